"""Ops that move elements around without changing them: reshape, transpose, indexing, concatenate.

Their backward rules move the gradient back the same way: reshape it back, transpose it with the
inverse permutation, scatter it into the indexed positions, split it at the concatenation seams.
"""
import itertools
import math

import numpy as np

from tinyattn.engine import Function, Tensor
from tinyattn.plumbing import INTEGERS, checked_axes, data_of


class Reshape(Function):
    """out = a with a new shape (same elements, same order).

    dL/da = grad reshaped to a's shape.
    """

    saves_arrays = False

    def forward(self, a, shape):
        self.saved = (a.shape,)
        return a.reshape(resolve_shape(a.shape, shape))

    def backward(self, grad):
        input_shape, = self.saved
        return (grad.reshape(input_shape),)


class Transpose(Function):
    """out = a with its axes permuted: out.shape[i] = a.shape[axes[i]].

    dL/da = grad permuted back, by the inverse permutation: axis i of a is axis axes.index(i) of
    out (argsort(axes), written in Python: NumPy's argsort of a short tuple costs more than the
    rest of this backward).
    """

    saves_arrays = False

    def forward(self, a, axes):
        axes = tuple(axis % a.ndim for axis in axes)      # argsort in backward needs them >= 0
        self.saved = (axes,)
        return a.transpose(axes)

    def backward(self, grad):
        axes, = self.saved
        return (grad.transpose(tuple(axes.index(i) for i in range(len(axes)))),)

    def check(self, a, axes):
        if not all(isinstance(axis, INTEGERS) for axis in axes):
            raise TypeError(f"axes must be ints, got {tuple(axes)}")
        in_range = [axis % a.ndim for axis in axes if -a.ndim <= axis < a.ndim]
        if len(axes) != a.ndim or sorted(in_range) != list(range(a.ndim)):
            raise ValueError(f"axes {tuple(axes)} are not a permutation of the {a.ndim} axes "
                             f"of a tensor of shape {a.shape}")


BASIC_INDEX = (*INTEGERS, slice, type(None), type(Ellipsis))


class Index(Function):
    """out = a[index]  (NumPy indexing: ints, slices, None, ..., integer and boolean arrays).

    dL/da = zeros of a's shape, with grad added at the indexed positions. Added, not written: an
    integer array may pick the same element twice (as an embedding lookup of a repeated token
    does), and then that element's gradient is the sum of both uses. np.add.at does that.

    np.add.at is quick when it adds numbers at positions of a 1-D array, and slow when each index
    picks a whole row, as an embedding lookup's does (several times slower than the same sums
    as numbers, in NumPy 2; bench 3 has such a lookup). So for an integer array along the
    first axis, the elements of each picked row r are added at their flat positions in a,
    r * row_size + 0, 1, ..., row_size - 1: the same sums. (A negative row counts from the end,
    and so does its negative flat position.)
    """

    def forward(self, a, index):
        self.saved = (a.shape, index)
        self.saves_arrays = not all(isinstance(i, BASIC_INDEX) for i in
                                    (index if isinstance(index, tuple) else (index,)))
        return a[index]

    def backward(self, grad):
        input_shape, index = self.saved
        grad_a = np.zeros(input_shape, dtype=grad.dtype)
        if isinstance(index, np.ndarray) and index.dtype.kind in "iu":    # rows of a (axis 0)
            row_size = math.prod(input_shape[1:])
            rows = index.astype(np.intp)              # (no int32 overflow in rows * row_size)
            positions = rows[..., np.newaxis] * row_size + np.arange(row_size)
            np.add.at(grad_a.reshape(-1), positions.reshape(-1), grad.reshape(-1))
        else:
            np.add.at(grad_a, index, grad)
        return (grad_a,)


class Concatenate(Function):
    """out = the inputs joined along `axis`.

    dL/d(input k) = the slice of grad where input k went
    """

    saves_arrays = False

    def forward(self, *arrays, axis):
        axis %= arrays[0].ndim
        seams = tuple(itertools.accumulate(a.shape[axis] for a in arrays[:-1]))
        self.saved = (axis, seams)
        return np.concatenate(arrays, axis=axis)

    def backward(self, grad):
        axis, seams = self.saved
        return tuple(np.split(grad, seams, axis=axis))

    def check(self, *arrays, axis):
        first = arrays[0]
        checked_axes((axis,), first.ndim, f"axis {axis}")
        axis %= first.ndim

        def without_axis(shape):
            return shape[:axis] + shape[axis + 1:]
        for other in arrays[1:]:
            if other.ndim != first.ndim or without_axis(other.shape) != without_axis(first.shape):
                raise ValueError(f"shapes {first.shape} and {other.shape} differ outside "
                                 f"axis {axis}")


def concatenate(tensors, axis=0):
    """Join tensors along an existing axis (NumPy's `np.concatenate`)."""
    return Concatenate.apply(*_as_tensors(tensors, "concatenate"), axis=axis)


def stack(tensors, axis=0):
    """Join tensors along a new axis (NumPy's `np.stack`): each gets a size-1 axis at `axis`,
    then they are concatenated along it."""
    tensors = _as_tensors(tensors, "stack")
    shape, ndim = tensors[0].shape, tensors[0].ndim + 1
    checked_axes((axis,), ndim, f"axis {axis}", op="stack")
    for t in tensors[1:]:
        if t.shape != shape:
            raise ValueError(f"stack: all tensors must have the same shape, got {shape} and "
                             f"{t.shape}")
    axis %= ndim
    return concatenate([t.reshape(shape[:axis] + (1,) + shape[axis:]) for t in tensors], axis)


# ------------------------------------------------------------------------------------------------
# Reading the arguments of the ops above

def resolve_shape(input_shape, shape):
    """`shape` with its one allowed -1 replaced by the size that keeps the number of elements."""
    if not all(isinstance(n, INTEGERS) and n >= -1 for n in shape) or shape.count(-1) > 1:
        raise ValueError(f"{shape} is not a shape: sizes must be integers >= 0, with at most "
                         f"one -1")
    size = math.prod(input_shape)       # math.prod on Python ints: np.prod converts to an array,
    known = math.prod(n for n in shape if n != -1)      # slower than the reshape itself
    if -1 in shape and known > 0 and size % known == 0:
        shape = tuple(size // known if n == -1 else int(n) for n in shape)
    if math.prod(shape) != size or -1 in shape:
        raise ValueError(f"cannot reshape a tensor of shape {input_shape} ({size} elements) "
                         f"into shape {shape}")
    return shape


def unpacked(sizes):
    """`reshape(2, 3)` and `reshape((2, 3))` alike: the sizes (or axes) as one tuple."""
    return tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes


def swapped_axes(ndim, axis1, axis2, op):
    """The permutation of `ndim` axes that swaps `axis1` and `axis2`."""
    checked_axes((axis1, axis2), ndim, f"axes {axis1} and {axis2}", op)
    axes = list(range(ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return tuple(axes)


def as_index(index):
    """An index for NumPy: tensors inside it are replaced by their arrays."""
    return tuple(map(data_of, index)) if isinstance(index, tuple) else data_of(index)


def _as_tensors(values, op):
    tensors = [v if isinstance(v, Tensor) else Tensor(v) for v in values]
    if not tensors:
        raise ValueError(f"{op}: need at least one tensor")
    return tensors
