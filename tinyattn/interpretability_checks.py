"""Chapter 4. What makes an argument of interpretability.py's tools bad: the model the lens
reads, the head an ablation removes, a patching run's source, metric and names."""
from collections.abc import Mapping

import numpy as np

from tinyattn.engine import Tensor
from tinyattn.nn.hooks_checks import names_known


def lens_model_fits(model):
    """logit_lens: a language model of `blocks`, with a final `ln` and a `head`."""
    if not all(hasattr(model, part) for part in ("blocks", "ln", "head")):
        raise TypeError(f"logit_lens: the model must be a language model with blocks, a final "
                        f"LayerNorm `ln` and a `head` (an nn.CausalTransformer), got "
                        f"{type(model).__name__}")


def head_in_range(function, head, x, axis):
    """A head of an attention activation whose heads are on `axis`: (B, H, T, D), (B, H, L, S),
    or (B, T, H, E) for each head's result; None for an activation without heads."""
    if axis is None or x.ndim != 4:
        raise ValueError(f"{function}: an activation of shape {x.shape} has no head axis (the "
                         f"residual stream and the layers' outputs are (B, T, E)): give "
                         f"{function} to an attention activation with one, q, k, v, weights, "
                         f"heads (B, H, ...) or result (B, T, H, E)")
    if not -x.shape[axis] <= head < x.shape[axis]:
        raise ValueError(f"{function}: head {head} of an activation of shape {x.shape}, which "
                         f"has {x.shape[axis]} heads on axis {axis}")


def source_fits_activation(function, source, x):
    """A patch's source of the activation's shape."""
    if source.shape != x.shape:
        raise ValueError(f"{function}: the source has shape {source.shape}, the activation "
                         f"{x.shape}: a patch comes from a run on inputs of the same shape")


def patching_fits(model, source, metric, names, function):
    """activation_patching and attribution_patching: names of the model's activations (a list),
    a source cache (a dict) holding each, a callable metric."""
    names_known(model, names, function)
    if not isinstance(source, Mapping):
        raise TypeError(f"{function}: source must be a cache, {{name: array}} (from "
                        f"model.run_with_cache), got {type(source).__name__}")
    missing = [name for name in names if name not in source]
    if missing:
        raise ValueError(f"{function}: source holds no {', '.join(map(repr, missing))}: cache "
                         f"them in the clean run (run_with_cache with names=None keeps all)")
    if not callable(metric):
        raise TypeError(f"{function}: metric must be a function of the logits, got "
                        f"{type(metric).__name__}")


def source_shapes_fit(source, activations, function):
    """Each source array of the shape and dtype the activation has in the patched run."""
    for name, activation in activations.items():
        given = np.asarray(source[name])
        if given.shape != activation.shape or given.dtype != activation.dtype:
            raise ValueError(f"{function}: source[{name!r}] is {given.dtype} {given.shape}, but "
                             f"the activation is {activation.dtype} {activation.shape} on these "
                             f"ids: the clean and corrupted inputs must have one shape")


def metric_number(function, value):
    """What a metric returned: a number, or a one-element Tensor; as a float."""
    array = np.asarray(value.data if isinstance(value, Tensor) else value)
    if array.size != 1 or array.dtype.kind not in "biuf":
        raise ValueError(f"{function}: the metric must return one number (or a one-element "
                         f"Tensor), got {type(value).__name__} of shape {array.shape}")
    return float(array.reshape(()))


def differentiable_metric(function, value):
    """attribution_patching's metric: a one-element Tensor, computed with a graph."""
    if not isinstance(value, Tensor) or value.size != 1:
        raise ValueError(f"{function}: the metric must return a one-element Tensor computed "
                         f"from the logits, to differentiate; got {type(value).__name__} of "
                         f"shape {np.shape(value)}")
    if not value.requires_grad:
        raise ValueError(f"{function}: the metric's value has no graph to differentiate: call "
                         f"{function} outside ta.no_grad(), with a metric made of tinyattn ops")
