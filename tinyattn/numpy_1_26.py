"""Chapter 1. What NumPy 1.26, the oldest NumPy tinyattn runs on, needs and NumPy 2 does not.

NumPy 2 lets a Python number take the dtype of the array it meets, 0-d arrays included (NEP 50):
`x * 0.5` stays float32 for a float32 x of any shape. NumPy 1.26 does that only for arrays of one
axis or more: there a 0-d float32 loss times 0.5 is a float64. So, on 1.26 alone, `Function.apply`
gives numbers the dtype of the arrays they meet (`numbers_in_dtype`) and turns a float64 result
of float32 operands back into float32 (`in_numpy_2_dtype`). On NumPy 2 neither runs; the day
NumPy 1.26 is no longer supported, this file goes.
"""
import numpy as np

LEGACY_PROMOTION = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def in_numpy_2_dtype(data, operands):
    """`data`, an op's result, in the dtype NumPy 2 would give it: on NumPy 1.26 a 0-d float32
    array times a Python float, inside a forward (`0.5 * x` in GELU's), is a float64, so a
    float64 result of float32 operands alone is turned back into float32."""
    floating = [a.dtype for a in operands if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if data.dtype == np.float64 and floating and np.float64 not in floating:
        return data.astype(np.result_type(*floating))
    return data


def numbers_in_dtype(operands):
    """The operands, with each Python number made a 0-d array of the floating dtype of the arrays
    among them (when they have one), as NumPy 2 would treat it."""
    floating = [a.dtype for a in operands if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if not floating:
        return operands
    dtype = np.result_type(*floating)
    return [np.asarray(a, dtype) if isinstance(a, (int, float)) else a for a in operands]
