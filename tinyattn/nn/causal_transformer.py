"""Chapter 2. A small GPT-style language model: token ids (B, T) -> next-token logits (B, T,
vocab_size).

    embedding (+ positions) -> num_layers causal blocks -> LayerNorm -> Linear

GPT-2 small is this model with 12 layers of 12 heads, 768 wide (embed_dim), 1024 learned positions
(max_len) and 50257 tokens (vocab_size), its output head tied to the token embedding.

Chapter 2 builds it, with its choice of positions, and its block (`CausalBlock`: chapter 1's
TransformerBlock around chapter 2's attention, nn/positions.py), which takes the position of its
first token and its layer's key/value cache (nn/kv_cache.py); nn/generation.py gives it
`generate`, which writes text one token at a time with that cache. Chapter 3 (nn/pretrained.py)
adds `from_pretrained` and `save_pretrained`, which read and write GPT-2's own files.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, door
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.nn import causal_transformer_checks as checks
from tinyattn.nn.causal_transformer_checks import POSITIONAL  # noqa: F401  (positional's choices)
from tinyattn.nn.kv_cache import KVCache
from tinyattn.nn.layers import Dropout, Embedding, FeedForward, LayerNorm, Linear
from tinyattn.nn.module import Module
from tinyattn.nn.positions import MultiHeadAttention, PositionalEncoding
from tinyattn.nn.transformer import TransformerBlock
from tinyattn.arrays import data_of


class CausalBlock(TransformerBlock):
    """Chapter 1's pre-LN block (its docstring says the rest) around chapter 2's attention: with
    `rope`, its queries and keys rotated by their positions, and the keys and values of earlier
    tokens from a cache.

    forward(x, attn_mask=None, is_causal=False, return_weights=False, start=0, cache=None): the
    tokens x (B, T, E) are at positions start, start + 1, ...; `cache` is this block's
    LayerCache (one of a KVCache's `layers`), or None. The attention weights are (B, H, T, S), S
    the cached keys and the new ones. Its feed-forward is GPT-2's, with GELU in its tanh form.
    """

    @door(checks.heads_fit_rope, **checks.BLOCK_ARGUMENTS)
    def __init__(self, embed_dim, num_heads, hidden_dim=None, dropout=0.0, scale=None,
                 dtype=None, layer_norm_eps=1e-5, rope=False):
        self.embed_dim = embed_dim
        self.ln1 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, scale=scale,
                                       dtype=dtype, rope=rope)
        self.ln2 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.ff = FeedForward(embed_dim, hidden_dim, dropout=dropout, dtype=dtype)
        self.dropout = Dropout(dropout)

    @door(checks.block_input_and_cache_fit, x="(B, T, embed_dim)", is_causal=bool,
          return_weights=bool, start=at_least(0))
    def forward(self, x, attn_mask=None, is_causal=False, return_weights=False, start=0,
                cache=None):
        x = self.hook("resid_pre", x)                                       # (B, T, E)
        attended, weights = self.attn(self.ln1(x), attn_mask=attn_mask, is_causal=is_causal,
                                      start=start, cache=cache)   # (B, T, E), (B, H, T, S)
        x = self.hook("resid_mid", x + self.dropout(attended))              # (B, T, E)
        x = x + self.hook("mlp_out", self.ff(self.ln2(x)))                  # (B, T, E)
        x = self.hook("resid_post", x)                                      # (B, T, E)
        return (x, weights) if return_weights else x


class CausalTransformer(Module):
    """A GPT-style language model of causal blocks (CausalBlock).

    `scale` is passed to every attention layer (None: 1 / sqrt(head_dim); 1.0: unscaled).
    `hidden_dim` is the feed-forward width (default 4 * embed_dim).

    `positional` says how the model knows where a token is (tinyattn/functional/positions.py):
      "sinusoidal"  the fixed table of "Attention Is All You Need", added to the embeddings
      "learned"     an nn.Embedding(max_len, embed_dim) of positions, added to the embeddings
      "rope"        every attention layer rotates its queries and keys (rope=True)
      "alibi"       every attention layer adds ALiBi's distance penalty to its scores
      "none"        nothing: a layer cannot tell orders apart (one causal layer sees, before each
                    position, a multiset of tokens; from the second on, the causal mask lets
                    some order in: demo 8)
    The first two are tables of max_len rows, so sequences are at most max_len long; the last
    three have no length limit (max_len is then unused).

    `tied_head=True` makes the output head the token embedding itself, without bias:
    logits = ln(x) @ embed.weight^T, so the one Parameter `embed.weight` gets the gradients of
    both its uses (listed once by `parameters()` and `state_dict()`, as "embed.weight"). GPT-2 is
    this model with learned positions, a tied head and the `layer_norm_eps` of its config.

    The activations it names (`Module.hook`): the token embeddings with their positions, "embed"
    (B, T, E), and the last LayerNorm's output, "final" (B, T, E), which the head turns into
    logits; its blocks and their attention name theirs.
    """

    activations = ("embed", "final")

    @door(checks.heads_fit_positions, **checks.MODEL_ARGUMENTS)
    def __init__(self, vocab_size, embed_dim, num_heads, num_layers, max_len=256, dropout=0.0,
                 scale=None, dtype=None, positional="sinusoidal", hidden_dim=None,
                 layer_norm_eps=1e-5, tied_head=False):
        self.positional, self.max_len, self.num_heads = positional, max_len, num_heads
        self.tied_head = tied_head
        self.embed = Embedding(vocab_size, embed_dim, dtype=dtype)
        if positional == "sinusoidal":
            self.positions = PositionalEncoding(embed_dim, max_len)
        elif positional == "learned":
            self.positions = Embedding(max_len, embed_dim, dtype=dtype)
        self.blocks = [CausalBlock(embed_dim, num_heads, hidden_dim, dropout=dropout, scale=scale,
                                   dtype=dtype, layer_norm_eps=layer_norm_eps,
                                   rope=positional == "rope")
                       for _ in range(num_layers)]
        self.ln = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.head = Linear(embed_dim, vocab_size, bias=not tied_head, dtype=dtype)
        if tied_head:       # one Parameter in two places: its gradient sums both uses
            self.head.weight = self.embed.weight        # (vocab_size, E): Linear's (out, in)

    @door(checks.ids_and_cache_fit, return_weights=bool, last_only=bool)
    def forward(self, ids, cache=None, return_weights=False, last_only=False):
        """Logits (B, T, vocab_size); with return_weights, also each block's attention weights.
        `last_only=True` gives the last position's logits alone, (B, 1, vocab_size): all that
        generation reads, for one row of the head's product (E x vocab_size) instead of T.

        `cache` (a KVCache from `empty_cache()`, nn/kv_cache.py) holds the keys and values of
        the tokens seen so far: the ids are then the next tokens of the same sequences, at the
        positions after the cached ones, and the logits are those the model gives them in the
        whole sequence. Each block gets its layer's cache, which grows by the ids' length.
        """
        ids = np.asarray(data_of(ids))                                  # (B, T)
        T = ids.shape[1]
        start = 0 if cache is None else len(cache)                      # tokens already cached
        x = self.embed(ids)                                             # (B, T, E)
        if self.positional == "sinusoidal":
            x = self.positions(x, offset=start)                         # (B, T, E)
        elif self.positional == "learned":
            x = x + self.positions(np.arange(start, start + T))         # (B, T, E) + (T, E)
        x = self.hook("embed", x)                                       # (B, T, E)
        # query i, at position start + i, sees the keys j <= start + i (and ALiBi's penalty)
        bias = (F.alibi_bias(self.num_heads, T, x.dtype, offset=start)
                if self.positional == "alibi" else None)                # (H, T, start + T)
        mask = causal_mask(T, start + T, bias, offset=start)  # (T, start + T); ALiBi: (H, ...)
        layer_caches = [None] * len(self.blocks) if cache is None else cache.layers
        weights = []
        for block, layer_cache in zip(self.blocks, layer_caches):
            x, block_weights = block(x, mask, return_weights=True, start=start,
                                     cache=layer_cache)                 # (B, T, E)
            weights.append(block_weights)                               # (B, H, T, start + T)
        if cache is not None:
            cache.length += T
        if last_only:
            x = x[:, -1:]                                               # (B, 1, E)
        logits = self.head(self.hook("final", self.ln(x)))              # (B, T or 1, vocab_size)
        return (logits, weights) if return_weights else logits

    def empty_cache(self):
        """A KVCache for this model, empty, for `forward(ids, cache=...)`."""
        return KVCache(self)
