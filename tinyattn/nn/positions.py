"""Chapter 2. Positions as layers: the sinusoidal table of "Attention Is All You Need", added to the
token embeddings, and chapter 2's attention, which knows where its tokens are: rotary positions
act inside it, and a key/value cache gives it the keys and values of earlier tokens. (Learned
positions are an `nn.Embedding` of positions; ALiBi is a bias on the scores:
tinyattn/functional/positions.py derives all four.)

`MultiHeadAttention` here is chapter 1's five steps with two more, written out in its forward:

    1. project  the inputs into queries, keys and values     (B, L, E), (B, T, E)
    2. split    each projection into num_heads heads         (B, H, L, D), (B, H, T, D)
    3. rotate   with rope, queries and keys turned by their positions start, start + 1, ...
    4. cache    with a cache, the keys and values of the earlier tokens put before the new
                ones                                         (B, H, T, D) -> (B, H, S, D)
    5. attend   every head on its own                        -> weights (B, H, L, S), (B, H, L, D)
    6. merge    the heads back side by side                  (B, H, L, D) -> (B, L, E)
    7. project  the merged heads with out_proj               (B, L, E) -> (B, L, E)

with L new queries, T new keys, and S keys in all: the c cached ones and the T new ones.

With causal attention a token's key and value depend only on the tokens up to it, so once
computed they never change: generation computes the new tokens' alone and takes the others from
the cache (nn/kv_cache.py). With rope, the cache keeps rotated keys, each turned by its own
position, which is what the new queries need: a score depends only on the distance between its
query's and its key's positions.
"""
import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype, number, optional
from tinyattn.functional.scaled_dot_product import attention_weights, causal_mask
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


class MultiHeadAttention(multi_head_attention.MultiHeadAttention):
    """Chapter 1's multi-head attention (its docstring says the rest) that knows where its tokens
    are: with `rope=True` each head's queries and keys are rotated by their positions (`F.rope`,
    RoFormer), and given a `cache` (an nn.LayerCache) its new keys and values come after those
    of the earlier tokens. `rope` needs an even head_dim (F.rope turns pairs).

    forward(query, key=None, value=None, attn_mask=None, is_causal=False, start=0, cache=None)
    -> (output (B, L, E), weights (B, H, L, S)): the L queries and T new keys are at positions
    start, start + 1, ... (the first token's is 0; after a cache of c tokens, c). With a cache,
    S = c + T keys take part and `attn_mask` broadcasts to (B, H, L, S); `is_causal` lets query i
    see the keys up to its own position, j <= c + i (chapter 1's, for c = 0).

    The activations it names are chapter 1's: "q", "k", "v" are the new tokens' (B, H, L or T,
    D), after the rotation and before the cache puts its own in front, so that a function
    chapter 4's `hooks` attaches to "k" during generation sees the prompt's keys, then one new
    token's per step, as TransformerLens's hook_k does; what it returns is what the cache keeps.
    """

    @door(checks.heads_fit_rope, embed_dim=at_least(1), num_heads=at_least(1), bias=bool,
          dropout=between(0, 1), scale=optional(number), dtype=floating_dtype, rope=bool)
    def __init__(self, embed_dim, num_heads, bias=True, dropout=0.0, scale=None, dtype=None,
                 rope=False):
        super().__init__(embed_dim, num_heads, bias, dropout, scale, dtype)
        self.rope = rope

    @door(checks.inputs_and_cache_fit, is_causal=bool, start=at_least(0))
    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False, start=0,
                cache=None):
        key = query if key is None else key
        value = key if value is None else value
        (B, L, E), T = query.shape, key.shape[1]
        H, D = self.num_heads, self.head_dim

        # 1. project
        q = self.q_proj(query)                                          # (B, L, E)
        k = self.k_proj(key)                                            # (B, T, E)
        v = self.v_proj(value)                                          # (B, T, E)
        # 2. split into heads: head h owns features h*D ... (h+1)*D - 1
        q = q.reshape(B, L, H, D).transpose(0, 2, 1, 3)                 # (B, H, L, D)
        k = k.reshape(B, T, H, D).transpose(0, 2, 1, 3)                 # (B, H, T, D)
        v = v.reshape(B, T, H, D).transpose(0, 2, 1, 3)                 # (B, H, T, D)
        # 3. rotate by their positions: the new tokens are at start, start + 1, ...
        if self.rope:
            q = F.rope(q, offset=start)                                 # (B, H, L, D)
            k = F.rope(k, offset=start)                                 # (B, H, T, D)
        q, k, v = self.hook("q", q), self.hook("k", k), self.hook("v", v)   # the new tokens'
        # 4. the keys and values the cache kept, before the new ones: S in all
        if cache is not None:
            k, v = cache.extended(k, v)                                 # (B, H, S, D)
        S = k.shape[2]                                                  # T without a cache
        # 5. attend, every head at once; query i (position S - T + i) sees the keys up to it
        if is_causal:
            attn_mask = causal_mask(L, S, attn_mask, offset=S - T)      # (..., L, S)
        dropout_p = self.dropout if self.training else 0.0
        weights = self.hook("weights", attention_weights(
            q, k, attn_mask, dropout_p, False, self.scale))             # (B, H, L, S)
        heads = self.hook("heads", weights @ v)                         # (B, H, L, D)
        # 6. merge the heads side by side
        merged = heads.transpose(0, 2, 1, 3).reshape(B, L, E)           # (B, L, E)
        # 7. project
        return self.hook("out", self.out_proj(merged)), weights         # (B, L, E), (B, H, L, S)

    def extra_repr(self):
        return super().extra_repr() + (", rope=True" if self.rope else "")
