"""tinyattn.optim: SGD and Adam against their formulas, dtypes and step counts."""
import numpy as np
import pytest

import tinyattn.nn as nn
from tinyattn import optim


def parameter_with_grad(value, grad, dtype=np.float64):
    p = nn.Parameter(np.array(value, dtype=dtype))
    p.grad = np.array(grad, dtype=dtype)
    return p


def test_sgd_with_momentum_and_weight_decay():
    p = parameter_with_grad([1.0, -2.0], [0.5, 0.5])
    sgd = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
    sgd.step()                                  # v = g + wd p
    v = np.array([0.5, 0.5]) + 0.01 * np.array([1.0, -2.0])
    expected = np.array([1.0, -2.0]) - 0.1 * v
    np.testing.assert_allclose(p.data, expected)
    sgd.step()                                  # v = 0.9 v + g + wd p
    v = 0.9 * v + np.array([0.5, 0.5]) + 0.01 * expected
    np.testing.assert_allclose(p.data, expected - 0.1 * v)


def test_adam_matches_its_formula():
    start, g1, g2 = np.array([1.0, -2.0, 3.0]), np.array([0.1, -3.0, 0.0]), np.array([0.2, 1.0, 1.0])
    p = parameter_with_grad(start, g1)
    adam = optim.Adam([p], lr=0.01)
    adam.step()          # step 1: m / (1 - b1) = g and v / (1 - b2) = g^2, so p moves by lr sign(g)
    np.testing.assert_allclose(p.data, [0.99, -1.99, 3.0], rtol=1e-6)
    after_one = start - 0.01 * g1 / (np.abs(g1) + 1e-8)
    np.testing.assert_allclose(p.data, after_one, rtol=1e-12)
    p.grad = g2.copy()
    adam.step()
    m = 0.9 * 0.1 * g1 + 0.1 * g2
    v = 0.999 * 0.001 * g1 ** 2 + 0.001 * g2 ** 2
    step = 0.01 * (m / (1 - 0.9 ** 2)) / (np.sqrt(v / (1 - 0.999 ** 2)) + 1e-8)
    np.testing.assert_allclose(p.data, after_one - step, rtol=1e-12)


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.Adam(ps, lr=0.1)])
def test_optimizers_keep_float32_and_clear_gradients(make):
    p = parameter_with_grad([1.0, 2.0], [0.5, -0.5], np.float32)
    optimizer = make([p])
    optimizer.step()
    optimizer.step()
    assert p.dtype == np.float32
    optimizer.zero_grad()
    assert p.grad is None


def test_adam_counts_steps_per_parameter():
    """A parameter that first gets a gradient at the third step takes Adam's first step then (its
    bias correction starts from 1), as in PyTorch; one without a gradient does not move."""
    late, idle = parameter_with_grad([1.0], [0.0]), nn.Parameter(np.array([5.0]))
    early = parameter_with_grad([1.0], [0.5])
    adam = optim.Adam([early, late, idle], lr=0.1)
    late.grad = None
    adam.step()
    adam.step()
    late.grad = np.array([2.0])
    adam.step()
    np.testing.assert_allclose(late.data, [1.0 - 0.1 * 2.0 / (2.0 + 1e-8)])
    np.testing.assert_array_equal(idle.data, [5.0])
