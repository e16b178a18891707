"""Every op, one table row per op and shape: forward against NumPy, gradients against finite
differences (float64, random upstream gradient, via ta.gradcheck), broadcast shapes included, and
float32 kept float32 through forward and backward."""
from typing import Callable, NamedTuple

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

ATOL, RTOL = 1e-7, 1e-5     # tighter than gradcheck's defaults: float64 differences are this good


class Case(NamedTuple):
    name: str
    op: Callable            # on tensors
    reference: Callable     # the same computation on NumPy arrays
    shapes: tuple           # one shape per input
    domain: str = "normal"  # how inputs are drawn: normal, positive, away_from_zero
    float64_constant: bool = False   # mixes in a float64 array, which NumPy's promotion obeys


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


BOOL_MASK = np.array([[True, False, True, True], [False, False, True, False],
                      [True, True, False, True]])
CONDITION = np.array([[True], [False], [True]])

CASES = [
    # binary elementwise, same shape and broadcast on either side
    Case("add", lambda a, b: a + b, np.add, ((3, 4), (3, 4))),
    Case("add broadcast row", lambda a, b: a + b, np.add, ((3, 4), (4,))),
    Case("add broadcast both", lambda a, b: a + b, np.add, ((2, 1, 4), (3, 1))),
    Case("add scalar tensor", lambda a, b: a + b, np.add, ((), (3, 4))),
    Case("sub", lambda a, b: a - b, np.subtract, ((3, 4), (3, 4))),
    Case("sub broadcast", lambda a, b: a - b, np.subtract, ((3, 1), (2, 1, 4))),
    Case("mul", lambda a, b: a * b, np.multiply, ((3, 4), (3, 4))),
    Case("mul broadcast", lambda a, b: a * b, np.multiply, ((4,), (2, 3, 4))),
    Case("mul broadcast both", lambda a, b: a * b, np.multiply, ((2, 1, 4), (3, 1))),
    Case("div", lambda a, b: a / b, np.divide, ((3, 4), (3, 4)), "away_from_zero"),
    Case("div broadcast", lambda a, b: a / b, np.divide, ((2, 3, 4), (3, 1)), "away_from_zero"),
    Case("pow", lambda a, b: a ** b, np.power, ((3, 4), (3, 4)), "positive"),
    Case("pow broadcast", lambda a, b: a ** b, np.power, ((3, 4), (4,)), "positive"),
    # with constants: Python numbers and arrays on either side
    Case("add number", lambda a: 2.5 + a + 1, lambda a: 2.5 + a + 1, ((3, 4),)),
    Case("rsub number", lambda a: 1 - a, lambda a: 1 - a, ((3, 4),)),
    Case("mul array", lambda a: a * np.arange(4.0), lambda a: a * np.arange(4.0), ((3, 4),),
         float64_constant=True),
    Case("rmul array", lambda a: np.arange(4.0) * a, lambda a: np.arange(4.0) * a, ((3, 4),),
         float64_constant=True),
    Case("rdiv number", lambda a: 2 / a, lambda a: 2 / a, ((3, 4),), "away_from_zero"),
    Case("div number", lambda a: a / 4, lambda a: a / 4, ((3, 4),)),
    Case("square", lambda a: a ** 2, lambda a: a ** 2, ((3, 4),)),
    Case("pow half", lambda a: a ** 0.5, np.sqrt, ((3, 4),), "positive"),
    Case("rpow number", lambda a: 3 ** a, lambda a: 3 ** a, ((3, 4),)),
    Case("neg", lambda a: -a, np.negative, ((3, 4),)),
    # unary elementwise
    Case("exp", lambda a: a.exp(), np.exp, ((3, 4),)),
    Case("log", lambda a: a.log(), np.log, ((3, 4),), "positive"),
    Case("sqrt", lambda a: a.sqrt(), np.sqrt, ((3, 4),), "positive"),
    Case("tanh", lambda a: a.tanh(), np.tanh, ((3, 4),)),
    Case("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), ((3, 4),), "away_from_zero"),
    Case("F.relu", F.relu, lambda a: np.maximum(a, 0), ((2, 5),), "away_from_zero"),
    # reductions
    Case("sum all", lambda a: a.sum(), np.sum, ((2, 3, 4),)),
    Case("sum axis", lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), ((2, 3, 4),)),
    Case("sum axes keepdims", lambda a: a.sum(axis=(0, 2), keepdims=True),
         lambda a: a.sum(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    Case("sum negative axis", lambda a: a.sum(axis=-1), lambda a: a.sum(axis=-1), ((2, 3, 4),)),
    Case("mean all", lambda a: a.mean(), np.mean, ((2, 3, 4),)),
    Case("mean axes", lambda a: a.mean(axis=(0, -1)), lambda a: a.mean(axis=(0, -1)),
         ((2, 3, 4),)),
    Case("mean keepdims", lambda a: a.mean(axis=1, keepdims=True),
         lambda a: a.mean(axis=1, keepdims=True), ((2, 3, 4),)),
    Case("max all", lambda a: a.max(), np.max, ((2, 3, 4),)),
    Case("max axis", lambda a: a.max(axis=1), lambda a: a.max(axis=1), ((2, 3, 4),)),
    Case("max axes keepdims", lambda a: a.max(axis=(0, 2), keepdims=True),
         lambda a: a.max(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    # shapes and indexing
    Case("reshape", lambda a: a.reshape(6, -1), lambda a: a.reshape(6, -1), ((2, 3, 4),)),
    Case("reshape tuple", lambda a: a.reshape((4, 6)), lambda a: a.reshape((4, 6)), ((2, 3, 4),)),
    Case("transpose", lambda a: a.transpose(), np.transpose, ((2, 3, 4),)),
    Case("transpose axes", lambda a: a.transpose(1, 2, 0), lambda a: a.transpose(1, 2, 0),
         ((2, 3, 4),)),
    Case("swapaxes", lambda a: a.swapaxes(0, -1), lambda a: a.swapaxes(0, -1), ((2, 3, 4),)),
    Case("T", lambda a: a.T, lambda a: a.T, ((2, 3, 4),)),
    Case("mT", lambda a: a.mT, lambda a: np.swapaxes(a, -1, -2), ((2, 3, 4),)),
    Case("index int", lambda a: a[1], lambda a: a[1], ((3, 4),)),
    Case("index slices", lambda a: a[1:, ::2], lambda a: a[1:, ::2], ((3, 4),)),
    Case("index None ellipsis", lambda a: a[None, ..., -1], lambda a: a[None, ..., -1],
         ((2, 3, 4),)),
    Case("index array repeats", lambda a: a[[0, 2, 0, 0]], lambda a: a[[0, 2, 0, 0]], ((3, 4),)),
    Case("index arrays 2-d", lambda a: a[np.array([[0, 1], [1, 1]]), np.array([2, 2])],
         lambda a: a[np.array([[0, 1], [1, 1]]), np.array([2, 2])], ((3, 4),)),
    Case("index tensor", lambda a: a[ta.tensor([1, 1, 2])], lambda a: a[np.array([1, 1, 2])],
         ((3, 4),)),
    Case("index mixed", lambda a: a[:, [2, 0, 2]], lambda a: a[:, [2, 0, 2]], ((2, 3, 4),)),
    Case("index boolean", lambda a: a[BOOL_MASK], lambda a: a[BOOL_MASK], ((3, 4),)),
    Case("concatenate", lambda a, b: ta.concatenate([a, b]), lambda a, b: np.concatenate([a, b]),
         ((2, 3), (4, 3))),
    Case("concatenate axis -1", lambda a, b, c: ta.concatenate([a, b, c], axis=-1),
         lambda a, b, c: np.concatenate([a, b, c], axis=-1), ((2, 3), (2, 1), (2, 2))),
    Case("stack", lambda a, b: ta.stack([a, b]), lambda a, b: np.stack([a, b]), ((2, 3), (2, 3))),
    Case("stack axis -1", lambda a, b: ta.stack([a, b], axis=-1),
         lambda a, b: np.stack([a, b], axis=-1), ((2, 3), (2, 3))),
    Case("where", lambda a, b: ta.where(CONDITION, a, b), lambda a, b: np.where(CONDITION, a, b),
         ((3, 4), (3, 4))),
    Case("where broadcast", lambda a, b: ta.where(CONDITION, a, b),
         lambda a, b: np.where(CONDITION, a, b), ((1, 4), (3, 1))),
    Case("where constant", lambda a: ta.where(CONDITION, a, -1.0),
         lambda a: np.where(CONDITION, a, -1.0), ((3, 4),)),
    # matmul: plain, batched, broadcast batch, shared 2-D weight, 1-D operands
    Case("matmul", lambda a, b: a @ b, np.matmul, ((3, 4), (4, 5))),
    Case("matmul batched", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (2, 4, 5))),
    Case("matmul shared weight", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (4, 5))),
    Case("matmul shared left", lambda a, b: a @ b, np.matmul, ((3, 4), (2, 4, 5))),
    Case("matmul broadcast batch", lambda a, b: a @ b, np.matmul, ((2, 1, 3, 4), (5, 4, 2))),
    Case("matmul vector left", lambda a, b: a @ b, np.matmul, ((4,), (4, 5))),
    Case("matmul vector right", lambda a, b: a @ b, np.matmul, ((3, 4), (4,))),
    Case("matmul vectors", lambda a, b: a @ b, np.matmul, ((4,), (4,))),
    Case("matmul batch and vector", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (4,))),
    Case("matmul vector and batch", lambda a, b: a @ b, np.matmul, ((4,), (2, 4, 5))),
    Case("rmatmul array", lambda b: np.ones((2, 3)) @ b, lambda b: np.ones((2, 3)) @ b, ((3, 4),),
         float64_constant=True),
    # softmax and log-softmax
    Case("softmax", F.softmax, np_softmax, ((3, 5),)),
    Case("softmax axis 0", lambda a: F.softmax(a, axis=0), lambda a: np_softmax(a, axis=0),
         ((3, 5),)),
    Case("softmax 3-d", lambda a: F.softmax(a, axis=1), lambda a: np_softmax(a, axis=1),
         ((2, 3, 4),)),
    Case("log_softmax", F.log_softmax, np_log_softmax, ((3, 5),)),
    Case("log_softmax axis 0", lambda a: F.log_softmax(a, axis=0),
         lambda a: np_log_softmax(a, axis=0), ((2, 3, 4),)),
]


def make_inputs(case, dtype=np.float64, seed=0):
    random = np.random.default_rng(seed)
    arrays = []
    for shape in case.shapes:
        x = random.standard_normal(shape)
        if case.domain == "positive":
            x = random.uniform(0.5, 2.0, shape)
        elif case.domain == "away_from_zero":
            x = np.sign(x) * (0.3 + np.abs(x))
        arrays.append(x.astype(dtype))
    return arrays


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_forward_matches_numpy(case):
    arrays = make_inputs(case)
    out = case.op(*[ta.tensor(a) for a in arrays])
    expected = case.reference(*arrays)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gradients_match_finite_differences(case):
    tensors = [ta.tensor(a, requires_grad=True) for a in make_inputs(case)]
    assert ta.gradcheck(case.op, tensors, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_float32_stays_float32(case):
    arrays = make_inputs(case, np.float32)
    tensors = [ta.tensor(a, requires_grad=True) for a in arrays]
    out = case.op(*tensors)
    assert out.dtype == (np.float64 if case.float64_constant else np.float32)
    out.backward(np.ones(out.shape))
    for t in tensors:
        assert t.grad.dtype == np.float32 and t.grad.shape == t.shape
    # and the float32 result is the float64 one, to float32 precision
    tensors64 = [ta.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    out64 = case.op(*tensors64)
    out64.backward(np.ones(out64.shape))
    np.testing.assert_allclose(out.data, out64.data, rtol=1e-4, atol=1e-5)
    for t, t64 in zip(tensors, tensors64):
        np.testing.assert_allclose(t.grad, t64.grad, rtol=1e-3, atol=1e-4)


def test_max_splits_gradient_between_ties():
    x = ta.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0]], requires_grad=True)
    x.max(axis=1).backward(np.array([1.0, 6.0]))
    np.testing.assert_array_equal(x.grad, [[0, 0.5, 0.5], [2, 2, 2]])


def test_max_over_everything_splits_ties():
    x = ta.tensor([1.0, 5.0, 5.0, 5.0], requires_grad=True)
    x.max().backward()
    np.testing.assert_allclose(x.grad, [0, 1 / 3, 1 / 3, 1 / 3])


def test_relu_gradient_at_zero_is_zero():
    x = ta.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad, [0, 0, 1])


def test_index_scatter_adds_repeated_indices():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 0, 2, 0]].backward(np.array([1.0, 10.0, 100.0, 1000.0]))
    np.testing.assert_array_equal(x.grad, [1011, 0, 100])


def test_pow_gradient_for_the_exponent():
    base = ta.tensor([2.0, 3.0])
    exponent = ta.tensor([3.0, 0.5], requires_grad=True)
    (base ** exponent).sum().backward()
    np.testing.assert_allclose(exponent.grad, [8 * np.log(2), np.sqrt(3) * np.log(3)])
