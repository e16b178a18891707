"""Reductions: sum, mean and max over some axes, and the running sum cumsum along one axis.

Backward sends each output element's gradient back to the input elements it was computed from:
all of them for sum (each with weight 1) and mean (weight 1/n), the maxima for max, the elements
at or before it for cumsum. With `keepdims=False` the reduced axes were dropped from the output,
so backward first puts them back as size-1 axes and then broadcasts over them.
"""
import math

import numpy as np

from tinyattn.engine import Function
from tinyattn.ops import checks
from tinyattn.ops.checks import normalize_axes


class Sum(Function):
    """out = sum of a over `axes`.    dL/da = grad, broadcast back over the summed axes"""

    saves_arrays = False

    def forward(self, a, axis=None, keepdims=False):
        axes = normalize_axes(axis, a.ndim)
        self.saved = (axes, keepdims, a.shape)
        return a.sum(axis=axes, keepdims=keepdims)

    def backward(self, grad):
        axes, keepdims, input_shape = self.saved
        grad = restore_reduced_axes(grad, axes, keepdims)
        return (np.broadcast_to(grad, input_shape),)


class Mean(Function):
    """out = sum of a over `axes` / n, n the number of elements summed.

    dL/da = grad / n, broadcast back over the summed axes
    """

    saves_arrays = False

    def forward(self, a, axis=None, keepdims=False):
        axes = normalize_axes(axis, a.ndim)
        self.saved = (axes, keepdims, a.shape)
        return a.mean(axis=axes, keepdims=keepdims)

    def backward(self, grad):
        axes, keepdims, input_shape = self.saved
        count = math.prod(input_shape[i] for i in axes)
        grad = restore_reduced_axes(grad, axes, keepdims)
        return (np.broadcast_to(grad / count, input_shape),)


class Max(Function):
    """out = max of a over `axes`.

    dL/da = grad at the position of the maximum, 0 elsewhere. When several elements tie for the
    maximum, max is not differentiable there; they share the gradient evenly (as PyTorch's
    `amax` does), so the total passed back is still `grad`.
    """

    check = staticmethod(checks.max_over_nonempty_axes)

    def forward(self, a, axis=None, keepdims=False):
        axes = normalize_axes(axis, a.ndim)
        kept = a.max(axis=axes, keepdims=True)
        self.saved = (a, kept, axes, keepdims)
        return kept if keepdims else np.squeeze(kept, axis=axes)

    def backward(self, grad):
        a, kept, axes, keepdims = self.saved
        grad = restore_reduced_axes(grad, axes, keepdims)
        is_max = a == kept
        ties = is_max.sum(axis=axes, keepdims=True, dtype=grad.dtype)   # not int64: no upcast
        return (is_max * (grad / ties),)


class Cumsum(Function):
    """out_i = a_0 + a_1 + ... + a_i along `axis` (a running sum; out has a's shape).

        dL/da_j = sum_{i >= j} grad_i      a cumulative sum of grad taken from the far end

    Why: a_j is a term of every out_i with i >= j, each with weight 1. So backward flips grad
    along the axis, takes the running sum, and flips it back.

    A 0-d tensor is its own running sum, along axis 0 or -1, as in PyTorch: forward and backward
    see it as a vector of one element (`np.atleast_1d`).
    """

    saves_arrays = False
    check = staticmethod(checks.cumsum_axis)

    def forward(self, a, axis):
        self.saved = (axis,)
        return np.cumsum(np.atleast_1d(a), axis=axis).reshape(a.shape)

    def backward(self, grad):
        axis, = self.saved
        grad_1d = np.atleast_1d(grad)
        return (np.flip(np.cumsum(np.flip(grad_1d, axis), axis=axis), axis).reshape(grad.shape),)


def restore_reduced_axes(grad, axes, keepdims):
    """Give `grad` back the size-1 axes that a reduction with keepdims=False dropped."""
    return grad if keepdims else np.expand_dims(grad, axes)
