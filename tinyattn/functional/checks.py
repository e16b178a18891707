"""Chapter 1. The functions' checks: what makes an argument of a function in tinyattn.functional
bad.

A function's door names them, `@door(checks.targets_fit, logits=any_tensor)` (tinyattn/arguments.py
says how doors work); they run once, when a user calls the function. Each gets the function's
arguments by name and raises a ValueError or TypeError saying what does not fit; one that had to
read an argument to check it returns {name: what it read}.

In the order of the files they serve: basics, scaled_dot_product, the functions of chapter 1. A
later chapter's rules are beside the file they serve, in its chapter: `positions_checks.py`
beside `positions.py`.
"""
import numpy as np

from tinyattn.arguments import ids
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
