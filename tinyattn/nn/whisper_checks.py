"""Chapter 6. What makes an argument of nn/whisper.py bad: sizes that do not fit together,
features that are not the encoder's (the wrong number of mel bands or of frames, another dtype),
token ids out of the vocabulary, a text longer than the decoder's positions."""
import numpy as np

from tinyattn import arguments
from tinyattn.arrays import data_of
from tinyattn.engine import Tensor, tensor

SIZES = ("vocab_size", "num_mel_bins", "d_model", "encoder_layers", "encoder_heads",
         "encoder_ffn_dim", "decoder_layers", "decoder_heads", "decoder_ffn_dim",
         "max_source_positions", "max_target_positions")


def settings_fit(self, settings, **_):
    """Whisper: sizes that are positive integers, heads that divide d_model, an even d_model
    (the sinusoids' sines and cosines), token ids inside the vocabulary."""
    for name in SIZES:
        arguments.at_least(1)(name, getattr(settings, name))
    for name in ("encoder_heads", "decoder_heads"):
        if settings.d_model % getattr(settings, name):
            raise ValueError(f"{name} ({getattr(settings, name)}) must divide d_model "
                             f"({settings.d_model})")
    if settings.d_model % 2 or settings.d_model < 4:
        raise ValueError(f"d_model must be even and at least 4 (the encoder's positions are "
                         f"half sines, half cosines), got {settings.d_model}")
    for name in ("eos_token_id", "pad_token_id", "decoder_start_token_id"):
        value = getattr(settings, name)
        if value is not None:
            arguments.ids(name, np.asarray(value), settings.vocab_size, "tokens")


def features_fit(model, input_features):
    """input_features (B, num_mel_bins, 2 max_source_positions), an array or tensor of the
    model's dtype; returns it as a tensor."""
    s = model.settings
    if not isinstance(input_features, (Tensor, np.ndarray)):
        raise TypeError(f"input_features must be an array or a Tensor, got "
                        f"{type(input_features).__name__}")
    features = input_features if isinstance(input_features, Tensor) else tensor(input_features)
    expected = (s.num_mel_bins, 2 * s.max_source_positions)
    if features.ndim != 3 or features.shape[1:] != expected:
        raise ValueError(f"input_features must be (B, num_mel_bins, frames) = (B, {expected[0]}, "
                         f"{expected[1]}): {expected[0]} mel bands and {expected[1]} frames, "
                         f"got shape {features.shape}")
    if features.dtype != model.dtype:
        raise TypeError(f"input_features are {features.dtype} but the model's parameters are "
                        f"{model.dtype}: convert one to the other")
    return features


def decoder_ids(model, ids, batch, more=0):
    """decoder_input_ids (B, T) of a batch of `batch`, inside the vocabulary, with room for
    `more` tokens in the decoder's positions."""
    s = model.settings
    shape = np.shape(data_of(ids))
    arguments.ids("decoder_input_ids", ids, s.vocab_size, "tokens")
    if len(shape) != 2 or shape[1] == 0:
        raise ValueError(f"decoder_input_ids must be (B, T) with T >= 1, got shape {shape}")
    if shape[0] != batch:
        raise ValueError(f"decoder_input_ids are a batch of {shape[0]} (shape {shape}) but "
                         f"input_features of {batch}")
    if shape[1] + more > s.max_target_positions:
        raise ValueError(f"{shape[1]} tokens" + (f" and {more} new ones" if more else "")
                         + f" are more than the decoder's {s.max_target_positions} positions "
                         f"(max_target_positions)")


def features_and_ids_fit(self, input_features, decoder_input_ids, **_):
    """Whisper.forward: features of the encoder, token ids of as many rows."""
    features = features_fit(self, input_features)
    decoder_ids(self, decoder_input_ids, features.shape[0])
    return {"input_features": features}


def generation_fits(self, input_features, decoder_input_ids, max_new_tokens, **_):
    """Whisper.generate: as forward, and the prompt and the new tokens within the positions."""
    features = features_fit(self, input_features)
    decoder_ids(self, decoder_input_ids, features.shape[0], max_new_tokens)
    return {"input_features": features}
