"""The functions a transformer uses besides attention: activations, softmax, layer norm, dropout
and the cross-entropy loss.

Everything here is composed from the ops in `tinyattn.ops`, except softmax and log-softmax, which
are fused ops of their own. Because of that, a gradient check of anything here also checks the
ops it is built from.
"""
import math

import numpy as np

from tinyattn import ops, rng
from tinyattn.arguments import check_ids, check_number, check_tensor
from tinyattn.engine import data_of


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

    x^3 is computed as x * x * x: NumPy's float32 `x ** 3` goes through its general power
    function, many times slower than two products.
    """
    check_tensor("gelu", "x", x)
    return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)).tanh())


def layer_norm(x, weight=None, bias=None, eps=1e-5, axes=(-1,)):
    """Normalise each row over the last axis (or `axes`) to mean 0 and variance 1, then scale by
    `weight` and shift by `bias`:

        y = (x - mean) / sqrt(var + eps) * weight + bias,   var the biased variance (as PyTorch)
    """
    check_layer_norm_arguments(x, weight, bias, axes)
    eps = check_number("layer_norm", "eps", eps, low=0)

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
    targets = check_cross_entropy_arguments(logits, targets, ignore_index)
    C = logits.shape[1] if logits.ndim > 1 else logits.shape[0]

    if logits.ndim > 2:                 # (N, C, d1, ...) -> (N, d1, ..., C): classes last
        logits = logits.transpose(0, *range(2, logits.ndim), 1)
    logits = logits.reshape(-1, C)                    # (rows, C)
    targets = targets.reshape(-1)                     # (rows,)
    rows = np.flatnonzero(targets != ignore_index)    # the rows that count
    picked = log_softmax(logits, axis=-1)[rows, targets[rows]]    # (counted rows,)
    return -picked.mean()


# ------------------------------------------------------------------------------------------------
# The doors of layer_norm and cross_entropy

def check_layer_norm_arguments(x, weight, bias, axes):
    check_tensor("layer_norm", "x", x)
    if x.ndim < len(axes):
        raise ValueError(f"layer_norm: inputs of shape {x.shape} have no axes {axes} to normalise")
    normalized_shape = " ".join(str(x.shape[axis]) for axis in axes)
    for name, parameter in (("weight", weight), ("bias", bias)):
        check_tensor("layer_norm", name, parameter, optional=True)
        if parameter is not None and parameter.shape != tuple(x.shape[axis] for axis in axes):
            raise ValueError(f"layer_norm: {name} of shape {parameter.shape} does not fit inputs "
                             f"of shape {x.shape} normalised over ({normalized_shape})")


def check_cross_entropy_arguments(logits, targets, ignore_index):
    """The targets as an array of class indices, after checking that they fit the logits."""
    check_tensor("cross_entropy", "logits", logits)
    if logits.ndim == 0:
        raise ValueError(f"cross_entropy: logits need at least one dimension (the classes), got "
                         f"shape {logits.shape}")
    targets = np.asarray(data_of(targets))
    C = logits.shape[1] if logits.ndim > 1 else logits.shape[0]
    check_ids("cross_entropy", "targets", targets[targets != ignore_index], C, "classes")
    expected = logits.shape[:1] + logits.shape[2:] if logits.ndim > 1 else ()
    if targets.shape != expected:
        raise ValueError(f"cross_entropy: logits of shape {logits.shape} need targets of shape "
                         f"{expected}, got {targets.shape}")
    return targets
