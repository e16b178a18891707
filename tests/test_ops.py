"""Every op, one table row per op and shape: forward against NumPy, gradients against finite
differences (float64, random upstream gradient, via ta.gradcheck), broadcast shapes included, and
float32 kept float32 through forward and backward.

The table itself, OP_CASES, lives in `tinyattn/check.py`, so `python -m tinyattn check` runs it too.
"""
import numpy as np
import pytest

import tinyattn as ta
from tinyattn.tools.checklist import ATOL, OP_CASES, RTOL
from tinyattn.tools.checklist.cases import op_inputs


@pytest.mark.parametrize("case", OP_CASES, ids=[c.name for c in OP_CASES])
def test_forward_matches_numpy(case):
    arrays = op_inputs(case)
    out = case.op(*[ta.tensor(a) for a in arrays])
    expected = case.reference(*arrays)
    assert out.shape == np.shape(expected)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("case", OP_CASES, ids=[c.name for c in OP_CASES])
def test_gradients_match_finite_differences(case):
    tensors = [ta.tensor(a, requires_grad=True) for a in op_inputs(case)]
    assert ta.gradcheck(case.op, tensors, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("case", OP_CASES, ids=[c.name for c in OP_CASES])
def test_float32_stays_float32(case):
    arrays = op_inputs(case, np.float32)
    tensors = [ta.tensor(a, requires_grad=True) for a in arrays]
    out = case.op(*tensors)
    assert out.dtype == (np.float64 if case.float64_constant else np.float32)
    upstream = np.random.default_rng(1).standard_normal(out.shape)   # not ones: see STYLE.md, 7
    out.backward(upstream)
    for t in tensors:
        assert t.grad.dtype == np.float32 and t.grad.shape == t.shape
    # and the float32 result is the float64 one, to float32 precision
    tensors64 = [ta.tensor(a.astype(np.float64), requires_grad=True) for a in arrays]
    out64 = case.op(*tensors64)
    out64.backward(upstream)
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
