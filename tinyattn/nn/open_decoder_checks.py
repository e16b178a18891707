"""Chapter 5. What makes an argument of the decoder (nn/open_decoder.py) bad: its settings, the
ids and cache of a forward pass, a prompt."""
import numbers

from tinyattn.nn.causal_transformer_checks import token_ids
from tinyattn.nn.open_layers import ACTIVATIONS
from tinyattn.nn.open_layers_checks import heads_fit_groups

SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads",
         "num_kv_heads", "head_dim")
KINDS = ("full", "sliding")


def settings_fit(self, settings, dtype=None):
    """OpenDecoder: settings is a DecoderSettings of positive integer sizes; its heads, rotary
    and activation fit; layer_types has one kind per layer, and sliding layers a window."""
    if type(settings).__name__ != "DecoderSettings":
        raise TypeError(f"settings must be a DecoderSettings, got {type(settings).__name__}")
    for name in SIZES:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"settings.{name} must be an integer of at least 1, got {value!r}")
    heads_fit_groups(settings.hidden_size, settings.num_heads, settings.num_kv_heads,
                     settings.head_dim, settings.rope_theta, settings.rope_scaling)
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


def ids_and_cache_fit(self, ids, cache=None, **_):
    """OpenDecoder.forward: token ids (B, T); cache None or a DecoderCache of this model, of as
    many sequences."""
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
    """OpenDecoder.generate: token ids (the prompt)."""
    token_ids(self, ids)
