"""Chapter 2. The two ops chapter 2's linear attention needs that chapter 1 did not: ELU, from which
its feature map phi(x) = elu(x) + 1 is made, and the running sum (`t.cumsum(axis)`) of its causal
form (tinyattn/functional/linear_attention.py)."""
import numpy as np

from tinyattn.engine import Function, Tensor
from tinyattn.ops import elu_and_cumsum_checks
from tinyattn.extends import extends


class Elu(Function):
    """out = a where a > 0, alpha (e^a - 1) elsewhere   (ELU, Clevert et al. 2016).

        dL/da = grad where a > 0,  grad * alpha e^a = grad * (out + alpha) elsewhere

    The output is saved, with where a was positive: a negative alpha makes out positive where a
    is not, so the sign of out alone cannot tell the two branches apart. e^a - 1 is computed as
    expm1 (exact near 0) of min(a, 0) (no overflow for a large a, whose branch is not taken).
    """

    def forward(self, a, alpha=1.0):
        positive = a > 0
        out = np.where(positive, a, alpha * np.expm1(np.minimum(a, 0)))
        self.saved = (out, positive, alpha)
        return out

    def backward(self, grad):
        out, positive, alpha = self.saved
        return (np.where(positive, grad, grad * (out + alpha)),)


class Cumsum(Function):
    """out_i = a_0 + a_1 + ... + a_i along `axis` (a running sum; out has a's shape).

        dL/da_j = sum_{i >= j} grad_i      a cumulative sum of grad taken from the far end

    Why: a_j is a term of every out_i with i >= j, each with weight 1. So backward flips grad
    along the axis, takes the running sum, and flips it back.

    A 0-d tensor is its own running sum, along axis 0 or -1, as in PyTorch: forward and backward
    see it as a vector of one element (`np.atleast_1d`).
    """

    saves_arrays = False
    check = staticmethod(elu_and_cumsum_checks.cumsum_axis)

    def forward(self, a, axis):
        self.saved = (axis,)
        return np.cumsum(np.atleast_1d(a), axis=axis).reshape(a.shape)

    def backward(self, grad):
        axis, = self.saved
        grad_1d = np.atleast_1d(grad)
        return (np.flip(np.cumsum(np.flip(grad_1d, axis), axis=axis), axis).reshape(grad.shape),)


@extends(Tensor)
def cumsum(self, axis):
    """The running sum along `axis` (required, as PyTorch's `dim`); same shape as self."""
    return Cumsum.apply(self, axis=axis)
