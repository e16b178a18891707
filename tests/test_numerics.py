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
