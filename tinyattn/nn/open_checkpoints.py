"""Chapter 5. Today's checkpoints: `nn.from_pretrained(folder)` reads a model folder of any family
of this chapter (or GPT-2's, chapter 3) and `save_pretrained` writes one back.

A folder in Hugging Face's layout holds config.json and model.safetensors (or shards and their
index, read as chapter 3 reads them). config.json's `model_type` names the family:

    gpt2                             chapter 3's CausalTransformer.from_pretrained
    llama, mistral, qwen2            Llama, Mistral, Qwen2 (nn/llama.py)
    qwen3                            Qwen3 (nn/qwen3.py)
    gemma3_text                      Gemma3 (nn/gemma3.py)
    qwen3_moe                        Qwen3Moe (nn/qwen3_moe.py)
    deepseek_v3                      DeepseekV3 (nn/deepseek_v3.py)

each built from the DecoderSettings (nn/open_decoder.py) read from config.json as transformers
reads it (MODELS is that table).

Two things make reading a config more than copying numbers:

1. Each family's code fixes some switches whatever its config says (FIXED: Qwen3 always norms
   its queries and keys, Qwen2 always has q, k, v biases, Gemma always scales its embedding), and
   a key the file leaves out means the family's default in transformers (DEFAULTS: a Mistral
   config without sliding_window slides with a window of 4096, a Qwen3 one without head_dim has
   head_dim 128). Switches mean what transformers makes them mean: Qwen2's and Qwen3's
   sliding_window counts only with use_sliding_window, and then on the layers from
   max_window_layers on (or as layer_types says); Mistral's applies to every layer; Gemma 3's to
   the layers layer_types (or sliding_window_pattern) marks "sliding_attention"; Qwen3-MoE's
   to every layer (its code has no max_window_layers). Qwen3-MoE's experts are on the layers
   not in mlp_only_layers whose number plus one decoder_sparse_step divides; DeepSeek-V3's on
   the layers from first_k_dense_replace on.
2. Two layouts of the rotary settings: the hub's (`rope_theta`, `rope_scaling`,
   `rope_local_base_freq` for Gemma 3's local layers) and transformers 5's (`rope_parameters`,
   per layer type for Gemma 3: "full_attention", "sliding_attention"). Both are read;
   `rope_scaling` wins over `rope_parameters`, as in transformers.

What the decoder does not compute is refused by name, never approximated: another model_type,
an activation other than SiLU or tanh-GELU, a rope_type other than default, linear or llama3
(YaRN, dynamic, longrope: DeepSeek-V3's own config asks for YaRN, and for FP8 weights), a
partial rotary, attention softcapping, bidirectional attention, dropout, a quantized checkpoint,
DeepSeek key/value heads other than its heads.

The weights' names (LAYOUT) are transformers' LlamaForCausalLM's, shared by every family here,
with one trap: Llama calls the norm before its feed-forward `post_attention_layernorm` (it comes
after the attention); Gemma 3, which has a norm on the attention's output as well, gives that one
the name and calls the feed-forward's `pre_feedforward_layernorm`. Experts are stored one by one
(mlp.experts.E.gate_proj, as on the hub and as transformers 5 writes them); DeepSeek's latent
attention has names of its own (nn/latent_attention.py says which weight is which), and its
q_a_layernorm is where QK-norm's q_norm would be (LATENT_LAYOUT).
"""
import json
import os
import re

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.functional.rotate_half_checks import SCALING_KEYS
from tinyattn.nn import open_checkpoints_checks as checks
from tinyattn.nn.causal_transformer import CausalTransformer
from tinyattn.nn.families import (ACTIVATIONS, ARCHITECTURES, DEFAULTS, FAMILIES, FIXED,
                                  LAYER_TYPES, ROUTERS, SIZES, THEIR_ACTIVATION, THETA)
from tinyattn.nn.deepseek_v3 import DeepseekV3
from tinyattn.nn.gemma3 import Gemma3
from tinyattn.nn.latent_attention import LatentSettings
from tinyattn.nn.llama import Llama, Mistral, Qwen2
from tinyattn.nn.module import extends
from tinyattn.nn.open_decoder import DecoderSettings, OpenDecoder
from tinyattn.nn.open_decoder_checks import settings_fit
from tinyattn.nn.pretrained import checked_state, read_stored_weights
from tinyattn.nn.qwen3 import Qwen3
from tinyattn.nn.qwen3_moe import Qwen3Moe
from tinyattn.nn.routed_experts import ExpertSettings
from tinyattn.safetensors import replaced_atomically, save_safetensors

# model_type -> the model on its family's page
MODELS = {"llama": Llama, "mistral": Mistral, "qwen2": Qwen2, "qwen3": Qwen3,
          "gemma3_text": Gemma3, "qwen3_moe": Qwen3Moe, "deepseek_v3": DeepseekV3}
KEPT = ("bos_token_id", "eos_token_id", "pad_token_id", "max_position_embeddings")

# tinyattn's name (N: the block)    the checkpoint's name (transformers' ...ForCausalLM)
LAYOUT = [
    ("embed.weight",                  "model.embed_tokens.weight"),
    ("blocks.N.attn_norm.weight",     "model.layers.N.input_layernorm.weight"),
    ("blocks.N.attn.q_proj.weight",   "model.layers.N.self_attn.q_proj.weight"),
    ("blocks.N.attn.q_proj.bias",     "model.layers.N.self_attn.q_proj.bias"),
    ("blocks.N.attn.k_proj.weight",   "model.layers.N.self_attn.k_proj.weight"),
    ("blocks.N.attn.k_proj.bias",     "model.layers.N.self_attn.k_proj.bias"),
    ("blocks.N.attn.v_proj.weight",   "model.layers.N.self_attn.v_proj.weight"),
    ("blocks.N.attn.v_proj.bias",     "model.layers.N.self_attn.v_proj.bias"),
    ("blocks.N.attn.out_proj.weight", "model.layers.N.self_attn.o_proj.weight"),
    ("blocks.N.attn.out_proj.bias",   "model.layers.N.self_attn.o_proj.bias"),
    ("blocks.N.attn.q_norm.weight",   "model.layers.N.self_attn.q_norm.weight"),
    ("blocks.N.attn.k_norm.weight",   "model.layers.N.self_attn.k_norm.weight"),
    # the trap (see the top of this file): Gemma 3's norm of the attention's output, and the norm
    # before the feed-forward in every other family; Gemma 3's is in SANDWICH_LAYOUT below
    ("blocks.N.attn_out_norm.weight", "model.layers.N.post_attention_layernorm.weight"),
    ("blocks.N.mlp_norm.weight",      "model.layers.N.post_attention_layernorm.weight"),
    ("blocks.N.mlp.gate.weight",      "model.layers.N.mlp.gate_proj.weight"),
    ("blocks.N.mlp.gate.bias",        "model.layers.N.mlp.gate_proj.bias"),
    ("blocks.N.mlp.up.weight",        "model.layers.N.mlp.up_proj.weight"),
    ("blocks.N.mlp.up.bias",          "model.layers.N.mlp.up_proj.bias"),
    ("blocks.N.mlp.down.weight",      "model.layers.N.mlp.down_proj.weight"),
    ("blocks.N.mlp.down.bias",        "model.layers.N.mlp.down_proj.bias"),
    ("blocks.N.mlp_out_norm.weight",  "model.layers.N.post_feedforward_layernorm.weight"),
    ("norm.weight",                   "model.norm.weight"),
    ("head.weight",                   "lm_head.weight"),
    # DeepSeek's latent attention (nn/latent_attention.py)
    ("blocks.N.attn.q_down.weight",   "model.layers.N.self_attn.q_a_proj.weight"),
    ("blocks.N.attn.q_down.bias",     "model.layers.N.self_attn.q_a_proj.bias"),
    ("blocks.N.attn.q_up.weight",     "model.layers.N.self_attn.q_b_proj.weight"),
    ("blocks.N.attn.kv_down.weight",  "model.layers.N.self_attn.kv_a_proj_with_mqa.weight"),
    ("blocks.N.attn.kv_down.bias",    "model.layers.N.self_attn.kv_a_proj_with_mqa.bias"),
    ("blocks.N.attn.kv_norm.weight",  "model.layers.N.self_attn.kv_a_layernorm.weight"),
    ("blocks.N.attn.kv_up.weight",    "model.layers.N.self_attn.kv_b_proj.weight"),
    # routed experts (nn/routed_experts.py), E: the expert
    ("blocks.N.mlp.router.weight",    "model.layers.N.mlp.gate.weight"),
    ("blocks.N.mlp.choice_bias",      "model.layers.N.mlp.gate.e_score_correction_bias"),
    *[(f"blocks.N.mlp.{ours}.{part}.weight", f"model.layers.N.mlp.{theirs}.{part}_proj.weight")
      for ours, theirs in (("experts.E", "experts.E"), ("shared", "shared_experts"))
      for part in ("gate", "up", "down")],
]
SANDWICH_LAYOUT = {"blocks.N.mlp_norm.weight": "model.layers.N.pre_feedforward_layernorm.weight"}
LATENT_LAYOUT = {"blocks.N.attn.q_norm.weight": "model.layers.N.self_attn.q_a_layernorm.weight"}
BUFFERS = ("rotary_emb.inv_freq",)         # old checkpoints store the rotary's frequencies


def checkpoint_names(model):
    """{tinyattn's name: the checkpoint's} for every parameter of `model` (a tied head is the
    embedding, listed once, so it has no lm_head.weight)."""
    table = dict(LAYOUT)
    if model.settings.sandwich_norms:
        table.update(SANDWICH_LAYOUT)
    if model.settings.latent is not None:
        table.update(LATENT_LAYOUT)
    names = {}
    for ours in model.state_dict():
        block = re.match(r"blocks\.(\d+)\.", ours)
        expert = re.search(r"\.experts\.(\d+)\.", ours)
        pattern = re.sub(r"\.experts\.\d+\.", ".experts.E.", re.sub(r"^blocks\.\d+\.", "blocks.N.",
                                                                 ours))
        theirs = table[pattern]
        if block is not None:
            theirs = theirs.replace(".N.", f".{block.group(1)}.")
        if expert is not None:
            theirs = theirs.replace(".E.", f".{expert.group(1)}.")
        names[ours] = theirs
    return names


# ------------------------------------------------------------------------------------------------
# Reading

def read_config(folder):
    """config.json of a model folder as a dict with a model_type."""
    config = model_folders.read_config(folder)
    if "model_type" not in config:
        raise ValueError(f"the folder {folder!r}: config.json names no model_type (the family "
                         f"of model it describes)")
    return config


def settings_from_config(config, folder):
    """The DecoderSettings of a config.json of one of FAMILIES, read as transformers reads it;
    a ValueError listing everything in it that the decoder does not compute."""
    family = config["model_type"]
    if family not in FAMILIES:
        raise ValueError(f"the folder {folder!r}: config.json's model_type {family!r} is not one "
                         f"from_pretrained reads ({', '.join(('gpt2',) + FAMILIES)})")
    given = {**DEFAULTS[family], **config}
    missing = [key for key in SIZES if not isinstance(given.get(key), int)]
    if missing:
        raise ValueError(f"the folder {folder!r}: config.json's {', '.join(missing)} must be "
                         f"integers (a {family} config gives {', '.join(SIZES)})")
    refused = checks.unimplemented(given, family)
    rope_theta, rope_scaling, local_rope_theta = rotary_of(given, family, refused)
    window, kinds = sliding_of(given, family, refused)
    activation = given.get("hidden_activation" if family == "gemma3_text" else "hidden_act")
    if activation not in ACTIVATIONS:
        refused.append(f"activation {activation!r} (the gate's is SiLU, 'silu', or tanh-GELU, "
                       f"'gelu_pytorch_tanh')")
    if refused:
        raise ValueError(f"the folder {folder!r}: config.json asks for what the decoder does not "
                         f"compute: {'; '.join(refused)}")
    heads = given["num_attention_heads"]
    bias = bool(given.get("attention_bias", False))
    latent = latent_of(given) if family == "deepseek_v3" else None
    read = dict(vocab_size=given["vocab_size"], hidden_size=given["hidden_size"],
                intermediate_size=given["intermediate_size"],
                num_layers=given["num_hidden_layers"], num_heads=heads,
                num_kv_heads=given["num_key_value_heads"] or heads,
                head_dim=given["head_dim"] or given["hidden_size"] // heads,
                norm_eps=given["rms_norm_eps"], activation=ACTIVATIONS[activation],
                mlp_bias=bool(given.get("mlp_bias", False)), qkv_bias=bias, out_bias=bias,
                query_pre_attn_scalar=given.get("query_pre_attn_scalar"),
                rope_theta=rope_theta, rope_scaling=rope_scaling,
                local_rope_theta=local_rope_theta, sliding_window=window, layer_types=kinds,
                final_logit_softcapping=given.get("final_logit_softcapping"),
                tied_head=bool(given["tie_word_embeddings"]), model_type=family)
    if family in ROUTERS:
        read.update(experts=experts_of(given, family))
    if latent is not None:
        read.update(latent=latent, num_kv_heads=heads,
                    head_dim=latent.qk_nope_head_dim + latent.qk_rope_head_dim)
    settings = DecoderSettings(**{**read, **FIXED[family]})
    try:                          # the decoder's own door is not checked inside from_pretrained's
        settings_fit(None, settings)
    except (TypeError, ValueError) as error:
        raise ValueError(f"the folder {folder!r}: config.json gives settings the decoder cannot "
                         f"run: {error}") from None
    return settings


def latent_of(config):
    """DeepSeek's latent attention: the LatentSettings of its config."""
    return LatentSettings(**{field: config[field] for field in (
        "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank")},
        rope_interleave=bool(config["rope_interleave"]))


def experts_of(config, family):
    """The ExpertSettings of a Qwen3-MoE or DeepSeek-V3 config (what its router fixes is in
    ROUTERS), or None for a Qwen3-MoE without experts."""
    layers = range(config["num_hidden_layers"])
    read = dict(top_k=config["num_experts_per_tok"], hidden_dim=config["moe_intermediate_size"],
                norm_topk_prob=bool(config["norm_topk_prob"]))
    if family == "qwen3_moe":
        count = config.get("num_local_experts", config["num_experts"])
        if not count:
            return None
        step, dense_only = config["decoder_sparse_step"], config["mlp_only_layers"] or []
        dense = tuple(i for i in layers if i in dense_only or (i + 1) % step)
    else:
        count = config.get("num_local_experts", config["n_routed_experts"])   # either name
        shared = config["n_shared_experts"]
        dense = tuple(i for i in layers if i < config["first_k_dense_replace"])
        read.update(num_groups=config["n_group"] or 1, top_groups=config["topk_group"] or 1,
                    routed_scaling_factor=config["routed_scaling_factor"],
                    shared_hidden_dim=config["moe_intermediate_size"] * shared or None)
    return ExpertSettings(num_experts=count, dense_layers=dense, **read, **ROUTERS[family])


def rotary_of(config, family, refused):
    """(rope_theta, rope_scaling, local_rope_theta) from either layout of a config; what the
    decoder does not compute is added to `refused`."""
    parameters = config.get("rope_parameters") or {}
    scaling = config.get("rope_scaling")
    if family != "gemma3_text":
        rope = dict(scaling or parameters)
        rope.setdefault("rope_theta", config.get("rope_theta", 10_000.0))
        if rope.get("rope_type", rope.get("type")) == "llama3":
            rope.setdefault("original_max_position_embeddings", config["max_position_embeddings"])
        return float(rope["rope_theta"]), scaling_of(rope, "rope_scaling", refused), None
    global_theta, local_theta = THETA[family]
    full = dict(parameters.get("full_attention") or {})
    local = dict(parameters.get("sliding_attention") or {})
    full.update(scaling or {})
    full.setdefault("rope_theta", config.get("rope_theta", global_theta))
    local.setdefault("rope_theta", config.get("rope_local_base_freq", local_theta))
    if scaling_of(local, "the sliding layers' rope_parameters", refused) is not None:
        refused.append("rotary scaling on the sliding layers (Gemma 3 scales its global ones)")
    return (float(full["rope_theta"]), scaling_of(full, "rope_scaling", refused),
            float(local["rope_theta"]))


def scaling_of(rope, called, refused):
    """The rope_scaling setting (None, or {"rope_type": "linear" or "llama3", ...}) of a
    config's rotary dict, or a refusal added to `refused`."""
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind not in SCALING_KEYS:
        refused.append(f"{called} of rope_type {kind!r} (implemented: "
                       f"{', '.join(map(repr, SCALING_KEYS))})")
        return None
    if rope.get("partial_rotary_factor", 1.0) != 1.0:
        refused.append(f"partial_rotary_factor {rope['partial_rotary_factor']} (every feature of "
                       f"a head turns here)")
    unknown = sorted(set(rope) - {"rope_type", "type", "rope_theta", "partial_rotary_factor",
                                  *SCALING_KEYS[kind]})
    if unknown:
        refused.append(f"{called} of rope_type {kind!r} with {', '.join(unknown)} (known: "
                       f"{', '.join(SCALING_KEYS[kind]) or 'none'})")
    if kind == "default":
        return None
    return {"rope_type": kind, **{key: rope[key] for key in SCALING_KEYS[kind] if key in rope}}


def sliding_of(config, family, refused):
    """(sliding_window, layer kinds) as the family's transformers code sets them: see the top of
    this file. None for the kinds when every layer is full."""
    layers = config["num_hidden_layers"]
    window = config.get("sliding_window")
    if family in ("llama", "deepseek_v3"):
        return None, None
    if family == "qwen3_moe":
        window = window if config.get("use_sliding_window") else None
    if family in ("mistral", "qwen3_moe"):
        return window, None if window is None else ("sliding",) * layers
    if family in ("qwen2", "qwen3"):
        window = window if config.get("use_sliding_window") else None
        names = config.get("layer_types") or [
            "sliding_attention" if window is not None and i >= config["max_window_layers"]
            else "full_attention" for i in range(layers)]
    else:
        pattern = config.get("sliding_window_pattern", 6)
        names = config.get("layer_types") or [
            "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
    unknown = sorted(set(names) - set(LAYER_TYPES))
    if unknown or len(names) != layers:
        refused.append(f"layer_types {names} (one of {', '.join(LAYER_TYPES)} per layer)")
        return window, None
    kinds = tuple(LAYER_TYPES[name] for name in names)
    if "sliding" in kinds and window is None:
        refused.append("sliding layers without a sliding_window (use_sliding_window false)")
    return window, kinds if "sliding" in kinds else None


def state_from_checkpoint(model, folder):
    """{tinyattn's name: array} of `model`'s parameters from the folder's weights, checked: each
    weight there, of its parameter's shape, in floating point, and no other (a tied head may be
    stored too, equal to the embedding)."""
    stored, source = read_stored_weights(folder)
    # DeepSeek-V3 stores its multi-token prediction module as one layer more, which transformers
    # does not load either (_keys_to_ignore_on_load_unexpected)
    beyond = f"model.layers.{model.settings.num_layers}."
    stored = {name: array for name, array in stored.items() if not name.endswith(BUFFERS)
              and not (model.settings.model_type == "deepseek_v3" and name.startswith(beyond))}
    names = checkpoint_names(model)
    if model.settings.tied_head and "lm_head.weight" in stored:
        head = stored.pop("lm_head.weight")
        embedding = stored.get("model.embed_tokens.weight")
        if embedding is not None and not np.array_equal(head, embedding):
            raise ValueError(f"the folder {folder!r}: {source} holds an lm_head.weight other "
                             f"than the embedding, but config.json ties them "
                             f"(tie_word_embeddings)")
    return checked_state(stored, names, model, folder, source, model.settings.model_type)


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The model of a folder in Hugging Face's layout (config.json and model.safetensors, or the
    shards a model.safetensors.index.json lists), or of a name `python -m tinyattn download`
    fetched, in eval mode, its parameters of `dtype`: chapter 3's CausalTransformer for a GPT-2
    folder, the family's model for llama, mistral, qwen2, qwen3, gemma3_text, qwen3_moe and
    deepseek_v3 (MODELS; see the top of this file). Its logits are transformers'
    AutoModelForCausalLM's on the same ids. A folder that is not such a folder (a file missing, a
    config asking for what the model does not compute, weights that disagree with the config) is a
    FileNotFoundError or ValueError naming the folder and what is wrong."""
    try:
        folder = model_folders.model_folder(folder)
        config = read_config(folder)
    except (OSError, ValueError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    if config["model_type"] == "gpt2":
        return CausalTransformer.from_pretrained(folder, dtype=dtype)
    try:
        settings = settings_from_config(config, folder)
        model = MODELS[settings.model_type](settings, dtype=dtype)
        model.load_state_dict(state_from_checkpoint(model, folder))
    except (OSError, ValueError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    model.config = config
    return model.eval()


# ------------------------------------------------------------------------------------------------
# Writing

def family_config(model):
    """The config.json of `model` in its family's layout, the hub's (rope_theta, rope_scaling,
    rope_local_base_freq), which every version of transformers reads; ids and the context length
    come from the config it was read from, where there was one."""
    s = model.settings
    kinds = s.kinds()
    config = {"architectures": [ARCHITECTURES[s.model_type]], "model_type": s.model_type,
              "vocab_size": s.vocab_size, "hidden_size": s.hidden_size,
              "intermediate_size": s.intermediate_size, "num_hidden_layers": s.num_layers,
              "num_attention_heads": s.num_heads, "num_key_value_heads": s.num_kv_heads,
              "head_dim": s.head_dim, "rms_norm_eps": s.norm_eps,
              "tie_word_embeddings": s.tied_head, "rope_theta": s.rope_theta,
              "rope_scaling": s.rope_scaling, "attention_dropout": 0.0,
              "bos_token_id": None, "eos_token_id": None, "pad_token_id": None,
              "dtype": str(model.dtype)}
    config["hidden_activation" if s.model_type == "gemma3_text" else "hidden_act"] = \
        THEIR_ACTIVATION[s.activation]
    if s.model_type in ("llama", "qwen3", "gemma3_text", "qwen3_moe", "deepseek_v3"):
        config["attention_bias"] = s.qkv_bias
    if s.model_type == "llama":
        config["mlp_bias"] = s.mlp_bias
    if s.model_type == "mistral":
        config["sliding_window"] = s.sliding_window if "sliding" in kinds else None
    if s.model_type in ("qwen2", "qwen3", "gemma3_text"):
        names = {kind: name for name, kind in LAYER_TYPES.items()}
        config["layer_types"] = [names[kind] for kind in kinds]
        config["sliding_window"] = s.sliding_window
    if s.model_type in ("qwen2", "qwen3"):
        config["use_sliding_window"] = "sliding" in kinds
        config["max_window_layers"] = kinds.index("sliding") if "sliding" in kinds else len(kinds)
    if s.model_type == "gemma3_text":
        config.update(query_pre_attn_scalar=s.query_pre_attn_scalar or s.head_dim,
                      rope_local_base_freq=s.local_rope_theta or s.rope_theta,
                      final_logit_softcapping=s.final_logit_softcapping,
                      attn_logit_softcapping=None, use_bidirectional_attention=False)
    if s.model_type in ROUTERS:
        config.update(experts_config(s))
    read_from = model.config or {}
    config.update({key: read_from[key] for key in KEPT if key in read_from})
    return config


def experts_config(settings):
    """The keys of a Qwen3-MoE or DeepSeek-V3 config.json that its experts (and DeepSeek's
    latent attention) set; family_holds_it has checked that the family's files hold them."""
    experts = settings.experts
    config = dict(num_experts_per_tok=experts.top_k, moe_intermediate_size=experts.hidden_dim,
                  norm_topk_prob=experts.norm_topk_prob)
    if settings.model_type == "qwen3_moe":
        return dict(config, num_experts=experts.num_experts, decoder_sparse_step=1,
                    mlp_only_layers=list(experts.dense_layers),
                    use_sliding_window="sliding" in settings.kinds(),
                    sliding_window=settings.sliding_window)
    latent = settings.latent
    return dict(config, **vars(latent), n_routed_experts=experts.num_experts,
                n_shared_experts=(experts.shared_hidden_dim or 0) // experts.hidden_dim,
                n_group=experts.num_groups, topk_group=experts.top_groups,
                routed_scaling_factor=experts.routed_scaling_factor,
                first_k_dense_replace=len(experts.dense_layers), head_dim=latent.qk_rope_head_dim,
                num_key_value_heads=settings.num_heads)


def write_checkpoint(folder, model):
    """config.json and model.safetensors of `model` in `folder` (made if missing), each written
    whole or not at all."""
    folder = os.fspath(folder)
    os.makedirs(folder, exist_ok=True)
    config = family_config(model)
    with replaced_atomically(os.path.join(folder, "config.json"), "save_pretrained") as file:
        file.write((json.dumps(config, indent=2) + "\n").encode("utf-8"))
    state = model.state_dict()
    weights = {theirs: state[ours] for ours, theirs in checkpoint_names(model).items()}
    # transformers reads a safetensors file only if its metadata names the format "pt"
    save_safetensors(os.path.join(folder, "model.safetensors"), weights, {"format": "pt"})


@extends(OpenDecoder)
@door(checks.family_holds_it)
def save_pretrained(self, folder):
    """Write config.json and model.safetensors of this model to `folder` (made if missing) in its
    family's layout (settings.model_type), which `nn.from_pretrained` and transformers'
    `AutoModelForCausalLM.from_pretrained` read to the same logits. What that layout cannot
    hold is refused, never dropped: a setting the family's code fixes otherwise (QK-norm in a
    llama, no q, k, v biases in a qwen2), sliding layers where the family has none, or LoRA
    adapters not merged. Each file is written whole or not at all."""
    write_checkpoint(folder, self)
