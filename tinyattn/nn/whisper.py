"""Chapter 6. Whisper (Radford et al. 2022, "Robust Speech Recognition via Large-Scale Weak
Supervision"): speech to text with the encoder-decoder transformer of "Attention Is All You Need",
trained on 680,000 hours of audio and their transcripts.

The audio is a log-mel spectrogram (tinyattn/audio.py): M mel bands x 2N frames, 100 frames a
second over 30 seconds. The encoder reads it as a sequence; the decoder writes the text one token
at a time, each token attending to the tokens before it (causal self-attention) and to the whole
audio (cross-attention, the idea of Bahdanau et al.'s translation model):

    encoder  frames (B, M, 2N) -> conv(k 3) -> GELU -> conv(k 3, stride 2) -> GELU: (B, N, E)
             + sinusoidal positions -> pre-LN blocks [x + attn(ln(x)); x + mlp(ln(x))] -> LN
             = the audio (B, N, E), computed once per input
    decoder  tokens (B, T) -> embedding + learned positions -> pre-LN blocks
             [x + causal attn(ln(x)); x + cross attn(ln(x), audio); x + mlp(ln(x))] -> LN
             -> x @ embedding^T = logits (B, T, vocab)

Read in this order: sinusoids and FrameConvolution (the stem), WhisperAttention (one class for
the three attentions), EncoderBlock, DecoderBlock, AudioEncoder, TextDecoder, Whisper (forward,
then generate) and WhisperCache. nn/whisper_checkpoints.py reads and writes Hugging Face's files.

What differs from chapter 1's EncoderDecoder: the stem of two convolutions over frames instead of
a token embedding; exact GELU (erf), not its tanh form; the key projection has no bias (a bias on
the keys adds q.b to every score of a query, the same for every key, which softmax cancels);
the head is the token embedding; positions are sinusoids in the encoder but learned in the
decoder. `generate` is plain greedy decoding: the special tokens that steer the real model (the
language, the task, timestamps) are the prompt a user gives as decoder_input_ids.
"""
import dataclasses
import math

import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, door, floating_dtype, optional
from tinyattn.arrays import data_of
from tinyattn.engine import no_grad, tensor
from tinyattn.functional.scaled_dot_product import attention_weights, causal_mask
from tinyattn.nn import whisper_checks as checks
from tinyattn.nn.kv_cache import LayerCache
from tinyattn.nn.layers import Embedding, LayerNorm, Linear
from tinyattn.nn.module import Module, Parameter, uniform
from tinyattn.ops import concatenate, stack

# openai/whisper-tiny's config.json in WhisperSettings' names: 37,760,640 parameters
WHISPER_TINY = dict(vocab_size=51865, num_mel_bins=80, d_model=384, encoder_layers=4,
                    encoder_heads=6, encoder_ffn_dim=1536, decoder_layers=4, decoder_heads=6,
                    decoder_ffn_dim=1536, max_source_positions=1500, max_target_positions=448,
                    eos_token_id=50257, pad_token_id=50257, decoder_start_token_id=50258)


@dataclasses.dataclass(frozen=True)
class WhisperSettings:
    """The sizes of a Whisper model (WHISPER_TINY: whisper-tiny's).

    audio     num_mel_bins (M), max_source_positions (N): the encoder reads 2N frames, N
              after the stride-2 convolution (1500 for 30 seconds)
    text      vocab_size, max_target_positions (the longest text, 448 tokens)
    width     d_model (E), encoder_heads and decoder_heads (H, dividing E), encoder_ffn_dim
              and decoder_ffn_dim (the feed-forward's hidden size, 4 E in every Whisper)
    depth     encoder_layers, decoder_layers
    head      tied_head: the logits are x @ embedding^T (every Whisper); else a matrix of its own
    tokens    eos_token_id (ends a transcript), pad_token_id (what follows it in a batch),
              decoder_start_token_id (<|startoftranscript|>), None where there is none
    """

    vocab_size: int
    num_mel_bins: int
    d_model: int
    encoder_layers: int
    encoder_heads: int
    encoder_ffn_dim: int
    decoder_layers: int
    decoder_heads: int
    decoder_ffn_dim: int
    max_source_positions: int
    max_target_positions: int
    tied_head: bool = True
    eos_token_id: int = None
    pad_token_id: int = None
    decoder_start_token_id: int = None


def sinusoids(length, channels, max_timescale=10000.0):
    """Whisper's table of encoder positions (length, channels), float64: position t is

        [sin(t w_0), ..., sin(t w_{C/2-1}), cos(t w_0), ..., cos(t w_{C/2-1})]

    with C/2 frequencies w_i = max_timescale^(-i / (C/2 - 1)), from 1 (the first) down to
    1/10000 (the last) geometrically. "Attention Is All You Need" interleaves sines and cosines
    and ends at 10000^(-(C-2)/C); Whisper puts all the sines first and ends exactly at 10000^-1.
    Transformers stores the table in the checkpoint (model.encoder.embed_positions.weight, built
    in float32); from_pretrained reads it from there, a new model computes it here."""
    frequencies = np.exp(-math.log(max_timescale) / (channels // 2 - 1)
                         * np.arange(channels // 2))                 # (C/2,)
    angles = np.arange(length)[:, None] * frequencies[None, :]      # (length, C/2)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)  # (length, C)


class FrameConvolution(Module):
    """A 1-d convolution over frames, kernel 3, padding 1 (PyTorch's Conv1d(in, out, 3,
    stride, padding=1)), written as a matmul: (B, T, in) -> (B, T', out), T' = (T - 1) // stride
    + 1.

    Output frame t is sum over k = 0, 1, 2 and channels c of weight[o, c, k] x[stride t + k - 1,
    c] + bias[o] (x is 0 outside the frames): a Linear, the same for every t, applied to the
    window of 3 frames around stride t. So stack each window's 3 frames side by side into one
    vector of 3 in numbers, (c, k) order to match weight (out, in, 3) read as (out, 3 in), and
    it is one F.linear over all windows at once. The weight keeps PyTorch's layout (out, in, 3),
    the checkpoint's.
    """

    @door(in_channels=at_least(1), out_channels=at_least(1), stride=at_least(1),
          dtype=floating_dtype)
    def __init__(self, in_channels, out_channels, stride=1, dtype=None):
        self.in_channels, self.out_channels, self.stride = in_channels, out_channels, stride
        bound = 1.0 / math.sqrt(3 * in_channels)                        # as PyTorch's Conv1d
        self.weight = uniform((out_channels, in_channels, 3), bound, np.dtype(dtype))
        self.bias = uniform((out_channels,), bound, np.dtype(dtype))

    @door(x="(B, T, in_channels)")
    def forward(self, x):
        B, T, C = x.shape
        T_out = (T - 1) // self.stride + 1
        silence = tensor(np.zeros((B, 1, C), dtype=x.dtype))           # (B, 1, C)
        padded = concatenate([silence, x, silence], axis=1)             # (B, T + 2, C)
        last = self.stride * (T_out - 1)                                # the last window's start
        shifted = [padded[:, k:k + last + 1:self.stride] for k in range(3)]   # 3 x (B, T', C)
        windows = stack(shifted, axis=-1).reshape(B, T_out, 3 * C)      # (B, T', C * 3)
        weight = self.weight.reshape(self.out_channels, 3 * C)          # (out, C * 3)
        return F.linear(windows, weight, self.bias)                     # (B, T', out)

    def extra_repr(self):
        return f"{self.in_channels}, {self.out_channels}, kernel_size=3, stride={self.stride}"


class WhisperAttention(Module):
    """Multi-head attention as Whisper computes it, (B, T, E) -> (B, T, E): chapter 1's
    MultiHeadAttention (project, split, attend, merge, project) with no bias on k_proj, in three
    uses:

        encoder self-attention   memory None, not causal: every frame sees every frame
        decoder self-attention   memory None, causal; `cache` (a LayerCache) keeps the earlier
                                 tokens' keys and values, and the new ones come after them
        cross-attention          keys and values from `memory`, the audio (B, N, E); `cache`
                                 keeps them from the first call on: they are projections of the
                                 audio alone, the same for every token generated, so a step
                                 computes only its queries

    forward(x, memory=None, causal=False, cache=None) -> (output (B, T, E), weights (B, H, T,
    S)). The activation it names: "weights" (B, H, T, S). (Transformers and openai/whisper scale
    the queries, or queries and keys, before the product; scaling the scores after it is equal.)
    """

    activations = ("weights",)

    @door(checks.heads_fit, embed_dim=at_least(1), num_heads=at_least(1), dtype=floating_dtype)
    def __init__(self, embed_dim, num_heads, dtype=None):
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.q_proj = Linear(embed_dim, embed_dim, dtype=dtype)
        self.k_proj = Linear(embed_dim, embed_dim, bias=False, dtype=dtype)
        self.v_proj = Linear(embed_dim, embed_dim, dtype=dtype)
        self.out_proj = Linear(embed_dim, embed_dim, dtype=dtype)

    @door(checks.attention_inputs_fit, x="(B, T, embed_dim)",
          memory=optional("(B, S, embed_dim)"), causal=bool)
    def forward(self, x, memory=None, causal=False, cache=None):
        B, T, E = x.shape
        H, D = self.num_heads, self.head_dim

        def split(y):                                                   # (B, S, E)
            return y.reshape(B, y.shape[1], H, D).transpose(0, 2, 1, 3)     # (B, H, S, D)

        # 1. project, 2. split into heads
        q = split(self.q_proj(x))                                       # (B, H, T, D)
        if memory is None:                                  # self-attention: x's own tokens
            k, v = split(self.k_proj(x)), split(self.v_proj(x))         # (B, H, T, D)
            if cache is not None:
                k, v = cache.extended(k, v)                 # (B, H, S, D): earlier tokens first
        elif cache is None or cache.keys is None:           # cross-attention: the audio's
            k, v = split(self.k_proj(memory)), split(self.v_proj(memory))   # (B, H, N, D)
            if cache is not None:
                cache.extended(k, v)                        # kept for every later step
        else:                                               # the same audio: the same keys
            k, v = cache.keys, cache.values                             # (B, H, N, D)
        S = k.shape[2]
        # 3. attend; causal: the T new tokens are the last T of the S, each sees those up to it
        mask = causal_mask(T, S, offset=S - T) if causal else None      # (T, S) or None
        weights = self.hook("weights", attention_weights(q, k, mask))   # (B, H, T, S)
        heads = weights @ v                                             # (B, H, T, D)
        # 4. merge the heads side by side, 5. project
        merged = heads.transpose(0, 2, 1, 3).reshape(B, T, E)           # (B, T, E)
        return self.out_proj(merged), weights                           # (B, T, E), (B, H, T, S)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


class EncoderBlock(Module):
    """One pre-LN block of the encoder: x + attn(ln(x)), then x + fc2(gelu(fc1(ln(x)))), GELU
    as defined (erf)."""

    def __init__(self, embed_dim, num_heads, ffn_dim, dtype=None):
        self.embed_dim = embed_dim
        self.attn_norm = LayerNorm(embed_dim, dtype=dtype)
        self.attn = WhisperAttention(embed_dim, num_heads, dtype)
        self.mlp_norm = LayerNorm(embed_dim, dtype=dtype)
        self.fc1 = Linear(embed_dim, ffn_dim, dtype=dtype)
        self.fc2 = Linear(ffn_dim, embed_dim, dtype=dtype)

    @door(x="(B, N, embed_dim)")
    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))[0]                                 # (B, N, E)
        hidden = F.gelu(self.fc1(self.mlp_norm(x)), approximate="none")         # (B, N, ffn)
        return x + self.fc2(hidden)                                             # (B, N, E)


class DecoderBlock(Module):
    """One pre-LN block of the decoder: x + causal attn(ln(x)), then x + cross_attn(ln(x),
    audio), then x + fc2(gelu(fc1(ln(x)))). `self_cache` and `cross_cache` are this layer's
    LayerCaches (WhisperCache), or None."""

    def __init__(self, embed_dim, num_heads, ffn_dim, dtype=None):
        self.embed_dim = embed_dim
        self.attn_norm = LayerNorm(embed_dim, dtype=dtype)
        self.attn = WhisperAttention(embed_dim, num_heads, dtype)
        self.cross_norm = LayerNorm(embed_dim, dtype=dtype)
        self.cross_attn = WhisperAttention(embed_dim, num_heads, dtype)
        self.mlp_norm = LayerNorm(embed_dim, dtype=dtype)
        self.fc1 = Linear(embed_dim, ffn_dim, dtype=dtype)
        self.fc2 = Linear(ffn_dim, embed_dim, dtype=dtype)

    @door(checks.block_caches_fit, x="(B, T, embed_dim)", audio="(B, N, embed_dim)")
    def forward(self, x, audio, self_cache=None, cross_cache=None):
        x = x + self.attn(self.attn_norm(x), causal=True, cache=self_cache)[0]      # (B, T, E)
        x = x + self.cross_attn(self.cross_norm(x), audio, cache=cross_cache)[0]    # (B, T, E)
        hidden = F.gelu(self.fc1(self.mlp_norm(x)), approximate="none")             # (B, T, ffn)
        return x + self.fc2(hidden)                                                 # (B, T, E)


class AudioEncoder(Module):
    """Log-mel frames (B, M, 2N) -> the audio (B, N, E): the stem of two convolutions (the
    second halves the frames: 3000 -> 1500 for 30 seconds, 20 ms each), the sinusoidal
    positions (a Parameter that does not learn: requires_grad False), the blocks, a LayerNorm."""

    def __init__(self, settings, dtype=None):
        s = self.settings = settings
        self.conv1 = FrameConvolution(s.num_mel_bins, s.d_model, stride=1, dtype=dtype)
        self.conv2 = FrameConvolution(s.d_model, s.d_model, stride=2, dtype=dtype)
        self.positions = Parameter(sinusoids(s.max_source_positions, s.d_model).astype(dtype),
                                   requires_grad=False)                 # (N, E)
        self.blocks = [EncoderBlock(s.d_model, s.encoder_heads, s.encoder_ffn_dim, dtype)
                       for _ in range(s.encoder_layers)]
        self.norm = LayerNorm(s.d_model, dtype=dtype)

    @door(checks.encoder_features_fit)
    def forward(self, input_features):
        frames = input_features.transpose(0, 2, 1)                      # (B, 2N, M)
        x = F.gelu(self.conv1(frames), approximate="none")              # (B, 2N, E)
        x = F.gelu(self.conv2(x), approximate="none")                   # (B, N, E)
        x = x + self.positions                                          # (B, N, E)
        for block in self.blocks:
            x = block(x)                                                # (B, N, E)
        return self.norm(x)                                             # (B, N, E)


class TextDecoder(Module):
    """Token ids (B, T) and the audio (B, N, E) -> logits (B, T, vocab): the token embedding
    plus a learned position embedding, the blocks, a LayerNorm, and the head, the embedding
    itself (tied_head: its gradient sums both uses)."""

    def __init__(self, settings, dtype=None):
        s = self.settings = settings
        self.embed = Embedding(s.vocab_size, s.d_model, dtype=dtype)
        self.positions = Embedding(s.max_target_positions, s.d_model, dtype=dtype)
        self.blocks = [DecoderBlock(s.d_model, s.decoder_heads, s.decoder_ffn_dim, dtype)
                       for _ in range(s.decoder_layers)]
        self.norm = LayerNorm(s.d_model, dtype=dtype)
        self.head = Linear(s.d_model, s.vocab_size, bias=False, dtype=dtype)
        if s.tied_head:
            self.head.weight = self.embed.weight                        # (vocab, E)

    @door(checks.decoder_inputs_fit, last_only=bool)
    def forward(self, ids, audio, cache=None, last_only=False):
        ids = np.asarray(data_of(ids))                                  # (B, T)
        T = ids.shape[1]
        start = 0 if cache is None else len(cache)                      # tokens already seen
        x = self.embed(ids) + self.positions(np.arange(start, start + T))   # (B, T, E)
        for i, block in enumerate(self.blocks):
            layer_caches = (None, None) if cache is None else (cache.self_attention[i],
                                                               cache.cross_attention[i])
            x = block(x, audio, *layer_caches)                          # (B, T, E)
        if cache is not None:
            cache.length += T
        if last_only:
            x = x[:, -1:]                                               # (B, 1, E)
        return self.head(self.norm(x))                                  # (B, T or 1, vocab)


class Whisper(Module):
    """Whisper: log-mel features (B, M, 2N) and decoder token ids (B, T) -> logits (B, T,
    vocab_size), as transformers' WhisperForConditionalGeneration computes them. `settings` is
    a WhisperSettings (WHISPER_TINY: whisper-tiny's sizes); the parameters take `dtype`
    (default float64) and start as PyTorch's layers start.

    The activations it names are the attention weights: "encoder.blocks.N.attn.weights" (B, H,
    N, N), "decoder.blocks.N.attn.weights" (B, H, T, T) and "decoder.blocks.N.cross_attn.weights"
    (B, H, T, N), transformers' encoder_attentions, decoder_attentions and cross_attentions."""

    config = None       # the config.json it was read from (from_pretrained), if it was

    @door(checks.settings_fit, dtype=floating_dtype)
    def __init__(self, settings, dtype=None):
        self.settings = settings
        self.encoder = AudioEncoder(settings, dtype)
        self.decoder = TextDecoder(settings, dtype)

    @door(checks.features_and_ids_fit)
    def forward(self, input_features, decoder_input_ids):
        """The logits (B, T, vocab_size) of each token of decoder_input_ids (B, T) predicting the
        next, given the audio of input_features (B, num_mel_bins, 2 max_source_positions)."""
        audio = self.encoder(input_features)                            # (B, N, E)
        return self.decoder(decoder_input_ids, audio)                   # (B, T, vocab)

    @no_grad()
    @door(checks.generation_fits, max_new_tokens=at_least(0))
    def generate(self, input_features, decoder_input_ids, max_new_tokens):
        """Greedy decoding: decoder_input_ids (B, T) continued by max_new_tokens tokens, each the
        argmax of the logits of the sequence so far, (B, T + max_new_tokens) int64. A row that
        has emitted eos_token_id continues with pad_token_id (eos_token_id if there is none);
        when every row has, generation stops early, with fewer columns.

        The audio is encoded once. The first step runs the prompt into a WhisperCache, each
        later step the newest token alone: its self-attention adds its key and value to those
        cached, its cross-attention reuses the audio's keys and values computed at the first
        step. None of transformers' Whisper rules (forced, suppressed or timestamp tokens)."""
        s = self.settings
        ids = np.asarray(data_of(decoder_input_ids), dtype=np.int64)     # (B, T)
        pad = s.eos_token_id if s.pad_token_id is None else s.pad_token_id
        audio = self.encoder(input_features)                            # (B, N, E), once
        cache = self.empty_cache()
        finished = np.zeros(ids.shape[0], dtype=bool)                   # (B,)
        new = ids                                                       # what the next step runs
        for _ in range(max_new_tokens):
            logits = self.decoder(new, audio, cache, last_only=True)    # (B, 1, vocab)
            chosen = logits.data[:, -1].argmax(axis=-1)                 # (B,)
            if s.eos_token_id is not None:
                chosen = np.where(finished, pad, chosen)                # (B,)
                finished |= chosen == s.eos_token_id
            ids = np.concatenate([ids, chosen[:, None]], axis=1)        # (B, T + 1)
            new = ids[:, -1:]                                           # (B, 1)
            if finished.all():
                break
        return ids

    def empty_cache(self):
        """A WhisperCache for this model, empty."""
        return WhisperCache(self)

    def extra_repr(self):
        s = self.settings
        return (f"d_model={s.d_model}, layers={s.encoder_layers}+{s.decoder_layers}, "
                f"num_mel_bins={s.num_mel_bins}, vocab_size={s.vocab_size}")


class WhisperCache:
    """What generation keeps, one LayerCache per decoder layer for each attention: its
    self-attention's keys and values of the tokens so far (growing by one token a step), its
    cross-attention's of the audio (N positions, filled at the first step and never changed).
    `len(cache)` is the number of tokens seen."""

    def __init__(self, model):
        self.model = model
        layers = len(model.decoder.blocks)
        self.self_attention = [LayerCache() for _ in range(layers)]
        self.cross_attention = [LayerCache() for _ in range(layers)]
        self.length = 0

    def __len__(self):
        return self.length

    @property
    def nbytes(self):
        """The bytes of the keys and values it holds: 2 * layers * B * H * (T + N) * D *
        itemsize."""
        return sum(layer.nbytes for layer in self.self_attention + self.cross_attention)
