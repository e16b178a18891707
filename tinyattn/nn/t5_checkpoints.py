"""Chapter 6. T5's checkpoints: `from_pretrained(folder)` reads a T5 folder in Hugging Face's
layout (config.json and model.safetensors, as t5-small, flan-t5 and the T5 v1.1 models hold
them) into nn/t5.py's T5, and `T5.save_pretrained(folder)` writes one back.

The hub's names (LAYOUT) number each block's sublayers: layer.0 is the self-attention, layer.1
the cross-attention in a decoder block and the feed-forward in an encoder block, layer.2 the
decoder's feed-forward. The relative position table is stored on block 0 of each stack (whose
self-attention computes the bias every block shares); the ReLU feed-forward's matrices are wi
and wo, the gated one's wi_0 (through the GELU), wi_1 and wo.

config.json is read as transformers 5 reads it; a key it leaves out means T5Config's default
(t5-small's sizes). Two keys decide the head:

    scale_decoder_outputs   the decoder's output times d_model^-0.5 before the head: the key
                            when the file has it (transformers 5 writes it), else
                            tie_word_embeddings, unless false (T5 v1.1's configs say false:
                            no scaling)
    lm_head.weight          the head, when the weights hold one that is not the embedding
                            (T5 v1.1's); else the head is the embedding table (transformers 5
                            ties them whatever tie_word_embeddings says)

Older files also hold encoder.embed_tokens.weight and decoder.embed_tokens.weight (copies of
shared.weight) and a relative table on the decoder's first cross-attention, which nothing uses;
all are skipped, as transformers skips them. What T5 here does not compute is refused by name: a
feed-forward other than "relu" and "gated-gelu", several eos ids, a decoder-only config.
"""
import json
import os
import re

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.extends import extends
from tinyattn.nn.pretrained import checked_state, read_stored_weights
from tinyattn.nn.t5 import T5, T5Settings
from tinyattn.nn.t5_checks import FEED_FORWARDS
from tinyattn.safetensors import replaced_atomically, save_safetensors

# tinyattn's name (N: the block)         the checkpoint's name (T5ForConditionalGeneration's)
LAYOUT = [
    ("shared.weight",                      "shared.weight"),
    ("encoder_positions.weight",
     "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
    ("encoder.N.attn_norm.weight",         "encoder.block.N.layer.0.layer_norm.weight"),
    *[(f"encoder.N.attn.{m}.weight",       f"encoder.block.N.layer.0.SelfAttention.{m}.weight")
      for m in "qkvo"],
    ("encoder.N.mlp_norm.weight",          "encoder.block.N.layer.1.layer_norm.weight"),
    ("encoder.N.mlp.up.weight",            "encoder.block.N.layer.1.DenseReluDense.wi.weight"),
    ("encoder.N.mlp.down.weight",          "encoder.block.N.layer.1.DenseReluDense.wo.weight"),
    ("encoder_norm.weight",                "encoder.final_layer_norm.weight"),
    ("decoder_positions.weight",
     "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight"),
    ("decoder.N.attn_norm.weight",         "decoder.block.N.layer.0.layer_norm.weight"),
    *[(f"decoder.N.attn.{m}.weight",       f"decoder.block.N.layer.0.SelfAttention.{m}.weight")
      for m in "qkvo"],
    ("decoder.N.cross_norm.weight",        "decoder.block.N.layer.1.layer_norm.weight"),
    *[(f"decoder.N.cross_attn.{m}.weight", f"decoder.block.N.layer.1.EncDecAttention.{m}.weight")
      for m in "qkvo"],
    ("decoder.N.mlp_norm.weight",          "decoder.block.N.layer.2.layer_norm.weight"),
    ("decoder.N.mlp.up.weight",            "decoder.block.N.layer.2.DenseReluDense.wi.weight"),
    ("decoder.N.mlp.down.weight",          "decoder.block.N.layer.2.DenseReluDense.wo.weight"),
    ("decoder_norm.weight",                "decoder.final_layer_norm.weight"),
    ("head.weight",                        "lm_head.weight"),
]
# T5 v1.1's gated feed-forward: GatedFeedForward's gate (through the GELU) is wi_0, up is wi_1
GATED_LAYOUT = {f"{stack}.N.mlp.{ours}.weight":
                f"{stack}.block.N.layer.{layer}.DenseReluDense.{theirs}.weight"
                for stack, layer in (("encoder", 1), ("decoder", 2))
                for ours, theirs in (("gate", "wi_0"), ("up", "wi_1"))}
SKIPPED = re.compile(r"(encoder|decoder)\.embed_tokens\.weight$"
                     r"|decoder\.block\.0\.layer\.1\.EncDecAttention\.relative_attention_bias")
DEFAULTS = dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                num_decoder_layers=None, num_heads=8, relative_attention_num_buckets=32,
                relative_attention_max_distance=128, layer_norm_epsilon=1e-6,
                feed_forward_proj="relu", pad_token_id=0, eos_token_id=1,
                decoder_start_token_id=None, is_encoder_decoder=True)


def checkpoint_names(model):
    """{tinyattn's name: the checkpoint's} for every parameter of `model` (a tied head is the
    embedding, listed once: no lm_head.weight)."""
    table = dict(LAYOUT)
    if model.settings.feed_forward_proj == "gated-gelu":
        table.update(GATED_LAYOUT)
    names = {}
    for ours in model.state_dict():
        block = re.match(r"(encoder|decoder)\.(\d+)\.", ours)
        pattern = ours if block is None else re.sub(r"^(\w+)\.\d+\.", r"\1.N.", ours)
        theirs = table[pattern]
        names[ours] = theirs if block is None else theirs.replace(".N.", f".{block.group(2)}.")
    return names


# ------------------------------------------------------------------------------------------------
# Reading

def settings_from_config(config, folder, stored):
    """The T5Settings of a T5 config.json, read as transformers reads it (see the top of this
    file); `stored` (the weights' names and arrays) says whether the head is tied."""
    given = {**DEFAULTS, **{key: value for key, value in config.items() if value is not None
                            or key == "decoder_start_token_id"}}
    refused = []
    if given.get("model_type") != "t5":
        refused.append(f"model_type {given.get('model_type')!r} (this reader reads 't5')")
    if given["feed_forward_proj"] not in FEED_FORWARDS:
        refused.append(f"feed_forward_proj {given['feed_forward_proj']!r} (implemented: "
                       f"{', '.join(map(repr, FEED_FORWARDS))})")
    if not isinstance(given["eos_token_id"], int):
        refused.append(f"eos_token_id {given['eos_token_id']!r} (one eos id)")
    if not given["is_encoder_decoder"]:
        refused.append("is_encoder_decoder false (an encoder or decoder alone)")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what T5 does not "
                         f"compute: {'; '.join(refused)}")
    scale = given.get("scale_decoder_outputs", given.get("tie_word_embeddings", True) is not False)
    head = stored.get("lm_head.weight")
    tied = head is None or ("shared.weight" in stored and np.array_equal(head,
                                                                         stored["shared.weight"]))
    start = given["decoder_start_token_id"]
    return T5Settings(
        vocab_size=given["vocab_size"], d_model=given["d_model"], d_kv=given["d_kv"],
        d_ff=given["d_ff"], num_layers=given["num_layers"],
        num_decoder_layers=given["num_decoder_layers"] or given["num_layers"],
        num_heads=given["num_heads"],
        relative_attention_num_buckets=given["relative_attention_num_buckets"],
        relative_attention_max_distance=given["relative_attention_max_distance"],
        layer_norm_epsilon=given["layer_norm_epsilon"],
        feed_forward_proj=given["feed_forward_proj"], scale_decoder_outputs=bool(scale),
        tied_head=bool(tied), pad_token_id=given["pad_token_id"],
        eos_token_id=given["eos_token_id"],
        decoder_start_token_id=given["pad_token_id"] if start is None else start)


def state_from_checkpoint(model, folder, stored, source):
    """{tinyattn's name: array} of `model`'s parameters from the stored weights, checked: each
    weight there, of its parameter's shape, in floating point, and no other."""
    names = checkpoint_names(model)
    if model.settings.tied_head:
        stored.pop("lm_head.weight", None)          # equal to shared.weight: settings said so
    return checked_state(stored, names, model, folder, source, "T5")


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The T5 of a folder in Hugging Face's layout (config.json with model_type "t5", and
    model.safetensors or shards with their index), in eval mode, its parameters of `dtype`.
    Its logits are transformers' T5ForConditionalGeneration's. A folder that is not such a
    folder is a FileNotFoundError or ValueError naming the folder and what is wrong."""
    try:
        folder = model_folders.model_folder(folder)
        config = model_folders.read_config(folder)
        stored, source = read_stored_weights(folder)
        stored = {name: array for name, array in stored.items() if not SKIPPED.search(name)}
        model = T5(settings_from_config(config, folder, stored), dtype=dtype)
        model.load_state_dict(state_from_checkpoint(model, folder, stored, source))
    except (OSError, ValueError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    model.config = config
    return model.eval()


# ------------------------------------------------------------------------------------------------
# Writing

def t5_config(model):
    """config.json of `model`, as transformers 5 writes T5's, which transformers 4 reads too
    (tie_word_embeddings says what both scale_decoder_outputs and, in transformers 4, tying
    mean)."""
    s = model.settings
    read_from = model.config or {}
    return {"architectures": ["T5ForConditionalGeneration"], "model_type": "t5",
            "vocab_size": s.vocab_size, "d_model": s.d_model, "d_kv": s.d_kv, "d_ff": s.d_ff,
            "num_layers": s.num_layers, "num_decoder_layers": s.num_decoder_layers,
            "num_heads": s.num_heads,
            "relative_attention_num_buckets": s.relative_attention_num_buckets,
            "relative_attention_max_distance": s.relative_attention_max_distance,
            "layer_norm_epsilon": s.layer_norm_epsilon,
            "feed_forward_proj": s.feed_forward_proj, "is_encoder_decoder": True,
            "scale_decoder_outputs": s.scale_decoder_outputs,
            "tie_word_embeddings": s.scale_decoder_outputs,
            "dropout_rate": read_from.get("dropout_rate", 0.1),
            "decoder_start_token_id": s.decoder_start_token_id,
            "pad_token_id": s.pad_token_id, "eos_token_id": s.eos_token_id,
            "dtype": str(model.dtype)}


@extends(T5)
def save_pretrained(self, folder):
    """Write config.json and model.safetensors of this T5 to `folder` (made if missing) with
    the hub's names, which `from_pretrained` and transformers' T5ForConditionalGeneration read
    to the same logits. The head is written as lm_head.weight when it is its own, or when the
    config does not scale (so that transformers 4, which unties it then, reads it too). Each
    file is written whole or not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    config = t5_config(self)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(config, indent=2) + "\n").encode("utf-8"))
    state = self.state_dict()
    weights = {theirs: state[ours] for ours, theirs in checkpoint_names(self).items()}
    if not config["tie_word_embeddings"]:
        weights.setdefault("lm_head.weight", state["shared.weight"])
    # transformers reads a safetensors file only if its metadata names the format "pt"
    save_safetensors(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"})
