"""Chapter 1. The error function of a whole array, fast: GELU as defined (ops/elementwise.py's
GeluExact) needs it, and NumPy has none.

    erf(x) = 2 / sqrt(pi) * integral from 0 to x of exp(-s^2) ds

erf is odd and climbs from 0 to 1. Write it as x times an even function,

    erf(x) = x G(|x|),    G(a) = erf(a) / a    (G(0) = 2 / sqrt(pi), the slope at 0)

G is smooth and never 0: it falls from 1.128 at 0 to 1 / a once erf(a) is 1. Computing G to a
relative error e gives erf to the same relative error e, however small x is (near 0, erf(x) is
about 2 x / sqrt(pi), and a formula such as 1 - erfc(x) would lose every digit there).

G is a table of polynomials. [0, CUTOFF] is cut into n intervals of width w, and on interval k,
centred at c_k, G is the polynomial of degree d in s = a - c_k through G's values at the d + 1
Chebyshev points of the interval, c_k + (w / 2) cos((j + 1/2) pi / (d + 1)): the interpolant whose
error is nearly the smallest any polynomial of degree d has there. On an interval of width 1/64
a polynomial of degree 6 follows G to the rounding of float64 (degree 2, of float32). For each
element: its interval k = floor(|x| / w), its s, the d + 1 coefficients of interval k looked up
(np.take), Horner's rule in s, times x. Past CUTOFF (6 in float64, 4 in float32) erfc(x) is below
half the spacing of the dtype's numbers next to 1, so erf rounds to +-1: x is clipped to
[-CUTOFF, CUTOFF] first, where erf(CUTOFF) is 1 to the dtype's precision.

The coefficients are not typed in: they are computed when this file is imported, from Python's
math.erf (accurate to about an ulp), one table per dtype (DEGREES), by solving for the polynomial
through those values. A float32 array is computed in float32 throughout, with its own table of a
lower degree, since its numbers carry 7 digits, not 16. tests/test_erf.py measures the error
against math.erf on a dense grid (a few units in the last place) and the time against np.tanh.
"""
import math

import numpy as np

# dtype: (interval width w, degree d, CUTOFF); the error of each pair is at the dtype's rounding
DEGREES = {np.dtype(np.float64): (1 / 64, 6, 6.0), np.dtype(np.float32): (1 / 64, 2, 4.0)}
ERF_OVER_A = np.frompyfunc(lambda a: math.erf(a) / a, 1, 1)         # G(a), for a > 0


def table(dtype):
    """(w, centres (n,), coefficients (d + 1, n), CUTOFF) of `dtype`'s table: row i holds the
    coefficient of s^i of each interval's polynomial."""
    width, degree, cutoff = DEGREES[dtype]
    half, n = width / 2, round(cutoff / width)
    centres = (np.arange(n) + 0.5) * width                              # (n,)
    points = np.cos(np.pi * (np.arange(degree + 1) + 0.5) / (degree + 1))   # in (-1, 1)
    values = ERF_OVER_A(centres + half * points[:, None]).astype(float)     # (d + 1, n), a > 0
    # the polynomial through them, in sigma = s / half: V[j, i] = points[j]^i
    powers = np.arange(degree + 1)
    in_sigma = np.linalg.solve(points[:, None] ** powers, values)      # (d + 1, n)
    coefficients = in_sigma / half ** powers[:, None]                   # in s = half sigma
    return width, centres.astype(dtype), coefficients.astype(dtype), cutoff


TABLES = {dtype: table(dtype) for dtype in DEGREES}


def erf(x):
    """The error function of a float32 or float64 array, element by element, in its dtype (see
    the top of this file); other arrays are computed in float64."""
    x = np.asarray(x)
    if x.dtype not in TABLES:
        x = x.astype(np.float64)
    out = np.empty(x.shape, dtype=x.dtype)                  # C order: its reshape is a view
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    for start in range(0, x.size, BLOCK):
        block = slice(start, start + BLOCK)
        flat_out[block] = erf_of_block(flat_x[block], *TABLES[x.dtype])
    return out


def erf_of_block(x, width, centres, coefficients, cutoff):
    """erf of a 1-d array: x G(|x|), G's polynomial chosen by the interval |x| falls in."""
    x = np.clip(x, -cutoff, cutoff)                          # erf is +-1 beyond (NaN stays)
    a = np.abs(x)
    # the interval, floor(a / w): the last one for a = CUTOFF, its end (and for NaN: fmin)
    k = np.fmin(a * (1.0 / width), len(centres) - 1).astype(np.intp)
    s = a - centres.take(k)                                  # in [-w/2, w/2]
    g = coefficients[-1].take(k)
    for row in coefficients[-2::-1]:                         # Horner's rule in s
        g *= s
        g += row.take(k)
    return x * g


# The speed trick, in one place: the array is computed in blocks of BLOCK elements. The formula
# above is fifteen (float32) to thirty (float64) passes of NumPy over its input; over a whole
# array of millions of numbers each pass streams it from memory and back, and each temporary
# array is fresh memory for the system to map. A block's temporaries (BLOCK float64s: 128 KiB)
# stay in the processor's cache and are reused. tests/test_erf.py times it against np.tanh.
BLOCK = 16384
