"""Chapter 6. Whisper's checkpoints: `from_pretrained(folder)` reads a folder in Hugging Face's
layout (config.json and model.safetensors, as transformers' WhisperForConditionalGeneration
saves it, openai/whisper-tiny's on the hub among them) into nn/whisper.py's Whisper, and
`model.save_pretrained(folder)` writes one back, which transformers reloads to the same logits.

config.json is read as transformers' WhisperConfig reads it: a key the file leaves out means
WhisperConfig's default (DEFAULTS, whisper-tiny's sizes). What the model does not compute is
refused by name, never approximated: an activation other than GELU ("gelu", erf), dropout,
LayerDrop or SpecAugment (all training-time, where tinyattn's Whisper drops nothing).
`scale_embedding` is read and ignored, as transformers 5 ignores it.

The weights' names (LAYOUT) are transformers'; the head, `proj_out.weight`, is the token embedding
(tie_word_embeddings) and is left out of the file, as transformers leaves it out.
"""
import json
import os
import re

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.nn.module import extends
from tinyattn.nn.pretrained import checked_state, read_stored_weights, shown
from tinyattn.nn.whisper import Whisper, WhisperSettings
from tinyattn.nn.whisper_checks import settings_fit
from tinyattn.safetensors import replaced_atomically, save_safetensors

# WhisperConfig's defaults, for the keys a config.json leaves out
DEFAULTS = dict(vocab_size=51865, num_mel_bins=80, encoder_layers=4, encoder_attention_heads=6,
                decoder_layers=4, decoder_attention_heads=6, decoder_ffn_dim=1536,
                encoder_ffn_dim=1536, d_model=384, max_source_positions=1500,
                max_target_positions=448, pad_token_id=50256, eos_token_id=50256,
                decoder_start_token_id=50257, activation_function="gelu",
                tie_word_embeddings=True, dropout=0.0, attention_dropout=0.0,
                activation_dropout=0.0, encoder_layerdrop=0.0, decoder_layerdrop=0.0,
                apply_spec_augment=False)
# WhisperSettings' name    config.json's
SETTINGS = {"vocab_size": "vocab_size", "num_mel_bins": "num_mel_bins", "d_model": "d_model",
            "encoder_layers": "encoder_layers", "encoder_heads": "encoder_attention_heads",
            "encoder_ffn_dim": "encoder_ffn_dim", "decoder_layers": "decoder_layers",
            "decoder_heads": "decoder_attention_heads", "decoder_ffn_dim": "decoder_ffn_dim",
            "max_source_positions": "max_source_positions",
            "max_target_positions": "max_target_positions"}
TOKENS = ("eos_token_id", "pad_token_id", "decoder_start_token_id")
TRAINING_ONLY = ("dropout", "attention_dropout", "activation_dropout", "encoder_layerdrop",
                 "decoder_layerdrop")

# tinyattn's name (N: the block)              the checkpoint's (WhisperForConditionalGeneration)
LAYOUT = [
    ("encoder.conv1.weight",                    "model.encoder.conv1.weight"),
    ("encoder.conv1.bias",                      "model.encoder.conv1.bias"),
    ("encoder.conv2.weight",                    "model.encoder.conv2.weight"),
    ("encoder.conv2.bias",                      "model.encoder.conv2.bias"),
    ("encoder.positions",                       "model.encoder.embed_positions.weight"),
    *[(f"encoder.blocks.N.{ours}", f"model.encoder.layers.N.{theirs}") for ours, theirs in (
        ("attn_norm.weight", "self_attn_layer_norm.weight"),
        ("attn_norm.bias", "self_attn_layer_norm.bias"),
        *[(f"attn.{p}", f"self_attn.{p}") for p in (
            "q_proj.weight", "q_proj.bias", "k_proj.weight", "v_proj.weight", "v_proj.bias",
            "out_proj.weight", "out_proj.bias")],
        ("mlp_norm.weight", "final_layer_norm.weight"), ("mlp_norm.bias", "final_layer_norm.bias"),
        ("fc1.weight", "fc1.weight"), ("fc1.bias", "fc1.bias"),
        ("fc2.weight", "fc2.weight"), ("fc2.bias", "fc2.bias"))],
    ("encoder.norm.weight",                     "model.encoder.layer_norm.weight"),
    ("encoder.norm.bias",                       "model.encoder.layer_norm.bias"),
    ("decoder.embed.weight",                    "model.decoder.embed_tokens.weight"),
    ("decoder.positions.weight",                "model.decoder.embed_positions.weight"),
    *[(f"decoder.blocks.N.{ours}", f"model.decoder.layers.N.{theirs}") for ours, theirs in (
        ("attn_norm.weight", "self_attn_layer_norm.weight"),
        ("attn_norm.bias", "self_attn_layer_norm.bias"),
        ("cross_norm.weight", "encoder_attn_layer_norm.weight"),
        ("cross_norm.bias", "encoder_attn_layer_norm.bias"),
        *[(f"{ours_attn}.{p}", f"{their_attn}.{p}")
          for ours_attn, their_attn in (("attn", "self_attn"), ("cross_attn", "encoder_attn"))
          for p in ("q_proj.weight", "q_proj.bias", "k_proj.weight", "v_proj.weight",
                    "v_proj.bias", "out_proj.weight", "out_proj.bias")],
        ("mlp_norm.weight", "final_layer_norm.weight"), ("mlp_norm.bias", "final_layer_norm.bias"),
        ("fc1.weight", "fc1.weight"), ("fc1.bias", "fc1.bias"),
        ("fc2.weight", "fc2.weight"), ("fc2.bias", "fc2.bias"))],
    ("decoder.norm.weight",                     "model.decoder.layer_norm.weight"),
    ("decoder.norm.bias",                       "model.decoder.layer_norm.bias"),
    ("decoder.head.weight",                     "proj_out.weight"),     # untied heads only
]


def checkpoint_names(model):
    """{tinyattn's name: the checkpoint's} for every parameter of `model` (a tied head is the
    embedding, listed once, so it has no proj_out.weight)."""
    table = dict(LAYOUT)
    names = {}
    for ours in model.state_dict():
        block = re.match(r"(encoder|decoder)\.blocks\.(\d+)\.", ours)
        pattern = re.sub(r"\.blocks\.\d+\.", ".blocks.N.", ours)
        theirs = table[pattern]
        names[ours] = theirs if block is None else theirs.replace(".N.", f".{block.group(2)}.")
    return names


# ------------------------------------------------------------------------------------------------
# Reading

def settings_from_config(config, folder):
    """The WhisperSettings of a Whisper config.json, read as transformers reads it; a ValueError
    naming everything in it the model does not compute."""
    if config.get("model_type") != "whisper":
        raise ValueError(f"the folder {folder!r}: config.json's model_type is "
                         f"{config.get('model_type')!r}, not 'whisper'")
    given = {**DEFAULTS, **config}
    refused = [f"{key} {given[key]} (tinyattn's Whisper drops nothing)" for key in TRAINING_ONLY
               if given[key]]
    if given["activation_function"] != "gelu":
        refused.append(f"activation_function {given['activation_function']!r} (Whisper's is "
                       f"'gelu', GELU as defined)")
    if given["apply_spec_augment"]:
        refused.append("apply_spec_augment (SpecAugment's masking in training)")
    missing = [key for key in SETTINGS.values() if not isinstance(given[key], int)
               or isinstance(given[key], bool)]
    if missing:
        refused.append(f"{', '.join(missing)} that are not integers")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what tinyattn's Whisper "
                         f"does not compute: {'; '.join(refused)}")
    settings = WhisperSettings(**{ours: given[theirs] for ours, theirs in SETTINGS.items()},
                               tied_head=bool(given["tie_word_embeddings"]),
                               **{key: given[key] for key in TOKENS})
    try:                          # the model's own door is not checked inside from_pretrained's
        settings_fit(None, settings)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the folder {folder!r}: config.json gives settings Whisper cannot "
                         f"run: {error}") from None
    return settings


def state_from_checkpoint(model, folder):
    """{tinyattn's name: array} of `model`'s parameters from the folder's weights, checked: each
    weight there, of its parameter's shape, in floating point, and no other (a tied head may be
    stored too, equal to the embedding)."""
    stored, source = read_stored_weights(folder)
    names = checkpoint_names(model)
    if model.settings.tied_head and "proj_out.weight" in stored:
        head = stored.pop("proj_out.weight")
        if not np.array_equal(head, stored.get("model.decoder.embed_tokens.weight")):
            raise ValueError(f"the folder {folder!r}: {source} holds a proj_out.weight other "
                             f"than the embedding, but config.json ties them "
                             f"(tie_word_embeddings)")
    return checked_state(stored, names, model, folder, source, "whisper")


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The Whisper of a folder in Hugging Face's layout (config.json, model.safetensors), in eval
    mode, its parameters of `dtype`; its logits are WhisperForConditionalGeneration's. The
    encoder's positions are read from the file (transformers stores them, in float32), not
    recomputed, so a float64 model computes what transformers' float64 model computes. A folder
    that is not such a folder is a FileNotFoundError or ValueError naming it and what is
    wrong."""
    try:
        folder = model_folders.model_folder(folder)
        config = model_folders.read_config(folder, "Whisper")
        model = Whisper(settings_from_config(config, folder), dtype=dtype)
        model.load_state_dict(state_from_checkpoint(model, folder))
    except (OSError, ValueError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    model.config = config
    return model.eval()


# ------------------------------------------------------------------------------------------------
# Writing

def whisper_config(model):
    """The config.json of `model` as transformers writes a WhisperConfig's."""
    s = model.settings
    config = {"architectures": ["WhisperForConditionalGeneration"], "model_type": "whisper",
              **{theirs: getattr(s, ours) for ours, theirs in SETTINGS.items()},
              "activation_function": "gelu", "tie_word_embeddings": s.tied_head,
              "scale_embedding": False, "apply_spec_augment": False,
              **{key: 0.0 for key in TRAINING_ONLY},
              **{key: getattr(s, key) for key in TOKENS},
              "is_encoder_decoder": True, "dtype": str(model.dtype)}
    read_from = model.config or {}
    config.update({key: read_from[key] for key in ("bos_token_id",) if key in read_from})
    return config


def layout_holds_it(self, folder):
    """Whisper.save_pretrained: every parameter has a name in transformers' layout (a LoRA
    adapter has none: merge_lora(model) folds adapters into plain Linear layers first)."""
    unnamed = [ours for ours in self.state_dict()
               if re.sub(r"\.blocks\.\d+\.", ".blocks.N.", ours) not in dict(LAYOUT)]
    if unnamed:
        raise ValueError(f"transformers' Whisper has no place for {shown(unnamed)} (merge_lora("
                         f"model) folds LoRA adapters into plain Linear layers; save_lora saves "
                         f"the adapters alone)")


@extends(Whisper)
@door(layout_holds_it)
def save_pretrained(self, folder):
    """Write config.json and model.safetensors of this model to `folder` (made if missing) in
    transformers' layout, which `from_pretrained` and transformers'
    `WhisperForConditionalGeneration.from_pretrained` read to the same logits. Each file is
    written whole or not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(whisper_config(self), indent=2) + "\n").encode("utf-8"))
    state = self.state_dict()
    weights = {theirs: state[ours] for ours, theirs in checkpoint_names(self).items()}
    # transformers reads a safetensors file only if its metadata names the format "pt"
    save_safetensors(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"})
