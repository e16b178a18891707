"""Chapter 1. What makes an argument of optim.py bad: the parameters of an optimizer or of
clip_grad_norm, Adam's betas, a learning-rate schedule (each door names its rule)."""
from tinyattn.arguments import between
from tinyattn.engine import Tensor


def parameters_fit(params, **_):
    """The parameters of an optimizer (or of clip_grad_norm): an iterable of tensors that require
    grad, not empty, none twice. A single tensor is refused, as in PyTorch: iterating over it
    would give its rows. Returns {"params": them as a list}: a generator can be read only once."""
    if isinstance(params, Tensor):
        raise TypeError(f"params must be an iterable of tensors, got a single Tensor of shape "
                        f"{params.shape}; pass [tensor]")
    params = list(params)
    if not params:
        raise ValueError("got an empty list of parameters")
    for i, p in enumerate(params):
        if not isinstance(p, Tensor):
            raise TypeError(f"every parameter must be a Tensor that requires grad; parameter {i} "
                            f"is a {type(p).__name__}")
        if not p.requires_grad:
            named = f" ({p.name})" if p.name else ""
            raise TypeError(f"every parameter must be a Tensor that requires grad; parameter "
                            f"{i}{named}, of shape {p.shape}, does not: it is frozen, and an "
                            f"optimizer would never move it. Give the optimizer only the "
                            f"parameters that train: [p for p in model.parameters() if "
                            f"p.requires_grad], which is model.trainable_parameters() "
                            f"(chapter 4)")
    if len({id(p) for p in params}) != len(params):
        raise ValueError("a parameter appears twice in the list")
    return {"params": params}


def betas_below_1(name, betas):
    """A pair (beta1, beta2) in [0, 1): the decay rates of Adam's moving averages (1 would never
    forget)."""
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise TypeError(f"{name} must be a pair (beta1, beta2), got {betas!r}")
    between(0)("beta1", betas[0])
    between(0)("beta2", betas[1])
    if not (betas[0] < 1.0 and betas[1] < 1.0):
        raise ValueError(f"needs 0 <= betas < 1, got betas={betas}")


def clipped_parameters_fit(parameters, **_):
    """parameters_fit, for clip_grad_norm, which also takes a single tensor (as PyTorch)."""
    single = [parameters] if isinstance(parameters, Tensor) else parameters
    return {"parameters": parameters_fit(single)["params"]}


def schedule_fits(lr, warmup_steps, total_steps, min_lr=0.0, **_):
    """The warm-up ends by the last step, and the rate decays down to min_lr, not up."""
    if total_steps < warmup_steps:
        raise ValueError(f"total_steps {total_steps} must be at least warmup_steps {warmup_steps}")
    if min_lr > lr:
        raise ValueError(f"min_lr {min_lr} must be at most lr {lr}: the schedule decays")
