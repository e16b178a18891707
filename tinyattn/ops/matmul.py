"""Matrix multiplication, batched and broadcast as in NumPy's `@`."""
import math

import numpy as np

from tinyattn.engine import Function


class Matmul(Function):
    """out = a @ b: a matrix product over the last two axes; the leading (batch) axes broadcast.

        dL/da = grad @ b^T        dL/db = a^T @ grad        (^T swaps the last two axes)

    Why: out[i, j] = sum_k a[i, k] b[k, j], so a[i, k] meets grad[i, j] through b[k, j] for every j
    (README, "The matmul adjoint"). A batch axis that broadcast is summed back by the sweep.

    Two special cases, both NumPy's rules or their cost:
    * A 1-D `a` acts as a one-row matrix, a 1-D `b` as a one-column matrix, and that axis is
      dropped from the output; backward puts it back into grad and takes it out of the result.
    * A 2-D `b` shared by a batch of `a`s (the weight of a Linear layer): `product` folds the batch
      into rows, so that out and dL/da are each one 2-D product, (rows, k) @ (k, n), and not one
      small product per batch element (NumPy's `@` loops over the batch); and dL/db, a^T @ grad
      summed over the batch, is the same one product, (rows, k)^T @ (rows, n)
      (`rows_transposed_times`).

    Whenever b is one matrix, dL/db is written in b's memory layout. A Linear layer's b is W.T, a
    transposed view of W, so dL/db comes out laid out as W, and so does W's `.grad` once the
    transpose is undone. (In the row-major layout of a plain product, W's gradient would be
    column-major, and every optimizer step, which walks each weight together with its gradient
    and moments, would read the gradient across its rows, a slow walk through memory.)
    """

    def forward(self, a, b):
        self.saved = (a, b)
        return product(a, b)

    def backward(self, grad):
        a, b = self.saved
        a_is_vector, b_is_vector = a.ndim == 1, b.ndim == 1
        if b_is_vector:
            b, grad = b[:, np.newaxis], np.expand_dims(grad, -1)   # b (k, 1), grad (..., m, 1)
        if a_is_vector:
            a, grad = a[np.newaxis, :], np.expand_dims(grad, -2)   # a (1, k), grad (..., 1, n)
        grad_a = grad_b = None
        if self.needs_grad(0):
            grad_a = product(grad, b.swapaxes(-1, -2))                     # grad @ b^T
            if a_is_vector:
                grad_a = grad_a[..., 0, :]
        if self.needs_grad(1):
            if b.ndim == 2:     # one matrix b: its gradient summed over the batch, in b's layout
                grad_b = rows_transposed_times(a, grad, layout_of=b)       # a^T @ grad
            else:
                grad_b = a.swapaxes(-1, -2) @ grad                         # a^T @ grad
            if b_is_vector:
                grad_b = grad_b[..., 0]
        return grad_a, grad_b

    def check(self, a, b):
        if np.ndim(a) == 0 or np.ndim(b) == 0:
            raise ValueError(f"shapes {np.shape(a)} and {np.shape(b)}: both operands need at "
                             "least one axis (use * to multiply by a scalar)")
        b_axis = -2 if b.ndim > 1 else 0
        if a.shape[-1] != b.shape[b_axis]:
            raise ValueError(f"shapes {a.shape} and {b.shape} are not aligned: {a.shape[-1]} "
                             f"(axis -1 of a) != {b.shape[b_axis]} (axis {b_axis} of b)")
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError:
            raise ValueError(f"shapes {a.shape} and {b.shape}: the batch shapes {a.shape[:-2]} "
                             f"and {b.shape[:-2]} do not broadcast") from None


def product(x, y):
    """x @ y, as one 2-D product of the rows of x when y is one matrix shared by a batch of xs:
    (..., k) @ (k, n) -> (..., n)."""
    if y.ndim != 2 or x.ndim <= 2:
        return x @ y
    return (as_rows(x) @ y).reshape(*x.shape[:-1], y.shape[-1])


def rows_transposed_times(x, g, layout_of):
    """x^T @ g summed over the batch axes, (..., m, k) and (..., m, n) -> (k, n): one product of
    the rows, (rows, k)^T @ (rows, n), written into an array laid out as `layout_of`."""
    return np.matmul(as_rows(x).T, as_rows(g), out=np.empty_like(layout_of))


def as_rows(x):
    """(..., n) as (rows, n): every leading axis folded into one. (Not -1: it cannot be inferred
    when n is 0.)"""
    return x.reshape(math.prod(x.shape[:-1]), x.shape[-1])
