"""Chapter 3. GPT-2's checkpoint layout: how Hugging Face stores GPT-2, and how it maps onto
tinyattn's `CausalTransformer`; and the two methods this chapter gives the model, `from_pretrained`,
which reads it, and `save_pretrained`, which writes it (at the end of this file).

A GPT-2 folder holds `config.json` (the sizes) and `model.safetensors` (the weights; the tokenizer's
vocab.json and merges.txt sit beside them, read by `tinyattn.tokenizer`). A model too big for one
file is saved in shards instead, model-00001-of-0000N.safetensors and so on, with an index,
model.safetensors.index.json, that names each weight's shard: both are read. The model is a
CausalTransformer with learned positions, tanh GELU (F.gelu; GPT-2's config calls it "gelu_new"),
LayerNorms of eps `layer_norm_epsilon`, and an output head tied to the token embedding, without
bias: logits = ln_f(h) @ wte^T. Four things differ from tinyattn's layout:

1. Names: GPT-2's `h.0.ln_1.weight` is tinyattn's `blocks.0.ln1.weight`; LAYOUT lists them all.
   transformers saves them with the prefix `transformer.` (GPT2LMHeadModel's body is
   `self.transformer`), OpenAI's converted checkpoint without it: both are read.
2. Conv1D: GPT-2's projections are "Conv1D" layers (from the original TensorFlow code), which
   compute x @ W + b with W stored (in, out): the transpose of nn.Linear's (out, in).
3. c_attn: the query, key and value projections are one Conv1D of width 3E, side by side:
   columns [0, E) are the query's, [E, 2E) the key's, [2E, 3E) the value's.
4. The head: tied to wte, so it is not stored (a `lm_head.weight` equal to wte is accepted); with
   `tie_word_embeddings: false` in the config it is a weight of its own, `lm_head.weight`, of
   Linear's layout (vocab, E), without bias. (A tied head stops being tied when LoRA adapters on
   it are merged: then it is written this way.) The real checkpoint also stores each layer's
   causal mask as a buffer, `h.N.attn.bias` (and `attn.masked_bias`): a constant, not a weight,
   which tinyattn skips.
"""
import json
import os

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.nn import pretrained_checks
from tinyattn.nn.causal_transformer import CausalTransformer
from tinyattn.nn.module import Parameter, extends
from tinyattn.safetensors import load_safetensors, replaced_atomically, save_safetensors

# tinyattn's name (N: the block)    GPT-2's name (Hugging Face)  which third of c_attn, transposed
LAYOUT = [
    ("embed.weight",                  "wte.weight",                  None, False),
    ("positions.weight",              "wpe.weight",                  None, False),
    ("blocks.N.ln1.weight",           "h.N.ln_1.weight",             None, False),
    ("blocks.N.ln1.bias",             "h.N.ln_1.bias",               None, False),
    ("blocks.N.attn.q_proj.weight",   "h.N.attn.c_attn.weight",      0,    True),
    ("blocks.N.attn.q_proj.bias",     "h.N.attn.c_attn.bias",        0,    False),
    ("blocks.N.attn.k_proj.weight",   "h.N.attn.c_attn.weight",      1,    True),
    ("blocks.N.attn.k_proj.bias",     "h.N.attn.c_attn.bias",        1,    False),
    ("blocks.N.attn.v_proj.weight",   "h.N.attn.c_attn.weight",      2,    True),
    ("blocks.N.attn.v_proj.bias",     "h.N.attn.c_attn.bias",        2,    False),
    ("blocks.N.attn.out_proj.weight", "h.N.attn.c_proj.weight",      None, True),
    ("blocks.N.attn.out_proj.bias",   "h.N.attn.c_proj.bias",        None, False),
    ("blocks.N.ln2.weight",           "h.N.ln_2.weight",             None, False),
    ("blocks.N.ln2.bias",             "h.N.ln_2.bias",               None, False),
    ("blocks.N.ff.up.weight",         "h.N.mlp.c_fc.weight",         None, True),
    ("blocks.N.ff.up.bias",           "h.N.mlp.c_fc.bias",           None, False),
    ("blocks.N.ff.down.weight",       "h.N.mlp.c_proj.weight",       None, True),
    ("blocks.N.ff.down.bias",         "h.N.mlp.c_proj.bias",         None, False),
    ("ln.weight",                     "ln_f.weight",                 None, False),
    ("ln.bias",                       "ln_f.bias",                   None, False),
]
PREFIX = "transformer."
BUFFERS = (".attn.bias", ".attn.masked_bias")      # GPT-2's causal masks, not weights
SIZES = ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size")
TANH_GELU = ("gelu_new", "gelu_pytorch_tanh")       # transformers' names for F.gelu
ENDOFTEXT_ID = 50256                                # GPT-2's <|endoftext|>, its bos and eos
INDEX = "model.safetensors.index.json"              # the index of a sharded checkpoint


def layout(num_layers):
    """LAYOUT with N replaced by each block's number: [(tinyattn name, GPT-2 name, third,
    transposed)], in the order of LAYOUT, block after block."""
    rows = [row for row in LAYOUT if "N" not in row[0]]
    per_block = [row for row in LAYOUT if "N" in row[0]]
    blocks = [(ours.replace("N", str(n), 1), theirs.replace("N", str(n), 1), third, transposed)
              for n in range(num_layers) for ours, theirs, third, transposed in per_block]
    return rows[:2] + blocks + rows[2:]


# ------------------------------------------------------------------------------------------------
# Reading

def read_gpt2(folder):
    """(settings for CausalTransformer, state dict of tinyattn's names) from a GPT-2 folder; a
    FileNotFoundError or ValueError naming the folder and what is wrong with it."""
    folder = model_folders.model_folder(folder)
    config = read_config(folder)
    settings = settings_from_config(config, folder)
    weights = read_weights(folder, config)
    state = {}
    for ours, theirs, third, transposed in layout(config["n_layer"]):
        array = weights[theirs]
        if third is not None:
            array = np.split(array, 3, axis=-1)[third]      # (E, 3E) -> (E, E); (3E,) -> (E,)
        state[ours] = array.T if transposed else array      # Conv1D (in, out) -> Linear (out, in)
    if "lm_head.weight" in weights:                          # a head of its own, not tied
        state["head.weight"] = weights["lm_head.weight"]
    return settings, state


def read_config(folder):
    """config.json as a dict, with the sizes a GPT-2 must have."""
    config = model_folders.read_config(folder, "GPT-2", " (`python -m tinyattn download gpt2` "
                                                        "fetches GPT-2 small)")
    missing = [key for key in SIZES if key not in config]
    if missing:
        raise ValueError(f"the folder {folder!r}: config.json has no {', '.join(missing)}: it "
                         f"is not a GPT-2 config (GPT-2's has {', '.join(SIZES)})")
    bad = [key for key in SIZES if type(config[key]) is not int or config[key] < 1]
    if bad:
        raise ValueError(f"the folder {folder!r}: config.json's "
                         + ", ".join(f"{key} is {config[key]!r}" for key in bad)
                         + "; sizes must be integers of at least 1")
    return config


def settings_from_config(config, folder):
    """The CausalTransformer arguments of a GPT-2 config, or a ValueError for a config that asks
    for what this model does not do."""
    refused = []
    if config.get("model_type", "gpt2") != "gpt2":
        refused.append(f"model_type {config['model_type']!r} (not 'gpt2')")
    if config.get("activation_function", "gelu_new") not in TANH_GELU:
        refused.append(f"activation_function {config['activation_function']!r} (F.gelu is the "
                       f"tanh form: {' or '.join(TANH_GELU)})")
    for option in ("scale_attn_by_inverse_layer_idx", "add_cross_attention"):
        if config.get(option, False):
            refused.append(f"{option} true")
    if config["n_embd"] % config["n_head"]:
        refused.append(f"n_embd {config['n_embd']} not divisible by n_head {config['n_head']}")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what "
                         f"CausalTransformer does not do: {'; '.join(refused)}")
    return dict(vocab_size=config["vocab_size"], embed_dim=config["n_embd"],
                num_heads=config["n_head"], num_layers=config["n_layer"],
                max_len=config["n_positions"], hidden_dim=config.get("n_inner"),
                layer_norm_eps=config.get("layer_norm_epsilon", 1e-5),
                scale=None if config.get("scale_attn_weights", True) else 1.0,
                positional="learned", tied_head=True)


def expected_shapes(config):
    """{GPT-2 name: shape} of the weights a config's model has (Conv1D weights (in, out))."""
    E, inner = config["n_embd"], config.get("n_inner") or 4 * config["n_embd"]
    shapes = {"wte.weight": (config["vocab_size"], E), "wpe.weight": (config["n_positions"], E)}
    for n in range(config["n_layer"]):
        for name, shape in {"ln_1.weight": (E,), "ln_1.bias": (E,), "ln_2.weight": (E,),
                            "ln_2.bias": (E,), "attn.c_attn.weight": (E, 3 * E),
                            "attn.c_attn.bias": (3 * E,), "attn.c_proj.weight": (E, E),
                            "attn.c_proj.bias": (E,), "mlp.c_fc.weight": (E, inner),
                            "mlp.c_fc.bias": (inner,), "mlp.c_proj.weight": (inner, E),
                            "mlp.c_proj.bias": (E,)}.items():
            shapes[f"h.{n}.{name}"] = shape
    shapes.update({"ln_f.weight": (E,), "ln_f.bias": (E,)})
    return shapes


def read_weights(folder, config):
    """{GPT-2 name, without the prefix: array} from model.safetensors (or a sharded checkpoint),
    checked against the config: every weight there, of the config's shape, in floating point, and
    no other."""
    stored, source = read_stored_weights(folder)
    weights = {name.removeprefix(PREFIX): array for name, array in stored.items()
               if not name.endswith(BUFFERS)}
    head = weights.pop("lm_head.weight", None)
    tied = config.get("tie_word_embeddings", True)
    expected = expected_shapes(config)
    missing = [name for name in expected if name not in weights]
    unexpected = [name for name in weights if name not in expected]
    disagree = f"the folder {folder!r}: {source} and config.json disagree"
    sizes = ", ".join(f"{key} {config[key]}" for key in SIZES)
    if missing or unexpected:
        raise ValueError(f"{disagree}: for a GPT-2 of {sizes}, {source} "
                         + "; ".join(f"{what} {shown(names)}" for what, names in
                                     (("lacks", missing), ("also holds", unexpected)) if names))
    for name, shape in expected.items():
        if weights[name].shape != shape:
            raise ValueError(f"{disagree}: for a GPT-2 of {sizes}, {name} would be {shape}, but "
                             f"{source} holds {weights[name].shape}")
        if weights[name].dtype.kind != "f":
            raise ValueError(f"the folder {folder!r}: {source} holds {name} as "
                             f"{weights[name].dtype}, not floating point")
    if tied and head is not None and not np.array_equal(head, weights["wte.weight"]):
        raise ValueError(f"the folder {folder!r}: {source} holds an lm_head.weight other than "
                         f"wte.weight, but config.json ties the head to the embedding "
                         f"(tie_word_embeddings is not false)")
    if not tied:
        if head is None or head.shape != expected["wte.weight"]:
            raise ValueError(f"the folder {folder!r}: config.json unties the head "
                             f"(tie_word_embeddings false), so {source} must hold lm_head.weight "
                             f"{expected['wte.weight']}; it holds "
                             f"{'none' if head is None else head.shape}")
        weights["lm_head.weight"] = head
    return weights


def read_stored_weights(folder):
    """({name as stored: array}, what holds them, for messages) of a folder's weights: the file
    model.safetensors, or else a sharded checkpoint, as Hugging Face saves a model too big for one
    file: shards model-00001-of-0000N.safetensors, ..., and model.safetensors.index.json, whose
    "weight_map" gives each weight's shard. Each weight is taken from the shard the index names."""
    single = os.path.join(folder, "model.safetensors")
    if os.path.isfile(single):
        return load_safetensors(single), "model.safetensors"
    if not os.path.isfile(os.path.join(folder, INDEX)):
        raise FileNotFoundError(f"the folder {folder!r} has config.json but no model.safetensors "
                                f"(the weights), nor the {INDEX} of a sharded checkpoint")
    weight_map = read_shard_index(folder)
    stored = {}
    for shard in sorted(set(weight_map.values())):
        path = os.path.join(folder, shard)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"the folder {folder!r}: {INDEX} lists the shard {shard}, "
                                    f"which is not in the folder")
        arrays = load_safetensors(path)
        for name in (name for name, listed_in in weight_map.items() if listed_in == shard):
            if name not in arrays:
                raise ValueError(f"the folder {folder!r}: {INDEX} lists {name} in {shard}, which "
                                 f"does not hold it")
            stored[name] = arrays[name]
    return stored, f"the sharded checkpoint ({INDEX})"


def read_shard_index(folder):
    """The "weight_map" of model.safetensors.index.json, {weight name: shard file name}, checked:
    each shard a file name in the folder (not a path that leads elsewhere)."""
    try:
        with open(os.path.join(folder, INDEX), encoding="utf-8") as file:
            index = json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the folder {folder!r}: {INDEX} is not valid JSON ({error})") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(shard, str)
                                                   for shard in weight_map.values()):
        raise ValueError(f"the folder {folder!r}: {INDEX} must hold a \"weight_map\" of weight "
                         f"names to shard file names (Hugging Face's index of a sharded "
                         f"checkpoint)")
    for shard in weight_map.values():
        if os.path.basename(shard) != shard:
            raise ValueError(f"the folder {folder!r}: {INDEX} names the shard {shard!r}, which "
                             f"is not a file name in the folder")
    return weight_map


def checked_state(stored, names, model, folder, source, config_kind):
    """{tinyattn's name: array} of `model`'s parameters from a checkpoint's weights `stored` {name
    as stored: array}, by `names` {tinyattn's name: name as stored}, checked: each weight there, of
    its parameter's shape, in floating point, and no other. A ValueError names the folder, `source`
    (the file), what disagrees and the config ("for this T5 config": `config_kind` "T5")."""
    parameters = dict(model.named_parameters())
    missing = [theirs for theirs in names.values() if theirs not in stored]
    unexpected = [name for name in stored if name not in names.values()]
    if missing or unexpected:
        raise ValueError(f"the folder {folder!r}: {source} and config.json disagree: for this "
                         f"{config_kind} config, {source} "
                         + "; ".join(f"{what} {shown(found)}" for what, found in
                                     (("lacks", missing), ("also holds", unexpected)) if found))
    for ours, theirs in names.items():
        array = stored[theirs]
        if array.shape != parameters[ours].shape or array.dtype.kind != "f":
            raise ValueError(f"the folder {folder!r}: {source} holds {theirs} as {array.dtype} "
                             f"{array.shape}; this config's model has it {parameters[ours].shape},"
                             f" in floating point")
    return {ours: stored[theirs] for ours, theirs in names.items()}


def shown(names, most=4):
    """'a, b, c, d and 6 more'."""
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


# ------------------------------------------------------------------------------------------------
# Writing

def gpt2_config(model):
    """The config.json of a GPT-2-shaped CausalTransformer, as transformers writes GPT-2's.

    GPT-2 begins and ends texts with one token, <|endoftext|> (id 50256): its bos and eos ids. A
    smaller vocabulary has no such id, so they are null there: left out, transformers would take
    GPT-2's 50256 and warn that it is outside the vocabulary."""
    attention = model.blocks[0].attn
    hidden_dim = model.blocks[0].ff.up.out_features
    endoftext = ENDOFTEXT_ID if ENDOFTEXT_ID < model.embed.num_embeddings else None
    return {"architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
            "vocab_size": model.embed.num_embeddings, "n_positions": model.max_len,
            "n_embd": attention.embed_dim, "n_layer": len(model.blocks),
            "n_head": attention.num_heads,
            "n_inner": None if hidden_dim == 4 * attention.embed_dim else hidden_dim,
            "activation_function": "gelu_new", "layer_norm_epsilon": model.ln.eps,
            "scale_attn_weights": attention.scale is None,
            "tie_word_embeddings": model.head.weight is model.embed.weight,
            # tinyattn drops attention weights and each residual branch, never the embeddings
            "attn_pdrop": attention.dropout, "resid_pdrop": attention.dropout, "embd_pdrop": 0.0,
            "bos_token_id": endoftext, "eos_token_id": endoftext, "dtype": str(model.dtype)}


def gpt2_weights(model):
    """{GPT-2 name with transformers' prefix: array} of a GPT-2-shaped CausalTransformer: LAYOUT
    the other way, the thirds of c_attn put side by side again."""
    state = model.state_dict()
    parts = {}
    for ours, theirs, third, transposed in layout(len(model.blocks)):
        parts.setdefault(theirs, []).append(state[ours].T if transposed else state[ours])
    weights = {PREFIX + name: np.ascontiguousarray(np.concatenate(arrays, axis=-1))
               for name, arrays in parts.items()}
    if model.head.weight is not model.embed.weight:            # untied: a weight of its own
        weights["lm_head.weight"] = state["head.weight"]
    return weights


def write_gpt2(folder, model):
    """config.json and model.safetensors of `model` in `folder` (made if missing), each written
    whole or not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(gpt2_config(model), indent=2) + "\n").encode("utf-8"))
    # transformers reads a safetensors file only if its metadata names the format "pt"
    save_safetensors(os.path.join(folder, "model.safetensors"), gpt2_weights(model),
                     {"format": "pt"})


# ------------------------------------------------------------------------------------------------
# The methods this chapter adds to CausalTransformer

@extends(CausalTransformer)
@classmethod
@door(dtype=floating_dtype)
def from_pretrained(cls, folder, dtype=np.float32):
    """GPT-2 from a folder in Hugging Face's layout (config.json and model.safetensors, as
    `python -m tinyattn download gpt2` fetches them, or as transformers' `save_pretrained` writes
    them; or the shards a model.safetensors.index.json lists), in eval mode, its parameters of
    `dtype`. A folder that is not such a folder (a file
    missing, a config asking for what this model does not do, weights that disagree with the
    config) is a FileNotFoundError or ValueError naming the folder and what is wrong."""
    try:
        settings, state = read_gpt2(folder)
    except (OSError, ValueError) as error:
        raise type(error)(f"CausalTransformer.from_pretrained: {error}") from None
    model = cls(**settings, dtype=dtype)
    if "head.weight" in state:          # tie_word_embeddings false: the head has its own weight
        model.head.weight = Parameter(state["head.weight"].astype(dtype))
    model.load_state_dict(state)
    return model.eval()


@extends(CausalTransformer)
@door(pretrained_checks.gpt2_shaped)
def save_pretrained(self, folder):
    """Write config.json and model.safetensors of this model to `folder` (made if missing) in
    GPT-2's layout, which `from_pretrained` and transformers' `GPT2LMHeadModel.from_pretrained`
    read: a model trained here runs there. Only a GPT-2-shaped model fits that layout (learned
    positions, a head without bias, the default scale or none, GPT-2's layers alone, nothing
    attached to their hook points): anything else is refused before a file is written, naming
    what the layout cannot hold, rather than saved without it. A head that is not the token
    embedding (untied, as merging LoRA adapters on a tied head leaves it) is written as
    lm_head.weight with tie_word_embeddings false. Each file is written whole or not at all."""
    write_gpt2(folder, self)
