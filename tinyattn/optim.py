"""Optimizers: they read each parameter's `.grad` and update its `.data` in place.

Hyper-parameters are Python floats, so a float32 model stays float32.
"""
import numpy as np

from tinyattn.arguments import check_number
from tinyattn.engine import Tensor


class Optimizer:
    def __init__(self, params, lr):
        self.params = list(params)
        if not self.params:
            raise ValueError(f"{type(self).__name__}: got an empty list of parameters")
        for p in self.params:
            if not isinstance(p, Tensor) or not p.requires_grad:
                raise TypeError(f"{type(self).__name__}: every parameter must be a Tensor that "
                                "requires grad")
        if len({id(p) for p in self.params}) != len(self.params):
            raise ValueError(f"{type(self).__name__}: a parameter appears twice in the list")
        self.lr = check_number(type(self).__name__, "lr", lr, low=0)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def decayed(self, p):
        """The gradient with L2 weight decay added: grad + weight_decay * p (PyTorch's form)."""
        return p.grad + self.weight_decay * p.data if self.weight_decay else p.grad


class SGD(Optimizer):
    """Stochastic gradient descent with momentum (PyTorch's form):

        v = momentum * v + grad (+ weight_decay * p);   p = p - lr * v
    """

    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        super().__init__(params, lr)
        self.momentum = check_number("SGD", "momentum", momentum, low=0)
        self.weight_decay = check_number("SGD", "weight_decay", weight_decay, low=0)
        self.velocity = [None] * len(self.params)

    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            grad = self.decayed(p)
            if self.momentum:
                if self.velocity[i] is None:
                    self.velocity[i] = np.array(grad)
                else:
                    self.velocity[i] = self.momentum * self.velocity[i] + grad
                grad = self.velocity[i]
            p.data -= self.lr * grad


class Adam(Optimizer):
    """Adam (Kingma & Ba), as in PyTorch:

        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2,   t = the parameter's steps so far
        p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr)
        if not isinstance(betas, (tuple, list)) or len(betas) != 2:
            raise TypeError(f"Adam: betas must be a pair (beta1, beta2), got {betas!r}")
        self.beta1, self.beta2 = (check_number("Adam", name, beta, low=0)
                                  for name, beta in (("beta1", betas[0]), ("beta2", betas[1])))
        if not (self.beta1 < 1.0 and self.beta2 < 1.0):
            raise ValueError(f"Adam: needs 0 <= betas < 1, got betas={betas}")
        self.eps = check_number("Adam", "eps", eps, low=0)
        self.weight_decay = check_number("Adam", "weight_decay", weight_decay, low=0)
        # per parameter, made at its first step (in its dtype then): the moving averages of its
        # gradient and squared gradient, and how many steps it has taken
        self.m, self.v, self.steps = {}, {}, {}

    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is None:          # a parameter without a gradient takes no step, as in PyTorch
                continue
            if i not in self.steps:
                self.m[i], self.v[i] = np.zeros_like(p.data), np.zeros_like(p.data)
                self.steps[i] = 0
            self.steps[i] += 1
            m, v = self.m[i], self.v[i]
            correction1 = 1.0 - self.beta1 ** self.steps[i]
            correction2 = 1.0 - self.beta2 ** self.steps[i]
            grad = self.decayed(p)
            m *= self.beta1
            m += (1.0 - self.beta1) * grad
            v *= self.beta2
            v += (1.0 - self.beta2) * grad * grad
            p.data -= self.lr * (m / correction1) / (np.sqrt(v / correction2) + self.eps)
