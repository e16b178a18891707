"""Every op, one table row per op and shape: forward against NumPy, gradients against finite
differences (float64, random upstream gradient, via ta.gradcheck), broadcast shapes included, and
float32 kept float32 through forward and backward.

The table itself, OP_CASES, lives in `tinyattn_tools/checklist/ops.py`, so
`python -m tinyattn check` runs it too. Below it: numerics (huge logits, limits at 0) and
property tests over broadcast shapes.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tinyattn as ta
import tinyattn.functional as F
from tinyattn_tools.checklist import ATOL, OP_CASES, RTOL
from tinyattn_tools.checklist.cases import op_inputs
from tinyattn_tools.checklist.ops import np_softmax


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
    # a random upstream gradient, not ones: sum(softmax) has gradient 0
    upstream = np.random.default_rng(1).standard_normal(out.shape)
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


def test_cumsum_backward_is_a_reversed_running_sum():
    x = ta.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    out = x.cumsum(axis=1)
    np.testing.assert_array_equal(out.data, [[1, 3, 6], [4, 9, 15]])
    out.backward(np.array([[1.0, 10.0, 100.0], [2.0, 20.0, 200.0]]))
    np.testing.assert_array_equal(x.grad, [[111, 110, 100], [222, 220, 200]])


def test_elu_limits_and_gradient_at_zero():
    x = ta.tensor([-800.0, -1.0, 0.0, 1000.0], requires_grad=True)
    with np.errstate(all="raise"):                 # no overflow on either branch
        out = F.elu(x, alpha=2.0)
        out.backward(np.ones(4))
    np.testing.assert_allclose(out.data, [-2.0, 2 * np.expm1(-1.0), 0.0, 1000.0], rtol=1e-15)
    # the gradient alpha e^x on x <= 0 (alpha at 0, as in PyTorch), 1 above 0
    np.testing.assert_allclose(x.grad, [0.0, 2 * np.exp(-1.0), 2.0, 1.0], rtol=1e-15)


def test_elu_with_a_negative_alpha_takes_the_branch_of_the_input():
    x = ta.tensor([-1.0, 0.5], requires_grad=True)     # alpha < 0: out > 0 on both sides
    out = F.elu(x, alpha=-3.0)
    out.backward(np.ones(2))
    assert np.all(out.data > 0)
    np.testing.assert_allclose(x.grad, [-3.0 * np.exp(-1.0), 1.0], rtol=1e-15)


def test_index_scatter_adds_repeated_indices():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[[0, 0, 2, 0]].backward(np.array([1.0, 10.0, 100.0, 1000.0]))
    np.testing.assert_array_equal(x.grad, [1011, 0, 100])


def test_pow_gradient_for_the_exponent():
    base = ta.tensor([2.0, 3.0])
    exponent = ta.tensor([3.0, 0.5], requires_grad=True)
    (base ** exponent).sum().backward()
    np.testing.assert_allclose(exponent.grad, [8 * np.log(2), np.sqrt(3) * np.log(3)])


def test_max_backward_stays_float32_inside_the_graph():
    x = ta.tensor(np.array([[1.0, 3.0, 3.0]], np.float32), requires_grad=True)
    top = x.max(axis=1)
    (grad,) = top._node.backward(np.ones(1, np.float32))    # what the sweep passes upstream
    assert grad.dtype == np.float32
    np.testing.assert_array_equal(grad, [[0.0, 0.5, 0.5]])


def test_softmax_of_integers_is_computed_in_float64():
    np.testing.assert_allclose(F.softmax(ta.tensor([1, 2, 3])).data,
                               np_softmax(np.arange(1.0, 4.0)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_huge_logits_give_finite_values_and_gradients(fn, dtype):
    x = ta.tensor(np.array([[1e4, 0.0, -1e4], [3e4, 3e4, -5.0]], dtype), requires_grad=True)
    out = fn(x)
    upstream = np.array([[1.0, -2.0, 0.5], [3.0, -1.0, 2.0]], dtype)
    out.backward(upstream)
    assert out.dtype == dtype and x.grad.dtype == dtype
    assert np.all(np.isfinite(out.data)) and np.all(np.isfinite(x.grad))
    # the exact answers: row 1 is one-hot on its first entry, row 2 splits evenly between two
    if fn is F.softmax:             # dL/dx_i = p_i (g_i - sum_j g_j p_j)
        expected = [[0.0, 0.0, 0.0], [(3.0 + 1.0) / 4, (-1.0 - 3.0) / 4, 0.0]]
    else:                           # dL/dx_i = g_i - p_i sum_j g_j
        expected = [[1.0 + 0.5, -2.0, 0.5], [3.0 - 2.0, -1.0 - 2.0, 2.0]]
    np.testing.assert_allclose(x.grad, expected, atol=1e-6)


def test_softmax_of_huge_logits_is_right():
    probabilities = F.softmax(ta.tensor([1e4, 1e4 - np.log(3.0), -1e4])).data
    np.testing.assert_allclose(probabilities, [0.75, 0.25, 0.0])
    log_probabilities = F.log_softmax(ta.tensor([1e4, 0.0])).data
    np.testing.assert_allclose(log_probabilities, [0.0, -1e4])


def test_softmax_rows_of_minus_infinity_give_zeros_not_nan():
    x = ta.tensor([[-np.inf, -np.inf, -np.inf], [0.0, -np.inf, 1.0]], requires_grad=True)
    out = F.softmax(x)
    np.testing.assert_array_equal(out.data[0], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(out.data[1], [1 / (1 + np.e), 0.0, np.e / (1 + np.e)])
    out.backward(np.array([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]))
    assert np.all(np.isfinite(x.grad)) and np.all(x.grad[0] == 0)


def test_softmax_gradient_is_not_only_zero():
    """The sum of a softmax is always 1, so that loss has gradient 0: a random seed must not."""
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 5)), requires_grad=True)
    F.softmax(x).backward(np.random.default_rng(1).standard_normal((2, 5)))
    assert np.abs(x.grad).max() > 1e-3


def test_float32_scalars_do_not_upcast():
    x = ta.tensor(np.ones((2, 2), np.float32), requires_grad=True)
    y = (x * np.sqrt(2.0) + np.float64(1.0)) / 3 - 0.5
    y = y ** 2 + 2.0 ** x
    assert y.dtype == np.float32
    y.sum().backward()
    assert x.grad.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_logits_as_far_apart_as_the_dtype_allows(dtype):
    """x - max(x) overflows to -inf for these (no warning): the right limit, since exp(-inf) = 0."""
    huge = float(np.finfo(dtype).max) * 0.9
    x = ta.tensor(np.array([huge, -huge, 0.0], dtype), requires_grad=True)
    np.testing.assert_array_equal(F.softmax(x).data, [1.0, 0.0, 0.0])
    out = F.log_softmax(x)
    np.testing.assert_array_equal(out.data[:2], [0.0, -np.inf])
    out.backward(np.array([1.0, 2.0, 3.0], dtype))
    np.testing.assert_array_equal(x.grad, [1.0 - 6.0, 2.0, 3.0])   # g_i - p_i sum_j g_j
    assert x.grad.dtype == dtype


@pytest.mark.parametrize("fn", [F.softmax, F.log_softmax])
def test_softmax_of_a_scalar_and_over_an_empty_axis(fn):
    assert fn(ta.tensor(2.0)).item() == (1.0 if fn is F.softmax else 0.0)
    x = ta.tensor(np.ones((3, 0)), requires_grad=True)
    out = fn(x)
    assert out.shape == (3, 0)
    out.backward(np.ones((3, 0)))
    assert x.grad.shape == (3, 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_division_gradient_for_huge_and_tiny_divisors(dtype):
    """dL/db = -grad * a / b^2, computed without b^2, which would overflow or underflow here."""
    a = ta.tensor(np.array([1e20, 1e-30, 3.0], dtype), requires_grad=True)
    b = ta.tensor(np.array([1e20, 1e-30, 2.0], dtype), requires_grad=True)
    (a / b).backward(np.array([1.0, 2.0, 3.0], dtype))
    np.testing.assert_allclose(b.grad, [-1e-20, -2e30, -3.0 * 3.0 / 4.0], rtol=1e-6)
    np.testing.assert_allclose(a.grad, [1e-20, 2e30, 1.5], rtol=1e-6)
    assert a.grad.dtype == b.grad.dtype == dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_power_gradients_at_zero_are_the_limits_pytorch_takes(dtype):
    """Where the formulas give 0 * inf = NaN: x ** 0 is flat in x, and 0 ** y (y >= 0) in y."""
    def leaf(*values):
        return ta.tensor(np.array(values, dtype), requires_grad=True)

    x = leaf(0.0, 2.0)
    (x ** 0).backward(np.array([3.0, 5.0], dtype))
    np.testing.assert_array_equal(x.grad, [0.0, 0.0])
    y = leaf(0.0, 0.5, 2.0)
    (0.0 ** y).backward(np.array([3.0, 5.0, 7.0], dtype))
    np.testing.assert_array_equal(y.grad, [0.0, 0.0, 0.0])
    base, exponent = leaf(0.0, 0.0, 2.0, 3.0), leaf(0.0, 2.0, 0.0, 2.0)
    (base ** exponent).backward(np.array([3.0, 5.0, 7.0, 11.0], dtype))
    np.testing.assert_allclose(base.grad, [0.0, 0.0, 0.0, 11.0 * 2.0 * 3.0], rtol=1e-6)
    np.testing.assert_allclose(exponent.grad,
                               [0.0, 0.0, 7.0 * np.log(2.0), 11.0 * 9.0 * np.log(3.0)], rtol=1e-6)
    assert {x.grad.dtype, y.grad.dtype, base.grad.dtype, exponent.grad.dtype} == {np.dtype(dtype)}


BINARY_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "where": lambda a, b: ta.where(a.data > 0, a, b),
}


SHAPES = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


@settings(max_examples=40, deadline=None)
@given(shapes=SHAPES, op=st.sampled_from(sorted(BINARY_OPS)), seed=st.integers(0, 2**16))
def test_binary_ops_under_broadcasting(shapes, op, seed):
    random = np.random.default_rng(seed)
    a, b = (random.uniform(0.5, 1.5, s) * random.choice([-1, 1], s) for s in shapes.input_shapes)
    ta_a, ta_b = ta.tensor(a, requires_grad=True), ta.tensor(b, requires_grad=True)
    out = BINARY_OPS[op](ta_a, ta_b)
    assert out.shape == shapes.result_shape
    assert ta.gradcheck(BINARY_OPS[op], [ta_a, ta_b], atol=1e-7, rtol=1e-5)
    out.backward(np.ones(out.shape))
    assert ta_a.grad.shape == a.shape and ta_b.grad.shape == b.shape


@settings(max_examples=25, deadline=None)
@given(shapes=mutually_broadcastable_shapes(signature="(m,k),(k,n)->(m,n)",
                                            max_dims=2, max_side=3),
       seed=st.integers(0, 2**16))
def test_matmul_under_batch_broadcasting(shapes, seed):
    random = np.random.default_rng(seed)
    a, b = (ta.tensor(random.standard_normal(s), requires_grad=True) for s in shapes.input_shapes)
    np.testing.assert_allclose((a @ b).data, a.data @ b.data)
    assert ta.gradcheck(lambda x, y: x @ y, [a, b], atol=1e-7, rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4),
       data=st.data(), keepdims=st.booleans())
def test_reductions_over_any_axes(shape, data, keepdims):
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    x = ta.tensor(np.random.default_rng(len(shape)).standard_normal(shape), requires_grad=True)
    for name in ("sum", "mean", "max"):
        reduce = lambda t: getattr(t, name)(axis=axes, keepdims=keepdims)  # noqa: E731
        np.testing.assert_allclose(reduce(x).data, getattr(x.data, name)(axis=axes,
                                                                         keepdims=keepdims))
        assert ta.gradcheck(reduce, [x], atol=1e-7, rtol=1e-5)
