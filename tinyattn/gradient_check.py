"""Chapter 1. Gradient checking: the engine's gradients against central finite differences.

Take the function f under test and a random upstream gradient v shaped like its output, and look at
the scalar L(x) = <v, f(x)>. One backward sweep seeded with v gives the analytical dL/dx. The
numerical one perturbs one input element at a time:

    dL/dx_i  ~  (L(x + eps e_i) - L(x - eps e_i)) / (2 eps)          (error of order eps^2)

For inputs too large for that (every element costs two forward passes), perturb along random
directions u instead; the analytical side is then the dot product <u, dL/dx>:

    <u, dL/dx>  ~  (L(x + eps u) - L(x - eps u)) / (2 eps)

Why a random v: with L = sum(f(x)) some functions have gradient exactly 0 everywhere (the sum of a
softmax is always 1), so a backward rule that wrongly returns 0 would pass.

The function must be deterministic: the same inputs, the same outputs. One with randomness inside
(dropout in training mode, a layer built inside it with fresh random weights) is a different
function at every call, and the difference between two of its calls, divided by 2 eps, is noise of
any size. So `fn` is first run twice at the same point, and outputs that differ are refused.

Use float64. float32 keeps about 7 digits (its machine epsilon is 1.2e-7): L itself is rounded by
about 1e-7 |L|, and divided by 2 eps = 2e-6 that rounding alone is an error of about 5% of |L|,
larger than most of the gradients being checked.
"""
import warnings
from typing import NamedTuple

import numpy as np

from tinyattn.engine import Tensor, no_grad

FULL_JACOBIAN_LIMIT = 1000   # inputs with more elements are checked along random directions
DEFAULT_DIRECTIONS = 10


def central_difference(loss, x, direction, eps):
    """(L(x + eps d) - L(x - eps d)) / (2 eps): the slope of L along the direction d.

    `loss()` computes L from the current numbers of the array `x`; `direction` is an array of x's
    shape: e_i (1 at element i, 0 elsewhere) for the derivative by one element, or a random
    direction u. x is changed in place for the two evaluations and put back, also when `loss`
    raises.
    """
    original = x.copy()
    try:
        x[...] = original + eps * direction
        loss_plus = loss()
        x[...] = original - eps * direction
        loss_minus = loss()
    finally:
        x[...] = original
    return (loss_plus - loss_minus) / (2 * eps)


def compare_gradients(fn, inputs, eps=1e-6, directions=None, seed=0):
    """Every (analytical, numerical) pair gradcheck looks at, as a list of Comparison."""
    inputs, checked = leaves_to_check(inputs)          # the inputs, and which of them to check
    outputs = outputs_of(fn, inputs)                   # f(x): tensors, the same at every call
    random = np.random.default_rng(seed)
    seeds = [random.standard_normal(out.shape) for out in outputs]     # v: one per output

    def loss():                                        # L(x) = <v, f(x)>, at x as it is now
        with no_grad():
            return sum(float(np.vdot(v, out.data)) for v, out in zip(seeds, as_tuple(fn(*inputs))))

    analytical = analytical_gradients(inputs, checked, outputs, seeds)   # backward seeded with v
    comparisons = []
    for i in checked:
        x = inputs[i].data
        if directions is None and x.size <= FULL_JACOBIAN_LIMIT:
            for where in np.ndindex(x.shape):
                numerical = central_difference(loss, x, unit(x.shape, where), eps)
                comparisons.append(Comparison(i, where, float(analytical[i][where]), numerical))
        else:
            for k in range(directions or DEFAULT_DIRECTIONS):
                u = random.standard_normal(x.shape)
                numerical = central_difference(loss, x, u, eps)
                comparisons.append(Comparison(i, ("direction", k),
                                              float(np.vdot(u, analytical[i])), numerical))
    return comparisons


def analytical_gradients(inputs, checked, outputs, seeds):
    """dL/dx for each checked input, from backward sweeps seeded with v; earlier .grad untouched."""
    kept = {i: inputs[i].grad for i in checked}
    for i in checked:
        inputs[i].grad = None
    for out, v in zip(outputs, seeds):
        if out.requires_grad:
            out.backward(v.astype(out.dtype), retain_graph=True)
    gradients = {i: (np.zeros(inputs[i].shape) if inputs[i].grad is None
                     else inputs[i].grad.astype(np.float64)) for i in checked}
    for i in checked:
        inputs[i].grad = kept[i]
    return gradients


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3, directions=None, seed=0):
    """Check the gradients of `fn(*inputs)` with respect to every input that requires grad.

    `inputs` is a list of arguments (or a single tensor); `fn` returns a tensor or a tuple of
    tensors. `directions=None` perturbs every element of inputs with at most 1,000 elements and uses
    10 random directions for larger ones; an int uses that many random directions for every input.
    Returns True, or raises GradcheckError naming the input, the element, and both values unless
    |analytical - numerical| <= atol + rtol * |numerical| (so a NaN on either side fails).
    """
    inputs = as_input_list(inputs)
    for c in compare_gradients(fn, inputs, eps, directions, seed):
        allowed = atol + rtol * abs(c.numerical)
        if not abs(c.analytical - c.numerical) <= allowed:
            raise GradcheckError(mismatch(c, inputs[c.input], eps, allowed))
    return True


# ------------------------------------------------------------------------------------------------
# What gradcheck reports, and what it needs besides the idea

class GradcheckError(AssertionError):
    """An analytical gradient that disagrees with its finite-difference estimate."""


class Comparison(NamedTuple):
    """One checked number: `where` is an element index, or ("direction", k) for direction k."""
    input: int
    where: tuple
    analytical: float
    numerical: float


def mismatch(c, x, eps, allowed):
    """The message of a Comparison `c` outside the tolerance, for the input `x` it is about."""
    place = f"direction {c.where[1]}" if c.where and c.where[0] == "direction" else \
        f"element {c.where}"
    low_precision = ("" if x.dtype == np.float64 else
                     f"; the input is {x.dtype}, whose rounding swamps differences of "
                     f"eps = {eps:g}: check in float64")
    return (f"gradcheck: input {c.input} (shape {x.shape}), {place}: analytical gradient "
            f"{c.analytical:.8g}, numerical {c.numerical:.8g} (difference "
            f"{abs(c.analytical - c.numerical):.3g}, allowed {allowed:.3g}){low_precision}")


def leaves_to_check(inputs):
    """(the inputs as a list, the indices of those that require grad): a tensor an op made is
    checked as a leaf holding the same numbers; one that is not float64 gets a warning."""
    inputs = as_input_list(inputs)
    checked = [i for i, x in enumerate(inputs) if isinstance(x, Tensor) and x.requires_grad]
    if not checked:
        raise ValueError("gradcheck: no input requires grad, so there is nothing to check")
    for i in checked:
        if not inputs[i].is_leaf:
            inputs[i] = Tensor(inputs[i].data, requires_grad=True)
        if inputs[i].dtype != np.float64:
            warnings.warn(f"gradcheck: input {i} is {inputs[i].dtype}; finite differences need "
                          "float64 to be accurate", stacklevel=4)
    return inputs, checked


def outputs_of(fn, inputs):
    """fn(*inputs) as a tuple of tensors, refused (a TypeError, a GradcheckError) if it is not
    one, or if a second call gives other numbers."""
    outputs = as_tuple(fn(*inputs))
    for out in outputs:
        if not isinstance(out, Tensor):
            raise TypeError(f"gradcheck: fn must return a tensor or a tuple of tensors, got a "
                            f"{type(out).__name__}")
    refuse_randomness(outputs, fn, inputs)
    return outputs


def unit(shape, where):
    """e_where: an array of `shape`, 1 at the element `where`, 0 elsewhere."""
    e = np.zeros(shape)
    e[where] = 1.0
    return e


def as_input_list(inputs):
    return [inputs] if isinstance(inputs, Tensor) else list(inputs)


def as_tuple(outputs):
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


def refuse_randomness(outputs, fn, inputs):
    """Raise GradcheckError if a second call of fn at the same point gives other outputs: other
    shapes, or numbers that differ by more than rounding (16 units in the last place of the
    largest output: BLAS may add in another order)."""
    with no_grad():
        again = as_tuple(fn(*inputs))
    for k, (first, second) in enumerate(zip(outputs, again)):
        first, second = first.data, second.data
        if first.shape != second.shape:
            different = f"shape {first.shape}, then {second.shape}"
        else:
            rounding = 16 * np.finfo(first.dtype).eps * float(np.abs(first).max(initial=0.0))
            with np.errstate(invalid="ignore", over="ignore"):
                same = ((first == second) | (np.abs(second - first) <= rounding)
                        | (np.isnan(first) & np.isnan(second)))
            if same.all():
                continue
            where = tuple(int(i) for i in np.argwhere(~same)[0])
            different = f"element {where}: {first[where]:.8g}, then {second[where]:.8g}"
        raise GradcheckError(
            f"gradcheck: fn is not deterministic: called twice with the same inputs, its output "
            f"{k} differs ({different}), so its finite differences are noise. Take the "
            f"randomness out of fn: build layers outside it, call .eval() on them (dropout), or "
            f"seed its draws (ta.manual_seed(0) as its first line)")
