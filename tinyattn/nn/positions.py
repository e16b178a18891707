"""Chapter 2. Positions as layers: the sinusoidal table of "Attention Is All You Need", added to the
token embeddings, and rotary positions, which act inside attention instead. (Learned positions are
an `nn.Embedding` of positions; ALiBi is a bias on the scores: tinyattn/functional/positions.py
derives all four.)

Rotary positions reach chapter 1's attention through its extension point, the hook points of each
head's queries "q" and keys "k" (`Module.hook`), the same points the key/value cache of
nn/generation.py uses: `Rotary(attention)` attaches a rotation to both, so the layer itself is
unchanged. `MultiHeadAttention(..., rope=True)` is chapter 1's layer with a Rotary attached.
"""
import weakref

import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype, number, optional
from tinyattn.nn import multi_head_attention, positions_checks as checks
from tinyattn.nn.module import Module


class PositionalEncoding(Module):
    """Adds the sinusoidal position table (`F.sinusoidal_positions`) to a batch of embeddings
    (B, T, E); no parameters. forward(x, offset=0) adds the rows offset ... offset + T - 1: the
    positions of tokens that come after `offset` cached ones."""

    @door(embed_dim=at_least(0), max_len=at_least(0))
    def __init__(self, embed_dim, max_len=1024):
        self.embed_dim, self.max_len = embed_dim, max_len
        self.table = F.sinusoidal_positions(max_len, embed_dim)

    @door(checks.within_the_table, x="(..., T, embed_dim)", offset=at_least(0))
    def forward(self, x, offset=0):
        T = x.shape[-2]
        rows = self.table[offset:offset + T].astype(x.dtype, copy=False)     # (T, E)
        return x + rows                                                       # (B, T, E)

    def extra_repr(self):
        return f"{self.embed_dim}, max_len={self.max_len}"


class Rotary:
    """Rotary positions (`F.rope`, RoFormer) for one attention layer: attached to its "q" and "k"
    hook points, it rotates each head's queries and keys (B, H, T, D) by their positions, so that
    every score depends on the distance between query and key.

    The tokens of a forward pass are at positions start, start + 1, ...: `start` is 0, unless a
    key/value cache is attached (KVCache sets it to the number of tokens it holds, for the length
    of its `attached()` block). The rotation runs before the cache's own function on "k" (it was
    attached first), so the cache keeps rotated keys, and the new tokens' queries and keys
    continue from the positions of the cached ones. A function that chapter 4's `hooks` attaches
    to "q" or "k" comes after the rotation (and before the cache), and sees the rotated queries
    and keys of the new tokens.
    """

    def __init__(self, attention, base=10000.0):
        self.start, self.base = 0, base
        attention.attach("q", self.rotated)
        attention.attach("k", self.rotated)
        ROTARIES[attention] = self

    def rotated(self, x):
        return F.rope(x, offset=self.start, base=self.base)              # (B, H, T, D)


ROTARIES = weakref.WeakKeyDictionary()      # attention layer -> its Rotary


def rotary_of(attention):
    """The Rotary attached to `attention`, or None."""
    return ROTARIES.get(attention)


class MultiHeadAttention(multi_head_attention.MultiHeadAttention):
    """Chapter 1's multi-head attention (its docstring says the rest), and `rope=True`: each
    head's queries and keys rotated by their positions (`Rotary`), counted from the first token,
    or from the first cached one. `rope` needs an even head_dim (F.rope turns pairs)."""

    @door(checks.heads_fit_rope, embed_dim=at_least(1), num_heads=at_least(1), bias=bool,
          dropout=between(0, 1), scale=optional(number), dtype=floating_dtype, rope=bool)
    def __init__(self, embed_dim, num_heads, bias=True, dropout=0.0, scale=None, dtype=None,
                 rope=False):
        super().__init__(embed_dim, num_heads, bias, dropout, scale, dtype)
        if rope:
            Rotary(self)

    @property
    def rope(self):
        return rotary_of(self) is not None

    def extra_repr(self):
        return super().extra_repr() + (", rope=True" if self.rope else "")
