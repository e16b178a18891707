"""Chapter 1. The ops' checks: what makes an op's input bad, kept out of the files that hold the
ops' math.

An op names its check in one line, `check = staticmethod(checks.matmul_operands)`; `Function.apply`
runs it before `forward` when a user applies the op (not when tinyattn's own functions do: their
doors have checked what they pass on), and puts the op's name in front of its message:
`matmul: shapes (2, 3) and (4, 5) are not aligned: 3 (axis -1 of a) != 4 (axis -2 of b)`.

Also here: `normalize_axes`, which reductions use to read their `axis` argument, and the readers of
reshape's and swapaxes's arguments.
"""
import math

import numpy as np

from tinyattn.arrays import INTEGERS, checked_axes


def matmul_operands(a, b):
    """Both have an axis; a's last axis meets b's second to last (its only one, for a vector);
    the batch axes broadcast."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        raise ValueError(f"shapes {np.shape(a)} and {np.shape(b)}: both operands need at "
                         "least one axis (use * to multiply by a scalar)")
    b_axis = -2 if b.ndim > 1 else 0
    if a.shape[-1] != b.shape[b_axis]:
        raise ValueError(f"shapes {a.shape} and {b.shape} are not aligned: {a.shape[-1]} "
                         f"(axis -1 of a) != {b.shape[b_axis]} (axis {b_axis} of b)")
    try:
        np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    except ValueError:
        raise ValueError(f"shapes {a.shape} and {b.shape}: the batch shapes {a.shape[:-2]} "
                         f"and {b.shape[:-2]} do not broadcast") from None


def max_over_nonempty_axes(a, axis=None, keepdims=False):
    """An empty axis has no maximum."""
    if any(a.shape[i] == 0 for i in normalize_axes(axis, a.ndim)):
        raise ValueError(f"cannot take the max over an empty axis of a tensor of shape "
                         f"{a.shape} (axis={axis})")


def permutation_of_axes(a, axes):
    """`axes` lists every axis of a once."""
    if not all(isinstance(axis, INTEGERS) for axis in axes):
        raise TypeError(f"axes must be ints, got {tuple(axes)}")
    in_range = [axis % a.ndim for axis in axes if -a.ndim <= axis < a.ndim]
    if len(axes) != a.ndim or sorted(in_range) != list(range(a.ndim)):
        raise ValueError(f"axes {tuple(axes)} are not a permutation of the {a.ndim} axes "
                         f"of a tensor of shape {a.shape}")


def same_shapes_outside_axis(*arrays, axis):
    """The arrays to join agree on every axis but `axis`."""
    first = arrays[0]
    checked_axes((axis,), first.ndim, f"axis {axis}")
    axis %= first.ndim

    def without_axis(shape):
        return shape[:axis] + shape[axis + 1:]
    for other in arrays[1:]:
        if other.ndim != first.ndim or without_axis(other.shape) != without_axis(first.shape):
            raise ValueError(f"shapes {first.shape} and {other.shape} differ outside "
                             f"axis {axis}")


def stackable(tensors, axis):
    """Tensors of one shape, and an axis of the stacked result."""
    shape, ndim = tensors[0].shape, tensors[0].ndim + 1
    checked_axes((axis,), ndim, f"axis {axis}", op="stack")
    for t in tensors[1:]:
        if t.shape != shape:
            raise ValueError(f"stack: all tensors must have the same shape, got {shape} and "
                             f"{t.shape}")


# ------------------------------------------------------------------------------------------------
# Reading the ops' arguments

def normalize_axes(axis, ndim):
    """`axis` (None, an int or a tuple of ints, negative allowed) as a sorted tuple of axes >= 0."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, INTEGERS) else axis
    if not isinstance(axes, (tuple, list)) or not all(isinstance(a, INTEGERS) for a in axes):
        raise TypeError(f"axis must be None, an int or a tuple of ints, got {axis!r}")
    return tuple(sorted(int(a) % ndim for a in checked_axes(axes, ndim, f"axis {axis}")))


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


def swapped_axes(ndim, axis1, axis2, op):
    """The permutation of `ndim` axes that swaps `axis1` and `axis2`."""
    checked_axes((axis1, axis2), ndim, f"axes {axis1} and {axis2}", op)
    axes = list(range(ndim))
    axes[axis1], axes[axis2] = axes[axis2], axes[axis1]
    return tuple(axes)
