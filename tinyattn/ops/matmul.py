"""Chapter 1. Matrix multiplication, batched and broadcast as in NumPy's `@`."""
import numpy as np

from tinyattn.engine import Function
from tinyattn.ops import checks


class Matmul(Function):
    """out = a @ b: a matrix product over the last two axes; the leading (batch) axes broadcast.

        dL/da = grad @ b^T        dL/db = a^T @ grad        (^T swaps the last two axes)

    Why: out[i, j] = sum_k a[i, k] b[k, j], so a[i, k] meets grad[i, j] through b[k, j] for every j
    (README, "The matmul adjoint"). The two cases NumPy's `@` adds, stated once:
    * a 1-D `a` is a one-row matrix and a 1-D `b` a one-column matrix, and that axis is dropped
      from the output: backward puts it back (`as_matrices`, below), and takes it out again;
    * a batch axis that broadcast (a 2-D `b` shared by a batch of `a`s) gets a gradient per batch
      element from `a^T @ grad`: the sweep sums them back to b's shape (engine.unbroadcast).
    """

    check = staticmethod(checks.matmul_operands)

    def forward(self, a, b):
        self.saved = (a, b)
        return a @ b

    def backward(self, grad):
        a, b, grad = as_matrices(*self.saved, grad)        # a vector as a matrix (below)
        grad_a = grad @ b.swapaxes(-1, -2) if self.needs_grad(0) else None      # grad @ b^T
        grad_b = a.swapaxes(-1, -2) @ grad if self.needs_grad(1) else None      # a^T @ grad
        if grad_b is not None and self.saved[1].ndim == 1:
            grad_b = grad_b[..., 0]                          # b's column (k, 1) as b, (k,)
        return grad_a, grad_b


def as_matrices(a, b, grad):
    """NumPy's 1-D cases as matrices: a vector `a` as a one-row matrix (1, k), a vector `b` as a
    one-column matrix (k, 1), and `grad` with the axis the product dropped put back. a's row
    needs no undoing afterwards: its gradient (..., 1, k) is summed back to (k,) by the sweep,
    like any broadcast axis; b's column, (..., k, 1), is not an axis the sweep removes, so
    backward takes it out."""
    if b.ndim == 1:
        b, grad = b[:, np.newaxis], np.expand_dims(grad, -1)
    if a.ndim == 1:
        a, grad = a[np.newaxis, :], np.expand_dims(grad, -2)
    return a, b, grad
