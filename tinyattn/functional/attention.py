"""Scaled dot-product attention, composed from the ops: matmul, masking, softmax, matmul.

    scores  = query @ key^T * scale          (..., L, S)   how well each query matches each key
    weights = softmax(scores + mask)         (..., L, S)   each row sums to 1 over the keys
    output  = weights @ value                (..., L, Ev)  a weighted average of the values

L is the number of queries, S of keys (and values), E the width of queries and keys, Ev of values.
"""
import math

import numpy as np

from tinyattn import ops
from tinyattn.arguments import check_flags, check_number, check_shapes
from tinyattn.engine import Tensor, data_of, numeric_array
from tinyattn.functional.basics import dropout, softmax


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None):
    """softmax(query @ key^T * scale + mask) @ value, with PyTorch's signature and semantics.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> output (..., L, Ev); the
    leading (batch, head) axes broadcast. `scale` defaults to 1 / sqrt(E); `scale=1.0` gives the
    unscaled variant.

    attn_mask broadcasts to (..., L, S). A boolean mask marks with True the (query, key) pairs that
    take part; a float mask is added to the scores (use -inf to exclude a pair). `is_causal` lets
    query i see keys j <= i only; given together with attn_mask, a pair takes part only if both
    allow it. `dropout_p` drops attention weights (always, as in PyTorch: pass 0 when evaluating).

    A query row whose keys are all masked has no defined softmax; here it gets all-zero weights, so
    a zero output row and zero gradients, never NaN.
    """
    return attend("scaled_dot_product_attention", query, key, value, attn_mask, dropout_p,
                  is_causal, scale)[0]


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """Scaled dot-product attention returning (output, weights): see the function above."""
    return attend("attention", query, key, value, attn_mask, dropout_p, is_causal, scale)


def attend(op, query, key, value, attn_mask, dropout_p, is_causal, scale):
    """The two functions above: (output, weights). `op` names the one called, in its errors."""
    sizes = check_shapes(op, same_dtype=True, floating=True,
                         query=(query, "... L E"), key=(key, "... S E"), value=(value, "... S Ev"))
    allowed, additive = split_mask(attn_mask, sizes["..."] + (sizes["L"], sizes["S"]), query.dtype,
                                   op)
    dropout_p = check_number(op, "dropout_p", dropout_p, 0, 1)
    check_flags(op, is_causal=is_causal)
    scale = check_scale(op, scale, sizes["E"])
    if is_causal:
        allowed = causal_mask(sizes["L"], sizes["S"], allowed)

    scores = (query @ key.mT) * scale                  # (..., L, S)
    if additive is not None:
        scores = scores + additive                     # (..., L, S)
    if allowed is not None:
        scores = ops.where(allowed, scores, -math.inf)  # (..., L, S), masked pairs at -inf
    weights = softmax(scores, axis=-1)                 # (..., L, S); a row with no key left: zeros
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)          # (..., L, S)
    return weights @ value, weights                    # (..., L, Ev), (..., L, S)


def check_scale(op, scale, E):
    """The door for `scale`: a number, or None for the default 1 / sqrt(E), queries and keys being
    of width E; returned as a Python float (a NumPy float64 would upcast float32 scores)."""
    if scale is not None:
        return check_number(op, "scale", scale)
    if E == 0:
        raise ValueError(f"{op}: queries and keys need a width E of 1 or more, got a width E of 0")
    return 1.0 / math.sqrt(E)


def causal_mask(L, S, attn_mask=None, offset=0):
    """The causal mask (L, S): True where query i, at position offset + i, may see key j, that is
    where j <= offset + i.

    offset = 0 is `is_causal` of SDPA, aligned at the start as in PyTorch: query i sees the keys
    j <= i. A key/value cache puts its L new queries at the end, after the S - L cached positions:
    offset = S - L. (The two agree when L == S.)

    With an `attn_mask`, the result is both masks in one: a boolean mask (True = takes part) is
    and-ed with the causal one, a float mask (added to the scores, such as ALiBi's bias) gets
    -inf added where the causal mask forbids.
    """
    causal = np.tril(np.ones((L, S), dtype=bool), k=offset)                   # (L, S)
    if attn_mask is None:
        return causal
    mask = np.asarray(data_of(attn_mask))
    if mask.dtype == np.bool_:
        return mask & causal                                                  # (..., L, S)
    return attn_mask + np.where(causal, 0.0, -math.inf).astype(mask.dtype)    # (..., L, S)


def split_mask(attn_mask, scores_shape, dtype, op, name="attn_mask"):
    """The door for `attn_mask`: (allowed, additive), a boolean mask (True = takes part) and a
    float mask added to the scores, either or both None. `op` and `name` say in an error which
    function received the mask, and as what.

    A float mask given as a NumPy array takes the scores' dtype (a float64 array of zeros must not
    turn float32 attention into float64); one given as a tensor (it may be learned) must already
    have it.
    """
    if attn_mask is None:
        return None, None
    mask = numeric_array(data_of(attn_mask), f"{op}: {name}")
    try:
        fits = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{op}: {name} of shape {mask.shape} does not broadcast to the "
                         f"scores' shape {scores_shape} (..., L, S)")
    if mask.dtype == np.bool_:
        return mask, None
    if mask.dtype.kind != "f":
        raise TypeError(f"{op}: {name} must be boolean or float, got dtype {mask.dtype}")
    if not isinstance(attn_mask, Tensor):
        return None, mask.astype(dtype, copy=False)
    if mask.dtype != dtype:
        raise TypeError(f"{op}: {name} is a {mask.dtype} tensor but the query is {dtype}; "
                        "convert one of them")
    return None, attn_mask
