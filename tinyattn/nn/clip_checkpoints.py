"""Chapter 6. CLIP's checkpoints: `from_pretrained(folder)` reads a CLIP folder in Hugging Face's
layout (config.json with model_type "clip", model.safetensors: transformers' CLIPModel, e.g.
openai/clip-vit-base-patch32) as nn/clip.py's CLIP, and `model.save_pretrained(folder)` writes one
back, which transformers reads to the same numbers.

config.json holds the two towers' configs, "vision_config" and "text_config", beside
"projection_dim"; each is read as transformers' CLIPVisionConfig and CLIPTextConfig read it, their
defaults (DEFAULTS, ViT-B/32's) standing in for a missing key. What the model does not compute is
refused by name: an activation other than quick-GELU, dropout, patches or images that are not
square, several end-of-text ids, another architecture (the towers alone, CLIPTextModel,
CLIPVisionModel..., are read by none of this). transformers can interpolate the positions for
images of another size; this model takes its config's size only.

The weights' names (LAYOUT): tinyattn's blocks are chapter 1's TransformerBlocks, so a
CLIPEncoderLayer's layer_norm1 is ln1, mlp.fc1 ff.up; the same table serves both towers, under
"vision_model." and "text_model.". One weight changes shape on the way: the patch embedding is a
Conv2d in the file, (E, C, p, p), and a Linear here, (E, C p p): the same numbers, read in the same
order (nn/vit.py says why they are one map). The learned temperature, logit_scale, is a number
of shape () in both.
"""
import json
import os
import re

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.nn.clip import CLIP
from tinyattn.nn.module import extends
from tinyattn.nn.pretrained import read_stored_weights, shown
from tinyattn.safetensors import replaced_atomically, save_safetensors

# transformers' CLIPVisionConfig and CLIPTextConfig defaults: OpenAI's ViT-B/32
DEFAULTS = {
    "vision_config": dict(hidden_size=768, intermediate_size=3072, num_hidden_layers=12,
                          num_attention_heads=12, num_channels=3, image_size=224, patch_size=32,
                          hidden_act="quick_gelu", layer_norm_eps=1e-5, attention_dropout=0.0),
    "text_config": dict(vocab_size=49408, hidden_size=512, intermediate_size=2048,
                        num_hidden_layers=12, num_attention_heads=8, max_position_embeddings=77,
                        hidden_act="quick_gelu", layer_norm_eps=1e-5, attention_dropout=0.0,
                        pad_token_id=1, bos_token_id=49406, eos_token_id=49407),
}
PROJECTION_DIM, LOGIT_SCALE = 512, 2.6592          # CLIPConfig's projection_dim, its t at start
ARCHITECTURES = ("CLIPModel",)

# tinyattn's name (N: the block)        the checkpoint's
LAYOUT = [
    ("vision.patch_embed.weight",       "vision_model.embeddings.patch_embedding.weight"),
    ("vision.class_embedding",          "vision_model.embeddings.class_embedding"),
    ("vision.positions",                "vision_model.embeddings.position_embedding.weight"),
    ("vision.pre_ln.weight",            "vision_model.pre_layrnorm.weight"),
    ("vision.pre_ln.bias",              "vision_model.pre_layrnorm.bias"),
    ("vision.post_ln.weight",           "vision_model.post_layernorm.weight"),
    ("vision.post_ln.bias",             "vision_model.post_layernorm.bias"),
    ("text.token_embed.weight",         "text_model.embeddings.token_embedding.weight"),
    ("text.positions",                  "text_model.embeddings.position_embedding.weight"),
    ("text.final_ln.weight",            "text_model.final_layer_norm.weight"),
    ("text.final_ln.bias",              "text_model.final_layer_norm.bias"),
    ("visual_projection.weight",        "visual_projection.weight"),
    ("text_projection.weight",          "text_projection.weight"),
    ("logit_scale",                     "logit_scale"),
]
# in either tower: tinyattn's "<tower>.blocks.N." + name, the checkpoint's "<tower>_model.encoder
# .layers.N." + name
BLOCK = [
    ("ln1.weight",           "layer_norm1.weight"),
    ("ln1.bias",             "layer_norm1.bias"),
    ("attn.q_proj.weight",   "self_attn.q_proj.weight"),
    ("attn.q_proj.bias",     "self_attn.q_proj.bias"),
    ("attn.k_proj.weight",   "self_attn.k_proj.weight"),
    ("attn.k_proj.bias",     "self_attn.k_proj.bias"),
    ("attn.v_proj.weight",   "self_attn.v_proj.weight"),
    ("attn.v_proj.bias",     "self_attn.v_proj.bias"),
    ("attn.out_proj.weight", "self_attn.out_proj.weight"),
    ("attn.out_proj.bias",   "self_attn.out_proj.bias"),
    ("ln2.weight",           "layer_norm2.weight"),
    ("ln2.bias",             "layer_norm2.bias"),
    ("ff.up.weight",         "mlp.fc1.weight"),
    ("ff.up.bias",           "mlp.fc1.bias"),
    ("ff.down.weight",       "mlp.fc2.weight"),
    ("ff.down.bias",         "mlp.fc2.bias"),
]


def checkpoint_names(model):
    """{tinyattn's name: the checkpoint's} for every parameter of `model`."""
    names, table, block_table = {}, dict(LAYOUT), dict(BLOCK)
    for ours in model.state_dict():
        block = re.match(r"(vision|text)\.blocks\.(\d+)\.(.*)", ours)
        if block is None:
            names[ours] = table[ours]
        else:
            tower, number, rest = block.groups()
            names[ours] = f"{tower}_model.encoder.layers.{number}.{block_table[rest]}"
    return names


# ------------------------------------------------------------------------------------------------
# Reading

def single_size(value):
    """An int for a size given as one number or as equal (height, width); None otherwise."""
    if np.ndim(value) == 1 and len(set(value)) == 1:
        value = value[0]
    return value if isinstance(value, int) else None


def arguments_from_config(config, folder):
    """CLIP's keyword arguments from a config.json, read as transformers reads it; a ValueError
    listing everything in it that the model does not compute."""
    refused = []
    if config.get("model_type") != "clip":
        refused.append(f"model_type {config.get('model_type')!r} (this reader's is 'clip')")
    unknown = [name for name in config.get("architectures") or [] if name not in ARCHITECTURES]
    if unknown:
        refused.append(f"architectures {unknown} (read: {', '.join(ARCHITECTURES)})")
    towers = {key: {**DEFAULTS[key], **(config.get(key) or {})} for key in DEFAULTS}
    for key, tower in towers.items():
        if tower["hidden_act"] != "quick_gelu":
            refused.append(f"{key}.hidden_act {tower['hidden_act']!r} (computed: 'quick_gelu')")
        if tower["attention_dropout"]:
            refused.append(f"{key}.attention_dropout {tower['attention_dropout']} (this CLIP "
                           f"has no dropout)")
    vision, text = towers["vision_config"], towers["text_config"]
    for key in ("image_size", "patch_size"):
        if single_size(vision[key]) is None:
            refused.append(f"vision_config.{key} {vision[key]!r} (square: one size)")
    if not isinstance(text["eos_token_id"], int):
        refused.append(f"text_config.eos_token_id {text['eos_token_id']!r} (one id)")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what CLIP does not "
                         f"compute: {'; '.join(refused)}")
    return dict(
        vision=dict(image_size=single_size(vision["image_size"]),
                    patch_size=single_size(vision["patch_size"]),
                    num_channels=vision["num_channels"], embed_dim=vision["hidden_size"],
                    num_heads=vision["num_attention_heads"],
                    num_layers=vision["num_hidden_layers"], hidden_dim=vision["intermediate_size"],
                    layer_norm_eps=vision["layer_norm_eps"]),
        text=dict(vocab_size=text["vocab_size"], max_positions=text["max_position_embeddings"],
                  embed_dim=text["hidden_size"], num_heads=text["num_attention_heads"],
                  num_layers=text["num_hidden_layers"], hidden_dim=text["intermediate_size"],
                  eos_token_id=text["eos_token_id"], layer_norm_eps=text["layer_norm_eps"]),
        projection_dim=config.get("projection_dim", PROJECTION_DIM),
        logit_scale=config.get("logit_scale_init_value", LOGIT_SCALE))


def state_from_checkpoint(model, stored, source, folder):
    """{tinyattn's name: array} of `model`'s parameters from the stored weights, checked: each
    there, of its parameter's shape (the patch embedding's as a Conv2d), in floating point, and
    no other."""
    names = checkpoint_names(model)
    parameters = dict(model.named_parameters())
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
        if ours == "vision.patch_embed.weight" and array.ndim == 4:
            array = array.reshape(array.shape[0], -1)       # Conv2d (E, C, p, p) -> (E, C p p)
        if array.shape != shape or array.dtype.kind != "f":
            raise ValueError(f"the folder {folder!r}: {source} holds {theirs} as "
                             f"{stored[theirs].dtype} {stored[theirs].shape}; this config's "
                             f"model has it {shape}, in floating point")
        state[ours] = array
    return state


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The CLIP of a folder in Hugging Face's layout (config.json with model_type "clip" and
    model.safetensors, or shards and their index), in eval mode, its parameters of `dtype`: its
    features, logits and loss are transformers' CLIPModel's. A folder that is not such a folder
    is a FileNotFoundError or ValueError naming the folder and what is wrong."""
    try:
        folder = model_folders.model_folder(folder)
        config = model_folders.read_config(folder)
        stored, source = read_stored_weights(folder)
        model = CLIP(**arguments_from_config(config, folder), dtype=dtype)
        model.load_state_dict(state_from_checkpoint(model, stored, source, folder))
    except (OSError, ValueError, TypeError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    model.config = config
    return model.eval()


# ------------------------------------------------------------------------------------------------
# Writing

def tower_config(tower, block):
    """The keys both towers' configs share, as transformers writes them."""
    return {"hidden_size": block.embed_dim, "intermediate_size": block.ff.up.out_features,
            "num_hidden_layers": len(tower.blocks), "num_attention_heads": block.attn.num_heads,
            "hidden_act": "quick_gelu", "layer_norm_eps": block.ln1.eps, "attention_dropout": 0.0}


def clip_config(model):
    """The config.json of `model` as transformers writes a CLIPModel's; the text's pad and bos
    ids come from the config it was read from, where there was one (CLIP's otherwise)."""
    vision, text = model.vision, model.text
    read_from = (getattr(model, "config", None) or {}).get("text_config") or {}
    defaults = DEFAULTS["text_config"]
    return {"architectures": ["CLIPModel"], "model_type": "clip",
            "projection_dim": model.visual_projection.out_features,
            "logit_scale_init_value": float(model.logit_scale.data),
            "vision_config": {**tower_config(vision, vision.blocks[0]),
                              "image_size": vision.image_size, "patch_size": vision.patch_size,
                              "num_channels": vision.num_channels,
                              "model_type": "clip_vision_model"},
            "text_config": {**tower_config(text, text.blocks[0]),
                            "vocab_size": text.token_embed.num_embeddings,
                            "max_position_embeddings": text.max_positions,
                            "eos_token_id": text.eos_token_id,
                            **{key: read_from.get(key, defaults[key])
                               for key in ("pad_token_id", "bos_token_id")},
                            "model_type": "clip_text_model"},
            "dtype": str(model.dtype)}


@extends(CLIP)
def save_pretrained(self, folder):
    """Write config.json and model.safetensors of this CLIP to `folder` (made if missing) in
    transformers' CLIPModel layout, which `from_pretrained` and transformers read to the same
    numbers. Each file is written whole or not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(clip_config(self), indent=2) + "\n").encode("utf-8"))
    state = self.state_dict()
    vision = self.vision
    E, C, p = vision.post_ln.normalized_shape[0], vision.num_channels, vision.patch_size
    state["vision.patch_embed.weight"] = state["vision.patch_embed.weight"].reshape(E, C, p, p)
    weights = {theirs: state[ours] for ours, theirs in checkpoint_names(self).items()}
    # transformers reads a safetensors file only if its metadata names the format "pt"
    save_safetensors(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"})
