"""Chapter 5. What makes an argument of a family's model (nn/llama.py ... nn/deepseek_v3.py, on
nn/open_decoder.py's base) bad: its settings, the ids and cache of a forward pass, a prompt."""
import dataclasses
import numbers

from tinyattn.nn.causal_transformer_checks import token_ids
from tinyattn.nn.families import FIXED, ROUTERS
from tinyattn.nn.latent_attention_checks import rotary_fits
from tinyattn.nn.open_layers import ACTIVATIONS
from tinyattn.nn.open_layers_checks import heads_fit_groups
from tinyattn.nn.routed_experts import SCORES
from tinyattn.nn.routed_experts_checks import groups_fit

SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
         "num_kv_heads", "head_dim")
KINDS = ("full", "sliding")


def settings_fit(self, settings, dtype=None):
    """A family's model: settings is a DecoderSettings of positive integer sizes; its heads, rotary
    and activation fit; layer_types has one kind per layer, and sliding layers a window; its
    latent attention and its experts, if any, are of sizes that fit."""
    if type(settings).__name__ != "DecoderSettings":
        raise TypeError(f"settings must be a DecoderSettings, got {type(settings).__name__}")
    for name in SIZES:
        positive_integer(f"settings.{name}", getattr(settings, name))
    if settings.latent is None:
        heads_fit_groups(settings.hidden_size, settings.num_heads, settings.num_kv_heads,
                         settings.head_dim, settings.rope_theta, settings.rope_scaling)
    else:
        latent_fits(settings)
    if settings.experts is not None:
        experts_fit(settings)
    if settings.activation not in ACTIVATIONS:
        raise ValueError(f"settings.activation must be one of {', '.join(map(repr, ACTIVATIONS))},"
                         f" got {settings.activation!r}")
    kinds = settings.kinds()
    if len(kinds) != settings.num_layers or any(kind not in KINDS for kind in kinds):
        raise ValueError(f"settings.layer_types must give 'full' or 'sliding' for each of the "
                         f"{settings.num_layers} layers, got {settings.layer_types!r}")
    window = settings.sliding_window
    if "sliding" in kinds and (isinstance(window, bool) or not isinstance(window, numbers.Integral)
                               or window < 1):
        raise ValueError(f"sliding layers need settings.sliding_window, a positive integer; got "
                         f"{window!r}")
    for name in ("norm_eps", "rope_theta", "local_rope_theta", "query_pre_attn_scalar",
                 "final_logit_softcapping"):
        value = getattr(settings, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, numbers.Real)
                                  or value < 0 or value == 0 and name != "norm_eps"):
            raise ValueError(f"settings.{name} must be a positive number, got {value!r}")


def positive_integer(name, value):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be an integer of at least 1, got {value!r}")


def latent_fits(settings):
    """settings.latent: a LatentSettings of positive sizes (q_lora_rank may be None), an even
    qk_rope_head_dim; head_dim the keys', qk_nope_head_dim + qk_rope_head_dim, and as many
    key/value heads as heads (each head rebuilds its own)."""
    latent = settings.latent
    if type(latent).__name__ != "LatentSettings":
        raise TypeError(f"settings.latent must be a LatentSettings or None, got "
                        f"{type(latent).__name__}")
    for field in dataclasses.fields(latent)[:5]:
        value = getattr(latent, field.name)
        if value is not None or field.name != "q_lora_rank":
            positive_integer(f"settings.latent.{field.name}", value)
    rotary_fits(latent.qk_rope_head_dim, settings.rope_theta, settings.rope_scaling)
    if settings.head_dim != latent.qk_nope_head_dim + latent.qk_rope_head_dim or \
            settings.num_kv_heads != settings.num_heads:
        raise ValueError(f"with latent attention, head_dim must be qk_nope_head_dim + "
                         f"qk_rope_head_dim ({latent.qk_nope_head_dim + latent.qk_rope_head_dim})"
                         f" and num_kv_heads num_heads ({settings.num_heads}); got "
                         f"{settings.head_dim} and {settings.num_kv_heads}")


def experts_fit(settings):
    """settings.experts: an ExpertSettings of positive sizes whose groups fit, a known scoring,
    dense_layers among the layers."""
    experts = settings.experts
    if type(experts).__name__ != "ExpertSettings":
        raise TypeError(f"settings.experts must be an ExpertSettings or None, got "
                        f"{type(experts).__name__}")
    for name in ("num_experts", "top_k", "hidden_dim", "num_groups", "top_groups"):
        positive_integer(f"settings.experts.{name}", getattr(experts, name))
    if experts.shared_hidden_dim is not None:
        positive_integer("settings.experts.shared_hidden_dim", experts.shared_hidden_dim)
    if experts.scoring not in SCORES:
        raise ValueError(f"settings.experts.scoring must be one of "
                         f"{', '.join(map(repr, SCORES))}, got {experts.scoring!r}")
    groups_fit(experts.num_experts, experts.top_k, experts.num_groups, experts.top_groups)
    if any(layer not in range(settings.num_layers) for layer in experts.dense_layers):
        raise ValueError(f"settings.experts.dense_layers must be layers 0 ... "
                         f"{settings.num_layers - 1}, got {experts.dense_layers!r}")


def family_differences(settings):
    """What the model of a family (settings.model_type's page) does not compute of `settings`
    (phrases): a switch the family fixes at another value (nn/families.py's FIXED), sliding
    layers in a llama."""
    differences = [f"{name}={getattr(settings, name)!r} ({settings.model_type} has {value!r})"
                   for name, value in FIXED[settings.model_type].items()
                   if getattr(settings, name) != value]
    if settings.model_type == "llama" and "sliding" in settings.kinds():
        differences.append("sliding layers (llama has none)")
    return differences


def what_the_files_lack(settings):
    """What a family's files cannot hold of `settings` besides (phrases): sliding layers not on
    every layer (mistral), biases that one attention_bias cannot give, experts routed otherwise
    than the family routes them."""
    differences = []
    kinds = settings.kinds()
    if settings.model_type == "mistral" and len(set(kinds)) > 1:
        differences.append(f"layer_types {kinds} (mistral slides on every layer, or none)")
    if settings.qkv_bias != settings.out_bias and settings.model_type != "qwen2":
        differences.append(f"qkv_bias={settings.qkv_bias} with out_bias={settings.out_bias} "
                           f"(one attention_bias for all four)")
    if settings.model_type in ROUTERS:
        differences += what_the_experts_lack(settings)
    return differences


def what_the_experts_lack(settings):
    """What a Qwen3-MoE's or DeepSeek-V3's files cannot hold of these settings (phrases):
    experts missing, or routed otherwise than the family routes them (ROUTERS); for DeepSeek,
    latent attention missing, dense layers other than the first ones, shared experts that are
    not a whole number of experts."""
    family, experts = settings.model_type, settings.experts
    if experts is None:
        return [f"no experts ({family}'s files describe routed experts)"]
    lacks = [f"experts.{name}={getattr(experts, name)!r} ({family} has {value!r})"
             for name, value in ROUTERS[family].items() if getattr(experts, name) != value]
    if family == "deepseek_v3":
        if settings.latent is None:
            lacks.append("no latent attention (deepseek_v3 has it on every layer)")
        if experts.dense_layers != tuple(range(len(experts.dense_layers))):
            lacks.append(f"dense layers {experts.dense_layers} (deepseek_v3's are the first "
                         f"first_k_dense_replace layers)")
        if (experts.shared_hidden_dim or 0) % experts.hidden_dim:
            lacks.append(f"a shared expert of width {experts.shared_hidden_dim} (n_shared_experts"
                         f" experts of width {experts.hidden_dim})")
    if family == "qwen3_moe" and len(set(settings.kinds())) > 1:
        lacks.append(f"layer_types {settings.kinds()} (qwen3_moe slides on every layer, or none)")
    return lacks


def ids_and_cache_fit(self, ids, cache=None, **_):
    """A family's model's forward: token ids (B, T); cache None or a DecoderCache of this model,
    of as many sequences."""
    B, T = token_ids(self, ids)
    if cache is None:
        return
    if getattr(cache, "model", None) is not self:
        raise TypeError(f"cache must be a DecoderCache of this model (from model.empty_cache()), "
                        f"got {type(cache).__name__}")
    if len(cache) and cache.batch_size != B:
        raise ValueError(f"the cache holds the keys of {cache.batch_size} sequences, but ids is "
                         f"a batch of {B} (shape {(B, T)})")


def prompt_fits(self, ids, **_):
    """A family's model's generate (OpenDecoder.generate): token ids (the prompt)."""
    token_ids(self, ids)
