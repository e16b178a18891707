"""Chapter 6. What makes an argument of BART or Marian (nn/bart.py) bad: its settings, the ids
and mask of a forward pass (as T5's, and no longer than the positions), a generation's beams."""
import numbers

import numpy as np

from tinyattn.arrays import data_of
from tinyattn.nn import t5_checks

SIZES = ("vocab_size", "d_model", "encoder_layers", "decoder_layers", "encoder_attention_heads",
         "decoder_attention_heads", "encoder_ffn_dim", "decoder_ffn_dim",
         "max_position_embeddings")
IDS = ("decoder_start_token_id", "pad_token_id", "eos_token_id")
ACTIVATION_NAMES = ("gelu", "swish", "silu")
MODEL_TYPES = ("bart", "marian")


def settings_fit(self, settings, dtype=None):
    """Bart, Marian: settings is a BartSettings of positive integer sizes, d_model divisible by
    both head counts, a known activation and model_type, token ids in the vocabulary."""
    if type(settings).__name__ != "BartSettings":
        raise TypeError(f"settings must be a BartSettings, got {type(settings).__name__}")
    for name in SIZES:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"settings.{name} must be an integer of at least 1, got {value!r}")
    for name in ("encoder_attention_heads", "decoder_attention_heads"):
        if settings.d_model % getattr(settings, name):
            raise ValueError(f"settings.d_model {settings.d_model} must be divisible by "
                             f"settings.{name} {getattr(settings, name)}")
    if settings.activation_function not in ACTIVATION_NAMES:
        raise ValueError(f"settings.activation_function must be one of "
                         f"{', '.join(map(repr, ACTIVATION_NAMES))}, got "
                         f"{settings.activation_function!r}")
    if settings.model_type not in MODEL_TYPES:
        raise ValueError(f"settings.model_type must be one of {', '.join(map(repr, MODEL_TYPES))},"
                         f" got {settings.model_type!r}")
    for name in IDS:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) \
                or not 0 <= value < settings.vocab_size:
            raise ValueError(f"settings.{name} must be a token id in [0, {settings.vocab_size}),"
                             f" got {value!r}")


def within_positions(model, name, length):
    if length > model.settings.max_position_embeddings:
        raise ValueError(f"{name} has {length} positions, more than the model's "
                         f"{model.settings.max_position_embeddings} (max_position_embeddings)")


def inputs_fit(self, input_ids, decoder_input_ids, attention_mask=None):
    """Bart, Marian: as T5's inputs, each no longer than the positions."""
    t5_checks.inputs_fit(self, input_ids, decoder_input_ids, attention_mask)
    within_positions(self, "input_ids", np.shape(data_of(input_ids))[1])
    within_positions(self, "decoder_input_ids", np.shape(data_of(decoder_input_ids))[1])


def generation_fits(self, input_ids, max_new_tokens, num_beams=1, length_penalty=1.0,
                    attention_mask=None):
    """Bart.generate, Marian.generate: as T5's, the input and the output (the start token and
    max_new_tokens) no longer than the positions."""
    t5_checks.generation_fits(self, input_ids, max_new_tokens, num_beams, length_penalty,
                              attention_mask)
    within_positions(self, "input_ids", np.shape(data_of(input_ids))[1])
    within_positions(self, "the output", 1 + max_new_tokens)
