"""Numerics: stable softmax and log-softmax, no overflow warnings (pytest turns warnings into
errors, see setup.cfg), float32 kept float32."""
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F


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


def test_attention_over_no_keys_gives_zeros():
    """S = 0: every key is missing, like a fully masked row, so the output row is zero."""
    random = np.random.default_rng(0)
    q = ta.tensor(random.standard_normal((3, 4)), requires_grad=True)
    k, v = ta.tensor(np.zeros((0, 4)), requires_grad=True), ta.tensor(np.zeros((0, 2)))
    out = F.scaled_dot_product_attention(q, k, v)
    np.testing.assert_array_equal(out.data, np.zeros((3, 2)))
    out.backward(random.standard_normal((3, 2)))
    np.testing.assert_array_equal(q.grad, np.zeros((3, 4)))
    assert k.grad.shape == (0, 4)


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
