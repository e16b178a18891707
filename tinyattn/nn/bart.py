"""Chapter 6. BART (Lewis et al. 2019, "BART: Denoising Sequence-to-Sequence Pre-training") and
Marian (Junczys-Dowmunt et al. 2018; the OPUS-MT translators, Tiedemann & Thottingal 2020): the
encoder-decoder of "Attention Is All You Need" almost as it was, where T5 (nn/t5.py) changed it.
The skeleton is T5's: `start` runs the encoder once and computes the cross-attention keys and
values once per input (T5Cache), `decode` runs the decoder on the new tokens with the cache, and
`generate` is greedy or beam search (tinyattn/beam_search.py). What differs from T5:

    positions     absolute, added to the token embeddings: BART's learned, one row per position
                  with the rows shifted by 2 (position p reads row p + 2: fairseq kept the first
                  two rows for padding); Marian's the sinusoids of the 2017 paper, sines in the
                  first half of the features and cosines in the second (not interleaved)
    embeddings    times sqrt(d_model) when scale_embedding (Marian's checkpoints); BART then
                  LayerNorms the sum (layernorm_embedding), Marian does not
    blocks        post-norm, as in 2017: x = norm(x + sublayer(x)), LayerNorm with its bias
    attention     scores scaled by D^-1/2; biases on q, k, v and out (BartAttention)
    feed-forward  up, activation, down, with biases: GELU as defined (erf: F.gelu(x,
                  approximate="none")) in BART, SiLU ("swish") in Marian
    head          the embedding table, plus `final_logits_bias` (a vector over the vocabulary,
                  kept with the weights; zero in BART's checkpoints, Marian's bans its pad token
                  with -inf there)

bart-large is BartSettings' defaults (vocabulary 50265, d_model 1024, 12 + 12 blocks of 16
heads, feed-forward 4096, 1024 positions: 406M parameters); Helsinki-NLP/opus-mt-en-de is
MARIAN_EN_DE (vocabulary 58101, d_model 512, 6 + 6 blocks of 8 heads, feed-forward 2048, 512
positions, SiLU, scaled embeddings: 74M). nn/bart_checkpoints.py reads and writes their files.
"""
import dataclasses
import math

import numpy as np

import tinyattn.functional as F
from tinyattn import rng
from tinyattn.arguments import at_least, between, door, floating_dtype
from tinyattn.arrays import data_of
from tinyattn.beam_search import beam_search, greedy_search
from tinyattn.engine import no_grad
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.nn import bart_checks as checks
from tinyattn.nn.layers import Embedding, LayerNorm, Linear
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.t5 import T5Attention, T5Cache

ACTIVATIONS = {"gelu": lambda x: F.gelu(x, approximate="none"),     # as defined, with erf
               "swish": F.silu, "silu": F.silu}                      # x sigmoid(x)


@dataclasses.dataclass(frozen=True)
class BartSettings:
    """BART's and Marian's sizes and switches, named as their config.json names them; the
    defaults are bart-large's. `model_type` "bart" (learned positions, the embedding norm) or
    "marian" (sinusoids, none); `activation_function` "gelu" (exact) or "swish" (SiLU)."""
    vocab_size: int = 50265
    d_model: int = 1024
    encoder_layers: int = 12
    decoder_layers: int = 12
    encoder_attention_heads: int = 16
    decoder_attention_heads: int = 16
    encoder_ffn_dim: int = 4096
    decoder_ffn_dim: int = 4096
    max_position_embeddings: int = 1024
    activation_function: str = "gelu"
    scale_embedding: bool = False
    tied_head: bool = True
    pad_token_id: int = 1
    eos_token_id: int = 2
    decoder_start_token_id: int = 2
    model_type: str = "bart"


MARIAN_EN_DE = BartSettings(vocab_size=58101, d_model=512, encoder_layers=6, decoder_layers=6,
                            encoder_attention_heads=8, decoder_attention_heads=8,
                            encoder_ffn_dim=2048, decoder_ffn_dim=2048,
                            max_position_embeddings=512, activation_function="swish",
                            scale_embedding=True, pad_token_id=58100, eos_token_id=0,
                            decoder_start_token_id=58100, model_type="marian")


def marian_positions(positions, d_model):
    """Marian's sinusoidal table (positions, d_model), float64: feature j of position p is
    sin(p / 10000^(2j / d)) for j < d/2 and cos(p / 10000^(2(j - d/2) / d)) after (with an odd d
    the sines take one feature more)."""
    sines = (d_model + 1) // 2
    angles = np.arange(positions)[:, None] / 10000.0 ** (2 * np.arange(sines) / d_model)
    return np.concatenate([np.sin(angles), np.cos(angles[:, :d_model // 2])], axis=1)


class LearnedPositions(Module):
    """BART's positions: row p + 2 of `weight` (max_position_embeddings + 2, E) added to the
    embeddings of position p, then a LayerNorm (`norm`: layernorm_embedding)."""

    def __init__(self, max_positions, d_model, dtype=None):
        table = rng.generator.standard_normal((max_positions + 2, d_model))
        self.weight = Parameter(table.astype(dtype))
        self.norm = LayerNorm(d_model, dtype=dtype)

    def forward(self, x, start):
        T = x.shape[1]
        return self.norm(x + self.weight[start + 2:start + 2 + T])      # (B, T, E)


class SinusoidalPositions(Module):
    """Marian's positions: the sinusoids of position p (marian_positions) added, nothing
    learned."""

    def __init__(self, max_positions, d_model, dtype=None):
        self.table = marian_positions(max_positions, d_model).astype(dtype)    # (P, E)

    def forward(self, x, start):
        T = x.shape[1]
        return x + self.table[start:start + T]                          # (B, T, E)


class BartAttention(T5Attention):
    """The 2017 paper's attention, as BART and Marian hold it: T5Attention with biases on q, k,
    v and o, and the queries scaled by D^-1/2 (the scores are then q . k / sqrt(D))."""

    def __init__(self, d_model, num_heads, dtype=None):
        self.num_heads, self.head_dim = num_heads, d_model // num_heads
        self.q = Linear(d_model, d_model, dtype=dtype)
        self.k = Linear(d_model, d_model, dtype=dtype)
        self.v = Linear(d_model, d_model, dtype=dtype)
        self.o = Linear(d_model, d_model, dtype=dtype)

    def queries(self, x):
        return super().queries(x) * self.head_dim ** -0.5              # (B, H, T, D)


class BartFeedForward(Module):
    """down(activation(up(x))), with biases: fc1 and fc2 in the hub's names."""

    def __init__(self, d_model, hidden, activation, dtype=None):
        self.activation = activation
        self.up = Linear(d_model, hidden, dtype=dtype)
        self.down = Linear(hidden, d_model, dtype=dtype)

    def forward(self, x):
        return self.down(ACTIVATIONS[self.activation](self.up(x)))     # (..., E)


class BartEncoderBlock(Module):
    """Post-norm: x = norm(x + attn(x)), then x = norm(x + mlp(x))."""

    def __init__(self, settings, dtype=None):
        E = settings.d_model
        self.attn = BartAttention(E, settings.encoder_attention_heads, dtype)
        self.attn_norm = LayerNorm(E, dtype=dtype)
        self.mlp = BartFeedForward(E, settings.encoder_ffn_dim, settings.activation_function,
                                   dtype)
        self.mlp_norm = LayerNorm(E, dtype=dtype)

    def forward(self, x, allowed):
        keys, values = self.attn.keys_values(x)                         # (B, H, S, D) each
        x = self.attn_norm(x + self.attn(x, keys, values, None, allowed))   # (B, S, E)
        return self.mlp_norm(x + self.mlp(x))                           # (B, S, E)


class BartDecoderBlock(Module):
    """Post-norm: causal self-attention (cached), cross-attention, feed-forward, each
    x = norm(x + sublayer(x))."""

    def __init__(self, settings, dtype=None):
        E, H = settings.d_model, settings.decoder_attention_heads
        self.attn = BartAttention(E, H, dtype)
        self.attn_norm = LayerNorm(E, dtype=dtype)
        self.cross_attn = BartAttention(E, H, dtype)
        self.cross_norm = LayerNorm(E, dtype=dtype)
        self.mlp = BartFeedForward(E, settings.decoder_ffn_dim, settings.activation_function,
                                   dtype)
        self.mlp_norm = LayerNorm(E, dtype=dtype)

    def forward(self, x, causal, cache, cross_keys, cross_values, source_allowed):
        keys, values = self.attn.keys_values(x)                         # (B, H, T, D): new ones
        keys, values = cache.extended(keys, values)                     # (B, H, S, D): all so far
        x = self.attn_norm(x + self.attn(x, keys, values, None, causal))    # (B, T, E)
        x = self.cross_norm(x + self.cross_attn(x, cross_keys, cross_values, None,
                                                source_allowed))        # (B, T, E)
        return self.mlp_norm(x + self.mlp(x))                           # (B, T, E)


class Bart(Module):
    """BartForConditionalGeneration: `model(input_ids, decoder_input_ids, attention_mask=None)` ->
    logits (B, T, vocab_size), as T5's (nn/t5.py says what each argument is). Read `forward`,
    then `start` and `decode`; the positions are where BART and Marian differ. Its attentions'
    weights have T5's names (encoder.N.attn.weights, decoder.N.cross_attn.weights, ...)."""

    config = None       # the config.json it was read from (nn/bart_checkpoints.py), if it was
    Positions = LearnedPositions

    @door(checks.settings_fit, dtype=floating_dtype)
    def __init__(self, settings, dtype=None):
        s = self.settings = settings
        self.shared = Embedding(s.vocab_size, s.d_model, dtype=dtype)
        self.encoder_positions = self.Positions(s.max_position_embeddings, s.d_model, dtype)
        self.decoder_positions = self.Positions(s.max_position_embeddings, s.d_model, dtype)
        self.encoder = [BartEncoderBlock(s, dtype) for _ in range(s.encoder_layers)]
        self.decoder = [BartDecoderBlock(s, dtype) for _ in range(s.decoder_layers)]
        self.head = Linear(s.d_model, s.vocab_size, bias=False, dtype=dtype)
        if s.tied_head:
            self.head.weight = self.shared.weight                       # (vocab, E)
        self.final_logits_bias = Parameter(np.zeros((1, s.vocab_size), dtype=dtype),
                                           requires_grad=False)         # kept, never trained

    @property
    def embed_scale(self):
        return math.sqrt(self.settings.d_model) if self.settings.scale_embedding else 1.0

    @door(checks.inputs_fit)
    def forward(self, input_ids, decoder_input_ids, attention_mask=None):
        cache = self.start(input_ids, attention_mask)   # the encoder, and cross keys/values
        return self.decode(decoder_input_ids, cache)                    # (B, T, vocab)

    def start(self, input_ids, attention_mask=None):
        """The encoder on the input (B, S), once, and every decoder block's cross-attention keys
        and values from its output: a T5Cache (nn/t5.py), ready for `decode`."""
        ids = np.asarray(data_of(input_ids))                            # (B, S)
        allowed = None if attention_mask is None else \
            (np.asarray(data_of(attention_mask)) != 0)[:, None, None, :]     # (B, 1, 1, S)
        x = self.shared(ids) * self.embed_scale                         # (B, S, E)
        x = self.encoder_positions(x, 0)                                # (B, S, E)
        for block in self.encoder:
            x = block(x, allowed)                                       # (B, S, E)
        cross = [block.cross_attn.keys_values(x) for block in self.decoder]     # (B, H, S, D)
        return T5Cache(cross, allowed)

    def decode(self, decoder_input_ids, cache):
        """Logits (B, T, vocab) of the decoder's new tokens (B, T), after the `cache.length`
        tokens the cache holds; the cache then holds them too."""
        ids = np.asarray(data_of(decoder_input_ids))                    # (B, T)
        T, start = ids.shape[1], cache.length
        x = self.shared(ids) * self.embed_scale                         # (B, T, E)
        x = self.decoder_positions(x, start)                            # (B, T, E)
        causal = causal_mask(T, start + T, offset=start)                # (T, start + T)
        for block, layer, (keys, values) in zip(self.decoder, cache.layers, cache.cross):
            x = block(x, causal, layer, keys, values, cache.source_allowed)     # (B, T, E)
        cache.length += T
        return self.head(x) + self.final_logits_bias                    # (B, T, vocab)

    @no_grad()
    @door(checks.generation_fits, max_new_tokens=at_least(1), num_beams=at_least(1),
          length_penalty=between(-math.inf))
    def generate(self, input_ids, max_new_tokens, num_beams=1, length_penalty=1.0,
                 attention_mask=None):
        """As T5.generate: the tokens of transformers' generate(..., do_sample=False, num_beams,
        length_penalty, early_stopping=False), with no forced tokens."""
        s = self.settings
        cache = self.start(input_ids, attention_mask)
        if num_beams == 1:
            return greedy_search(self.decode, cache, max_new_tokens, s.decoder_start_token_id,
                                 s.eos_token_id, s.pad_token_id)
        return beam_search(self.decode, cache, max_new_tokens, num_beams, length_penalty,
                           s.decoder_start_token_id, s.eos_token_id, s.pad_token_id)

    def extra_repr(self):
        s = self.settings
        return (f"model_type={s.model_type!r}, d_model={s.d_model}, "
                f"activation_function={s.activation_function!r}")


class Marian(Bart):
    """Marian: BART with the 2017 paper's sinusoidal positions, computed (never stored or
    trained), and no LayerNorm on the embeddings."""

    Positions = SinusoidalPositions
