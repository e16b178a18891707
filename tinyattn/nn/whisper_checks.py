"""Chapter 6. What makes an argument of nn/whisper.py bad: sizes that do not fit together,
features that are not the encoder's (the wrong number of mel bands or of frames, another dtype),
token ids out of the vocabulary, a text longer than the decoder's positions."""
import numpy as np

from tinyattn import arguments
from tinyattn.arrays import data_of
from tinyattn.engine import Tensor, tensor
from tinyattn.nn.kv_cache import LayerCache

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


def decoder_ids(model, ids, batch, cached=0, more=0):
    """decoder_input_ids (B, T) of a batch of `batch`, inside the vocabulary, with room for
    `cached` tokens before them and `more` after them in the decoder's positions."""
    s = model.settings
    shape = np.shape(data_of(ids))
    arguments.ids("decoder_input_ids", ids, s.vocab_size, "tokens")
    if len(shape) != 2 or shape[1] == 0:
        raise ValueError(f"decoder_input_ids must be (B, T) with T >= 1, got shape {shape}")
    if shape[0] != batch:
        raise ValueError(f"decoder_input_ids are a batch of {shape[0]} (shape {shape}) but "
                         f"input_features of {batch}")
    if cached + shape[1] + more > s.max_target_positions:
        counted = [f"{cached} cached tokens"] * bool(cached) + [f"{shape[1]} tokens"] \
            + [f"{more} new ones"] * bool(more)
        raise ValueError(f"{' and '.join(counted)} are more than the decoder's "
                         f"{s.max_target_positions} positions (max_target_positions)")


def features_and_ids_fit(self, input_features, decoder_input_ids, **_):
    """Whisper.forward: features of the encoder, token ids of as many rows."""
    features = features_fit(self, input_features)
    decoder_ids(self, decoder_input_ids, features.shape[0])
    return {"input_features": features}


def generation_fits(self, input_features, decoder_input_ids, max_new_tokens, **_):
    """Whisper.generate: as forward, and the prompt and the new tokens within the positions."""
    features = features_fit(self, input_features)
    decoder_ids(self, decoder_input_ids, features.shape[0], more=max_new_tokens)
    return {"input_features": features}


def heads_fit(self, embed_dim, num_heads, **_):
    """WhisperAttention: num_heads divides embed_dim."""
    if embed_dim % num_heads:
        raise ValueError(f"num_heads ({num_heads}) must divide embed_dim ({embed_dim})")


def a_layer_cache(name, cache, batch):
    """`cache`: None or a LayerCache, empty or of `batch` sequences."""
    if cache is not None and not isinstance(cache, LayerCache):
        raise TypeError(f"{name} must be a LayerCache (nn/kv_cache.py) or None, got "
                        f"{type(cache).__name__}")
    if cache is not None and cache.keys is not None and cache.batch_size != batch:
        raise ValueError(f"{name} holds the keys of {cache.batch_size} sequences, but the input "
                         f"is a batch of {batch}")


def attention_inputs_fit(self, x, memory=None, causal=False, cache=None):
    """WhisperAttention.forward: causal for self-attention only; the cache a LayerCache of as
    many sequences."""
    if causal and memory is not None:
        raise ValueError("causal applies to self-attention: cross-attention (memory given) "
                         "sees every position of the memory")
    a_layer_cache("cache", cache, x.shape[0])


def block_caches_fit(self, x, audio, self_cache=None, cross_cache=None):
    """DecoderBlock.forward: each cache a LayerCache of as many sequences."""
    a_layer_cache("self_cache", self_cache, x.shape[0])
    a_layer_cache("cross_cache", cross_cache, x.shape[0])


def encoder_features_fit(self, input_features):
    """AudioEncoder.forward: the encoder's features; returns them as a tensor."""
    return {"input_features": features_fit(self, input_features)}


def decoder_inputs_fit(self, ids, audio, cache=None, **_):
    """TextDecoder.forward: token ids of as many rows as the audio, which is the encoder's
    output (B, max_source_positions, d_model) in the model's dtype; the cache a WhisperCache of
    this model, of as many sequences, with room for the ids."""
    s = self.settings
    arguments.shapes(dtype=self.dtype, audio=(audio, f"(B, {s.max_source_positions}, "
                                                     f"{s.d_model})"))
    if cache is not None and getattr(getattr(cache, "model", None), "decoder", None) is not self:
        raise TypeError(f"cache must be a WhisperCache of this model (model.empty_cache()), got "
                        f"{type(cache).__name__}")
    cached = 0 if cache is None else len(cache)
    decoder_ids(self, ids, audio.shape[0], cached)
    if cached:
        a_layer_cache("cache", cache.self_attention[0], audio.shape[0])
