"""Chapter 6. T5 (Raffel et al. 2020, "Exploring the Limits of Transfer Learning with a Unified
Text-to-Text Transformer"): the encoder-decoder of "Attention Is All You Need", as translators and
summarisers run it. Every task is text to text: "translate English to German: ..." in, the German
out, one token at a time.

    encoder   reads the input once, each token attending to every other (bidirectional)
    decoder   the output so far: each token attends to the tokens before it (causal), then to
              the encoded input (cross-attention), then goes through its feed-forward
    head      the decoder's last state against every token's embedding: the next token's logits

What T5 changed from the 2017 transformer, each where it acts below:

1. No absolute positions. Each self-attention adds to its scores a learned number per head for
   how far the key is from the query, looked up by bucket (relative_position_bucket): distances
   under a few tokens have a bucket each, farther ones share buckets that widen logarithmically
   up to max_distance, past which all share the last. The encoder tells keys before the query
   from keys after it; the decoder sees only keys before. The first block of each stack holds
   the table (the hub's names put it on block 0); the stack computes the bias (1, H, T, S) once
   and every block adds the same. Cross-attention has none.
2. No 1/sqrt(D) in the scores. The scale moved into the initialisation: T5 draws the query
   weights with std (E D)^-1/2 where the keys' have E^-1/2 (transformers' _init_weights), so
   q . k starts at the size the scaled product would have; a trained checkpoint carries the
   scale in its weights. T5Attention draws its query D^-1/2 smaller than a Linear would.
3. RMSNorm with no mean subtracted and no bias (T5LayerNorm: chapter 5's RMSNorm), before each
   sublayer (pre-norm: x + sublayer(norm(x))) and once after each stack.
4. No biases anywhere; a ReLU feed-forward, down(relu(up(x))) (T5 v1.1, "gated-gelu": chapter
   5's GatedFeedForward, down(gelu(gate(x)) * up(x)), GELU in its tanh form, transformers'
   "gelu_new").
5. One embedding table for the input, the output and (original T5) the head. The tied head
   multiplies the decoder's output by d_model^-0.5 first: the table's rows are drawn with std 1,
   d_model^1/2 times a head's (`scale_decoder_outputs`; T5 v1.1 unties the head and drops it).

The cache (generation, tinyattn/beam_search.py): `start` runs the encoder once per input and
computes each decoder block's cross-attention keys and values from its output, once: they depend
on the input alone, never on the tokens generated, so every step reuses them (and a row's beams
share them). The self-attention keys and values grow by one token a step (chapter 2's
LayerCache); their relative positions come from how many tokens the cache holds.

t5-small, the smallest of the paper's models, is T5Settings' defaults: vocabulary 32128, d_model
512, 8 heads of 64, feed-forward 2048, 6 encoder and 6 decoder blocks, 32 buckets up to 128
tokens: 60M parameters. nn/t5_checkpoints.py reads and writes the hub's files.
"""
import dataclasses
import math

import numpy as np

import tinyattn.functional as F
from tinyattn import ops, rng
from tinyattn.arguments import at_least, between, door, floating_dtype
from tinyattn.arrays import data_of
from tinyattn.beam_search import beam_search, greedy_search
from tinyattn.engine import no_grad
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.nn import t5_checks as checks
from tinyattn.nn.kv_cache import LayerCache
from tinyattn.nn.layers import Embedding, Linear
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.open_layers import GatedFeedForward, RMSNorm


@dataclasses.dataclass(frozen=True)
class T5Settings:
    """T5's sizes and switches, named as its config.json names them; the defaults are t5-small's.

    sizes      vocab_size, d_model (E), d_kv (D, a head's width: H D need not be E), d_ff (the
               feed-forward's), num_layers (encoder blocks), num_decoder_layers, num_heads (H)
    positions  relative_attention_num_buckets, relative_attention_max_distance
    switches   feed_forward_proj "relu" or "gated-gelu"; scale_decoder_outputs (d_model^-0.5
               before the head); tied_head (the head is the embedding table)
    ids        decoder_start_token_id (the decoder's first input), pad_token_id, eos_token_id
    """
    vocab_size: int = 32128
    d_model: int = 512
    d_kv: int = 64
    d_ff: int = 2048
    num_layers: int = 6
    num_decoder_layers: int = 6
    num_heads: int = 8
    relative_attention_num_buckets: int = 32
    relative_attention_max_distance: int = 128
    layer_norm_epsilon: float = 1e-6
    feed_forward_proj: str = "relu"
    scale_decoder_outputs: bool = True
    tied_head: bool = True
    decoder_start_token_id: int = 0
    pad_token_id: int = 0
    eos_token_id: int = 1


def relative_position_bucket(relative_position, bidirectional, num_buckets, max_distance):
    """The bucket of each relative position (key position - query position), an int array of
    its shape, as Mesh TensorFlow's T5 computes it:

        bidirectional (encoder)  half the buckets for keys after the query, half for before;
                                 the distance is |key - query|
        one-sided (decoder)      all buckets for keys before the query (or at it); a key after
                                 it (never seen: causal) counts as distance 0
        within a half of n       distances 0 ... n/2 - 1 exact: a bucket each
                                 farther: n/2 + floor(log(d / (n/2)) / log(max_distance /
                                 (n/2)) * n/2), logarithmically wider, capped at n - 1

    so near tokens are told apart one by one and far ones only roughly, and every distance
    beyond max_distance shares the last bucket: the table is the same size for any length. The
    logarithm is taken in float32, as T5 and transformers take it (a bucket is an integer: the
    same in either precision on these sizes, but float32 is the rule's)."""
    relative_position = np.asarray(relative_position)
    buckets = np.zeros(relative_position.shape, dtype=np.int64)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0) * num_buckets        # keys after the query: upper half
        distance = np.abs(relative_position)
    else:
        distance = np.maximum(-relative_position, 0)            # keys after the query: 0
    exact = num_buckets // 2
    ratio = np.maximum(distance, exact).astype(np.float32) / np.float32(exact)   # >= 1
    far = exact + (np.log(ratio) / np.float32(math.log(max_distance / exact))
                   * np.float32(num_buckets - exact)).astype(np.int64)
    far = np.minimum(far, num_buckets - 1)
    return buckets + np.where(distance < exact, distance, far)


class RelativePositionBias(Module):
    """A stack's position bias: a learned number per bucket and head, `weight` (num_buckets, H),
    looked up for each (query, key) pair. forward(T, S, start) -> (1, H, T, S), for T queries at
    positions start ... start + T - 1 and S keys at positions 0 ... S - 1."""

    def __init__(self, num_buckets, max_distance, num_heads, bidirectional, dtype=None):
        self.num_buckets, self.max_distance = num_buckets, max_distance
        self.bidirectional = bidirectional
        table = rng.generator.standard_normal((num_buckets, num_heads))
        self.weight = Parameter(table.astype(dtype))

    def forward(self, T, S, start=0):
        queries = np.arange(start, start + T)[:, None]                  # (T, 1)
        keys = np.arange(S)[None, :]                                    # (1, S)
        buckets = relative_position_bucket(keys - queries, self.bidirectional,
                                           self.num_buckets, self.max_distance)   # (T, S)
        return self.weight[buckets].transpose(2, 0, 1)[None]            # (1, H, T, S)

    def extra_repr(self):
        return (f"num_buckets={self.num_buckets}, max_distance={self.max_distance}, "
                f"bidirectional={self.bidirectional}")


class T5Attention(Module):
    """T5's multi-head attention: q, k, v (E -> H D) and o (H D -> E), no biases, scores not
    scaled by 1/sqrt(D) (see the top of this file), a position bias added to them.

    keys_values(source) -> (keys, values), (B, H, S, D) each: what the queries attend to, from
    the same tokens (self-attention) or from the encoded input (cross-attention, computed once).
    forward(x, keys, values, bias, allowed) -> (B, T, E): x (B, T, E) the queries' tokens, `bias`
    (1, H, T, S) or None, `allowed` a boolean mask broadcasting to (B, H, T, S) (causal, padding)
    or None. The activation it names: "weights" (B, H, T, S).
    """

    activations = ("weights",)

    def __init__(self, d_model, num_heads, d_kv, dtype=None):
        self.num_heads, self.head_dim = num_heads, d_kv
        self.q = Linear(d_model, num_heads * d_kv, bias=False, dtype=dtype)
        self.k = Linear(d_model, num_heads * d_kv, bias=False, dtype=dtype)
        self.v = Linear(d_model, num_heads * d_kv, bias=False, dtype=dtype)
        self.o = Linear(num_heads * d_kv, d_model, bias=False, dtype=dtype)
        self.q.weight = Parameter(self.q.weight.data * d_kv ** -0.5)   # the scale, moved here

    def keys_values(self, source):
        B, S, _ = source.shape
        H, D = self.num_heads, self.head_dim
        keys = self.k(source).reshape(B, S, H, D).transpose(0, 2, 1, 3)         # (B, H, S, D)
        values = self.v(source).reshape(B, S, H, D).transpose(0, 2, 1, 3)       # (B, H, S, D)
        return keys, values

    def queries(self, x):
        B, T, _ = x.shape
        q = self.q(x).reshape(B, T, self.num_heads, self.head_dim)     # (B, T, H, D)
        return q.transpose(0, 2, 1, 3)                                  # (B, H, T, D)

    def forward(self, x, keys, values, bias, allowed):
        B, T, _ = x.shape
        H, D = self.num_heads, self.head_dim
        q = self.queries(x)                                             # (B, H, T, D)
        scores = q @ keys.mT                                            # (B, H, T, S), unscaled
        if bias is not None:
            scores = scores + bias                                      # (B, H, T, S)
        if allowed is not None:
            scores = ops.where(allowed, scores, -math.inf)              # (B, H, T, S)
        weights = self.hook("weights", F.softmax(scores, axis=-1))      # (B, H, T, S)
        heads = weights @ values                                        # (B, H, T, D)
        merged = heads.transpose(0, 2, 1, 3).reshape(B, T, H * D)       # (B, T, H D)
        return self.o(merged)                                           # (B, T, E)


class ReluFeedForward(Module):
    """T5's feed-forward: down(relu(up(x))), no biases (the hub's wi and wo)."""

    def __init__(self, d_model, d_ff, dtype=None):
        self.up = Linear(d_model, d_ff, bias=False, dtype=dtype)
        self.down = Linear(d_ff, d_model, bias=False, dtype=dtype)

    def forward(self, x):
        return self.down(F.relu(self.up(x)))                            # (..., E)


def feed_forward(settings, dtype):
    if settings.feed_forward_proj == "relu":
        return ReluFeedForward(settings.d_model, settings.d_ff, dtype)
    return GatedFeedForward(settings.d_model, settings.d_ff, "gelu_tanh", dtype=dtype)


class EncoderBlock(Module):
    """x + attn(norm(x)) over the whole input, then x + mlp(norm(x))."""

    def __init__(self, settings, dtype=None):
        E, eps = settings.d_model, settings.layer_norm_epsilon
        self.attn_norm = RMSNorm(E, eps, dtype=dtype)
        self.attn = T5Attention(E, settings.num_heads, settings.d_kv, dtype)
        self.mlp_norm = RMSNorm(E, eps, dtype=dtype)
        self.mlp = feed_forward(settings, dtype)

    def forward(self, x, bias, allowed):
        normed = self.attn_norm(x)                                      # (B, S, E)
        keys, values = self.attn.keys_values(normed)                    # (B, H, S, D) each
        x = x + self.attn(normed, keys, values, bias, allowed)          # (B, S, E)
        return x + self.mlp(self.mlp_norm(x))                           # (B, S, E)


class DecoderBlock(Module):
    """x + attn(norm(x)) over the tokens so far (causal, cached), x + cross_attn(norm(x)) over
    the encoded input, then x + mlp(norm(x))."""

    def __init__(self, settings, dtype=None):
        E, H, D, eps = (settings.d_model, settings.num_heads, settings.d_kv,
                        settings.layer_norm_epsilon)
        self.attn_norm = RMSNorm(E, eps, dtype=dtype)
        self.attn = T5Attention(E, H, D, dtype)
        self.cross_norm = RMSNorm(E, eps, dtype=dtype)
        self.cross_attn = T5Attention(E, H, D, dtype)
        self.mlp_norm = RMSNorm(E, eps, dtype=dtype)
        self.mlp = feed_forward(settings, dtype)

    def forward(self, x, bias, causal, cache, cross_keys, cross_values, source_allowed):
        normed = self.attn_norm(x)                                      # (B, T, E)
        keys, values = self.attn.keys_values(normed)                    # (B, H, T, D): new ones
        keys, values = cache.extended(keys, values)                     # (B, H, S, D): all so far
        x = x + self.attn(normed, keys, values, bias, causal)           # (B, T, E)
        x = x + self.cross_attn(self.cross_norm(x), cross_keys, cross_values, None,
                                source_allowed)                         # (B, T, E)
        return x + self.mlp(self.mlp_norm(x))                           # (B, T, E)


class T5(Module):
    """T5ForConditionalGeneration: `model(input_ids, decoder_input_ids, attention_mask=None)` ->
    logits (B, T, vocab_size). input_ids (B, S) is the input; attention_mask (B, S), 1 for a
    token and 0 for padding (None: no padding); decoder_input_ids (B, T) the output so far,
    starting with decoder_start_token_id (the labels shifted right, in training).

    Read `forward`, then `start` (the encoder, once per input) and `decode` (the decoder, on the
    new tokens, with the cache); `generate` decodes with greedy or beam search. Chapter 4's
    `run_with_cache` names each attention's weights (B, H, T, S): encoder.N.attn.weights,
    decoder.N.attn.weights and decoder.N.cross_attn.weights.
    """

    config = None       # the config.json it was read from (nn/t5_checkpoints.py), if it was

    @door(checks.settings_fit, dtype=floating_dtype)
    def __init__(self, settings, dtype=None):
        s = self.settings = settings
        self.shared = Embedding(s.vocab_size, s.d_model, dtype=dtype)   # input, output, head
        self.encoder_positions = RelativePositionBias(
            s.relative_attention_num_buckets, s.relative_attention_max_distance, s.num_heads,
            bidirectional=True, dtype=dtype)
        self.encoder = [EncoderBlock(s, dtype) for _ in range(s.num_layers)]
        self.encoder_norm = RMSNorm(s.d_model, s.layer_norm_epsilon, dtype=dtype)
        self.decoder_positions = RelativePositionBias(
            s.relative_attention_num_buckets, s.relative_attention_max_distance, s.num_heads,
            bidirectional=False, dtype=dtype)
        self.decoder = [DecoderBlock(s, dtype) for _ in range(s.num_decoder_layers)]
        self.decoder_norm = RMSNorm(s.d_model, s.layer_norm_epsilon, dtype=dtype)
        self.head = Linear(s.d_model, s.vocab_size, bias=False, dtype=dtype)
        if s.tied_head:             # one Parameter in two places: its gradient sums both uses
            self.head.weight = self.shared.weight                       # (vocab, E)

    @door(checks.inputs_fit)
    def forward(self, input_ids, decoder_input_ids, attention_mask=None):
        cache = self.start(input_ids, attention_mask)   # the encoder, and cross keys/values
        return self.decode(decoder_input_ids, cache)                    # (B, T, vocab)

    def start(self, input_ids, attention_mask=None):
        """Run the encoder on the input (B, S) and compute every decoder block's cross-attention
        keys and values from its output: a T5Cache, ready for `decode`."""
        ids = np.asarray(data_of(input_ids))                            # (B, S)
        B, S = ids.shape
        allowed = None if attention_mask is None else \
            (np.asarray(data_of(attention_mask)) != 0)[:, None, None, :]     # (B, 1, 1, S)
        x = self.shared(ids)                                            # (B, S, E)
        bias = self.encoder_positions(S, S)                             # (1, H, S, S): once
        for block in self.encoder:
            x = block(x, bias, allowed)                                 # (B, S, E)
        encoded = self.encoder_norm(x)                                  # (B, S, E)
        cross = [block.cross_attn.keys_values(encoded) for block in self.decoder]  # (B, H, S, D)
        return T5Cache(cross, allowed)

    def decode(self, decoder_input_ids, cache):
        """Logits (B, T, vocab) of the decoder's new tokens (B, T), which come after the
        `cache.length` tokens the cache holds; the cache then holds them too."""
        ids = np.asarray(data_of(decoder_input_ids))                    # (B, T)
        T, start = ids.shape[1], cache.length
        x = self.shared(ids)                                            # (B, T, E)
        bias = self.decoder_positions(T, start + T, start)              # (1, H, T, start + T)
        causal = causal_mask(T, start + T, offset=start)                # (T, start + T)
        for block, layer, (keys, values) in zip(self.decoder, cache.layers, cache.cross):
            x = block(x, bias, causal, layer, keys, values, cache.source_allowed)   # (B, T, E)
        cache.length += T
        x = self.decoder_norm(x)                                        # (B, T, E)
        if self.settings.scale_decoder_outputs:
            x = x * self.settings.d_model ** -0.5                       # a Python float: no upcast
        return self.head(x)                                             # (B, T, vocab)

    @no_grad()
    @door(checks.generation_fits, max_new_tokens=at_least(1), num_beams=at_least(1),
          length_penalty=between(-math.inf))
    def generate(self, input_ids, max_new_tokens, num_beams=1, length_penalty=1.0,
                 attention_mask=None):
        """The output's tokens (B, columns), a NumPy int64 array starting with
        decoder_start_token_id: greedy (num_beams=1) or beam search (tinyattn/beam_search.py),
        the tokens transformers' `generate(..., do_sample=False, num_beams=num_beams,
        length_penalty=length_penalty, early_stopping=False)` gives. The encoder runs once."""
        s = self.settings
        cache = self.start(input_ids, attention_mask)
        if num_beams == 1:
            return greedy_search(self.decode, cache, max_new_tokens, s.decoder_start_token_id,
                                 s.eos_token_id, s.pad_token_id)
        return beam_search(self.decode, cache, max_new_tokens, num_beams, length_penalty,
                           s.decoder_start_token_id, s.eos_token_id, s.pad_token_id)

    def extra_repr(self):
        s = self.settings
        return (f"d_model={s.d_model}, num_heads={s.num_heads}, d_kv={s.d_kv}, "
                f"feed_forward_proj={s.feed_forward_proj!r}")


class T5Cache:
    """What decoding an input keeps between steps: each decoder block's cross-attention keys and
    values `cross` [(B, H, S, D) twice], fixed; the mask of the input's padding
    `source_allowed` (B, 1, 1, S) or None; each block's self-attention LayerCache `layers`,
    growing; and `length`, the decoder tokens it holds (where the next token's position is)."""

    def __init__(self, cross, source_allowed):
        self.cross, self.source_allowed = cross, source_allowed
        self.layers = [LayerCache() for _ in cross]
        self.length = 0

    @property
    def batch_size(self):
        return self.cross[0][0].shape[0]

    def repeated(self, n):
        """Each input's rows n times over, (B n) rows, before beam search's first step: every
        beam of an input attends to the same encoded input."""
        rows = np.repeat(np.arange(self.batch_size), n)                 # (B n,)
        self.cross = [(keys[rows], values[rows]) for keys, values in self.cross]
        if self.source_allowed is not None:
            self.source_allowed = self.source_allowed[rows]             # (B n, 1, 1, S)
        self.reorder(rows)

    def reorder(self, rows):
        """Keep the self-attention keys and values of the rows `rows` (an int array), in that
        order: the beams beam search continues. The cross-attention's need no reordering: a beam
        is only ever replaced by a beam of the same input, whose cross keys and values are the
        same."""
        for layer in self.layers:
            if layer.keys is not None:
                layer.keys, layer.values = layer.keys[rows], layer.values[rows]
