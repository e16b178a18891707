"""The checklist's rows for the fused ops that replace a chain of primitive ops (linear, softmax,
log-softmax, GELU, layer norm):
each is checked as an op (against NumPy, and against finite differences), and against the chain it
replaces, kept below as its reference: same output, same gradients, number by number.
"""
import math

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn_tools.checklist.cases import FusedCase, OpCase


def composed_linear(x, weight, bias=None):
    """F.linear written with primitive ops (transpose, matmul, add): the reference of the fused
    op, a batch of sequences multiplied sequence by sequence."""
    y = x @ weight.T
    return y if bias is None else y + bias


def np_linear(x, weight, bias=0.0):
    return x @ weight.T + bias


def composed_softmax(x, axis=-1):
    """F.softmax written with primitive ops (max, sub, exp, sum, div): the reference of the fused
    op. The max is a shift that keeps exp from overflowing; softmax ignores a shift shared by the
    whole row, so it is taken as a constant (detached)."""
    scores = (x - x.max(axis=axis, keepdims=True).detach()).exp()
    return scores / scores.sum(axis=axis, keepdims=True)


def composed_log_softmax(x, axis=-1):
    """F.log_softmax written with primitive ops: x - max - log(sum(exp(x - max)))."""
    shifted = x - x.max(axis=axis, keepdims=True).detach()
    return shifted - shifted.exp().sum(axis=axis, keepdims=True).log()


def composed_gelu(x):
    """F.gelu written with primitive ops (mul, add, tanh): the reference of the fused op."""
    return 0.5 * x * (1.0 + (math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)).tanh())


def np_gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def np_gelu_exact(x):
    erf = np.vectorize(math.erf, otypes=[x.dtype])
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


def gelu_exact(x):
    return F.gelu(x, approximate="none")


def composed_layer_norm(x, weight=None, bias=None, eps=1e-5):
    """F.layer_norm written with primitive ops (mean, sub, mul, add, sqrt, div): the reference of
    the fused op."""
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    variance = (centered * centered).mean(axis=-1, keepdims=True)
    normalized = centered / (variance + eps).sqrt()
    if weight is not None:
        normalized = normalized * weight
    if bias is not None:
        normalized = normalized + bias
    return normalized


FROZEN = np.linspace(0.5, 2.0, 5)      # a weight that requires no grad: a constant of the op


def np_layer_norm(x, weight=1.0, bias=0.0, eps=1e-5):
    centered = x - x.mean(axis=-1, keepdims=True)
    return centered / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + eps) * weight + bias


OP_CASES = [
    OpCase("linear", F.linear, np_linear, ((4, 3), (2, 3), (2,))),
    OpCase("linear, a batch of sequences", F.linear, np_linear, ((2, 5, 3), (4, 3), (4,))),
    OpCase("linear, no bias", F.linear, np_linear, ((3, 2, 4, 3), (5, 3))),
    OpCase("linear, one vector", F.linear, np_linear, ((3,), (2, 3), (2,))),
    OpCase("gelu", F.gelu, np_gelu, ((3, 4),)),
    OpCase("gelu, large inputs", lambda x: F.gelu(4.0 * x), lambda x: np_gelu(4.0 * x), ((2, 5),)),
    OpCase("gelu, 0-d", F.gelu, np_gelu, ((),)),
    OpCase("gelu, exact (erf)", gelu_exact, np_gelu_exact, ((3, 4),)),
    OpCase("gelu, exact, large inputs", lambda x: gelu_exact(4.0 * x),
           lambda x: np_gelu_exact(4.0 * x), ((2, 5),)),
    OpCase("gelu, exact, 0-d", gelu_exact, np_gelu_exact, ((),)),
    OpCase("layer_norm", F.layer_norm, np_layer_norm, ((2, 3, 5), (5,), (5,))),
    OpCase("layer_norm, no weight or bias", F.layer_norm, np_layer_norm, ((4, 6),)),
    OpCase("layer_norm, rows of one", F.layer_norm, np_layer_norm, ((3, 1), (1,), (1,))),
    OpCase("layer_norm, frozen weight (as add_lora leaves it)",
           lambda x, b: F.layer_norm(x, ta.tensor(FROZEN.astype(x.dtype)), b),
           lambda x, b: np_layer_norm(x, FROZEN, b), ((2, 5), (5,))),
]

FUSED_CASES = [
    FusedCase("linear = composed", F.linear, composed_linear, ((2, 5, 3), (4, 3), (4,))),
    FusedCase("linear = composed, no bias", F.linear, composed_linear, ((6, 3), (2, 3))),
    FusedCase("softmax = composed", F.softmax, composed_softmax, ((3, 5),)),
    FusedCase("softmax = composed, axis 0", lambda x: F.softmax(x, axis=0),
              lambda x: composed_softmax(x, axis=0), ((4, 3, 2),)),
    FusedCase("log_softmax = composed", F.log_softmax, composed_log_softmax, ((3, 5),)),
    FusedCase("log_softmax = composed, large logits", lambda x: F.log_softmax(30.0 * x, axis=1),
              lambda x: composed_log_softmax(30.0 * x, axis=1), ((2, 6, 3),)),
    FusedCase("gelu = composed", F.gelu, composed_gelu, ((3, 4),)),
    FusedCase("gelu = composed, large inputs", lambda x: F.gelu(4.0 * x),
              lambda x: composed_gelu(4.0 * x), ((2, 5),)),
    FusedCase("layer_norm = composed", F.layer_norm, composed_layer_norm, ((2, 3, 5), (5,), (5,))),
    FusedCase("layer_norm = composed, no weight or bias", F.layer_norm, composed_layer_norm,
              ((4, 6),)),
    FusedCase("layer_norm = composed, eps=0.1, no bias", lambda x, w: F.layer_norm(x, w, eps=0.1),
              lambda x, w: composed_layer_norm(x, w, eps=0.1), ((3, 4), (4,))),
]
