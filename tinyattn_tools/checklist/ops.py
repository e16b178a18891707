"""The checklist's rows for the ops: every op, one row per op and shape, broadcast shapes included;
and the NumPy references of softmax, attention and multi-head attention that the tests, the
benchmarks and the exercises share.
"""
import math

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn_tools.checklist.cases import OpCase


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_attention(q, k, v, allowed=None, scale=None):
    """Scaled dot-product attention in NumPy: (output, weights); `allowed` a boolean mask."""
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale                       # (..., L, S)
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)                   # (..., L, S)
    weights = np_softmax(scores)                                      # (..., L, S)
    return weights @ v, weights                                       # (..., L, Ev), (..., L, S)


def np_multi_head_attention(mha, query, key, value, allowed=None, rotate=None):
    """The formula of "Attention Is All You Need", one head at a time, in NumPy; `rotate` (such
    as positions.np_rope), when given, turns each head's queries and keys first."""
    def project(linear, x):
        return x @ linear.weight.data.T + linear.bias.data
    q, k, v = project(mha.q_proj, query), project(mha.k_proj, key), project(mha.v_proj, value)
    D = mha.head_dim
    heads, weights = [], []
    for h in range(mha.num_heads):
        part = slice(h * D, (h + 1) * D)
        q_head, k_head = q[..., part], k[..., part]
        if rotate is not None:
            q_head, k_head = rotate(q_head), rotate(k_head)
        head, head_weights = np_attention(q_head, k_head, v[..., part], allowed)
        heads.append(head)
        weights.append(head_weights)
    return project(mha.out_proj, np.concatenate(heads, axis=-1)), np.stack(weights, axis=1)


def np_log_softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def np_elu(x, alpha=1.0):
    return np.where(x > 0, x, alpha * (np.exp(x) - 1))


BOOL_MASK = np.array([[True, False, True, True], [False, False, True, False],
                      [True, True, False, True]])
CONDITION = np.array([[True], [False], [True]])
MATRIX, VECTOR = np.arange(20.0).reshape(4, 5), np.arange(4.0)     # constants on matmul's right

OP_CASES = [
    # binary elementwise, same shape and broadcast on either side
    OpCase("add", lambda a, b: a + b, np.add, ((3, 4), (3, 4))),
    OpCase("add broadcast row", lambda a, b: a + b, np.add, ((3, 4), (4,))),
    OpCase("add broadcast both", lambda a, b: a + b, np.add, ((2, 1, 4), (3, 1))),
    OpCase("add scalar tensor", lambda a, b: a + b, np.add, ((), (3, 4))),
    OpCase("sub", lambda a, b: a - b, np.subtract, ((3, 4), (3, 4))),
    OpCase("sub broadcast", lambda a, b: a - b, np.subtract, ((3, 1), (2, 1, 4))),
    OpCase("mul", lambda a, b: a * b, np.multiply, ((3, 4), (3, 4))),
    OpCase("mul broadcast", lambda a, b: a * b, np.multiply, ((4,), (2, 3, 4))),
    OpCase("mul broadcast both", lambda a, b: a * b, np.multiply, ((2, 1, 4), (3, 1))),
    OpCase("div", lambda a, b: a / b, np.divide, ((3, 4), (3, 4)), "away_from_zero"),
    OpCase("div broadcast", lambda a, b: a / b, np.divide, ((2, 3, 4), (3, 1)), "away_from_zero"),
    OpCase("pow", lambda a, b: a ** b, np.power, ((3, 4), (3, 4)), "positive"),
    OpCase("pow broadcast", lambda a, b: a ** b, np.power, ((3, 4), (4,)), "positive"),
    # with constants: Python numbers and arrays on either side
    OpCase("add number", lambda a: 2.5 + a + 1, lambda a: 2.5 + a + 1, ((3, 4),)),
    OpCase("rsub number", lambda a: 1 - a, lambda a: 1 - a, ((3, 4),)),
    OpCase("mul array", lambda a: a * np.arange(4.0), lambda a: a * np.arange(4.0), ((3, 4),),
         float64_constant=True),
    OpCase("rmul array", lambda a: np.arange(4.0) * a, lambda a: np.arange(4.0) * a, ((3, 4),),
         float64_constant=True),
    OpCase("rdiv number", lambda a: 2 / a, lambda a: 2 / a, ((3, 4),), "away_from_zero"),
    OpCase("div number", lambda a: a / 4, lambda a: a / 4, ((3, 4),)),
    OpCase("square", lambda a: a ** 2, lambda a: a ** 2, ((3, 4),)),
    OpCase("pow half", lambda a: a ** 0.5, np.sqrt, ((3, 4),), "positive"),
    OpCase("rpow number", lambda a: 3 ** a, lambda a: 3 ** a, ((3, 4),)),
    OpCase("neg", lambda a: -a, np.negative, ((3, 4),)),
    # unary elementwise
    OpCase("exp", lambda a: a.exp(), np.exp, ((3, 4),)),
    OpCase("log", lambda a: a.log(), np.log, ((3, 4),), "positive"),
    OpCase("sqrt", lambda a: a.sqrt(), np.sqrt, ((3, 4),), "positive"),
    OpCase("tanh", lambda a: a.tanh(), np.tanh, ((3, 4),)),
    OpCase("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), ((3, 4),), "away_from_zero"),
    OpCase("F.relu", F.relu, lambda a: np.maximum(a, 0), ((2, 5),), "away_from_zero"),
    OpCase("F.elu", F.elu, np_elu, ((3, 4),), "away_from_zero"),
    OpCase("F.elu alpha 0.5", lambda a: F.elu(a, alpha=0.5), lambda a: np_elu(a, 0.5), ((3, 4),),
         "away_from_zero"),
    OpCase("F.elu negative alpha", lambda a: F.elu(a, alpha=-2.0), lambda a: np_elu(a, -2.0),
         ((2, 5),), "away_from_zero"),
    # reductions
    OpCase("sum all", lambda a: a.sum(), np.sum, ((2, 3, 4),)),
    OpCase("sum axis", lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), ((2, 3, 4),)),
    OpCase("sum axes keepdims", lambda a: a.sum(axis=(0, 2), keepdims=True),
         lambda a: a.sum(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    OpCase("sum negative axis", lambda a: a.sum(axis=-1), lambda a: a.sum(axis=-1), ((2, 3, 4),)),
    OpCase("mean all", lambda a: a.mean(), np.mean, ((2, 3, 4),)),
    OpCase("mean axes", lambda a: a.mean(axis=(0, -1)), lambda a: a.mean(axis=(0, -1)),
         ((2, 3, 4),)),
    OpCase("mean keepdims", lambda a: a.mean(axis=1, keepdims=True),
         lambda a: a.mean(axis=1, keepdims=True), ((2, 3, 4),)),
    OpCase("max all", lambda a: a.max(), np.max, ((2, 3, 4),)),
    OpCase("max axis", lambda a: a.max(axis=1), lambda a: a.max(axis=1), ((2, 3, 4),)),
    OpCase("max axes keepdims", lambda a: a.max(axis=(0, 2), keepdims=True),
         lambda a: a.max(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    # running sums
    OpCase("cumsum 1-d", lambda a: a.cumsum(0), lambda a: np.cumsum(a, axis=0), ((5,),)),
    OpCase("cumsum 0-d", lambda a: a.cumsum(-1), lambda a: a.copy(), ((),)),
    OpCase("cumsum axis 0", lambda a: a.cumsum(0), lambda a: np.cumsum(a, axis=0), ((2, 3, 4),)),
    OpCase("cumsum axis 1", lambda a: a.cumsum(1), lambda a: np.cumsum(a, axis=1), ((2, 3, 4),)),
    OpCase("cumsum axis -1", lambda a: a.cumsum(-1), lambda a: np.cumsum(a, axis=-1),
         ((2, 3, 4),)),
    OpCase("cumsum axis -3", lambda a: a.cumsum(axis=-3), lambda a: np.cumsum(a, axis=-3),
         ((2, 3, 4),)),
    # shapes and indexing
    OpCase("reshape", lambda a: a.reshape(6, -1), lambda a: a.reshape(6, -1), ((2, 3, 4),)),
    OpCase("reshape tuple", lambda a: a.reshape((4, 6)), lambda a: a.reshape((4, 6)), ((2, 3, 4),)),
    OpCase("transpose", lambda a: a.transpose(), np.transpose, ((2, 3, 4),)),
    OpCase("transpose axes", lambda a: a.transpose(1, 2, 0), lambda a: a.transpose(1, 2, 0),
         ((2, 3, 4),)),
    OpCase("transpose negative axes", lambda a: a.transpose(-1, 0, -2),
         lambda a: a.transpose(-1, 0, -2), ((2, 3, 4),)),
    OpCase("swapaxes", lambda a: a.swapaxes(0, -1), lambda a: a.swapaxes(0, -1), ((2, 3, 4),)),
    OpCase("T", lambda a: a.T, lambda a: a.T, ((3, 4),)),
    OpCase("transpose(), all axes reversed", lambda a: a.transpose(), lambda a: a.transpose(),
           ((2, 3, 4),)),
    OpCase("mT", lambda a: a.mT, lambda a: np.swapaxes(a, -1, -2), ((2, 3, 4),)),
    OpCase("index int", lambda a: a[1], lambda a: a[1], ((3, 4),)),
    OpCase("index slices", lambda a: a[1:, ::2], lambda a: a[1:, ::2], ((3, 4),)),
    OpCase("index None ellipsis", lambda a: a[None, ..., -1], lambda a: a[None, ..., -1],
         ((2, 3, 4),)),
    OpCase("index array repeats", lambda a: a[[0, 2, 0, 0]], lambda a: a[[0, 2, 0, 0]], ((3, 4),)),
    OpCase("index arrays 2-d", lambda a: a[np.array([[0, 1], [1, 1]]), np.array([2, 2])],
         lambda a: a[np.array([[0, 1], [1, 1]]), np.array([2, 2])], ((3, 4),)),
    OpCase("index tensor", lambda a: a[ta.tensor([1, 1, 2])], lambda a: a[np.array([1, 1, 2])],
         ((3, 4),)),
    OpCase("index rows of a 3-d array, repeated and negative (an embedding lookup)",
         lambda a: a[np.array([[-1, 0], [2, -1]])], lambda a: a[np.array([[-1, 0], [2, -1]])],
         ((3, 2, 4),)),
    OpCase("index mixed", lambda a: a[:, [2, 0, 2]], lambda a: a[:, [2, 0, 2]], ((2, 3, 4),)),
    OpCase("index boolean", lambda a: a[BOOL_MASK], lambda a: a[BOOL_MASK], ((3, 4),)),
    OpCase("concatenate", lambda a, b: ta.concatenate([a, b]), lambda a, b: np.concatenate([a, b]),
         ((2, 3), (4, 3))),
    OpCase("concatenate axis -1", lambda a, b, c: ta.concatenate([a, b, c], axis=-1),
         lambda a, b, c: np.concatenate([a, b, c], axis=-1), ((2, 3), (2, 1), (2, 2))),
    OpCase("concatenate one tensor", lambda a: ta.concatenate([a], axis=-1),
         lambda a: np.concatenate([a], axis=-1), ((2, 3),)),
    OpCase("stack", lambda a, b: ta.stack([a, b]), lambda a, b: np.stack([a, b]), ((2, 3), (2, 3))),
    OpCase("stack axis -1", lambda a, b: ta.stack([a, b], axis=-1),
         lambda a, b: np.stack([a, b], axis=-1), ((2, 3), (2, 3))),
    OpCase("where", lambda a, b: ta.where(CONDITION, a, b), lambda a, b: np.where(CONDITION, a, b),
         ((3, 4), (3, 4))),
    OpCase("where broadcast", lambda a, b: ta.where(CONDITION, a, b),
         lambda a, b: np.where(CONDITION, a, b), ((1, 4), (3, 1))),
    OpCase("where constant", lambda a: ta.where(CONDITION, a, -1.0),
         lambda a: np.where(CONDITION, a, -1.0), ((3, 4),)),
    # matmul: plain, batched, broadcast batch, shared 2-D weight, 1-D operands
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ((3, 4), (4, 5))),
    OpCase("matmul batched", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (2, 4, 5))),
    OpCase("matmul shared weight", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (4, 5))),
    OpCase("matmul shared left", lambda a, b: a @ b, np.matmul, ((3, 4), (2, 4, 5))),
    OpCase("matmul broadcast batch", lambda a, b: a @ b, np.matmul, ((2, 1, 3, 4), (5, 4, 2))),
    OpCase("matmul vector left", lambda a, b: a @ b, np.matmul, ((4,), (4, 5))),
    OpCase("matmul vector right", lambda a, b: a @ b, np.matmul, ((3, 4), (4,))),
    OpCase("matmul vectors", lambda a, b: a @ b, np.matmul, ((4,), (4,))),
    OpCase("matmul batch and vector", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (4,))),
    OpCase("matmul vector and batch", lambda a, b: a @ b, np.matmul, ((4,), (2, 4, 5))),
    OpCase("rmatmul array", lambda b: np.ones((2, 3)) @ b, lambda b: np.ones((2, 3)) @ b, ((3, 4),),
         float64_constant=True),
    OpCase("matmul constant matrix", lambda a: a @ MATRIX, lambda a: a @ MATRIX, ((2, 3, 4),),
         float64_constant=True),
    OpCase("matmul constant vector", lambda a: a @ VECTOR, lambda a: a @ VECTOR, ((2, 3, 4),),
         float64_constant=True),
    OpCase("matmul length-1 vector", lambda a, b: a @ b, np.matmul, ((3, 1), (1,))),
    # softmax and log-softmax
    OpCase("softmax", F.softmax, np_softmax, ((3, 5),)),
    OpCase("softmax axis 0", lambda a: F.softmax(a, axis=0), lambda a: np_softmax(a, axis=0),
         ((3, 5),)),
    OpCase("softmax 3-d", lambda a: F.softmax(a, axis=1), lambda a: np_softmax(a, axis=1),
         ((2, 3, 4),)),
    OpCase("log_softmax", F.log_softmax, np_log_softmax, ((3, 5),)),
    OpCase("log_softmax axis 0", lambda a: F.log_softmax(a, axis=0),
         lambda a: np_log_softmax(a, axis=0), ((2, 3, 4),)),
]
