"""ta.gradcheck itself: it passes right gradients and catches wrong ones, with a useful message."""
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.engine import Function


class WrongSquare(Function):
    """x^2 with a deliberately wrong backward: 3x instead of 2x."""

    def forward(self, x):
        self.saved = (x,)
        return x * x

    def backward(self, grad):
        x, = self.saved
        return (grad * 3 * x,)


class ForgetfulSum(Function):
    """sum(x) whose backward forgets the upstream gradient: only a random seed reveals it."""

    def forward(self, x):
        self.shape_in = x.shape
        return x.sum(axis=-1)

    def backward(self, grad):
        return (np.ones(self.shape_in),)


def test_catches_a_wrong_rule_and_names_it():
    x = ta.tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    with pytest.raises(ta.GradcheckError, match=r"input 0 \(shape \(2, 2\)\), element \(0, 0\): "
                                                r"analytical gradient .*numerical"):
        ta.gradcheck(WrongSquare.apply, [x])


def test_catches_a_rule_that_ignores_the_upstream_gradient():
    x = ta.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(ta.GradcheckError):
        ta.gradcheck(ForgetfulSum.apply, [x])


def test_random_directions_for_large_inputs():
    x = ta.tensor(np.random.default_rng(0).standard_normal((40, 40)), requires_grad=True)
    assert ta.gradcheck(lambda a: (a @ a).tanh(), [x])            # 1,600 elements: directions
    with pytest.raises(ta.GradcheckError, match="direction"):
        ta.gradcheck(WrongSquare.apply, [x])
    assert ta.gradcheck(lambda a: a.exp(), [ta.tensor(np.ones(3), requires_grad=True)],
                        directions=4)


def test_several_inputs_outputs_and_constants():
    a = ta.tensor(np.random.default_rng(1).standard_normal((2, 3)), requires_grad=True)
    b = ta.tensor(np.random.default_rng(2).standard_normal((3,)), requires_grad=True)
    constant = ta.tensor(np.ones((2, 3)))
    assert ta.gradcheck(lambda a, b, c: (a * b + c, (a - b).exp()), [a, b, constant])
    assert a.grad is None and b.grad is None        # gradcheck leaves .grad as it found it


def test_inputs_are_restored():
    values = np.random.default_rng(3).standard_normal(5)
    x = ta.tensor(values, requires_grad=True)
    ta.gradcheck(lambda a: a.tanh(), [x])
    np.testing.assert_array_equal(x.data, values)


def test_needs_an_input_that_requires_grad():
    with pytest.raises(ValueError, match="no input requires grad"):
        ta.gradcheck(lambda a: a * 2, [ta.tensor([1.0])])


class NaNRule(Function):
    """out = 3a, with a backward that gives NaN."""

    def forward(self, a):
        return a * 3

    def backward(self, grad):
        return (grad * np.nan,)


def test_a_nan_gradient_fails():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(ta.GradcheckError, match=r"analytical gradient nan"):
        ta.gradcheck(lambda a: NaNRule.apply(a), [x])


def test_an_input_made_by_an_op_is_checked_as_a_leaf():
    x = ta.tensor(np.random.default_rng(0).standard_normal(3), requires_grad=True)
    assert ta.gradcheck(lambda a: a * a, [x * 1.0])
    assert ta.gradcheck(lambda a: a.exp(), x)        # a single tensor instead of a list


def test_inputs_are_restored_when_the_function_raises():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    calls = []

    def fails_on_third_call(a):
        calls.append(1)
        if len(calls) == 3:
            raise RuntimeError("boom")
        return a * 2

    with pytest.raises(RuntimeError, match="boom"):
        ta.gradcheck(fails_on_third_call, [x])
    np.testing.assert_array_equal(x.data, [1.0, 2.0])


def test_a_function_that_returns_an_array_is_told_to_return_tensors():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="gradcheck: fn must return a tensor or a tuple of "
                                        "tensors, got a ndarray"):
        ta.gradcheck(lambda x: x.data * 2, [x])


@pytest.mark.parametrize("make_random", ["dropout", "layer built inside"])
def test_a_function_with_randomness_inside_is_refused_and_told_what_to_do(make_random):
    x = ta.tensor(np.random.default_rng(4).standard_normal((3, 4)), requires_grad=True)
    fn = ((lambda a: F.dropout(a, 0.5)) if make_random == "dropout"
          else (lambda a: ta.nn.Linear(4, 2)(a)))
    with pytest.raises(ta.GradcheckError, match=r"gradcheck: fn is not deterministic: called "
                                                r"twice with the same inputs, its output 0 "
                                                r"differs \(element .*\.eval\(\).*manual_seed"):
        ta.gradcheck(fn, [x])


def test_randomness_seeded_inside_the_function_is_deterministic_and_checked():
    x = ta.tensor(np.random.default_rng(5).standard_normal((3, 4)), requires_grad=True)

    def seeded_dropout(a):
        ta.manual_seed(0)
        return F.dropout(a, 0.5) * a

    assert ta.gradcheck(seeded_dropout, [x])


def test_the_same_nan_twice_is_deterministic():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    nan = ta.tensor([np.nan, 0.0])
    with pytest.raises(ta.GradcheckError, match=r"analytical gradient nan, numerical nan"):
        ta.gradcheck(lambda a: a * nan, [x])


def test_a_function_whose_output_shape_changes_is_refused():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    calls = []

    def grows(a):
        calls.append(1)
        return ta.concatenate([a] * len(calls))

    with pytest.raises(ta.GradcheckError, match=r"its output 0 differs \(shape \(3,\), then "
                                                r"\(6,\)\)"):
        ta.gradcheck(grows, [x])
