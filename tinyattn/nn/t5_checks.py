"""Chapter 6. What makes an argument of T5 (nn/t5.py) bad: its settings, the ids and mask of a
forward pass, a generation's beams."""
import numbers

import numpy as np

from tinyattn import arguments
from tinyattn.arrays import data_of

SIZES = ("vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers",
         "num_heads", "relative_attention_num_buckets", "relative_attention_max_distance")
IDS = ("decoder_start_token_id", "pad_token_id", "eos_token_id")
FEED_FORWARDS = ("relu", "gated-gelu")      # T5's, T5 v1.1's (config.json's feed_forward_proj)


def settings_fit(self, settings, dtype=None):
    """T5: settings is a T5Settings of positive integer sizes, at least 4 buckets (an exact one
    in each half of the encoder's) reaching farther than the decoder's exact ones (else the
    logarithmic buckets divide by log 1 = 0), a known feed-forward, and token ids in the
    vocabulary."""
    if type(settings).__name__ != "T5Settings":
        raise TypeError(f"settings must be a T5Settings, got {type(settings).__name__}")
    for name in SIZES:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"settings.{name} must be an integer of at least 1, got {value!r}")
    buckets = settings.relative_attention_num_buckets
    if buckets < 4 or settings.relative_attention_max_distance <= buckets // 2:
        raise ValueError(f"settings.relative_attention_num_buckets must be at least 4 and "
                         f"relative_attention_max_distance more than half of it (the decoder's "
                         f"exact buckets), got {buckets} and "
                         f"{settings.relative_attention_max_distance}")
    if settings.feed_forward_proj not in FEED_FORWARDS:
        raise ValueError(f"settings.feed_forward_proj must be one of "
                         f"{', '.join(map(repr, FEED_FORWARDS))}, got "
                         f"{settings.feed_forward_proj!r}")
    for name in IDS:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
                or not 0 <= value < settings.vocab_size:
            raise ValueError(f"settings.{name} must be a token id in [0, {settings.vocab_size}),"
                             f" got {value!r}")
    if not isinstance(settings.layer_norm_epsilon, numbers.Real) or settings.layer_norm_epsilon < 0:
        raise ValueError(f"settings.layer_norm_epsilon must be a number >= 0, got "
                         f"{settings.layer_norm_epsilon!r}")


def token_rows(model, name, ids):
    """`name`: (B, T) integers in [0, vocab_size), T >= 1; returns its shape."""
    try:
        shape = np.shape(data_of(ids))
    except ValueError:                  # NumPy's "inhomogeneous shape"
        raise ValueError(f"{name}: the rows have different lengths; pad them to one length (and "
                         f"give attention_mask)") from None
    arguments.ids(name, ids, model.settings.vocab_size, "tokens")
    if len(shape) != 2 or shape[1] == 0:
        raise ValueError(f"{name} must be (B, T) with T >= 1, got shape {shape}")
    return shape


def mask_fits(shape, attention_mask):
    """attention_mask: None, or 0s and 1s of input_ids' shape, each row with a token."""
    if attention_mask is None:
        return
    mask = np.asarray(data_of(attention_mask))
    if mask.shape != shape:
        raise ValueError(f"attention_mask must have input_ids' shape {shape}, got {mask.shape}")
    if mask.dtype.kind not in "biuf" or not np.isin(mask, (0, 1)).all():
        raise ValueError("attention_mask must hold 1 for a token and 0 for padding")
    if not mask.any(axis=1).all():
        raise ValueError("attention_mask has a row with no token (all 0)")


def inputs_fit(self, input_ids, decoder_input_ids, attention_mask=None):
    """T5: input_ids (B, S) and decoder_input_ids (B, T) token ids of one batch size; the mask
    fits input_ids."""
    shape = token_rows(self, "input_ids", input_ids)
    target = token_rows(self, "decoder_input_ids", decoder_input_ids)
    if target[0] != shape[0]:
        raise ValueError(f"input_ids {shape} and decoder_input_ids {target} must have one batch "
                         f"size")
    mask_fits(shape, attention_mask)


def generation_fits(self, input_ids, max_new_tokens, num_beams=1, length_penalty=1.0,
                    attention_mask=None):
    """T5.generate: input_ids and the mask as for a forward pass; at most vocab_size / 2 beams
    (beam search keeps 2 num_beams candidates a step, which the first step takes from one
    beam's vocabulary)."""
    mask_fits(token_rows(self, "input_ids", input_ids), attention_mask)
    if 2 * num_beams > self.settings.vocab_size:
        raise ValueError(f"num_beams {num_beams} is more than half the vocabulary "
                         f"({self.settings.vocab_size} tokens)")
