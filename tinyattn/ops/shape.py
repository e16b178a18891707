"""Chapter 1. Ops that move elements around without changing them: reshape, transpose, indexing,
concatenate.

Their backward rules move the gradient back the same way: reshape it back, transpose it with the
inverse permutation, scatter it into the indexed positions, split it at the concatenation seams.
"""
import itertools

import numpy as np

from tinyattn.engine import Function, Tensor
from tinyattn.ops import checks
from tinyattn.ops.checks import resolve_shape
from tinyattn.arrays import INTEGERS, data_of


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
    check = staticmethod(checks.permutation_of_axes)

    def forward(self, a, axes):
        axes = tuple(axis % a.ndim for axis in axes)      # argsort in backward needs them >= 0
        self.saved = (axes,)
        return a.transpose(axes)

    def backward(self, grad):
        axes, = self.saved
        return (grad.transpose(tuple(axes.index(i) for i in range(len(axes)))),)



BASIC_INDEX = (*INTEGERS, slice, type(None), type(Ellipsis))


class Index(Function):
    """out = a[index]  (NumPy indexing: ints, slices, None, ..., integer and boolean arrays).

    dL/da = zeros of a's shape, with grad added at the indexed positions. Added, not written: an
    integer array may pick the same element twice (as an embedding lookup of a repeated token
    does), and then that element's gradient is the sum of both uses. np.add.at does that.
    """

    def forward(self, a, index):
        self.saved = (a.shape, index)
        self.saves_arrays = not all(isinstance(i, BASIC_INDEX) for i in
                                    (index if isinstance(index, tuple) else (index,)))
        return a[index]

    def backward(self, grad):
        input_shape, index = self.saved
        grad_a = np.zeros(input_shape, dtype=grad.dtype)
        np.add.at(grad_a, index, grad)
        return (grad_a,)


class Concatenate(Function):
    """out = the inputs joined along `axis`.

    dL/d(input k) = the slice of grad where input k went
    """

    saves_arrays = False
    check = staticmethod(checks.same_shapes_outside_axis)

    def forward(self, *arrays, axis):
        axis %= arrays[0].ndim
        seams = tuple(itertools.accumulate(a.shape[axis] for a in arrays[:-1]))
        self.saved = (axis, seams)
        return np.concatenate(arrays, axis=axis)

    def backward(self, grad):
        axis, seams = self.saved
        return tuple(np.split(grad, seams, axis=axis))


def concatenate(tensors, axis=0):
    """Join tensors along an existing axis (NumPy's `np.concatenate`)."""
    return Concatenate.apply(*_as_tensors(tensors, "concatenate"), axis=axis)


def stack(tensors, axis=0):
    """Join tensors along a new axis (NumPy's `np.stack`): each gets a size-1 axis at `axis`,
    then they are concatenated along it."""
    tensors = _as_tensors(tensors, "stack")
    checks.stackable(tensors, axis)
    shape, axis = tensors[0].shape, axis % (tensors[0].ndim + 1)
    return concatenate([t.reshape(shape[:axis] + (1,) + shape[axis:]) for t in tensors], axis)


# ------------------------------------------------------------------------------------------------
# Reading the arguments of the ops above

def unpacked(sizes):
    """`reshape(2, 3)` and `reshape((2, 3))` alike: the sizes (or axes) as one tuple."""
    return tuple(sizes[0]) if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)) else sizes


def as_index(index):
    """An index for NumPy: tensors inside it are replaced by their arrays."""
    return tuple(map(data_of, index)) if isinstance(index, tuple) else data_of(index)


def _as_tensors(values, op):
    tensors = [v if isinstance(v, Tensor) else Tensor(v) for v in values]
    if not tensors:
        raise ValueError(f"{op}: need at least one tensor")
    return tensors
