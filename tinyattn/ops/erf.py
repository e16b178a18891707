"""Chapter 1. The error function of a whole array, fast: GELU as defined (ops/elementwise.py's
GeluExact) needs it, and NumPy has none.

    erf(x) = 2 / sqrt(pi) * integral from 0 to x of exp(-s^2) ds

erf is odd and climbs from 0 to 1. Write it as x times an even function,

    erf(x) = x G(|x|),    G(a) = erf(a) / a    (G(0) = 2 / sqrt(pi), the slope at 0)

G is smooth and never 0: it falls from 1.128 at 0 to 1 / a once erf(a) is 1. Computing G to a
relative error e gives erf to the same relative error e, however small x is (near 0, erf(x) is
about 2 x / sqrt(pi), and a formula such as 1 - erfc(x) would lose every digit there).

G is a table of polynomials. [0, CUTOFF] is cut into intervals of width w, and on interval k,
centred at c_k, G is the polynomial of degree d in s = a - c_k that interpolates it at the
Chebyshev points of the interval (numpy.polynomial.chebyshev: an error nearly the smallest any
polynomial of that degree has there). On a short interval a polynomial of low degree follows
G to the rounding of the dtype. For each element: its interval k = floor(|x| / w), its s, the
d + 1 coefficients of interval k looked up (np.take), Horner's rule in s, times x. Past CUTOFF
(6 in float64, 4 in float32) erfc(x) is below half the spacing of the dtype's numbers next to 1,
so erf rounds to +-1: x is clipped to [-CUTOFF, CUTOFF] first, where erf(CUTOFF) is 1 to the
dtype's precision.

The coefficients are not typed in: they are computed when this file is imported, from Python's
math.erf (correct to the last bit), one table per dtype (DEGREES): a float32 array is computed in
float32 throughout, with a table of fewer intervals and a lower degree, since its numbers carry 7
digits, not 16. tests/test_erf.py measures the error against math.erf on a dense grid (a few
units in the last place) and the time against np.tanh.
"""
import math

import numpy as np
from numpy.polynomial import Chebyshev, Polynomial

# dtype: (interval width w, degree d, CUTOFF); the error of each pair is at the dtype's rounding
DEGREES = {np.dtype(np.float64): (0.125, 9, 6.0), np.dtype(np.float32): (0.5, 6, 4.0)}


def G(a):
    """erf(a) / a for an array of a >= 0, 2 / sqrt(pi) at 0."""
    return np.array([math.erf(v) / v if v > 0 else 2 / math.sqrt(math.pi) for v in a])


def table(dtype):
    """(w, centres (n,), coefficients (d + 1, n), CUTOFF) of `dtype`'s table: row j holds the
    coefficient of s^j of each interval's polynomial."""
    width, degree, cutoff = DEGREES[dtype]
    n = round(cutoff / width)
    centres = (np.arange(n) + 0.5) * width
    coefficients = np.zeros((degree + 1, n))
    for k, centre in enumerate(centres):
        interval = [centre - width / 2, centre + width / 2]
        fit = Chebyshev.interpolate(G, degree, domain=interval)
        in_s = fit.convert(kind=Polynomial, domain=interval, window=[-width / 2, width / 2])
        coefficients[:len(in_s.coef), k] = in_s.coef        # (convert drops zeros at the end)
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
# above is some thirty passes of NumPy over its input; over a whole array of millions of numbers
# each pass streams it from memory and back, and each temporary array is fresh memory for the
# system to map. A block's temporaries (BLOCK float64s: 128 KiB) stay in the processor's cache
# and are reused. tests/test_erf.py times it against np.tanh.
BLOCK = 16384
