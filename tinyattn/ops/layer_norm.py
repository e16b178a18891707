"""Chapter 1. Layer normalisation as one fused op: its backward rule is a classic derivation,
shorter and cheaper than the chain of primitive ops it replaces (mean, subtract, square, mean, add,
sqrt, divide, multiply, add: nine nodes, each keeping its own arrays)."""
import numpy as np

from tinyattn.engine import Function


class LayerNorm(Function):
    """out = xhat * weight + bias,  xhat = (x - mu) / sigma,  over the last axis of N elements:

        mu = mean(x),   sigma = sqrt(mean((x - mu)^2) + eps)     (the biased variance, as PyTorch)

    `weight` and `bias` have shape (N,) (or are numbers: 1 and 0 for none).

    Backward, with `grad` = dL/d(out) and g = grad * weight = dL/d(xhat):

        dL/dbias = grad,   dL/dweight = grad * xhat      (the sweep sums both over the rows)
        dL/dx = (1 / sigma) * (g - mean(g) - xhat * mean(g * xhat))

    Derivation, for one row: xhat_i = (x_i - mu) / sigma depends on every x_j through mu and sigma.
    d mu / d x_j = 1/N, and d sigma / d x_j = (x_j - mu) / (N sigma) = xhat_j / N (the mu term of
    d(var)/dx_j sums to zero), so

        d xhat_i / d x_j = (1[i = j] - 1/N) / sigma - (x_i - mu) / sigma^2 * xhat_j / N
                         = (1[i = j] - 1/N - xhat_i xhat_j / N) / sigma

    and dL/dx_j = sum_i g_i d xhat_i / d x_j = (g_j - mean(g) - xhat_j mean(g * xhat)) / sigma.
    The two means take out of g what moving x along (1, ..., 1) or along xhat would change:
    normalisation undoes any shift of x (and, up to eps, any scaling), so they get no gradient.

    Saved: xhat and 1 / sigma (one number per row), and the weight; forward needs no other arrays.
    """

    def forward(self, x, weight, bias, eps):
        mu = x.mean(axis=-1, keepdims=True)                              # (..., 1)
        centered = x - mu                                                # (..., N)
        variance = (centered * centered).mean(axis=-1, keepdims=True)    # (..., 1)
        inv_sigma = 1.0 / np.sqrt(variance + eps)                        # (..., 1)
        xhat = centered * inv_sigma                                      # (..., N)
        self.saved = (xhat, inv_sigma, weight)
        return xhat * weight + bias

    def backward(self, grad):
        xhat, inv_sigma, weight = self.saved
        g = grad * weight                                                # dL/dxhat (..., N)
        mean_g = g.mean(axis=-1, keepdims=True)                          # (..., 1)
        mean_g_xhat = (g * xhat).mean(axis=-1, keepdims=True)            # (..., 1)
        grad_x = inv_sigma * (g - mean_g - xhat * mean_g_xhat)           # (..., N)
        return (grad_x,
                grad * xhat if self.needs_grad(1) else None,
                grad if self.needs_grad(2) else None)
