"""Chapter 1. The error function of a whole array, fast: GELU as defined (ops/elementwise.py's
GeluExact) needs it, and NumPy has none.

    erf(x) = 2 / sqrt(pi) * integral from 0 to x of exp(-s^2) ds

erf is odd (erf(-x) = -erf(x)) and climbs from 0 to 1, so it is enough to compute it for |x| and
give the result x's sign. Two ranges of |x|, each with the form that keeps the error relative:

    near   |x| < 1     erf(x) = x g(x^2),             g(t) = erf(sqrt t) / sqrt t
    far    |x| >= 1    erf(x) = 1 - exp(-x^2) h(|x|),  h(x) = erfc(x) exp(x^2)

Near 0, erf(x) is about 2 x / sqrt(pi): writing it as x times g keeps the relative error of the
result that of g, however small x is (a polynomial in x would add errors of its own size there).
g is a smooth function of t = x^2 (its Taylor series sum_n (-1)^n t^n / (n! (2 n + 1)) * 2 /
sqrt(pi) converges everywhere), so a polynomial of low degree in t follows it on [0, 1]. Far
from 0, erf is 1 minus the small erfc(x), and erfc falls like exp(-x^2); divided by exp(-x^2)
what is left, h, varies slowly (from 0.43 at 1 to 1 / (x sqrt(pi)) as x grows) and a polynomial
follows it. Past CUTOFF (6 in float64, 4 in float32) erfc(x) is below half the spacing of the
dtype's numbers next to 1, so erf is 1 exactly; h is then taken at CUTOFF, and exp(-x^2) makes
its part vanish.

The polynomials are not typed in: they are computed when this file is imported, from Python's own
math.erf and math.erfc (correct to the last bit), as Chebyshev interpolants (the polynomial
through the function's values at the Chebyshev points of the range, whose error is nearly the
smallest any polynomial of its degree has there: numpy.polynomial.chebyshev), one set of
degrees per dtype, then rewritten in powers of t (near) or of the range mapped to [-1, 1] (far)
and evaluated by Horner's rule: degree multiplications and additions of whole arrays. A float32
array is computed in float32 throughout, with the float32 polynomials: fewer terms, since its
numbers carry 7 digits, not 16. tests/test_erf.py measures the error against math.erf on a dense
grid (a few units in the last place) and the time against np.tanh.
"""
import math

import numpy as np
from numpy.polynomial import Chebyshev, Polynomial

# dtype: (degree near, degree far, CUTOFF), each degree the smallest at which the polynomial's own
# error is below the rounding of the dtype (tests/test_erf.py checks the result)
DEGREES = {np.dtype(np.float64): (11, 24, 6.0), np.dtype(np.float32): (5, 10, 4.0)}


def g(t):
    """erf(sqrt t) / sqrt t, 2 / sqrt(pi) at t = 0."""
    return np.array([math.erf(math.sqrt(v)) / math.sqrt(v) if v > 0 else 2 / math.sqrt(math.pi)
                     for v in t])


def h(x):
    """erfc(x) exp(x^2): erfc scaled back up."""
    return np.array([math.erfc(v) * math.exp(v * v) for v in x])


def polynomials(dtype):
    """(powers of t near, powers of u far, cutoff) for `dtype`: the coefficients, lowest power
    first, as Python floats (which keep a float32 array float32)."""
    near, far, cutoff = DEGREES[dtype]
    near_fit = Chebyshev.interpolate(g, near, domain=[0.0, 1.0])          # in t = x^2
    far_fit = Chebyshev.interpolate(h, far, domain=[1.0, cutoff])         # in u in [-1, 1]
    in_t = near_fit.convert(kind=Polynomial).coef
    in_u = np.polynomial.chebyshev.cheb2poly(far_fit.coef)
    rounded = [[float(c) for c in np.asarray(p, dtype=dtype)] for p in (in_t, in_u)]
    return rounded[0], rounded[1], cutoff


POLYNOMIALS = {dtype: polynomials(dtype) for dtype in DEGREES}
CUTOFF_OF = {dtype: cutoff for dtype, (_, _, cutoff) in DEGREES.items()}


def horner(coefficients, x):
    """sum_k coefficients[k] x^k, by Horner's rule (one multiplication and one addition of the
    array per degree, in place)."""
    y = np.full_like(x, coefficients[-1])
    for c in coefficients[-2::-1]:
        y *= x
        y += c
    return y


def erf(x):
    """The error function of a float32 or float64 array, element by element, in its dtype (see
    the top of this file); other arrays are computed in float64."""
    x = np.asarray(x)
    if x.dtype not in POLYNOMIALS:
        x = x.astype(np.float64)
    out = np.empty(x.shape, dtype=x.dtype)                  # C order: its reshape is a view
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    for start in range(0, x.size, BLOCK):
        block = slice(start, start + BLOCK)
        flat_out[block] = erf_of_block(flat_x[block], *POLYNOMIALS[x.dtype])
    return out


def erf_of_block(x, in_t, in_u, cutoff):
    """erf of a 1-d array: both forms computed for every element, each where it holds kept."""
    size = np.abs(x)
    # near: x g(x^2), for |x| < 1 (x clipped to [-1, 1] where it is not)
    x_near = np.clip(x, -1.0, 1.0)
    near = x_near * horner(in_t, x_near * x_near)
    # far: +-(1 - exp(-x^2) h(|x|)), h between 1 and the cutoff (NaN stays NaN)
    u = np.clip(size, 1.0, cutoff) * (2.0 / (cutoff - 1.0)) - (cutoff + 1.0) / (cutoff - 1.0)
    tail = np.exp(-(size * size)) * horner(in_u, u)                     # erfc(|x|)
    far = np.copysign(1.0 - tail, x)
    return np.where(size < 1.0, near, far)


# The speed trick, in one place: the array is computed in blocks of BLOCK elements. Each of the
# forms above is some forty passes of NumPy over its input; over a whole array of millions of
# numbers each pass streams it from memory and back, and each temporary array is fresh memory
# for the system to map. A block's temporaries (BLOCK float64s: 128 KiB) stay in the processor's
# cache and are reused. tests/test_erf.py times it against np.tanh.
BLOCK = 16384
