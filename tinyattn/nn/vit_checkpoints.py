"""Chapter 6. ViT's checkpoints: `from_pretrained(folder)` reads a Vision Transformer folder in
Hugging Face's layout (config.json with model_type "vit", model.safetensors) as nn/vit.py's ViT,
and `model.save_pretrained(folder)` writes one back, which transformers reads to the same
numbers.

Two kinds of folder hold a ViT:

    ViTForImageClassification   the model and its classifier: weights named vit.embeddings...,
                                vit.encoder..., vit.layernorm and classifier; config.json's
                                id2label names the labels (kept in model.config, and written back)
    ViTModel                    the model alone (google/vit-base-patch16-224-in21k): the same
                                names without "vit.", and a pooler (a Linear and tanh on the class
                                token, which no ViT classifier reads; not read here, and not
                                written back). Read as a ViT without head: `model.features` is
                                all it computes, and `model(pixel_values)` says so

config.json is read as transformers' ViTConfig reads it, its defaults (DEFAULTS, ViT-B/16's)
standing in for a missing key. What the model does not compute is refused by name: an activation
other than GELU (exact, or its tanh form), dropout, patches that are not square, another
architecture (ViTForMaskedImageModeling, the one reader of encoder_stride). transformers can
interpolate the positions for images of another size; this model takes its config's size only.

The weights' names (LAYOUT): tinyattn's blocks are chapter 1's TransformerBlocks, so ViTLayer's
layernorm_before is ln1, attention.attention.query q_proj, intermediate.dense ff.up. One weight
changes shape on the way: the patch embedding is a Conv2d in the file, (E, C, p, p), and a Linear
here, (E, C p p): the same numbers, read in the same order (nn/vit.py says why they are one map).
"""
import json
import os
import re

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.nn.module import extends
from tinyattn.nn.pretrained import read_stored_weights, shown
from tinyattn.nn.vit import ViT
from tinyattn.safetensors import replaced_atomically, save_safetensors

# transformers' ViTConfig defaults: ViT-B/16 at 224 x 224
DEFAULTS = dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                intermediate_size=3072, hidden_act="gelu", hidden_dropout_prob=0.0,
                attention_probs_dropout_prob=0.0, layer_norm_eps=1e-12, image_size=224,
                patch_size=16, num_channels=3, qkv_bias=True, encoder_stride=16)
ACTIVATIONS = {"gelu": "gelu", "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}
ARCHITECTURES = ("ViTForImageClassification", "ViTModel")

# tinyattn's name (N: the block)    the checkpoint's, after "vit." (ViTModel: as it is)
LAYOUT = [
    ("patch_embed.weight",            "embeddings.patch_embeddings.projection.weight"),
    ("patch_embed.bias",              "embeddings.patch_embeddings.projection.bias"),
    ("cls_token",                     "embeddings.cls_token"),
    ("positions",                     "embeddings.position_embeddings"),
    ("blocks.N.ln1.weight",           "encoder.layer.N.layernorm_before.weight"),
    ("blocks.N.ln1.bias",             "encoder.layer.N.layernorm_before.bias"),
    ("blocks.N.attn.q_proj.weight",   "encoder.layer.N.attention.attention.query.weight"),
    ("blocks.N.attn.q_proj.bias",     "encoder.layer.N.attention.attention.query.bias"),
    ("blocks.N.attn.k_proj.weight",   "encoder.layer.N.attention.attention.key.weight"),
    ("blocks.N.attn.k_proj.bias",     "encoder.layer.N.attention.attention.key.bias"),
    ("blocks.N.attn.v_proj.weight",   "encoder.layer.N.attention.attention.value.weight"),
    ("blocks.N.attn.v_proj.bias",     "encoder.layer.N.attention.attention.value.bias"),
    ("blocks.N.attn.out_proj.weight", "encoder.layer.N.attention.output.dense.weight"),
    ("blocks.N.attn.out_proj.bias",   "encoder.layer.N.attention.output.dense.bias"),
    ("blocks.N.ln2.weight",           "encoder.layer.N.layernorm_after.weight"),
    ("blocks.N.ln2.bias",             "encoder.layer.N.layernorm_after.bias"),
    ("blocks.N.ff.up.weight",         "encoder.layer.N.intermediate.dense.weight"),
    ("blocks.N.ff.up.bias",           "encoder.layer.N.intermediate.dense.bias"),
    ("blocks.N.ff.down.weight",       "encoder.layer.N.output.dense.weight"),
    ("blocks.N.ff.down.bias",         "encoder.layer.N.output.dense.bias"),
    ("ln.weight",                     "layernorm.weight"),
    ("ln.bias",                       "layernorm.bias"),
]
HEAD = [("head.weight", "classifier.weight"), ("head.bias", "classifier.bias")]
POOLER = ("pooler.dense.weight", "pooler.dense.bias")      # a ViTModel's, not read


def checkpoint_names(model):
    """{tinyattn's name: the checkpoint's} for every parameter of `model`: a model with a head in
    ViTForImageClassification's layout, one without in ViTModel's."""
    prefix = "" if model.head is None else "vit."
    table = {ours: prefix + theirs for ours, theirs in LAYOUT}
    table.update(HEAD)
    names = {}
    for ours in model.state_dict():
        block = re.match(r"blocks\.(\d+)\.", ours)
        theirs = table[re.sub(r"^blocks\.\d+\.", "blocks.N.", ours)]
        names[ours] = theirs if block is None else theirs.replace(".N.", f".{block.group(1)}.")
    return names


# ------------------------------------------------------------------------------------------------
# Reading

def arguments_from_config(config, folder, has_head):
    """ViT's keyword arguments from a config.json, read as transformers reads it; a ValueError
    listing everything in it that the model does not compute."""
    given = {**DEFAULTS, **config}
    refused = []
    if given["model_type"] != "vit":
        refused.append(f"model_type {given['model_type']!r} (this reader's is 'vit')")
    architectures = given.get("architectures") or []
    unknown = [name for name in architectures if name not in ARCHITECTURES]
    if unknown:
        refused.append(f"architectures {unknown} (read: {', '.join(ARCHITECTURES)})")
    if given["hidden_act"] not in ACTIVATIONS:
        refused.append(f"hidden_act {given['hidden_act']!r} (computed: "
                       f"{', '.join(map(repr, ACTIVATIONS))})")
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if given[key]:
            refused.append(f"{key} {given[key]} (this ViT has no dropout)")
    patch = given["patch_size"]
    if np.ndim(patch) == 1 and len(set(patch)) == 1:
        patch = patch[0]
    if not isinstance(patch, int):
        refused.append(f"patch_size {given['patch_size']!r} (square patches: one size)")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what ViT does not "
                         f"compute: {'; '.join(refused)}")
    labels = len(given.get("id2label") or {}) or given.get("num_labels", 2)
    return dict(image_size=tuple(given["image_size"]) if np.ndim(given["image_size"])
                else given["image_size"], patch_size=patch, num_channels=given["num_channels"],
                embed_dim=given["hidden_size"], num_heads=given["num_attention_heads"],
                num_layers=given["num_hidden_layers"], hidden_dim=given["intermediate_size"],
                num_labels=labels if has_head else None, qkv_bias=bool(given["qkv_bias"]),
                layer_norm_eps=given["layer_norm_eps"], activation=ACTIVATIONS[given["hidden_act"]])


def state_from_checkpoint(model, stored, source, folder):
    """{tinyattn's name: array} of `model`'s parameters from the stored weights, checked: each
    there, of its parameter's shape (the patch embedding's as a Conv2d), in floating point, and
    no other (but a ViTModel's pooler)."""
    names = checkpoint_names(model)
    parameters = dict(model.named_parameters())
    stored = {name: array for name, array in stored.items() if name not in POOLER}
    missing = [theirs for theirs in names.values() if theirs not in stored]
    unexpected = [name for name in stored if name not in names.values()]
    if missing or unexpected:
        raise ValueError(f"the folder {folder!r}: {source} and config.json disagree: for this "
                         f"config, {source} " + "; ".join(
                             f"{what} {shown(found)}" for what, found in
                             (("lacks", missing), ("also holds", unexpected)) if found))
    state = {}
    for ours, theirs in names.items():
        array, shape = stored[theirs], parameters[ours].shape
        if ours == "patch_embed.weight" and array.ndim == 4:
            array = array.reshape(array.shape[0], -1)       # Conv2d (E, C, p, p) -> (E, C p p)
        if array.shape != shape or array.dtype.kind != "f":
            raise ValueError(f"the folder {folder!r}: {source} holds {theirs} as "
                             f"{stored[theirs].dtype} {stored[theirs].shape}; this config's "
                             f"model has it {shape}, in floating point")
        state[ours] = array
    return state


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The ViT of a folder in Hugging Face's layout (config.json with model_type "vit" and
    model.safetensors, or shards and their index), in eval mode, its parameters of `dtype`: with
    a head for a ViTForImageClassification checkpoint (its logits are transformers'), without one
    for a bare ViTModel (its features are transformers' last_hidden_state). A folder that is not
    such a folder is a FileNotFoundError or ValueError naming the folder and what is wrong."""
    try:
        folder = model_folders.model_folder(folder)
        config = model_folders.read_config(folder)
        stored, source = read_stored_weights(folder)
        has_head = "classifier.weight" in stored
        model = ViT(**arguments_from_config({"model_type": None, **config}, folder, has_head),
                    dtype=dtype)
        model.load_state_dict(state_from_checkpoint(model, stored, source, folder))
    except (OSError, ValueError, TypeError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    model.config = config
    return model.eval()


# ------------------------------------------------------------------------------------------------
# Writing

def vit_config(model):
    """The config.json of `model` as transformers writes a ViT's; the labels' names and
    encoder_stride come from the config it was read from, where there was one."""
    block = model.blocks[0]
    read_from = getattr(model, "config", None) or {}
    height, width = model.image_size
    config = {"architectures": ["ViTModel" if model.head is None
                                else "ViTForImageClassification"],
              "model_type": "vit", "hidden_size": block.embed_dim,
              "num_hidden_layers": len(model.blocks), "num_attention_heads": block.attn.num_heads,
              "intermediate_size": block.ff.up.out_features,
              "hidden_act": "gelu" if block.ff.approximate == "none" else "gelu_pytorch_tanh",
              "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0,
              "layer_norm_eps": model.ln.eps, "image_size": height if height == width
              else [height, width], "patch_size": model.patch_size,
              "num_channels": model.num_channels,
              "qkv_bias": block.attn.q_proj.bias is not None,
              "encoder_stride": read_from.get("encoder_stride", model.patch_size),
              "dtype": str(model.dtype)}
    if model.head is not None:
        labels = read_from.get("id2label")
        if labels is None or len(labels) != model.head.out_features:
            labels = {str(i): f"LABEL_{i}" for i in range(model.head.out_features)}
        config.update(id2label=labels, label2id={name: int(i) for i, name in labels.items()})
    return config


@extends(ViT)
def save_pretrained(self, folder):
    """Write config.json and model.safetensors of this ViT to `folder` (made if missing) in
    transformers' layout: ViTForImageClassification's with a head, ViTModel's without, which
    `from_pretrained` and transformers read to the same numbers. Each file is written whole or
    not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(vit_config(self), indent=2) + "\n").encode("utf-8"))
    state = self.state_dict()
    E, C, p = self.blocks[0].embed_dim, self.num_channels, self.patch_size
    state["patch_embed.weight"] = state["patch_embed.weight"].reshape(E, C, p, p)   # a Conv2d's
    weights = {theirs: state[ours] for ours, theirs in checkpoint_names(self).items()}
    # transformers reads a safetensors file only if its metadata names the format "pt"
    save_safetensors(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"})
