"""Matrix multiplication, batched and broadcast as in NumPy's `@`."""
import numpy as np

from tinyattn.engine import Function
from tinyattn.ops import checks


class Matmul(Function):
    """out = a @ b: a matrix product over the last two axes; the leading (batch) axes broadcast.

        dL/da = grad @ b^T        dL/db = a^T @ grad        (^T swaps the last two axes)

    Why: out[i, j] = sum_k a[i, k] b[k, j], so a[i, k] meets grad[i, j] through b[k, j] for every j
    (README, "The matmul adjoint"). The two cases NumPy's `@` adds, stated once:
    * a 1-D `a` is a one-row matrix and a 1-D `b` a one-column matrix, and that axis is dropped
      from the output: backward puts it back into grad, and takes it out of the gradient;
    * a batch axis that broadcast (a 2-D `b` shared by a batch of `a`s) gets a gradient per batch
      element from `a^T @ grad`: the sweep sums them back to b's shape (engine.unbroadcast).
    """

    check = staticmethod(checks.matmul_operands)

    def forward(self, a, b):
        self.saved = (a, b)
        return a @ b

    def backward(self, grad):
        a, b = self.saved
        a_is_row, b_is_column = a.ndim == 1, b.ndim == 1
        if b_is_column:                                    # b (k,) as a column (k, 1)
            b, grad = b[:, np.newaxis], np.expand_dims(grad, -1)
        if a_is_row:                                       # a (k,) as a row (1, k)
            a, grad = a[np.newaxis, :], np.expand_dims(grad, -2)
        grad_a = grad_b = None
        if self.needs_grad(0):
            grad_a = grad @ b.swapaxes(-1, -2)             # grad @ b^T
            if a_is_row:
                grad_a = grad_a[..., 0, :]
        if self.needs_grad(1):
            grad_b = a.swapaxes(-1, -2) @ grad             # a^T @ grad
            if b_is_column:
                grad_b = grad_b[..., 0]
        return grad_a, grad_b
