"""The checklist's rows for the fused ops that replace a chain of primitive ops (layer norm): each
is checked as an op (against NumPy, and against finite differences), and against the chain it
replaces, kept below as its reference: same output, same gradients, number by number.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn.tools.checklist.cases import FusedCase, OpCase


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


def np_layer_norm(x, weight=1.0, bias=0.0, eps=1e-5):
    centered = x - x.mean(axis=-1, keepdims=True)
    return centered / np.sqrt((centered ** 2).mean(axis=-1, keepdims=True) + eps) * weight + bias


OP_CASES = [
    OpCase("layer_norm", F.layer_norm, np_layer_norm, ((2, 3, 5), (5,), (5,))),
    OpCase("layer_norm, no weight or bias", F.layer_norm, np_layer_norm, ((4, 6),)),
    OpCase("layer_norm, rows of one", F.layer_norm, np_layer_norm, ((3, 1), (1,), (1,))),
]

FUSED_CASES = [
    FusedCase("layer_norm = composed", F.layer_norm, composed_layer_norm, ((2, 3, 5), (5,), (5,))),
    FusedCase("layer_norm = composed, no weight or bias", F.layer_norm, composed_layer_norm,
              ((4, 6),)),
    FusedCase("layer_norm = composed, eps=0.1, no bias", lambda x, w: F.layer_norm(x, w, eps=0.1),
              lambda x, w: composed_layer_norm(x, w, eps=0.1), ((3, 4), (4,))),
]
