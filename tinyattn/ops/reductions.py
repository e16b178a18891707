"""Chapter 1. Reductions: sum, mean and max over some axes.

Backward sends each output element's gradient back to the input elements it was computed from:
all of them for sum (each with weight 1) and mean (weight 1/n), the maxima for max. With
`keepdims=False` the reduced axes were dropped from the output, so backward first puts them back
as size-1 axes and then broadcasts over them.
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


def restore_reduced_axes(grad, axes, keepdims):
    """Give `grad` back the size-1 axes that a reduction with keepdims=False dropped."""
    return grad if keepdims else np.expand_dims(grad, axes)
