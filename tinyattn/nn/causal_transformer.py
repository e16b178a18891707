"""Chapter 2. A small GPT-style language model: token ids (B, T) -> next-token logits (B, T,
vocab_size).

    embedding (+ positions) -> num_layers causal TransformerBlocks -> LayerNorm -> Linear

Chapter 2 builds it, with its choice of positions; nn/generation.py gives it `generate`, which
writes text one token at a time with a key/value cache. Chapter 3 (nn/pretrained.py) adds
`from_pretrained` and `save_pretrained`, which read and write GPT-2's own files.
"""
import contextlib

import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype, number, one_of, optional
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.nn import causal_transformer_checks
from tinyattn.nn.layers import Embedding, LayerNorm, Linear
from tinyattn.nn.module import Module
from tinyattn.nn.positions import PositionalEncoding, Rotary
from tinyattn.nn.transformer import TransformerBlock
from tinyattn.arrays import data_of

POSITIONAL = ("sinusoidal", "learned", "rope", "alibi", "none")


class CausalTransformer(Module):
    """A GPT-style language model of causal TransformerBlocks.

    `scale` is passed to every attention layer (None: 1 / sqrt(head_dim); 1.0: unscaled).
    `hidden_dim` is the feed-forward width (default 4 * embed_dim).

    `positional` says how the model knows where a token is (tinyattn/functional/positions.py):
      "sinusoidal"  the fixed table of "Attention Is All You Need", added to the embeddings
      "learned"     an nn.Embedding(max_len, embed_dim) of positions, added to the embeddings
      "rope"        every attention layer rotates its queries and keys (F.rope)
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

    @door(causal_transformer_checks.heads_fit_positions, vocab_size=at_least(1), embed_dim=at_least(1),
          num_heads=at_least(1), num_layers=at_least(1), max_len=at_least(1),
          dropout=between(0, 1), scale=optional(number), dtype=floating_dtype,
          positional=one_of(*POSITIONAL), hidden_dim=optional(at_least(1)),
          layer_norm_eps=between(0), tied_head=bool)
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
        self.blocks = [TransformerBlock(embed_dim, num_heads, hidden_dim, dropout=dropout,
                                        scale=scale, dtype=dtype, layer_norm_eps=layer_norm_eps)
                       for _ in range(num_layers)]
        if positional == "rope":        # each attention's queries and keys rotated (nn/positions)
            for block in self.blocks:
                Rotary(block.attn)
        self.ln = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.head = Linear(embed_dim, vocab_size, bias=not tied_head, dtype=dtype)
        if tied_head:       # one Parameter in two places: its gradient sums both uses
            self.head.weight = self.embed.weight        # (vocab_size, E): Linear's (out, in)

    @door(causal_transformer_checks.ids_and_cache_fit, return_weights=bool, last_only=bool)
    def forward(self, ids, cache=None, return_weights=False, last_only=False):
        """Logits (B, T, vocab_size); with return_weights, also each block's attention weights.
        `last_only=True` gives the last position's logits alone, (B, 1, vocab_size): all that
        generation reads, for one row of the head's product (E x vocab_size) instead of T.

        `cache` (a KVCache from `empty_cache()`, nn/generation.py) holds the keys and values of
        the tokens seen so far: the ids are then the next tokens of the same sequences, at the
        positions after the cached ones, and the logits are those the model gives them in the
        whole sequence. The cache grows by the ids' length.
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
        mask = causal_mask(T, start + T, bias, offset=start)            # (T or H, T, start + T)
        weights = []
        with attached(cache):           # the cached keys and values come before the new ones
            for block in self.blocks:
                x, block_weights = block(x, mask, return_weights=True)  # (B, T, E)
                weights.append(block_weights)                           # (B, H, T, start + T)
        if last_only:
            x = x[:, -1:]                                               # (B, 1, E)
        logits = self.head(self.hook("final", self.ln(x)))              # (B, T or 1, vocab_size)
        return (logits, weights) if return_weights else logits


def attached(cache):
    """A `with` block during which `cache` feeds its model's attention layers (nothing, for no
    cache)."""
    return contextlib.nullcontext() if cache is None else cache.attached()
