"""Functions on tensors: activations, softmax, normalisation, dropout, a loss, and attention.

Everything here is composed from the ops in `tinyattn.ops`, except softmax and log-softmax, which
are fused ops of their own. Because of that, a gradient check of anything here also checks the
ops it is built from.
"""
import math

import numpy as np

from tinyattn import ops, rng
from tinyattn.checks import check_number, check_tensor
from tinyattn.engine import Tensor


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, computed stably (see `ops.softmax.Softmax`)."""
    return ops.Softmax.apply(x, axis=axis)


def log_softmax(x, axis=-1):
    """log(softmax(x)) along `axis`, computed stably (see `ops.softmax.LogSoftmax`)."""
    return ops.LogSoftmax.apply(x, axis=axis)


def relu(x):
    """max(x, 0), elementwise."""
    return ops.Relu.apply(x)


def gelu(x):
    """GELU in its tanh form (as in GPT-2 and PyTorch's `approximate="tanh"`):

        gelu(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
    """
    check_tensor("gelu", "x", x)
    return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)).tanh())


def layer_norm(x, weight=None, bias=None, eps=1e-5, axes=(-1,)):
    """Normalise each row over the last axis (or `axes`) to mean 0 and variance 1, then scale by
    `weight` and shift by `bias`:

        y = (x - mean) / sqrt(var + eps) * weight + bias,   var the biased variance (as PyTorch)
    """
    check_tensor("layer_norm", "x", x)
    check_tensor("layer_norm", "weight", weight, optional=True)
    check_tensor("layer_norm", "bias", bias, optional=True)
    eps = check_number("layer_norm", "eps", eps, low=0)
    if x.ndim < len(axes):
        raise ValueError(f"layer_norm: inputs of shape {x.shape} have no axes {axes} to normalise")
    normalized_shape = tuple(x.shape[axis] for axis in axes)
    for name, parameter in (("weight", weight), ("bias", bias)):
        if parameter is not None and parameter.shape != normalized_shape:
            raise ValueError(f"layer_norm: {name} of shape {parameter.shape} does not fit inputs of "
                             f"shape {x.shape} normalised over {normalized_shape}")
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=axes, keepdims=True)
    normalized = centered / (variance + eps).sqrt()
    if weight is not None:
        normalized = normalized * weight
    if bias is not None:
        normalized = normalized + bias
    return normalized


def dropout(x, p=0.5, training=True):
    """Zero each element with probability p and scale the survivors by 1 / (1 - p), so that the
    expected value is unchanged; the identity when not training or when p = 0."""
    p = check_number("dropout", "p", p, 0, 1)
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = rng.generator.random(x.shape) >= p
    return x * (keep / (1.0 - p)).astype(x.dtype)


def cross_entropy(logits, targets, ignore_index=-100):
    """The mean over targets of -log softmax(logits)[target], as PyTorch's `F.cross_entropy`.

    logits: (C,), (N, C), or (N, C, d1, ...) with the classes on axis 1; targets: integer class
    indices of shape (), (N,) or (N, d1, ...). Targets equal to `ignore_index` are left out.
    """
    if logits.ndim == 0:
        raise ValueError(f"cross_entropy: logits need at least one dimension (the classes), got "
                         f"shape {logits.shape}")
    targets = np.asarray(targets.data if isinstance(targets, Tensor) else targets)
    if targets.dtype.kind not in "iu":
        raise TypeError(f"cross_entropy: targets must be integer class indices, "
                        f"got dtype {targets.dtype}")
    expected = logits.shape[:1] + logits.shape[2:] if logits.ndim > 1 else ()
    if targets.shape != expected:
        raise ValueError(f"cross_entropy: logits of shape {logits.shape} need targets of shape "
                         f"{expected}, got {targets.shape}")
    num_classes = logits.shape[1] if logits.ndim > 1 else logits.shape[0]
    targets = targets.reshape(-1)                  # (rows,)
    kept = targets != ignore_index
    bad = targets[kept & ((targets < 0) | (targets >= num_classes))]
    if bad.size:
        raise ValueError(f"cross_entropy: target {bad[0]} is out of range for {num_classes} "
                         "classes")
    if logits.ndim > 2:                 # (N, C, d1, ...) -> (N, d1, ..., C): classes last
        logits = logits.transpose(0, *range(2, logits.ndim), 1)
    logits = logits.reshape(-1, num_classes)       # (rows, C)
    rows = np.flatnonzero(kept)
    picked = log_softmax(logits, axis=-1)[rows, targets[rows]]    # (kept rows,)
    return -picked.mean()


# ------------------------------------------------------------------------------------------------
# Attention

def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    """Scaled dot-product attention, returning (output, weights); see `scaled_dot_product_attention`.

        scores  = query @ key^T * scale          (..., L, S)   how well each query matches each key
        weights = softmax(scores + mask)         (..., L, S)   each row sums to 1 over the keys
        output  = weights @ value                (..., L, Ev)  a weighted average of the values
    """
    scores_shape = _check_shapes(query, key, value)          # (..., L, S)
    allowed, additive = _masks(attn_mask, is_causal, scores_shape, query.dtype)
    dropout_p = check_number("scaled_dot_product_attention", "dropout_p", dropout_p, 0, 1)
    scale = (1.0 / math.sqrt(query.shape[-1]) if scale is None
             else check_number("scaled_dot_product_attention", "scale", scale))

    scores = (query @ key.mT) * scale                  # (..., L, S)
    if additive is not None:
        scores = scores + additive                     # (..., L, S)
    if allowed is not None:
        scores = ops.where(allowed, scores, -math.inf)  # (..., L, S), masked pairs at -inf
    weights = softmax(scores, axis=-1)                 # (..., L, S); a row with no key left: zeros
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)          # (..., L, S)
    return weights @ value, weights                    # (..., L, Ev), (..., L, S)


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


def _check_shapes(query, key, value):
    """The shape of the scores, (..., L, S), after checking that the three inputs fit together."""
    for name, x in (("query", query), ("key", key), ("value", value)):
        check_tensor("scaled_dot_product_attention", name, x)
        if x.ndim < 2:
            raise ValueError(f"scaled_dot_product_attention: {name} needs at least 2 dimensions "
                             f"(..., length, width), got shape {x.shape}")
    if not query.dtype == key.dtype == value.dtype:      # as PyTorch: no silent promotion
        raise TypeError(f"scaled_dot_product_attention: query, key and value must have the same "
                        f"dtype, got {query.dtype}, {key.dtype} and {value.dtype}")
    shapes = f"query {query.shape}, key {key.shape}, value {value.shape}"
    if query.shape[-1] == 0:
        raise ValueError(f"scaled_dot_product_attention: queries and keys need a width E of 1 or "
                         f"more, got a width E of 0: {shapes}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(f"scaled_dot_product_attention: query and key must have the same width "
                         f"E, got {shapes}")
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(f"scaled_dot_product_attention: key and value must have the same length "
                         f"S, got {shapes}")
    try:
        batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    except ValueError:
        raise ValueError(f"scaled_dot_product_attention: the leading (batch) axes do not "
                         f"broadcast: {shapes}") from None
    return batch + (query.shape[-2], key.shape[-2])


def _masks(attn_mask, is_causal, scores_shape, dtype):
    """(allowed, additive): the boolean mask (True = takes part) and the float mask, or None.

    A float mask given as a NumPy array takes the scores' dtype (a float64 array of zeros must not
    turn float32 attention into float64); one given as a tensor must already have it.
    """
    allowed = additive = None
    if attn_mask is not None:
        mask = attn_mask.data if isinstance(attn_mask, Tensor) else np.asarray(attn_mask)
        try:
            fits = np.broadcast_shapes(mask.shape, scores_shape) == scores_shape
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"scaled_dot_product_attention: attn_mask of shape {mask.shape} does "
                             f"not broadcast to the scores' shape {scores_shape} (..., L, S)")
        if mask.dtype == np.bool_:
            allowed = mask
        elif isinstance(attn_mask, Tensor) and mask.dtype.kind == "f":
            if mask.dtype != dtype:
                raise TypeError(f"scaled_dot_product_attention: attn_mask is a {mask.dtype} "
                                f"tensor but the query is {dtype}; convert one of them")
            additive = attn_mask
        elif mask.dtype.kind == "f":
            additive = mask.astype(dtype, copy=False)
        else:
            raise TypeError(f"scaled_dot_product_attention: attn_mask must be boolean or float, "
                            f"got dtype {mask.dtype}")
    if is_causal:
        L, S = scores_shape[-2:]
        causal = np.tril(np.ones((L, S), dtype=bool))     # query i sees keys j <= i
        allowed = causal if allowed is None else allowed & causal
    return allowed, additive
