"""tinyattn: a reverse-mode autograd engine over NumPy, and attention built on it."""
from tinyattn.engine import (Tensor, TensorIndexError, tensor, no_grad, retain_grads)
from tinyattn.ops import concatenate, stack, where
from tinyattn.gradcheck import gradcheck, GradcheckError
from tinyattn.rng import manual_seed
from tinyattn import functional, nn, optim  # noqa: F401  (ta.nn, ta.optim, ta.functional)

__all__ = ["Tensor", "TensorIndexError", "tensor", "no_grad", "retain_grads",
           "concatenate", "stack", "where", "gradcheck", "GradcheckError", "manual_seed"]
