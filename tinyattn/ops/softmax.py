"""Chapter 1. Softmax and log-softmax, fused ops: several NumPy steps in one op.

Written with the primitives (exp, sum, div) these would be correct, but their backward would keep
several intermediate arrays; fused, each saves only its output and has a short backward rule.
"""
import numpy as np

from tinyattn.engine import Function


class Softmax(Function):
    """out_i = exp(x_i) / sum_j exp(x_j)   along `axis`, computed as

        out_i = exp(x_i - m) / sum_j exp(x_j - m),   m = max_j x_j

    (the factor exp(-m) cancels), so no logit can overflow.

    Backward is the Jacobian-vector product (README, "The softmax backward"): since
    d out_j / d x_i = out_j * (1[i = j] - out_i),

        dL/dx_i = sum_j grad_j * out_j * (1[i = j] - out_i)
                = out_i * (grad_i - sum_j grad_j * out_j)

    which needs only the output, and no (n x n) Jacobian. A row of all -inf logits gets all-zero
    weights (and so zero gradients) rather than 0/0 = NaN.
    """

    def forward(self, x, axis=-1):
        exps = np.exp(shifted(x, axis))
        total = exps.sum(axis=axis, keepdims=True)
        out = exps / np.where(total == 0, 1, total)      # an all -inf row: 0 / 1, not 0 / 0
        self.saved = (out, axis)
        return out

    def backward(self, grad):
        out, axis = self.saved
        return (out * (grad - (grad * out).sum(axis=axis, keepdims=True)),)


class LogSoftmax(Function):
    """out_i = x_i - log(sum_j exp(x_j)) = (x_i - m) - log(sum_j exp(x_j - m)),  m = max_j x_j.

    Backward: d out_j / d x_i = 1[i = j] - softmax_i, so

        dL/dx_i = grad_i - softmax_i * sum_j grad_j,    with softmax_i = exp(out_i).
    """

    def forward(self, x, axis=-1):
        x = shifted(x, axis)
        # An empty row takes log(0) of no entries: harmless. A row of only -inf (every key
        # masked) still warns: its log-probabilities are -inf - (-inf) = NaN, as in PyTorch.
        with np.errstate(divide="ignore"):
            out = x - np.log(np.exp(x).sum(axis=axis, keepdims=True))
        self.saved = (out, axis)
        return out

    def backward(self, grad):
        out, axis = self.saved
        return (grad - np.exp(out) * grad.sum(axis=axis, keepdims=True),)


def shifted(x, axis):
    """x - max(x) along `axis`: the largest entry becomes 0, so exp cannot overflow.

    Three edge cases, each given its limit: a row whose entries are all -inf (every key masked)
    stays -inf instead of becoming -inf - (-inf) = NaN, and so does an empty row (its maximum is
    taken as -inf); an entry so far below the maximum that the difference overflows (-3e38 - 3e38
    in float32) becomes -inf, whose exp is 0. Integer logits are computed in float64.
    """
    if x.dtype.kind != "f":
        x = x.astype(np.float64)
    row_max = x.max(axis=axis, keepdims=True, initial=-np.inf)
    with np.errstate(over="ignore"):
        return np.asarray(x - np.where(row_max == -np.inf, 0, row_max))   # 0-d stays an array
