"""Chapter 1. The functions' checks: what makes an argument of a function in tinyattn.functional
bad.

A function's door names them, `@door(checks.targets_fit, logits=any_tensor)` (tinyattn/arguments.py
says how doors work); they run once, when a user calls the function. Each gets the function's
arguments by name and raises a ValueError or TypeError saying what does not fit; one that had to
read an argument to check it returns {name: what it read}.

In the order of the files they serve: basics, scaled_dot_product (chapter 1); positions,
fused_attention, linear_attention, sparse_patterns (chapter 2).
"""
import numpy as np

from tinyattn.arguments import ids, shapes
from tinyattn.engine import Tensor
from tinyattn.arrays import data_of, numeric_array


# ------------------------------------------------------------------------------------------------
# Chapter 1: cross-entropy's targets, attention's mask and scale

def targets_fit(logits, targets, ignore_index=-100):
    """The targets must fit the logits: integer class indices, of the logits' shape without the
    classes."""
    if logits.ndim == 0:
        raise ValueError(f"logits need at least one dimension (the classes), got shape "
                         f"{logits.shape}")
    targets = numeric_array(data_of(targets), "targets")
    C = logits.shape[1] if logits.ndim > 1 else logits.shape[0]
    ids("targets", targets[targets != ignore_index], C, "classes")
    expected = logits.shape[:1] + logits.shape[2:] if logits.ndim > 1 else ()
    if targets.shape != expected:
        raise ValueError(f"logits of shape {logits.shape} need targets of shape {expected}, got "
                         f"{targets.shape}")


def mask_and_scale_fit(query, key, value, attn_mask=None, scale=None, **_):
    """attn_mask broadcasts to the scores (..., L, S), and the default scale has a width E."""
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    scores = batch + (query.shape[-2], key.shape[-2])                      # (..., L, S)
    attention_mask(attn_mask, scores, query.dtype)
    default_scale(query, scale)


def default_scale(query, scale=None, **_):
    """scale=None means 1 / sqrt(E), which needs queries and keys of a width E of 1 or more."""
    if scale is None and query.shape[-1] == 0:
        raise ValueError("queries and keys need a width E of 1 or more, got a width E of 0")


def attention_mask(mask, scores_shape, dtype, name="attn_mask"):
    """An attention mask: None, or booleans or floats that broadcast to the scores' shape
    (..., L, S); a float mask given as a tensor (it may be learned) must have the scores' dtype
    (one given as an array is converted to it)."""
    if mask is None:
        return
    array = numeric_array(data_of(mask), name)
    try:
        fits = np.broadcast_shapes(array.shape, scores_shape) == tuple(scores_shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name} of shape {array.shape} does not broadcast to the scores' shape "
                         f"{tuple(scores_shape)} (..., L, S)")
    if array.dtype != np.bool_ and array.dtype.kind != "f":
        raise TypeError(f"{name} must be boolean or float, got dtype {array.dtype}")
    if isinstance(mask, Tensor) and array.dtype.kind == "f" and array.dtype != dtype:
        raise TypeError(f"{name} is a {array.dtype} tensor but the query is {dtype}; convert one "
                        f"of them")


# ------------------------------------------------------------------------------------------------
# Chapter 2: rotary positions, block-sparse layouts, linear attention, sparse patterns

def pairs_of_features(x, **_):
    """rope rotates pairs of features: an even number of them."""
    if x.shape[-1] % 2:
        raise ValueError(f"the last axis of x holds pairs of features, so it must be even; got x "
                         f"of shape {x.shape}")


def layout_and_scale_fit(query, key, value, layout, block_size, scale=None, **_):
    """layout holds booleans (an array, a list or a tensor) broadcasting to (..., Lb, Sb): the
    pairs of blocks of the inputs' batch; the default scale has a width E. Returns the layout as
    a NumPy array."""
    default_scale(query, scale)
    layout = numeric_array(data_of(layout), "layout")
    if layout.dtype != np.bool_:
        raise TypeError(f"layout must hold booleans (True: the pair of blocks is visible), got "
                        f"dtype {layout.dtype}")
    L, S = query.shape[-2], key.shape[-2]
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    pairs = batch + (-(-L // block_size), -(-S // block_size))             # (..., Lb, Sb)
    try:
        fits = layout.ndim >= 2 and np.broadcast_shapes(layout.shape, pairs) == pairs
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"layout of shape {layout.shape} does not broadcast to (..., Lb, Sb) = "
                         f"{pairs}: L = {L} queries and S = {S} keys in blocks of {block_size} "
                         f"make {pairs[-2]} x {pairs[-1]} pairs of blocks")
    return {"layout": layout}


def causal_needs_L_keys(query, key, value, is_causal=False, **_):
    """Causal linear attention pairs query i with keys j <= i: as many keys as queries."""
    if is_causal and query.shape[-2] != key.shape[-2]:
        raise ValueError(f"causal attention needs as many keys as queries (L == Lk), got query "
                         f"{query.shape}, key {key.shape}, value {value.shape}")


def state_fits(query, key, value, state=None, eps=1e-6):
    """state: None, or the (S, z) pair a previous step returned."""
    if state is None:
        return
    if not (isinstance(state, tuple) and len(state) == 2):
        raise TypeError(f"state must be the (S, z) pair a previous step returned, or None, got "
                        f"{type(state).__name__}")
    shapes(query=(query, "(..., E)"), value=(value, "(..., Ev)"), S=(state[0], "(..., E, Ev)"),
           z=(state[1], "(..., E)"))


def positions_fit(length, positions, counted="positions", **_):
    """The global positions: ints in [0, length) ([] is none)."""
    positions = numeric_array(positions, "positions")
    ids("positions", positions.astype(int) if positions.size == 0 else positions,
                  length, counted)


def block_positions_fit(num_blocks, positions, **_):
    """The global blocks: ints in [0, num_blocks) ([] is none)."""
    positions_fit(num_blocks, positions, counted="blocks")


def layout_fits(layout, block_size, length, key_length=None, **_):
    """A layout of booleans whose last two axes are the blocks of the length queries and the
    key_length keys; returns it as a NumPy array."""
    layout = numeric_array(data_of(layout), "layout")
    S = length if key_length is None else key_length
    blocks = (-(-length // block_size), -(-S // block_size))                # (Lb, Sb)
    if layout.dtype != np.bool_:
        raise TypeError(f"layout must hold booleans, got dtype {layout.dtype}")
    if layout.shape[-2:] != blocks:
        raise ValueError(f"layout must have shape (..., {blocks[0]}, {blocks[1]}) for {length} "
                         f"queries and {S} keys in blocks of {block_size}, got {layout.shape}")
    return {"layout": layout}
