"""Chapter 4. LoRA, low-rank adaptation (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large
Language Models"): fine-tune a trained model by learning a small change to some of its weight
matrices, the rest of it frozen.

A Linear computes y = x W^T + b with W (out, in). Fine-tuning all of W learns out * in numbers per
layer, and Adam keeps two more of each. Hu et al. observe that the change fine-tuning makes, dW,
has a low "intrinsic rank", so they learn it as a product of two thin matrices:

    y = x W^T + b + (alpha / r) x A^T B^T          A (r, in), B (out, r), r << min(in, out)

W and b are frozen; only A and B learn, r (in + out) numbers instead of out * in. B starts at zero,
so a model with new adapters computes exactly what it computed before, and training starts from
the trained model, not from noise. A starts random (were both zero, dA = s (grad B)^T x and
dB = s grad^T (x A^T) would both stay zero: nothing would ever move). The scale alpha / r keeps the
size of the update about the same when r changes: Hu et al. set alpha once, to the first r they
tried, and then change r without retuning the learning rate (section 4.1). After training, the
adapter merges into the weight, W' = W + (alpha / r) B A, and the model runs as fast as before.

Read in this order:
    LowRankUpdate   the adapter's path, (alpha / r) x A^T B^T, as one op: its forward and backward
    LoRALinear      a frozen Linear plus that update; `merge()` gives back a plain Linear
    add_lora        wraps the Linear layers of a model chosen by name (the attention projections,
                    by default) and freezes everything else; `trainable_parameters()`, added to
                    every Module, is what an optimizer is given
    merge_lora      every adapter of a model merged into its weight
    save_lora, load_lora   the adapters alone, in a small safetensors file, or in Hugging Face
                    peft's format (nn/lora_peft.py), which peft loads onto transformers' GPT-2

What differs from the paper: A starts as a Linear's weight does (uniform in +-1/sqrt(in)), as the
paper's own code (Microsoft's loralib) draws it, where the paper says "a random Gaussian"; either
works, since B = 0 makes the first output the same. There is no dropout on the adapter's path
(loralib has it as an option). How frozen weights stay frozen: their `requires_grad` is False, so
the backward sweep sends them nothing, and an optimizer refuses a tensor that does not require
grad, so it is given `model.trainable_parameters()`: A and B.
"""
import fnmatch
import json
import math
import os

import numpy as np

from tinyattn.arguments import at_least, between, door, one_of, optional
from tinyattn.engine import Function
from tinyattn.nn import lora_checks
from tinyattn.nn.layers import Linear
from tinyattn.nn.lora_peft import read_peft, save_peft
from tinyattn.nn.module import Module, Parameter, extends, uniform
from tinyattn.safetensors import read_file, save_safetensors


class LowRankUpdate(Function):
    """out = scale * (x @ A^T) @ B^T: LoRA's update of a Linear's output, as one op.

    x is (..., in), A (r, in), B (out, r), and scale = alpha / r a Python float. With
    h = x @ A^T (..., r), the input brought down to r numbers per row, and grad = dL/d(out):

        dL/dB = scale * grad^T @ h          (out, r)     summed over every row of x
        dL/dh = scale * grad @ B            (..., r)
        dL/dA = dL/dh^T @ x                 (r, in)      summed over every row of x
        dL/dx = dL/dh @ A                   (..., in)    what the layers before need

    Each is the matmul adjoint (README) applied twice, and each stays thin: no product ever
    makes an (out, in) matrix, the size of W, which is what LoRA saves. dL/dx is easy to forget,
    since x is no parameter: but the gradient of every layer below this one (and of its
    adapters) flows through it. Saved: the rows of x and h, (N, r); A and B.

    Why one op, when two matmuls and a product with a number would compute the same: its
    backward is LoRA's gradients as the equations above (the checklist compares it with that
    chain of primitive ops). The leading axes of x are folded into rows, N of them, so that
    dL/dA and dL/dB are single 2-D products, as in Linear.
    """

    def forward(self, x, A, B, scale):
        rows = x.reshape(-1, x.shape[-1])                                # (N, in)
        h = rows @ A.T                                                   # (N, r)
        self.saved = (rows, h, A, B, scale, x.shape)
        out = scale * (h @ B.T)                                          # (N, out)
        return out.reshape(*x.shape[:-1], B.shape[0])                    # (..., out)

    def backward(self, grad):
        rows, h, A, B, scale, x_shape = self.saved
        grad = grad.reshape(-1, B.shape[0])                              # (N, out)
        grad_h = scale * (grad @ B)                                      # (N, r)
        grad_x = (grad_h @ A).reshape(x_shape)                           # (..., in)
        grad_A = grad_h.T @ rows                                         # (r, in)
        grad_B = scale * (grad.T @ h)                                    # (out, r)
        return grad_x, grad_A, grad_B


class LoRALinear(Linear):
    """A frozen Linear plus a trainable low-rank update (Hu et al. 2021):

        y = x W^T + b + (alpha / rank) x A^T B^T     W (out, in), A (rank, in), B (out, rank)

    `linear`'s weight and bias become this layer's `weight` and `bias`, the same tensors, now
    frozen (requires_grad=False); the new `lora_A` and `lora_B` are the only parameters that
    require grad. `lora_A` starts as a Linear(in, rank)'s weight would, `lora_B` at zero, so a
    new LoRALinear computes exactly what `linear` did. `alpha` defaults to `rank` (a scale of 1).
    The rank is at most min(in_features, out_features): B A can have no higher rank.

    It is a Linear (weight, bias, in_features and out_features in their places), so a model's
    state_dict keeps its names, `q_proj.weight`, with `q_proj.lora_A` and `q_proj.lora_B` added.
    """

    @door(lora_checks.a_linear_to_adapt, rank=at_least(1), alpha=optional(between(0)))
    def __init__(self, linear, rank, alpha=None):
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight, self.bias = linear.weight, linear.bias
        for parameter in (self.weight, self.bias):
            if parameter is not None:
                parameter.requires_grad = False
        self.rank = rank
        self.alpha = float(rank if alpha is None else alpha)
        self.scale = self.alpha / rank
        dtype = self.weight.dtype
        self.lora_A = uniform((rank, self.in_features), 1.0 / math.sqrt(self.in_features), dtype)
        self.lora_B = Parameter(np.zeros((self.out_features, rank), dtype))

    @door(x="(..., in_features)")
    def forward(self, x):
        return super().forward(x) + LowRankUpdate.apply(x, self.lora_A, self.lora_B,
                                                        scale=self.scale)    # (..., out)

    def merge(self):
        """A plain Linear that computes what this layer computes: weight W + (alpha / rank) B A,
        the same bias. Its parameters are new tensors (this layer is left as it is), frozen if
        this layer's weight is. Made without Linear.__init__, which would draw random weights
        only to replace them, and shift every later draw of the seeded generator."""
        merged = Linear.__new__(Linear)
        merged.in_features, merged.out_features = self.in_features, self.out_features
        update = self.scale * (self.lora_B.data @ self.lora_A.data)        # (out, in)
        merged.weight = Parameter(self.weight.data + update, self.weight.requires_grad)
        merged.bias = (None if self.bias is None else
                       Parameter(self.bias.data.copy(), self.bias.requires_grad))
        return merged

    def extra_repr(self):
        return f"{super().extra_repr()}, rank={self.rank}, alpha={self.alpha:g}"


# ------------------------------------------------------------------------------------------------
# A whole model: which layers get adapters, what trains, merging

ATTENTION = ("*q_proj", "*k_proj", "*v_proj", "*out_proj")     # every attention projection


def weight_of(linear):
    """The (out, in) matrix a Linear multiplies by, as a Tensor: its `weight`, and for a
    LoRALinear its weight plus the update, W + (alpha / rank) B A (what `merge()` would hold),
    made with tinyattn's ops so that gradients reach A and B. What reads a layer's weights
    (chapter 4's circuits: each head's result, the QK and OV circuits) reads them through this,
    so that an adapted model is read as it computes."""
    if not isinstance(linear, LoRALinear):
        return linear.weight                                             # (out, in)
    return linear.weight + linear.scale * (linear.lora_B @ linear.lora_A)     # (out, in)


def linear_layers(model):
    """{dotted name: layer} of every Linear in `model` (LoRALinear included), depth first;
    "blocks.0.attn.q_proj" is `model.blocks[0].attn.q_proj`."""
    return {name: layer for name, layer in model.named_modules() if isinstance(layer, Linear)}


def chosen_layers(model, targets):
    """{name: layer} of the Linear layers of `model` whose name matches one of the shell-style
    patterns in `targets` ("*q_proj" matches "blocks.0.attn.q_proj")."""
    patterns = (targets,) if isinstance(targets, str) else tuple(targets)
    return {name: layer for name, layer in linear_layers(model).items()
            if any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)}


@extends(Module)
def trainable_parameters(self):
    """The parameters that require grad, in the order of `parameters()`: what an optimizer is
    given once some are frozen (`ta.optim.AdamW(model.trainable_parameters())`)."""
    return [parameter for parameter in self.parameters() if parameter.requires_grad]


def freeze(model):
    """requires_grad=False on every parameter of `model` but the adapters it has already (a second
    add_lora adds adapters beside the first ones, which keep training): no gradient reaches them
    any more."""
    training = {id(part) for layer in adapters(model).values()
                for part in (layer.lora_A, layer.lora_B)}
    for parameter in model.parameters():
        if id(parameter) not in training:
            parameter.requires_grad = False


class LoRASummary:
    """What `add_lora` and `load_lora` did: the layers adapted, and the parameters that train
    against all of the model's (adapters included)."""

    def __init__(self, model, layers):
        self.layers = layers
        self.trainable = sum(p.size for p in model.trainable_parameters())
        self.total = sum(p.size for p in model.parameters())

    def __repr__(self):
        shown = ", ".join(self.layers[:4]) + (f" and {len(self.layers) - 4} more"
                                              if len(self.layers) > 4 else "")
        return (f"LoRA adapters on {len(self.layers)} Linear layers ({shown}): "
                f"{self.trainable:,} trainable parameters of {self.total:,} "
                f"({self.trainable / self.total:.2%})")


@door(model=lora_checks.a_module, rank=at_least(1), alpha=optional(between(0)),
      targets=lora_checks.patterns)
def add_lora(model, rank, alpha=None, targets=ATTENTION):
    """Freeze every parameter of `model`, then wrap each Linear layer whose dotted name matches
    `targets` (a shell-style pattern, or a list of them) in a LoRALinear of this rank and alpha:
    its adapters are then all that trains. Returns a LoRASummary (print it: the layers, and the
    trainable parameters against all of them).

    The default targets are the attention projections q, k, v and out of every attention layer,
    four of the projections Hu et al. adapt (they find W_q and W_v together do best, section 7.1).
    `targets="*"` adapts every Linear layer, "blocks.1.*" those of the second block.
    """
    chosen = chosen_layers(model, targets)
    lora_checks.layers_to_adapt(chosen, rank, targets, linear_layers(model))
    freeze(model)
    for name, linear in chosen.items():
        model.set_submodule(name, LoRALinear(linear, rank, alpha))
    return LoRASummary(model, list(chosen))


def merge_lora(model):
    """Replace every LoRALinear of `model` by its `merge()`, a plain Linear computing the same
    (W + (alpha / rank) B A): the model runs as fast as before adaptation, and saves as before
    (`save_pretrained` writes a GPT-2 that transformers reads). Returns the model."""
    for name, layer in adapters(model).items():
        model.set_submodule(name, layer.merge())
    return model


# ------------------------------------------------------------------------------------------------
# The adapters alone, in a file

def adapters(model):
    """{dotted name of a LoRALinear: the layer} of every adapted layer of `model`."""
    return {name: layer for name, layer in linear_layers(model).items()
            if isinstance(layer, LoRALinear)}


@door(model=lora_checks.a_module, format=one_of("tinyattn", "peft"),
      base_model_name_or_path=optional(lora_checks.text))
def save_lora(model, path, format="tinyattn", base_model_name_or_path=None):
    """Save the adapters of `model` alone: a few hundred kilobytes where the whole model is
    megabytes; the model they adapt is loaded from its own file, and `load_lora` adds them to it.

    format="tinyattn": the safetensors file `path`, each LoRALinear's `lora_A` and `lora_B` under
    their names in `state_dict()`, and in the metadata each layer's rank and alpha.
    format="peft": the folder `path` in Hugging Face peft's format (nn/lora_peft.py), which
    `peft.PeftModel.from_pretrained(gpt2, path)` loads onto transformers' GPT-2 of the same
    checkpoint, giving the same logits; `base_model_name_or_path` (that checkpoint's folder or
    hub name) goes into its adapter_config.json. The three adapters of a block's q, k and v
    become one on GPT-2's c_attn, exactly: nn/lora_peft.py says how, and how they come back."""
    layers = adapters(model)
    if not layers:
        raise ValueError("save_lora: the model has no LoRA adapters to save (add_lora adds them)")
    if format == "peft":
        save_peft(model, path, layers, base_model_name_or_path)
        return
    arrays = {f"{name}.{part}": getattr(layer, part).data
              for name, layer in layers.items() for part in ("lora_A", "lora_B")}
    settings = {name: {"rank": layer.rank, "alpha": layer.alpha} for name, layer in layers.items()}
    save_safetensors(path, arrays, {"lora": json.dumps(settings)})


@door(model=lora_checks.a_module)
def load_lora(model, path):
    """Add the adapters that `save_lora` wrote in `path` to `model` (the model they were trained
    on, as it was before add_lora, or already adapted alike), as `add_lora` does: every parameter
    frozen, each layer named in the file a LoRALinear of the file's rank and alpha, holding the
    file's A and B. `path` is save_lora's file, or a folder in peft's format (made by peft, or by
    save_lora(format="peft")) for a GPT-2. The whole file is read and checked against the model
    first (names, ranks, shapes, numbers), so a file that does not fit changes nothing. Returns a
    LoRASummary."""
    arrays, settings = read_peft(path) if os.path.isdir(path) else read_lora(path)
    layers = linear_layers(model)
    arrays = lora_checks.adapters_fit(path, arrays, settings, layers)
    freeze(model)
    for name, setting in settings.items():
        layer = layers[name]
        if not isinstance(layer, LoRALinear):
            layer = LoRALinear(layer, setting["rank"], setting["alpha"])
            model.set_submodule(name, layer)
        layer.lora_A.data[...] = arrays[f"{name}.lora_A"]
        layer.lora_B.data[...] = arrays[f"{name}.lora_B"]
    return LoRASummary(model, list(settings))


def read_lora(path):
    """(arrays, {layer name: {"rank": r, "alpha": alpha}}) from a file `save_lora` wrote; a
    FileNotFoundError or ValueError naming the file if it is not one."""
    path = os.fspath(path)
    arrays, metadata = read_file(path, "load_lora", "LoRA file", with_metadata=True)
    try:
        settings = json.loads(metadata["lora"])
    except (KeyError, json.JSONDecodeError):
        settings = None
    if not isinstance(settings, dict):
        raise ValueError(f"load_lora: {path!r} is a safetensors file but holds no LoRA adapters "
                         f"(save_lora names their layers, ranks and alphas in its metadata, "
                         f"under 'lora')")
    return arrays, settings
