"""Chapter 6. BART's and Marian's checkpoints: `from_pretrained(folder)` reads a folder in
Hugging Face's layout whose config.json says model_type "bart" (facebook/bart-base,
bart-large-cnn) or "marian" (Helsinki-NLP/opus-mt-*) into nn/bart.py's Bart or Marian, and
`save_pretrained(folder)` writes one back.

The hub's names (LAYOUT) are BartForConditionalGeneration's and MarianMTModel's, one layout:
`model.` then the stack, `layers.N.`, the attention's q_proj, k_proj, v_proj and out_proj (the
cross-attention is `encoder_attn`), the feed-forward's fc1 and fc2, the norms after each
sublayer self_attn_layer_norm, encoder_attn_layer_norm and final_layer_norm; BART's learned
positions are embed_positions (2 rows more than max_position_embeddings) and its embedding norm
layernorm_embedding; `final_logits_bias` (1, vocab) is at the top. Marian's sinusoids are not
stored (older files that hold them, every file's copies of the embedding in encoder.embed_tokens
and decoder.embed_tokens, and fairseq's encoder.version, are skipped, as transformers skips
them); the head is the embedding unless the file holds an lm_head.weight that differs.

config.json is read with BartConfig's or MarianConfig's defaults for a missing key (bart-large's
and opus-mt's sizes). Refused by name: an activation other than GELU and SiLU ("gelu", "swish",
"silu"), Marian's separate decoder vocabulary (share_encoder_decoder_embeddings false), several
eos ids, different head counts that do not divide d_model. The generation settings the hub's
configs carry (forced_bos_token_id, forced_eos_token_id, no_repeat_ngram_size, num_beams,
min_length) are rules of transformers' `generate`, not of the model: `generate` here applies
none of them, and they are not read.
"""
import json
import os
import re

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.extends import extends
from tinyattn.nn.bart import Bart, BartSettings, Marian
from tinyattn.nn.bart_checks import ACTIVATION_NAMES, settings_fit
from tinyattn.nn.pretrained import checked_state, read_stored_weights
from tinyattn.safetensors import replaced_atomically, save_safetensors

SUBLAYERS = [("attn.q", "self_attn.q_proj"), ("attn.k", "self_attn.k_proj"),
             ("attn.v", "self_attn.v_proj"), ("attn.o", "self_attn.out_proj"),
             ("attn_norm", "self_attn_layer_norm"),
             ("cross_attn.q", "encoder_attn.q_proj"), ("cross_attn.k", "encoder_attn.k_proj"),
             ("cross_attn.v", "encoder_attn.v_proj"), ("cross_attn.o", "encoder_attn.out_proj"),
             ("cross_norm", "encoder_attn_layer_norm"),
             ("mlp.up", "fc1"), ("mlp.down", "fc2"), ("mlp_norm", "final_layer_norm")]
# tinyattn's name (N: the block)          the checkpoint's name
LAYOUT = [
    ("final_logits_bias",                   "final_logits_bias"),
    ("shared.weight",                       "model.shared.weight"),
    ("head.weight",                         "lm_head.weight"),
    *[(f"{stack}_positions.weight",         f"model.{stack}.embed_positions.weight")
      for stack in ("encoder", "decoder")],
    *[(f"{stack}_positions.norm.{part}",    f"model.{stack}.layernorm_embedding.{part}")
      for stack in ("encoder", "decoder") for part in ("weight", "bias")],
    *[(f"{stack}.N.{ours}.{part}",          f"model.{stack}.layers.N.{theirs}.{part}")
      for stack in ("encoder", "decoder") for ours, theirs in SUBLAYERS
      for part in ("weight", "bias")],
]
COPIES = re.compile(r"^model\.(encoder|decoder)\.embed_tokens\.weight$"       # of shared
                    r"|^model\.(encoder|decoder)\.version$")             # fairseq's leftovers
SINUSOIDS = re.compile(r"^model\.(encoder|decoder)\.embed_positions\.weight$")  # Marian's
DEFAULTS = {
    "bart": dict(vocab_size=50265, d_model=1024, encoder_layers=12, decoder_layers=12,
                 encoder_attention_heads=16, decoder_attention_heads=16, encoder_ffn_dim=4096,
                 decoder_ffn_dim=4096, max_position_embeddings=1024,
                 activation_function="gelu", scale_embedding=False, pad_token_id=1,
                 eos_token_id=2, decoder_start_token_id=2),
    "marian": dict(vocab_size=58101, d_model=1024, encoder_layers=12, decoder_layers=12,
                   encoder_attention_heads=16, decoder_attention_heads=16,
                   encoder_ffn_dim=4096, decoder_ffn_dim=4096, max_position_embeddings=1024,
                   activation_function="gelu", scale_embedding=False, pad_token_id=58100,
                   eos_token_id=0, decoder_start_token_id=58100),
}
MODELS = {"bart": Bart, "marian": Marian}


def checkpoint_names(model):
    """{tinyattn's name: the checkpoint's} for every parameter of `model` (a tied head is the
    embedding, listed once: no lm_head.weight)."""
    table = dict(LAYOUT)
    names = {}
    for ours in model.state_dict():
        block = re.match(r"(encoder|decoder)\.(\d+)\.", ours)
        pattern = ours if block is None else re.sub(r"^(\w+)\.\d+\.", r"\1.N.", ours)
        theirs = table[pattern]
        names[ours] = theirs if block is None else theirs.replace(".N.", f".{block.group(2)}.")
    return names


def settings_from_config(config, folder, stored):
    """The BartSettings of a BART or Marian config.json, read as transformers reads it."""
    family = config.get("model_type")
    if family not in DEFAULTS:
        raise ValueError(f"the folder {folder!r}: config.json's model_type {family!r} is not "
                         f"'bart' or 'marian'")
    given = {**DEFAULTS[family], **{key: value for key, value in config.items()
                                    if value is not None}}
    refused = []
    if given["activation_function"] not in ACTIVATION_NAMES:
        refused.append(f"activation_function {given['activation_function']!r} (implemented: "
                       f"{', '.join(map(repr, ACTIVATION_NAMES))})")
    if family == "marian" and (not given.get("share_encoder_decoder_embeddings", True) or given.get(
            "decoder_vocab_size", given["vocab_size"]) != given["vocab_size"]):
        refused.append("share_encoder_decoder_embeddings false (a decoder vocabulary of its "
                       "own)")
    if not isinstance(given["eos_token_id"], int):
        refused.append(f"eos_token_id {given['eos_token_id']!r} (one eos id)")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what {family} here does "
                         f"not compute: {'; '.join(refused)}")
    head = stored.get("lm_head.weight")
    tied = head is None or ("model.shared.weight" in stored
                            and np.array_equal(head, stored["model.shared.weight"]))
    settings = BartSettings(**{key: given[key] for key in DEFAULTS[family]},
                            tied_head=bool(tied), model_type=family)
    try:
        settings_fit(None, settings)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the folder {folder!r}: config.json gives settings the model cannot "
                         f"run: {error}") from None
    return settings


def state_from_checkpoint(model, folder, stored, source):
    """{tinyattn's name: array} of `model`'s parameters from the stored weights, checked."""
    names = checkpoint_names(model)
    if model.settings.tied_head:
        stored.pop("lm_head.weight", None)
    return checked_state(stored, names, model, folder, source, model.settings.model_type)


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The Bart or Marian of a folder in Hugging Face's layout (config.json with model_type
    "bart" or "marian", and model.safetensors or shards with their index), in eval mode, its
    parameters of `dtype`. Its logits are transformers' BartForConditionalGeneration's or
    MarianMTModel's. A folder that is not such a folder is a FileNotFoundError or ValueError
    naming the folder and what is wrong."""
    try:
        folder = model_folders.model_folder(folder)
        config = model_folders.read_config(folder)
        stored, source = read_stored_weights(folder)
        settings = settings_from_config(config, folder, stored)
        stored = {name: array for name, array in stored.items() if not COPIES.search(name)
                  and not (settings.model_type == "marian" and SINUSOIDS.search(name))}
        model = MODELS[settings.model_type](settings, dtype=dtype)
        model.load_state_dict(state_from_checkpoint(model, folder, stored, source))
    except (OSError, ValueError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    model.config = config
    return model.eval()


def bart_config(model):
    """config.json of `model`, as transformers 5 writes BART's or Marian's, with no forced
    tokens (forced_bos_token_id, forced_eos_token_id: generate's rules, not the model's)."""
    s = model.settings
    read_from = model.config or {}
    config = {"architectures": ["BartForConditionalGeneration" if s.model_type == "bart"
                                else "MarianMTModel"],
              "model_type": s.model_type,
              **{key: getattr(s, key) for key in DEFAULTS[s.model_type]},
              "tie_word_embeddings": True, "is_encoder_decoder": True,
              "forced_bos_token_id": None, "forced_eos_token_id": None,
              "dropout": read_from.get("dropout", 0.1), "dtype": str(model.dtype)}
    if s.model_type == "marian":
        config.update(share_encoder_decoder_embeddings=True, decoder_vocab_size=s.vocab_size)
    return config


def save_pretrained(self, folder):
    """Write config.json and model.safetensors of this model to `folder` (made if missing)
    with the hub's names, which `from_pretrained` and transformers read to the same logits;
    the head as lm_head.weight when it is its own. Each file is written whole or not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(bart_config(self), indent=2) + "\n").encode("utf-8"))
    state = self.state_dict()
    weights = {theirs: state[ours] for ours, theirs in checkpoint_names(self).items()}
    # transformers reads a safetensors file only if its metadata names the format "pt"
    save_safetensors(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"})


extends(Bart)(save_pretrained)          # Marian inherits it
