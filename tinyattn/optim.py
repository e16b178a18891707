"""Chapter 1. Optimizers: they read each parameter's `.grad` and update its `.data` in place; and
the two helpers a training loop uses with them, gradient clipping and a learning-rate schedule.

Hyper-parameters are Python floats, so a float32 model stays float32.
"""
import math

import numpy as np

from tinyattn import optim_checks
from tinyattn.arguments import at_least, between, door


class Optimizer:
    """What the optimizers share: the parameters, the learning rate `lr`, `zero_grad`, and the
    gradient a step follows. Each keeps its per-parameter state in dicts keyed by the parameter's
    index, filled at the parameter's first step."""

    def __init__(self, params, lr):
        self.params = list(params)
        self.lr = float(lr)

    def zero_grad(self):
        for p in self.params:
            p.grad = None

    def gradient(self, p):
        """The gradient to follow. Weight decay as L2 regularisation (PyTorch's SGD and Adam) adds
        weight_decay * p to the gradient, the derivative of weight_decay / 2 * |p|^2."""
        return p.grad + self.weight_decay * p.data if self.weight_decay else p.grad


class SGD(Optimizer):
    """Stochastic gradient descent with momentum (PyTorch's form):

        v = momentum * v + grad (+ weight_decay * p);   p = p - lr * v
    """

    @door(optim_checks.parameters_fit, lr=between(0), momentum=between(0), weight_decay=between(0))
    def __init__(self, params, lr, momentum=0.0, weight_decay=0.0):
        super().__init__(params, lr)
        self.momentum, self.weight_decay = float(momentum), float(weight_decay)
        self.velocity = {}          # per parameter, from its first step: v (the first v is grad)

    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is None:
                continue
            grad = self.gradient(p)
            if self.momentum:
                self.velocity[i] = (self.momentum * self.velocity[i] + grad if i in self.velocity
                                    else np.array(grad))
                grad = self.velocity[i]
            p.data -= self.lr * grad


class Adam(Optimizer):
    """Adam (Kingma & Ba), as in PyTorch:

        m = b1 m + (1 - b1) g,   v = b2 v + (1 - b2) g^2,   t = the parameter's steps so far
        p = p - lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

    with g the gradient plus weight_decay * p (weight decay as L2 regularisation; see AdamW).
    """

    @door(optim_checks.parameters_fit, lr=between(0), betas=optim_checks.betas_below_1,
          eps=between(0), weight_decay=between(0))
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0):
        super().__init__(params, lr)
        self.beta1, self.beta2 = float(betas[0]), float(betas[1])
        self.eps, self.weight_decay = float(eps), float(weight_decay)
        # per parameter, made at its first step (in its dtype then): the moving averages of its
        # gradient and squared gradient, and how many steps it has taken
        self.m, self.v, self.steps = {}, {}, {}

    def step(self):
        for i, p in enumerate(self.params):
            if p.grad is None:          # a parameter without a gradient takes no step (PyTorch)
                continue
            if i not in self.steps:
                self.m[i], self.v[i] = np.zeros_like(p.data), np.zeros_like(p.data)
                self.steps[i] = 0
            self.steps[i] += 1
            t = self.steps[i]
            self.decay(p)
            g = self.gradient(p)
            self.m[i] = self.beta1 * self.m[i] + (1.0 - self.beta1) * g
            self.v[i] = self.beta2 * self.v[i] + (1.0 - self.beta2) * g * g
            m_hat = self.m[i] / (1.0 - self.beta1 ** t)
            v_hat = self.v[i] / (1.0 - self.beta2 ** t)
            p.data -= self.lr * m_hat / (np.sqrt(v_hat) + self.eps)

    def decay(self, p):
        """Decoupled weight decay, just before p's step: none in Adam, whose decay is in the
        gradient (`Optimizer.gradient`); AdamW's is below."""


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, "Decoupled Weight Decay
    Regularization"), as PyTorch's AdamW: before Adam's step, which follows the plain gradient,

        p = p - lr * weight_decay * p

    In Adam the L2 term weight_decay * p is divided by sqrt(v) like the rest of the gradient, so
    weights with large gradients were hardly decayed; here every weight shrinks at the same rate.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2):
        super().__init__(params, lr, betas, eps, weight_decay)

    def decay(self, p):
        """p = p - lr * weight_decay * p, for a parameter about to take a step."""
        p.data *= 1.0 - self.lr * self.weight_decay

    def gradient(self, p):
        """The plain gradient: the decay is not in it, but in `decay`."""
        return p.grad


@door(optim_checks.clipped_parameters_fit, max_norm=between(0), error_if_nonfinite=bool)
def clip_grad_norm(parameters, max_norm, error_if_nonfinite=False):
    """Scale the gradients of `parameters` together so that their total norm is at most
    `max_norm`, as PyTorch's `torch.nn.utils.clip_grad_norm_`:

        norm = sqrt(sum over every gradient element of g^2)
        g = g * max_norm / (norm + 1e-6)     when that factor is below 1

    One factor for all of them keeps the direction of the whole step. Returns the norm before
    clipping, a Python float; parameters without a gradient are left out. As in PyTorch,
    `parameters` may also be a single tensor.

    A NaN or infinite gradient element makes the norm NaN or inf. As in PyTorch, the factor is
    then NaN (every gradient becomes NaN) or 0 (every gradient becomes 0, an infinite element
    NaN), so the step that follows shows it; with `error_if_nonfinite=True` a RuntimeError
    (PyTorch's kind) is raised instead, and the gradients are left as they are.
    """
    grads = [p.grad for p in parameters if p.grad is not None]
    norm = math.hypot(*(float(np.linalg.norm(g)) for g in grads))
    if error_if_nonfinite and not math.isfinite(norm):
        raise RuntimeError(f"clip_grad_norm: the total norm of the gradients is {norm}, so it "
                           f"cannot be clipped; error_if_nonfinite=False scales them by it anyway")
    factor = max_norm / (norm + 1e-6)
    if not factor >= 1.0:                       # below 1, or NaN: a NaN norm makes them all NaN
        with np.errstate(invalid="ignore"):     # inf * 0: NaN, as in PyTorch
            for g in grads:
                g *= factor
    return norm


@door(optim_checks.schedule_fits, step=at_least(0), lr=between(0), warmup_steps=at_least(0),
      total_steps=at_least(0), min_lr=between(0))
def warmup_cosine_lr(step, lr, warmup_steps, total_steps, min_lr=0.0):
    """The learning rate at `step` (counted from 0) of a linear warm-up then a cosine decay:

        step < warmup_steps:     lr * (step + 1) / warmup_steps
        up to total_steps:       min_lr + (lr - min_lr) * (1 + cos(pi * progress)) / 2,
                                 progress = (step - warmup_steps) / (total_steps - warmup_steps)
        from total_steps on:     min_lr

    Set it before each step: `optimizer.lr = warmup_cosine_lr(step, 1e-3, 100, 2000, 1e-4)`.
    The warm-up reaches lr at its last step; nanoGPT's `get_lr` rises as lr * (step + 1) /
    (warmup_steps + 1) instead, and reaches lr one step later. The cosine part is the same.
    """
    if step < warmup_steps:
        return lr * (step + 1) / warmup_steps
    if step >= total_steps:
        return min_lr
    progress = (step - warmup_steps) / (total_steps - warmup_steps)
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * progress))
