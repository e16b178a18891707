"""NumPy references and random inputs shared by the test files."""
import math

import numpy as np


def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_attention(q, k, v, allowed=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    weights = np_softmax(scores)
    return weights @ v, weights


def arrays(*shapes, seed=0):
    random = np.random.default_rng(seed)
    return [random.standard_normal(shape) for shape in shapes]
