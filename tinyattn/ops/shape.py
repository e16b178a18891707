"""Ops that move elements around without changing them: reshape, transpose, indexing, concatenate.

Their backward rules move the gradient back the same way: reshape it back, transpose it with the
inverse permutation, scatter it into the indexed positions, split it at the concatenation seams.
"""
import numpy as np

from tinyattn.engine import Function, Tensor


class Reshape(Function):
    """out = a with a new shape (same elements, same order).    dL/da = grad reshaped to a's shape"""

    def forward(self, a, shape):
        self.input_shape = a.shape
        return a.reshape(resolve_shape(a.shape, shape))

    def backward(self, grad):
        return (grad.reshape(self.input_shape),)


def resolve_shape(input_shape, shape):
    """`shape` with its one allowed -1 replaced by the size that keeps the number of elements."""
    shape = tuple(shape)
    if not all(isinstance(n, (int, np.integer)) and n >= -1 for n in shape) or shape.count(-1) > 1:
        raise ValueError(f"{shape} is not a shape: sizes must be integers >= 0, with at most one -1")
    size = int(np.prod(input_shape))
    known = int(np.prod([n for n in shape if n != -1]))
    if -1 in shape and known > 0 and size % known == 0:
        shape = tuple(size // known if n == -1 else int(n) for n in shape)
    if int(np.prod(shape)) != size or -1 in shape:
        raise ValueError(f"cannot reshape a tensor of shape {input_shape} ({size} elements) "
                         f"into shape {shape}")
    return shape


class Transpose(Function):
    """out = a with its axes permuted: out.shape[i] = a.shape[axes[i]].

    dL/da = grad permuted back, by the inverse permutation argsort(axes).
    """

    def forward(self, a, axes):
        check_integer_axes(axes)
        self.axes = tuple(ax + a.ndim if ax < 0 else ax for ax in axes)
        if sorted(self.axes) != list(range(a.ndim)):
            raise ValueError(f"axes {tuple(axes)} are not a permutation of the {a.ndim} axes "
                             f"of a tensor of shape {a.shape}")
        return a.transpose(self.axes)

    def backward(self, grad):
        return (grad.transpose(np.argsort(self.axes)),)


def check_integer_axes(axes, op=None):
    """A TypeError unless every axis is an int (as NumPy and PyTorch require)."""
    if not all(isinstance(axis, (int, np.integer)) for axis in axes):
        prefix = f"{op}: " if op else ""
        raise TypeError(f"{prefix}axes must be ints, got {tuple(axes)}")


def swapped_axes(ndim, axis1, axis2, op):
    """The permutation of `ndim` axes that swaps `axis1` and `axis2`."""
    check_integer_axes((axis1, axis2), op)
    if not (-ndim <= axis1 < ndim and -ndim <= axis2 < ndim):
        raise ValueError(f"{op}: axes {axis1} and {axis2} are out of range for a tensor with "
                         f"{ndim} dimensions")
    axes = list(range(ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return tuple(axes)


class Index(Function):
    """out = a[index]  (NumPy indexing: ints, slices, None, ..., integer and boolean arrays).

    dL/da = zeros of a's shape, with grad added at the indexed positions. Added, not written: an
    integer array may pick the same element twice (as an embedding lookup of a repeated token
    does), and then that element's gradient is the sum of both uses. np.add.at does that.
    """

    def forward(self, a, index):
        self.input_shape, self.index = a.shape, index    # kept, like a shape: no big array
        return a[index]

    def backward(self, grad):
        grad_a = np.zeros(self.input_shape, dtype=grad.dtype)
        np.add.at(grad_a, self.index, grad)
        return (grad_a,)


def as_index(index):
    """An index for NumPy: tensors inside it are replaced by their arrays."""
    if isinstance(index, tuple):
        return tuple(i.data if isinstance(i, Tensor) else i for i in index)
    return index.data if isinstance(index, Tensor) else index


class Concatenate(Function):
    """out = the inputs joined along `axis`.    dL/d(input k) = the slice of grad where input k went"""

    def forward(self, *arrays, axis):
        first = arrays[0]
        check_integer_axes((axis,))
        if not -first.ndim <= axis < first.ndim:
            raise ValueError(f"axis {axis} is out of range for tensors of shape {first.shape}")
        axis %= first.ndim
        for other in arrays[1:]:
            if other.ndim != first.ndim or any(
                    m != n for i, (m, n) in enumerate(zip(first.shape, other.shape)) if i != axis):
                raise ValueError(f"shapes {first.shape} and {other.shape} differ outside "
                                 f"axis {axis}")
        self.axis = axis
        self.seams = np.cumsum([a.shape[axis] for a in arrays])[:-1]
        return np.concatenate(arrays, axis=axis)

    def backward(self, grad):
        return tuple(np.split(grad, self.seams, axis=self.axis))


def _tensors(values, op):
    tensors = [v if isinstance(v, Tensor) else Tensor(v) for v in values]
    if not tensors:
        raise ValueError(f"{op}: need at least one tensor")
    return tensors


def concatenate(tensors, axis=0):
    """Join tensors along an existing axis (NumPy's `np.concatenate`)."""
    return Concatenate.apply(*_tensors(tensors, "concatenate"), axis=axis)


def stack(tensors, axis=0):
    """Join tensors along a new axis (NumPy's `np.stack`): each gets a size-1 axis at `axis`,
    then they are concatenated along it."""
    tensors = _tensors(tensors, "stack")
    ndim = tensors[0].ndim + 1
    check_integer_axes((axis,), "stack")
    if not -ndim <= axis < ndim:
        raise ValueError(f"stack: axis {axis} is out of range for a result with {ndim} dimensions")
    axis %= ndim
    shape = tensors[0].shape
    for t in tensors[1:]:
        if t.shape != shape:
            raise ValueError(f"stack: all tensors must have the same shape, got {shape} and "
                             f"{t.shape}")
    return concatenate([t.reshape(t.shape[:axis] + (1,) + t.shape[axis:]) for t in tensors], axis)
