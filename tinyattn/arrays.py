"""Chapter 1. What the ops compute on, as `engine.py` needs it but a first reading can skip.

    data_of, numeric_array   a tensor's data, or a list, number or array as a NumPy array of
                             numbers (NumPy's complaint about it named by the op that got it)
    operand_arrays,          what an op computes on: each tensor's data, each constant as NumPy
    output_array             should meet it; and what it computed, as an array (numpy_1_26.py
                             keeps the dtypes of NumPy 2 on NumPy 1.26)
    named                    NumPy's complaint inside an op, said again with the op's name
    checked_axes             NumPy's rules for the axes of a reduction or a permutation
"""
import numpy as np

from tinyattn import numpy_1_26
from tinyattn.tensor_protocols import ArrayProtocols

INTEGERS = (int, np.integer)


class TensorIndexError(IndexError, ValueError):
    """An index out of range: an IndexError as in NumPy and PyTorch, and a ValueError like every
    other bad input to tinyattn."""


def named(error, op):
    """`error` (an IndexError, ValueError or TypeError) said again with the op's name in front; an
    IndexError as a TensorIndexError, which is also a ValueError."""
    kind = TensorIndexError if isinstance(error, IndexError) else type(error)
    return kind(f"{op}: {error}")


def data_of(value):
    """The NumPy array behind a tensor; any other value as it is."""
    return value.data if isinstance(value, ArrayProtocols) else value


def numeric_array(data, op, dtype=None):
    """`data` (an array, a list, a number) as a NumPy array of numbers: bool, int or float.

    NumPy's complaint about it (a ragged list, strings) is passed on as a tinyattn error naming
    `op`, the operation that received it.
    """
    try:
        array = np.asarray(data, dtype=dtype)
    except (ValueError, TypeError) as error:
        raise type(error)(f"{op}: {error}") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{op}: expected numbers, got an array of dtype {array.dtype}")
    return array


def operand_arrays(inputs, op):
    """The arrays `op` computes on: each tensor's `.data`, each constant made an operand
    (`as_operand`); on NumPy 1.26, numbers then take the arrays' dtype (`numbers_in_dtype`)."""
    arrays = [x.data if isinstance(x, ArrayProtocols) else as_operand(x, op) for x in inputs]
    return numpy_1_26.numbers_in_dtype(arrays) if numpy_1_26.LEGACY_PROMOTION else arrays


def as_operand(value, op):
    """A non-tensor operand, as NumPy should see it.

    Numbers stay Python numbers, because NumPy lets a Python number take the dtype of the array it
    meets: `x * 0.5` stays float32 for a float32 `x`. A NumPy scalar would not (`np.sqrt(2.0)` is a
    float64 and would upcast), so it is turned into a Python number first, as PyTorch does.
    """
    if isinstance(value, (np.ndarray, list, tuple)):
        return numeric_array(value, op)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (int, float)):
        return value
    raise TypeError(f"{op}: cannot use a {type(value).__name__} as an operand")


def output_array(data, operands):
    """What an op's forward returned, as an array: NumPy returns a scalar, not a 0-d array, for 0-d
    inputs; on NumPy 1.26 also in the dtype NumPy 2 would give it (numpy_1_26.py)."""
    data = data if type(data) is np.ndarray else np.asarray(data)
    return numpy_1_26.in_numpy_2_dtype(data, operands) if numpy_1_26.LEGACY_PROMOTION else data


def checked_axes(axes, ndim, shown, op=None):
    """`axes` checked against NumPy's rules for the axes of a reduction or a permutation: ints
    (else a TypeError), each in [-ndim, ndim), none twice; returned as they are. `shown` is how a
    message names them ("axis 2", "axes 0 and 2"); `op`, when given, starts the message (inside an
    op, `Function.apply` puts the op's name there)."""
    prefix = f"{op}: " if op else ""
    if not all(isinstance(a, INTEGERS) and not isinstance(a, bool) for a in axes):
        raise TypeError(f"{prefix}axes must be ints, got {tuple(axes)}")
    if not all(-ndim <= a < ndim for a in axes):
        verb = "are" if shown.startswith("axes") else "is"
        raise ValueError(f"{prefix}{shown} {verb} out of range for a tensor with {ndim} dimensions")
    if len({a % ndim for a in axes}) != len(axes):
        raise ValueError(f"{prefix}{shown} repeats an axis")
    return axes
