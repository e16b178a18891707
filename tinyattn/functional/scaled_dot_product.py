"""Chapter 1. Scaled dot-product attention, composed from the ops: matmul, masking, softmax, matmul.

    scores  = query @ key^T * scale          (..., L, S)   how well each query matches each key
    weights = softmax(scores + mask)         (..., L, S)   each row sums to 1 over the keys
    output  = weights @ value                (..., L, Ev)  a weighted average of the values

L is the number of queries, S of keys (and values), E the width of queries and keys, Ev of values.
"""
import math

import numpy as np

from tinyattn import ops
from tinyattn.arguments import between, door, number, optional
from tinyattn.engine import Tensor
from tinyattn.functional import checks
from tinyattn.functional.basics import dropout, softmax
from tinyattn.arrays import data_of


SDPA = dict(query="(..., L, E)", key="(..., S, E)", value="(..., S, Ev)",
            dropout_p=between(0, 1), is_causal=bool, scale=optional(number))


def attention_weights(query, key, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """softmax(query @ key^T * scale + mask), (..., L, S): how much each query takes from each
    value. (No door: `attention` checks the user's arguments, and layers call it inside theirs.)"""
    L, S, E = query.shape[-2], key.shape[-2], query.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)   # a Python float: no upcast
    allowed, additive = split_mask(attn_mask, query.dtype)   # (..., L, S) bool, float, or None
    if is_causal:
        allowed = causal_mask(L, S, allowed)                    # (..., L, S), j <= i

    scores = (query @ key.mT) * scale                  # (..., L, S)
    if additive is not None:
        scores = scores + additive                     # (..., L, S)
    if allowed is not None:
        scores = ops.where(allowed, scores, -math.inf)  # (..., L, S), masked pairs at -inf
    weights = softmax(scores, axis=-1)                 # (..., L, S); a row with no key left: zeros
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)          # (..., L, S)
    return weights


@door(checks.mask_and_scale_fit, **SDPA)
def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """Scaled dot-product attention returning (output, weights): `scaled_dot_product_attention`
    below, with the attention weights (..., L, S) too."""
    weights = attention_weights(query, key, attn_mask, dropout_p, is_causal, scale)  # (..., L, S)
    return weights @ value, weights                    # (..., L, Ev), (..., L, S)


@door(checks.mask_and_scale_fit, **SDPA)
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
    return attention(query, key, value, attn_mask, dropout_p, is_causal, scale)[0]


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


def split_mask(attn_mask, dtype):
    """`attn_mask` as (allowed, additive): a boolean mask (True = takes part) and a float mask added
    to the scores, either or both None. A float mask given as a NumPy array takes the scores'
    dtype (a float64 array of zeros must not turn float32 attention into float64); one given as a
    tensor (it may be learned) keeps its graph."""
    if attn_mask is None:
        return None, None
    mask = np.asarray(data_of(attn_mask))
    if mask.dtype == np.bool_:
        return mask, None
    if isinstance(attn_mask, Tensor):
        return None, attn_mask
    return None, mask.astype(dtype, copy=False)
