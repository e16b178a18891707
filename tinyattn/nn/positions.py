"""The positions a model adds to its token embeddings: the sinusoidal table of "Attention Is All
You Need" as a layer. (Learned positions are an `nn.Embedding` of positions; rotary embeddings and
ALiBi act inside attention instead: tinyattn/functional/positions.py derives all four.)
"""
import tinyattn.functional as F
from tinyattn.arguments import at_least, door
from tinyattn.nn import checks
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
