"""Chapter 1. The functions a transformer uses besides attention: the affine map of a Linear layer,
activations, softmax, layer norm, dropout and the cross-entropy loss.

Everything here is composed from the ops in `tinyattn.ops`, except softmax, log-softmax, GELU and
layer norm, which are fused ops of their own (each checked against the composed formula it
replaces). Because of that, a gradient check of anything here also checks the ops it is built from.
"""
import numpy as np

from tinyattn import ops, rng
from tinyattn.arguments import any_tensor, between, door, one_of, optional
from tinyattn.functional import checks
from tinyattn.arrays import data_of


@door(x=any_tensor)
def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, computed stably (see `ops.softmax.Softmax`)."""
    return ops.Softmax.apply(x, axis=axis)


@door(x=any_tensor)
def log_softmax(x, axis=-1):
    """log(softmax(x)) along `axis`, computed stably (see `ops.softmax.LogSoftmax`)."""
    return ops.LogSoftmax.apply(x, axis=axis)


@door(x="(..., I)", weight="(O, I)", bias=optional("(O)"))
def linear(x, weight, bias=None):
    """x @ weight^T + bias over the last axis of x, as PyTorch's `F.linear`: x (..., I),
    weight (O, I), bias (O,) or None -> (..., O). One op (`ops.linear.Linear`, where its backward
    is derived); the checklist compares it with the same formula composed from primitive ops."""
    return ops.Linear.apply(x, weight, 0.0 if bias is None else bias)


@door(x=any_tensor)
def relu(x):
    """max(x, 0), elementwise."""
    return ops.Relu.apply(x)


@door(x=any_tensor, approximate=one_of("tanh", "none"))
def gelu(x, approximate="tanh"):
    """GELU, x times the probability that a standard normal variable is below x. In its tanh form
    by default (GPT-2's, PyTorch's `approximate="tanh"`):

        gelu(x) = 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))

    and with `approximate="none"` as defined (PyTorch's default; ViT, Whisper and BART use it):

        gelu(x) = 0.5 x (1 + erf(x / sqrt(2)))

    Each is one fused op (`ops.elementwise.Gelu` and `GeluExact`, where their derivatives are
    worked out); the checklist compares the tanh form with the same formula composed from
    primitive ops, and both with NumPy.
    """
    return ops.Gelu.apply(x) if approximate == "tanh" else ops.GeluExact.apply(x)


@door(x="(..., N)", weight=optional("(N)"), bias=optional("(N)"), eps=between(0))
def layer_norm(x, weight=None, bias=None, eps=1e-5):
    """Normalise each row (the last axis) to mean 0 and variance 1, then scale by `weight` and
    shift by `bias` (both of the row's size, or None):

        y = (x - mean) / sqrt(var + eps) * weight + bias,   var the biased variance (as PyTorch)

    One fused op (`ops.layer_norm.LayerNorm`, where its backward is derived); the checklist
    compares it with the same formula composed from primitive ops.
    """
    return ops.LayerNorm.apply(x, 1.0 if weight is None else weight,
                               0.0 if bias is None else bias, eps=float(eps))


@door(x=any_tensor, p=between(0, 1), training=bool)
def dropout(x, p=0.5, training=True):
    """Zero each element with probability p and scale the survivors by 1 / (1 - p), so that the
    expected value is unchanged; the identity when not training or when p = 0."""
    if not training or p == 0.0:
        return x
    if p == 1.0:
        return x * 0.0
    keep = rng.generator.random(x.shape) >= p
    return x * (keep / (1.0 - p)).astype(x.dtype)


@door(checks.targets_fit, logits=any_tensor)
def cross_entropy(logits, targets, ignore_index=-100):
    """The mean over targets of -log softmax(logits)[target], as PyTorch's `F.cross_entropy`.

    logits: (C,), (N, C), or (N, C, d1, ...) with the classes on axis 1; targets: integer class
    indices of shape (), (N,) or (N, d1, ...). Targets equal to `ignore_index` are left out.
    """
    targets = np.asarray(data_of(targets))
    C = logits.shape[1] if logits.ndim > 1 else logits.shape[0]

    if logits.ndim > 2:                 # (N, C, d1, ...) -> (N, d1, ..., C): classes last
        logits = logits.transpose(0, *range(2, logits.ndim), 1)
    logits = logits.reshape(-1, C)                    # (rows, C)
    targets = targets.reshape(-1)                     # (rows,)
    rows = np.flatnonzero(targets != ignore_index)    # the rows that count
    picked = log_softmax(logits, axis=-1)[rows, targets[rows]]    # (counted rows,)
    return -picked.mean()
