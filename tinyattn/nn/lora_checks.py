"""Chapter 4. What makes an argument of LoRA (nn/lora.py) bad: the layer or model to adapt, its
rank and targets, an adapters file that does not fit the model."""
import os

from tinyattn import arguments
from tinyattn.arguments import at_least
from tinyattn.arrays import numeric_array
from tinyattn.engine import Tensor


def a_module(name, value):
    """An nn.Module."""
    if not callable(getattr(value, "named_children", None)):
        raise TypeError(f"{name} must be an nn.Module, got {type(value).__name__}")


def text(name, value):
    """A str."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")


def patterns(name, value):
    """A shell-style pattern ("*q_proj"), or a non-empty list or tuple of them."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not values or \
            not all(isinstance(pattern, str) for pattern in values):
        raise TypeError(f"{name} must be a pattern of layer names such as '*q_proj', or a list "
                        f"of them, got {value!r}")


def rank_fits(linear, rank, where="", caller=""):
    """The rank of an adapter is at most min(in_features, out_features): B A can have no higher
    rank, so more would only add parameters."""
    if rank > min(linear.in_features, linear.out_features):
        raise ValueError(f"{caller}rank {rank} is more than min(in_features, out_features) = "
                         f"min({linear.in_features}, {linear.out_features}){where}: B A (out, in) "
                         f"has no higher rank")


def a_linear_to_adapt(self, linear, rank, alpha=None):
    """LoRALinear: `linear` is a Linear without an adapter, and the rank fits it."""
    weight = getattr(linear, "weight", None)
    if not (hasattr(linear, "in_features") and isinstance(weight, Tensor) and weight.ndim == 2):
        raise TypeError(f"linear must be an nn.Linear, got {type(linear).__name__}")
    if hasattr(linear, "lora_A"):
        raise ValueError("linear already has an adapter (it is a LoRALinear): merge() it first, "
                         "or give its own rank to it")
    rank_fits(linear, rank)


def layers_to_adapt(chosen, rank, targets, linears):
    """add_lora: the patterns chose some Linear layers (`chosen`, of all the model's `linears`),
    none with an adapter already, each wide enough for the rank; both are {name: layer}."""
    if not chosen:
        names = list(linears)
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        raise ValueError(f"add_lora: no Linear layer of the model matches targets {targets!r}; "
                         f"its Linear layers are {shown or 'none'}")
    for name, layer in chosen.items():
        if hasattr(layer, "lora_A"):
            raise ValueError(f"add_lora: {name} already has an adapter; merge_lora(model) first "
                             f"to adapt a model again")
        rank_fits(layer, rank, f" of {name}", "add_lora: ")


def adapters_fit(path, arrays, settings, linears):
    """load_lora: the file's adapters fit the model's Linear layers `linears` ({name: layer}):
    a rank and alpha for each layer it names, and that layer's A (rank, in) and B (out, rank),
    no other array; a layer adapted already has the same rank. Returns the arrays converted to
    the layers' dtype. Errors name the file."""
    where = f"load_lora: the {'folder' if os.path.isdir(path) else 'file'} {str(path)!r}"
    expected = {f"{name}.{part}" for name in settings for part in ("lora_A", "lora_B")}
    if set(arrays) != expected:
        raise ValueError(f"{where} holds arrays {sorted(arrays)} but names the adapters of "
                         f"{sorted(settings)}: it was not written by save_lora")
    converted = {}
    for name, setting in settings.items():
        layer = linears.get(name)
        if layer is None:
            raise ValueError(f"{where} adapts {name}, which is no Linear layer of this model")
        rank, alpha = (setting.get("rank"), setting.get("alpha")) if isinstance(setting, dict) \
            else (None, None)
        try:
            at_least(1)("its rank", rank)
            arguments.between(0)("its alpha", alpha)
            rank_fits(layer, rank, f" of {name}")
        except (TypeError, ValueError) as error:
            raise type(error)(f"{where}, adapting {name}: {error}") from None
        if getattr(layer, "rank", rank) != rank:
            raise ValueError(f"{where} has adapters of rank {rank} for {name}, which has one of "
                             f"rank {layer.rank} already")
        for part, shape in (("lora_A", (rank, layer.in_features)),
                            ("lora_B", (layer.out_features, rank))):
            array = numeric_array(arrays[f"{name}.{part}"], f"{where}: {name}.{part}")
            if array.shape != shape:
                raise ValueError(f"{where}: {name}.{part} has shape {array.shape}, the layer's "
                                 f"is {shape}")
            converted[f"{name}.{part}"] = array.astype(layer.weight.dtype)
    return converted
