"""The checklist's rows for Whisper (chapter 6, tinyattn/nn/whisper.py): its stem's convolutions
over frames, its attention in its three uses (the encoder's, the decoder's causal one with a
cache, the cross-attention reusing the audio's cached keys), its blocks and the whole model on
fixed features and ids. Every LayerNorm gets random gains and biases first (`off_their_start`),
so that a backward which forgot one cannot pass where a gain is 1 or a bias 0."""
import dataclasses

import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.nn.kv_cache import LayerCache
from tinyattn.nn.whisper import DecoderBlock, EncoderBlock, FrameConvolution, WhisperAttention
from tinyattn_tools.checklist.cases import LayerCase, leaves

TINY = nn.WhisperSettings(vocab_size=11, num_mel_bins=3, d_model=8, encoder_layers=1,
                          encoder_heads=2, encoder_ffn_dim=12, decoder_layers=2, decoder_heads=4,
                          decoder_ffn_dim=6, max_source_positions=3, max_target_positions=6)
FIXED_IDS = np.array([[1, 4, 2, 9, 0], [3, 3, 10, 5, 7]])


def off_their_start(module):
    """`module` with every LayerNorm's weight and bias drawn at random (seeded)."""
    random = np.random.default_rng(2)
    for layer in module.modules():
        if isinstance(layer, nn.LayerNorm):
            layer.weight.data[...] = random.normal(1.0, 0.3, layer.weight.shape)
            layer.bias.data[...] = random.normal(0.0, 0.3, layer.bias.shape)
    return module


def built(make, *input_shapes, run=None):
    """A build function: a module made after seeding, its norms off their start, on standard
    normal inputs, checked against every input and parameter; `run(module, *inputs)` says how to
    call it (default: the module's output, the first of a tuple)."""
    def build():
        ta.manual_seed(0)
        module = off_their_start(make())
        inputs = leaves(*input_shapes)

        def output(*args):
            if run is not None:
                return run(module, *args[:len(inputs)])
            out = module(*args[:len(inputs)])
            return out[0] if isinstance(out, tuple) else out
        return output, [*inputs, *module.parameters()]
    return build


def causal_cached(attention, x):
    """Four tokens into the cache, then two more: their output, which reaches the first four
    only through the cached keys and values."""
    cache = LayerCache()
    attention(x[:, :4], causal=True, cache=cache)
    return attention(x[:, 4:], causal=True, cache=cache)[0]             # (2, 2, 8)


def cross_cached(attention, x, audio):
    """Two steps of cross-attention: the second reuses the audio's keys and values the first
    computed and cached (its gradient reaches the audio through them)."""
    cache = LayerCache()
    first = attention(x[:, :1], audio, cache=cache)[0]                  # (2, 1, 8)
    return ta.concatenate([first, attention(x[:, 1:], audio, cache=cache)[0]], axis=1)


def whisper(cached=False):
    """The whole model on fixed ids and random features: its logits, or with `cached` the last
    two positions' after the first three went into a WhisperCache (self and cross)."""
    def build():
        ta.manual_seed(0)
        model = off_their_start(nn.Whisper(dataclasses.replace(TINY)))
        features, = leaves((2, 3, 6))

        def logits(features, *parameters):
            if not cached:
                return model(features, FIXED_IDS)
            audio = model.encoder(features)
            cache = model.empty_cache()
            model.decoder(FIXED_IDS[:, :3], audio, cache)
            return model.decoder(FIXED_IDS[:, 3:], audio, cache)
        return logits, [features, *model.parameters()]
    return build


LAYER_CASES = [
    LayerCase("Whisper's FrameConvolution, stride 1", built(lambda: FrameConvolution(3, 4),
                                                            (2, 5, 3))),
    LayerCase("Whisper's FrameConvolution, stride 2, odd frames",
              built(lambda: FrameConvolution(3, 4, stride=2), (2, 7, 3))),
    LayerCase("WhisperAttention, encoder (no mask)", built(lambda: WhisperAttention(8, 2),
                                                           (2, 5, 8))),
    LayerCase("WhisperAttention, causal, cached step",
              built(lambda: WhisperAttention(8, 2), (2, 6, 8), run=causal_cached)),
    LayerCase("WhisperAttention, cross-attention, cached audio keys",
              built(lambda: WhisperAttention(8, 4), (2, 2, 8), (2, 5, 8), run=cross_cached)),
    LayerCase("Whisper's EncoderBlock", built(lambda: EncoderBlock(8, 2, 12), (2, 4, 8))),
    LayerCase("Whisper's DecoderBlock", built(lambda: DecoderBlock(8, 2, 12), (2, 3, 8),
                                              (2, 4, 8))),
    LayerCase("Whisper (random directions)", whisper(), directions=4),
    LayerCase("Whisper, cached step (random directions)", whisper(cached=True), directions=4),
]
