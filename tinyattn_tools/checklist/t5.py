"""The checklist's rows for chapter 6's encoder-decoders: T5 (tinyattn/nn/t5.py), its attention
with a position bias and masks, a whole model (ReLU; gated GELU with its own head), and a
decoding step on a cache, whose keys and values came from earlier steps and the
cross-attention's from the encoder; BART and Marian (tinyattn/nn/bart.py) whole."""
import dataclasses

import numpy as np

import tinyattn as ta
from tinyattn.nn.bart import Bart, BartSettings, Marian
from tinyattn.nn.t5 import RelativePositionBias, T5, T5Attention, T5Settings
from tinyattn_tools.checklist.cases import LayerCase, leaves, with_parameters

SETTINGS = T5Settings(vocab_size=11, d_model=4, d_kv=3, d_ff=6, num_layers=1,
                      num_decoder_layers=2, num_heads=2, relative_attention_num_buckets=4,
                      relative_attention_max_distance=6)
GATED = T5Settings(**{**vars(SETTINGS), "feed_forward_proj": "gated-gelu", "tied_head": False,
                      "scale_decoder_outputs": False})
IDS, DECODER_IDS = np.array([[3, 4, 5, 6], [7, 8, 0, 0]]), np.array([[0, 5, 6], [0, 10, 2]])
MASK = np.array([[1, 1, 1, 1], [1, 1, 0, 0]])


def attention_with_bias():
    """T5Attention on x (2, 5, 4) with a bucketed one-sided bias and a causal mask."""
    ta.manual_seed(0)
    attention = T5Attention(4, 2, 3)
    positions = RelativePositionBias(4, 6, 2, bidirectional=False)
    causal = np.tril(np.ones((5, 5), dtype=bool))
    (x,) = leaves((2, 5, 4))

    def fn(x, *_):
        keys, values = attention.keys_values(x)
        return attention(x, keys, values, positions(5, 5), causal)
    return fn, [x, *attention.parameters(), *positions.parameters()]


BART = BartSettings(vocab_size=11, d_model=4, encoder_layers=1, decoder_layers=1,
                    encoder_attention_heads=2, decoder_attention_heads=1, encoder_ffn_dim=5,
                    decoder_ffn_dim=6, max_position_embeddings=8, scale_embedding=True)
MARIAN = dataclasses.replace(BART, model_type="marian", activation_function="swish")


def model(kind, settings):
    def build():
        ta.manual_seed(0)
        return with_parameters(kind(settings), IDS, DECODER_IDS, attention_mask=MASK)
    return build


def cached_step():
    """The third decoder token alone, after two on the cache (built inside: the cache's keys are
    functions of the parameters too)."""
    ta.manual_seed(0)
    t5 = T5(SETTINGS)

    def fn(*_):
        cache = t5.start(IDS, MASK)
        t5.decode(DECODER_IDS[:, :2], cache)
        return t5.decode(DECODER_IDS[:, 2:], cache)
    return fn, t5.parameters()


LAYER_CASES = [
    LayerCase("T5Attention, relative bias, causal", attention_with_bias),
    LayerCase("T5, ReLU, tied and scaled head, padding", model(T5, SETTINGS)),
    LayerCase("T5 v1.1, gated GELU, own head (random directions)", model(T5, GATED),
              directions=4),
    LayerCase("BART, exact GELU, learned positions (random directions)", model(Bart, BART),
              directions=4),
    LayerCase("Marian, SiLU, sinusoids (random directions)", model(Marian, MARIAN),
              directions=4),
    LayerCase("T5, a cached decoding step (random directions)", cached_step, directions=4),
]
