"""Reductions: sum, mean and max over some axes.

Backward sends each output element's gradient back to the input elements it was computed from:
all of them for sum (each with weight 1) and mean (weight 1/n), the maxima for max. With
`keepdims=False` the reduced axes were dropped from the output, so backward first puts them back as
size-1 axes and then broadcasts over them.
"""
import numpy as np

from tinyattn.engine import Function


def normalize_axes(axis, ndim):
    """`axis` (None, an int or a tuple of ints, negative allowed) as a sorted tuple of axes >= 0."""
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if isinstance(axis, (int, np.integer)) else axis
    integers = (int, np.integer)
    if not isinstance(axes, (tuple, list)) or not all(isinstance(a, integers) for a in axes):
        raise TypeError(f"axis must be None, an int or a tuple of ints, got {axis!r}")
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {axis} is out of range for a tensor with {ndim} dimensions")
    normalized = tuple(sorted(int(a) % ndim for a in axes))
    if len(set(normalized)) != len(normalized):
        raise ValueError(f"axis {axis} repeats an axis")
    return normalized


def restore_reduced_axes(grad, axes, keepdims):
    """Give `grad` back the size-1 axes that a reduction with keepdims=False dropped."""
    return grad if keepdims else np.expand_dims(grad, axes)


class Sum(Function):
    """out = sum of a over `axes`.    dL/da = grad, broadcast back over the summed axes"""

    def forward(self, a, axis=None, keepdims=False):
        self.axes, self.keepdims, self.input_shape = normalize_axes(axis, a.ndim), keepdims, a.shape
        return a.sum(axis=self.axes, keepdims=keepdims)

    def backward(self, grad):
        grad = restore_reduced_axes(grad, self.axes, self.keepdims)
        return (np.broadcast_to(grad, self.input_shape),)


class Mean(Function):
    """out = sum of a over `axes` / n, n = number of elements summed.    dL/da = grad / n, broadcast"""

    def forward(self, a, axis=None, keepdims=False):
        self.axes, self.keepdims, self.input_shape = normalize_axes(axis, a.ndim), keepdims, a.shape
        self.count = int(np.prod([a.shape[i] for i in self.axes]))
        return a.mean(axis=self.axes, keepdims=keepdims)

    def backward(self, grad):
        grad = restore_reduced_axes(grad, self.axes, self.keepdims)
        return (np.broadcast_to(grad / self.count, self.input_shape),)


class Max(Function):
    """out = max of a over `axes`.

    dL/da = grad at the position of the maximum, 0 elsewhere. When several elements tie for the
    maximum, max is not differentiable there; they share the gradient evenly (as PyTorch's
    `amax` does), so the total passed back is still `grad`.
    """

    def forward(self, a, axis=None, keepdims=False):
        self.axes, self.keepdims = normalize_axes(axis, a.ndim), keepdims
        if any(a.shape[i] == 0 for i in self.axes):
            raise ValueError(f"cannot take the max over an empty axis of a tensor of shape "
                             f"{a.shape} (axis={axis})")
        kept = a.max(axis=self.axes, keepdims=True)
        self.saved = (a, kept)
        return kept if keepdims else np.squeeze(kept, axis=self.axes)

    def backward(self, grad):
        a, kept = self.saved
        grad = restore_reduced_axes(grad, self.axes, self.keepdims)
        is_max = a == kept
        ties = is_max.sum(axis=self.axes, keepdims=True, dtype=grad.dtype)   # not int64: no upcast
        return (is_max * (grad / ties),)
