"""Chapter 5. RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization") as one
fused op: the norm of Llama, Mistral, Qwen and Gemma, in place of GPT-2's LayerNorm.

LayerNorm centres each row (subtracts its mean) and divides by its standard deviation; RMSNorm
only divides by the root of its mean square, and has a gain but no bias. Zhang & Sennrich find
that the re-scaling is what helps, not the re-centring, and one statistic per row is cheaper than
two. The backward loses the term that centring brings (compare ops/layer_norm.py).
"""
import numpy as np

from tinyattn.engine import Function


class RMSNorm(Function):
    """out = xhat * weight,  xhat = x * r,  r = 1 / sqrt(mean(x^2) + eps)   over the last axis:

    x (..., N), `weight` (N,) (Gemma passes 1 + its stored weight: nn.RMSNorm's unit_offset).

    Backward, with `grad` = dL/d(out) and g = grad * weight = dL/d(xhat):

        dL/dweight = grad * xhat                     (the sweep sums it over the rows)
        dL/dx = r * (g - xhat * mean(g * xhat))

    Derivation, for one row of N elements: xhat_i = x_i r, and r = (mean(x^2) + eps)^(-1/2)
    depends on every x_j: d r / d x_j = -(1/2) r^3 (2 x_j / N) = -r^3 x_j / N. So

        d xhat_i / d x_j = 1[i = j] r - x_i r^3 x_j / N = r (1[i = j] - xhat_i xhat_j / N)

    and dL/dx_j = sum_i g_i d xhat_i / d x_j = r (g_j - xhat_j mean(g * xhat)). The second term
    takes out of g what moving x along itself (scaling the row) would change: up to eps, the
    norm undoes any scaling of x, so that direction gets no gradient. LayerNorm's backward has
    one more term, - mean(g), for the shift its centring undoes.

    Saved: xhat and r (one number per row), and the weight.
    """

    def forward(self, x, weight, eps):
        r = 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps)    # (..., 1)
        xhat = x * r                                                     # (..., N)
        self.saved = (xhat, r, weight)
        return xhat * weight

    def backward(self, grad):
        xhat, r, weight = self.saved
        g = grad * weight                                                # dL/dxhat (..., N)
        mean_g_xhat = (g * xhat).mean(axis=-1, keepdims=True)            # (..., 1)
        grad_x = r * (g - xhat * mean_g_xhat)                            # (..., N)
        return grad_x, (grad * xhat if self.needs_grad(1) else None)
