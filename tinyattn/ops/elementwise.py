"""Chapter 1. Elementwise ops: each output element depends on the elements at the same position.

Every backward rule below is the chain rule for one element, `dL/dx = dL/dout * dout/dx`,
applied to whole arrays at once. `grad` is dL/d(out). The sweep (engine.py) sums the gradient of a
broadcast input back to its shape, so the rules are written as if `a` and `b` had the same shape;
an input that is a constant (`self.needs_grad(i)` False) gets None instead of a gradient nobody
will read.
"""
import math

import numpy as np

from tinyattn.engine import Function
from tinyattn.ops.erf import erf
from tinyattn.arrays import data_of


class Add(Function):
    """out = a + b.    dL/da = grad,  dL/db = grad"""

    def forward(self, a, b):
        return a + b

    def backward(self, grad):
        return grad, grad


class Sub(Function):
    """out = a - b.    dL/da = grad,  dL/db = -grad"""

    def forward(self, a, b):
        return a - b

    def backward(self, grad):
        return grad, (-grad if self.needs_grad(1) else None)


class Mul(Function):
    """out = a * b.    dL/da = grad * b,  dL/db = grad * a"""

    def forward(self, a, b):
        self.saved = (a, b)
        return a * b

    def backward(self, grad):
        a, b = self.saved
        return (grad * b if self.needs_grad(0) else None,
                grad * a if self.needs_grad(1) else None)


class Div(Function):
    """out = a / b.    dL/da = grad / b,  dL/db = -grad * a / b^2 = -grad * out / b

    dL/db is computed as out / b, not a / b^2: b^2 overflows (or underflows to 0) for |b| beyond
    about 1e154 (1e19 in float32) where out / b is still an ordinary number.
    """

    def forward(self, a, b):
        out = a / b
        self.saved = (b, out)
        return out

    def backward(self, grad):
        b, out = self.saved
        return (grad / b if self.needs_grad(0) else None,
                -grad * out / b if self.needs_grad(1) else None)


class Pow(Function):
    """out = a ** b.    dL/da = grad * b * a^(b - 1),  dL/db = grad * out * log(a)

    Two limits are taken as PyTorch takes them, where the formulas would give 0 * inf = NaN:
      * b = 0: out = 1 whatever a is, so dL/da = 0 (even at a = 0, where a^(b - 1) is infinite);
      * a = 0 and b >= 0: out = 0 ** b is flat in b (0, or 1 at b = 0), so dL/db = 0.
    Elsewhere dL/db needs log(a), so it is only defined for a > 0 (as in PyTorch, a negative base
    gives NaN there); with a constant exponent, as in `x ** 2`, it is not computed.
    """

    def forward(self, a, b):
        out = a ** b
        # the base as an array of out's dtype, so that log(a) in backward cannot upcast
        self.saved = (np.asarray(a, dtype=out.dtype), b, out)
        return out

    def backward(self, grad):
        a, b, out = self.saved
        grad_a = grad_b = None
        with np.errstate(divide="ignore", invalid="ignore"):   # the infinities replaced below
            if self.needs_grad(0):
                grad_a = np.where(b == 0, 0, grad * b * a ** (b - 1))
            if self.needs_grad(1):
                grad_b = np.where((a == 0) & (b >= 0), 0, grad * out * np.log(a))
        return grad_a, grad_b


class Neg(Function):
    """out = -a.    dL/da = -grad"""

    def forward(self, a):
        return -a

    def backward(self, grad):
        return (-grad,)


class Exp(Function):
    """out = e^a.    dL/da = grad * out   (exp is its own derivative, so the output is saved)"""

    def forward(self, a):
        out = np.exp(a)
        self.saved = (out,)
        return out

    def backward(self, grad):
        out, = self.saved
        return (grad * out,)


class Log(Function):
    """out = ln(a).    dL/da = grad / a"""

    def forward(self, a):
        self.saved = (a,)
        return np.log(a)

    def backward(self, grad):
        a, = self.saved
        return (grad / a,)


class Sqrt(Function):
    """out = sqrt(a).    dL/da = grad / (2 * out)"""

    def forward(self, a):
        out = np.sqrt(a)
        self.saved = (out,)
        return out

    def backward(self, grad):
        out, = self.saved
        return (grad * 0.5 / out,)


class Tanh(Function):
    """out = tanh(a).    dL/da = grad * (1 - out^2)"""

    def forward(self, a):
        out = np.tanh(a)
        self.saved = (out,)
        return out

    def backward(self, grad):
        out, = self.saved
        return (grad * (1 - out * out),)


class Relu(Function):
    """out = max(a, 0).    dL/da = grad where a > 0, else 0   (0 at a = 0, as in PyTorch)"""

    def forward(self, a):
        out = np.maximum(a, 0)
        self.saved = (out,)
        return out

    def backward(self, grad):
        out, = self.saved
        return (grad * (out > 0),)


class Gelu(Function):
    """GELU in its tanh form (GPT-2's; PyTorch's `gelu(x, approximate="tanh")`), fused:

        out = 0.5 x (1 + t),   t = tanh(u),   u = c (x + 0.044715 x^3),   c = sqrt(2 / pi)

    dL/dx = grad * dout/dx, by the product rule, then the chain rule through tanh
    (d tanh(u) / du = 1 - t^2):

        dout/dx = 0.5 (1 + t) + 0.5 x (1 - t^2) du/dx,    du/dx = c (1 + 3 * 0.044715 x^2)

    Written with the primitive ops, GELU is nine nodes over arrays as large as the feed-forward
    layer's hidden activations; fused, it saves x and t, and its backward is the line above.
    (x * x * x, not x ** 3: NumPy's float32 power goes through its general function, far slower.)
    """

    def forward(self, x):
        t = np.tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
        self.saved = (x, t)
        return 0.5 * x * (1.0 + t)

    def backward(self, grad):
        x, t = self.saved
        du_dx = SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * x * x)
        return (grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * du_dx),)


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)     # a Python float: no float64 upcast of float32 arrays


class GeluExact(Function):
    """GELU as defined (Hendrycks & Gimpel 2016; PyTorch's `gelu(x)`, transformers' "gelu"), fused:
    the input times the probability that a standard normal variable is below it,

        out = x Phi(x),   Phi(x) = (1 + erf(x / sqrt(2))) / 2

    dL/dx = grad * dout/dx, by the product rule, with Phi's derivative the normal density phi:

        dout/dx = Phi(x) + x phi(x),   phi(x) = exp(-x^2 / 2) / sqrt(2 pi)

    The tanh form (`Gelu`) approximates Phi(x) by (1 + tanh(u)) / 2; they differ by up to ~5e-4.
    NumPy has no erf: ops/erf.py computes it for whole arrays, to a few units in the last place,
    in the array's dtype.
    """

    def forward(self, x):
        phi_cdf = 0.5 * (1.0 + erf(x * SQRT_HALF))
        self.saved = (x, phi_cdf)
        return x * phi_cdf

    def backward(self, grad):
        x, phi_cdf = self.saved
        density = np.exp(-0.5 * x * x) * ONE_OVER_SQRT_2PI
        return (grad * (phi_cdf + x * density),)


SQRT_HALF = math.sqrt(0.5)
ONE_OVER_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
class Where(Function):
    """out = a where condition else b  (condition: a boolean constant).

    dL/da = grad where condition else 0,  dL/db = grad where not condition else 0
    """

    def forward(self, a, b, condition):
        self.saved = (condition,)
        return np.where(condition, a, b)

    def backward(self, grad):
        condition, = self.saved
        return (np.where(condition, grad, 0) if self.needs_grad(0) else None,
                np.where(condition, 0, grad) if self.needs_grad(1) else None)


def where(condition, a, b):
    """Elements of `a` where `condition` is True, else of `b` (NumPy's `np.where`, differentiable
    in `a` and `b`). `condition` is a boolean array or tensor; all three broadcast together."""
    condition = np.asarray(data_of(condition))
    if condition.dtype != np.bool_:
        raise TypeError(f"where: the condition must be boolean, got dtype {condition.dtype}")
    return Where.apply(a, b, condition=condition)
