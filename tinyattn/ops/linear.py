"""Chapter 1. The affine map of a Linear layer, x @ W^T + b, as one op (PyTorch's `F.linear`)."""
import math

from tinyattn.engine import Function


class Linear(Function):
    """out = x @ W^T + b   over the last axis of x: x (..., in), W (out, in), b (out,) -> (..., out)

    Every leading axis of x is a row: the N rows of x (N = the product of the leading sizes) all
    meet the same W, so with the rows stacked into one (N, in) matrix X,

        OUT = X @ W^T + b             dL/dX = G @ W        dL/dW = G^T @ X        dL/db = sum_n G_n

    where G (N, out) is grad with its rows stacked the same way. These are the matmul adjoint
    (README) with W^T as the right factor: W's gradient is (dL/dW^T)^T = (X^T G)^T = G^T X, and
    since every row used W, its gradient is the sum over the rows that the one product G^T X
    makes; b was added to every row, so its gradient is the sum of the rows of G.

    Written with the primitive ops it would be a transpose, a matmul and an add, and for a batch
    of sequences (B, T, in) NumPy's @ would make one small product per sequence, and W's gradient
    one per sequence, summed afterwards; with the rows stacked each is a single 2-D product. The
    checklist compares it with the composed formula.
    """

    def forward(self, x, weight, bias):
        rows = x.reshape(math.prod(x.shape[:-1]), x.shape[-1])          # X (N, in)
        self.saved = (rows, weight, x.shape)
        out = rows @ weight.T + bias                                     # (N, out)
        return out.reshape(*x.shape[:-1], weight.shape[0])              # (..., out)

    def backward(self, grad):
        rows, weight, x_shape = self.saved
        g = grad.reshape(rows.shape[0], weight.shape[0])                # G (N, out)
        grad_x = (g @ weight).reshape(x_shape) if self.needs_grad(0) else None     # G @ W
        grad_weight = g.T @ rows if self.needs_grad(1) else None                  # G^T @ X
        grad_bias = g.sum(axis=0) if self.needs_grad(2) else None                 # sum_n G_n
        return grad_x, grad_weight, grad_bias
