"""Chapter 6. DiT's checkpoints in diffusers' layout: `from_pretrained(folder)` reads one and
`DiT.save_pretrained(folder)` writes one, which diffusers' `DiTTransformer2DModel.from_pretrained`
reads to the same numbers.

A diffusers model folder holds config.json, whose `_class_name` is "DiTTransformer2DModel", and
diffusion_pytorch_model.safetensors. (A pipeline folder, as facebook/DiT-XL-2-256 on the hub,
has model_index.json and the model in its transformer/ folder: that folder is read. Its
config.json names the class DiT was first published as, "Transformer2DModel", with norm_type
"ada_norm_zero", which diffusers reads as a DiTTransformer2DModel: so does this file.) A key the
config leaves out means diffusers' default (DEFAULTS: DiT-XL/2's sizes); `out_channels: null`
means in_channels. What the model does not compute is refused by name, never approximated: a
norm_type other than "ada_norm_zero", norms with an elementwise affine, an activation other than
tanh-GELU ("gelu-approximate"), attention without biases, dropout, no num_embeds_ada_norm.
(upcast_attention, which computes half-precision scores in float32, changes nothing in float32
or float64; norm_num_groups is not used by DiT.)

The weights' names (LAYOUT) are diffusers'. One is laid out otherwise: the patch embedding is a
Conv2d there, weight (E, C, p, p), and a Linear on F.patchify's tokens here, weight (E, C p p):
the same numbers, reshaped (functional/patches.py says why they compute the same).
"""
import json
import os
import re

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.nn.dit import DiT, DiTSettings
from tinyattn.nn.dit_checks import settings_fit
from tinyattn.nn.module import extends
from tinyattn.nn.pretrained import shown
from tinyattn.safetensors import load_safetensors, replaced_atomically, save_safetensors

CLASS_NAME = "DiTTransformer2DModel"
FIRST_CLASS_NAME = "Transformer2DModel"     # read as DiT with norm_type "ada_norm_zero"
WEIGHTS = "diffusion_pytorch_model.safetensors"
DIFFUSERS_VERSION = "0.42.1"        # the version that wrote and read the test fixture

# diffusers' DiTTransformer2DModel defaults: DiT-XL/2 (nn/dit.py's DIT_XL_2)
DEFAULTS = dict(num_attention_heads=16, attention_head_dim=72, in_channels=4, out_channels=None,
                num_layers=28, dropout=0.0, norm_num_groups=32, attention_bias=True,
                sample_size=32, patch_size=2, activation_fn="gelu-approximate",
                num_embeds_ada_norm=1000, upcast_attention=False, norm_type="ada_norm_zero",
                norm_elementwise_affine=False, norm_eps=1e-5)
# what the model computes, for each switch it refuses otherwise
COMPUTED = dict(norm_type="ada_norm_zero", norm_elementwise_affine=False,
                activation_fn="gelu-approximate", attention_bias=True, dropout=0.0)

EMB = "transformer_blocks.N.norm1.emb."
# tinyattn's name (N: the block)         diffusers' name
LAYOUT = [
    ("patch_embed.weight",                 "pos_embed.proj.weight"),
    ("patch_embed.bias",                   "pos_embed.proj.bias"),
    ("blocks.N.condition.time_in.weight",  EMB + "timestep_embedder.linear_1.weight"),
    ("blocks.N.condition.time_in.bias",    EMB + "timestep_embedder.linear_1.bias"),
    ("blocks.N.condition.time_out.weight", EMB + "timestep_embedder.linear_2.weight"),
    ("blocks.N.condition.time_out.bias",   EMB + "timestep_embedder.linear_2.bias"),
    ("blocks.N.condition.classes.weight",  EMB + "class_embedder.embedding_table.weight"),
    ("blocks.N.modulation.weight",         "transformer_blocks.N.norm1.linear.weight"),
    ("blocks.N.modulation.bias",           "transformer_blocks.N.norm1.linear.bias"),
    ("blocks.N.attn.q_proj.weight",        "transformer_blocks.N.attn1.to_q.weight"),
    ("blocks.N.attn.q_proj.bias",          "transformer_blocks.N.attn1.to_q.bias"),
    ("blocks.N.attn.k_proj.weight",        "transformer_blocks.N.attn1.to_k.weight"),
    ("blocks.N.attn.k_proj.bias",          "transformer_blocks.N.attn1.to_k.bias"),
    ("blocks.N.attn.v_proj.weight",        "transformer_blocks.N.attn1.to_v.weight"),
    ("blocks.N.attn.v_proj.bias",          "transformer_blocks.N.attn1.to_v.bias"),
    ("blocks.N.attn.out_proj.weight",      "transformer_blocks.N.attn1.to_out.0.weight"),
    ("blocks.N.attn.out_proj.bias",        "transformer_blocks.N.attn1.to_out.0.bias"),
    ("blocks.N.mlp.up.weight",             "transformer_blocks.N.ff.net.0.proj.weight"),
    ("blocks.N.mlp.up.bias",               "transformer_blocks.N.ff.net.0.proj.bias"),
    ("blocks.N.mlp.down.weight",           "transformer_blocks.N.ff.net.2.weight"),
    ("blocks.N.mlp.down.bias",             "transformer_blocks.N.ff.net.2.bias"),
    ("out_modulation.weight",              "proj_out_1.weight"),
    ("out_modulation.bias",                "proj_out_1.bias"),
    ("out.weight",                         "proj_out_2.weight"),
    ("out.bias",                           "proj_out_2.bias"),
]
PATCH_CONV = "pos_embed.proj.weight"


def checkpoint_names(model):
    """{tinyattn's name: diffusers'} for every parameter of `model`."""
    table = dict(LAYOUT)
    names = {}
    for ours in model.state_dict():
        block = re.match(r"blocks\.(\d+)\.", ours)
        theirs = table[re.sub(r"^blocks\.\d+\.", "blocks.N.", ours)]
        names[ours] = theirs.replace(".N.", f".{block.group(1)}.") if block else theirs
    return names


# ------------------------------------------------------------------------------------------------
# Reading

def model_folder(folder):
    """The folder holding the model: `folder`, or its transformer/ folder for a pipeline."""
    folder = model_folders.model_folder(folder)
    inner = os.path.join(folder, "transformer")
    if os.path.isfile(os.path.join(folder, "model_index.json")) and os.path.isdir(inner):
        folder = inner
    if not os.path.isfile(os.path.join(folder, "config.json")):
        raise FileNotFoundError(f"the folder {folder!r} has no config.json: a diffusers model "
                                f"folder holds config.json and {WEIGHTS}")
    return folder


def settings_from_config(config, folder):
    """The DiTSettings of a diffusers DiTTransformer2DModel config.json, its missing keys
    diffusers' defaults; a ValueError listing everything in it the model does not compute."""
    name = config.get("_class_name")
    if not (name == CLASS_NAME
            or name == FIRST_CLASS_NAME and config.get("norm_type") == "ada_norm_zero"):
        raise ValueError(f"the folder {folder!r}: config.json's _class_name is {name!r}, not "
                         f"{CLASS_NAME!r} (nor {FIRST_CLASS_NAME!r} with norm_type "
                         f"'ada_norm_zero', DiT's first name)")
    given = {**DEFAULTS, **config}
    refused = [f"{key} {given[key]!r} (implemented: {value!r})"
               for key, value in COMPUTED.items() if given[key] != value]
    if given["num_embeds_ada_norm"] is None:
        refused.append("num_embeds_ada_norm null (adaLN-Zero needs the number of classes)")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what DiT does not "
                         f"compute: {'; '.join(refused)}")
    channels = given["in_channels"]
    settings = DiTSettings(
        sample_size=given["sample_size"], patch_size=given["patch_size"], in_channels=channels,
        out_channels=channels if given["out_channels"] is None else given["out_channels"],
        num_layers=given["num_layers"], num_heads=given["num_attention_heads"],
        head_dim=given["attention_head_dim"], num_classes=given["num_embeds_ada_norm"],
        norm_eps=given["norm_eps"])
    try:                          # DiT's own door is not checked inside from_pretrained's
        settings_fit(None, settings)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the folder {folder!r}: config.json gives sizes DiT cannot run: "
                         f"{error}") from None
    return settings


def state_from_checkpoint(model, folder):
    """{tinyattn's name: array} of `model`'s parameters from the folder's weights, checked: each
    one there, of its parameter's shape, in floating point, and no other."""
    path = os.path.join(folder, WEIGHTS)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"the folder {folder!r} has config.json but no {WEIGHTS}")
    stored = dict(load_safetensors(path))
    if PATCH_CONV in stored:
        conv = stored[PATCH_CONV]
        stored[PATCH_CONV] = conv.reshape(conv.shape[0], -1)            # (E, C, p, p) -> (E, C p p)
    names = checkpoint_names(model)
    parameters = dict(model.named_parameters())
    missing = [theirs for theirs in names.values() if theirs not in stored]
    unexpected = [name for name in stored if name not in names.values()]
    if missing or unexpected:
        raise ValueError(f"the folder {folder!r}: {WEIGHTS} and config.json disagree: "
                         + "; ".join(f"{WEIGHTS} {what} {shown(found)}" for what, found in
                                     (("lacks", missing), ("also holds", unexpected)) if found))
    for ours, theirs in names.items():
        array = stored[theirs]
        if array.shape != parameters[ours].shape or array.dtype.kind != "f":
            raise ValueError(f"the folder {folder!r}: {WEIGHTS} holds {theirs} as {array.dtype} "
                             f"{array.shape}; this config's model has it "
                             f"{parameters[ours].shape}, in floating point")
    return {ours: stored[theirs] for ours, theirs in names.items()}


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The DiT of a diffusers folder (config.json with _class_name DiTTransformer2DModel, and
    diffusion_pytorch_model.safetensors; or a pipeline folder, from its transformer/ folder), in
    eval mode, its parameters of `dtype`. Its output is diffusers' on the same inputs. A folder
    that is not such a folder is a FileNotFoundError or ValueError naming it and what is wrong."""
    try:
        folder = model_folder(folder)
        config = model_folders.read_config(folder)
        model = DiT(settings_from_config(config, folder), dtype=dtype)
        model.load_state_dict(state_from_checkpoint(model, folder))
    except (OSError, ValueError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    model.config = config
    return model.eval()


# ------------------------------------------------------------------------------------------------
# Writing

def diffusers_config(model):
    """The config.json diffusers writes for `model`'s settings."""
    s = model.settings
    return {"_class_name": CLASS_NAME, "_diffusers_version": DIFFUSERS_VERSION,
            **DEFAULTS, "num_attention_heads": s.num_heads, "attention_head_dim": s.head_dim,
            "in_channels": s.in_channels, "out_channels": s.out_channels,
            "num_layers": s.num_layers, "sample_size": s.sample_size,
            "patch_size": s.patch_size, "num_embeds_ada_norm": s.num_classes,
            "norm_eps": s.norm_eps}


@extends(DiT)
def save_pretrained(self, folder):
    """Write config.json and diffusion_pytorch_model.safetensors of this model to `folder` (made
    if missing), in diffusers' layout, which `from_pretrained` and diffusers'
    `DiTTransformer2DModel.from_pretrained` read to the same numbers. Each file is written whole
    or not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(diffusers_config(self), indent=2) + "\n").encode("utf-8"))
    state = self.state_dict()
    weights = {theirs: state[ours] for ours, theirs in checkpoint_names(self).items()}
    p, C = self.settings.patch_size, self.settings.in_channels
    weights[PATCH_CONV] = weights[PATCH_CONV].reshape(-1, C, p, p)     # (E, C p p) -> (E, C, p, p)
    save_safetensors(os.path.join(folder, WEIGHTS), weights, {"format": "pt"})
