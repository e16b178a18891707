"""Multi-head attention: several attention heads side by side, each looking at its own slice of the
embedding.

    1. project  the inputs into queries, keys and values     (B, T, E) -> (B, T, E)
    2. split    each projection into num_heads heads         (B, T, E) -> (B, H, T, D)
                (rope=True: queries and keys then rotated by position; with a cache: the
                cached keys and values put before the new ones)
    3. attend   every head on its own (scaled dot-product)   -> (B, H, L, D), weights (B, H, L, S)
    4. merge    the heads back side by side                  (B, H, L, D) -> (B, L, E)
    5. project  the merged heads with out_proj               (B, L, E) -> (B, L, E)

with E = embed_dim, H = num_heads, D = E / H the head size, L the query length, S the key length.

Generating text, a model runs one new token at a time; a `KVCache` keeps the keys and values of
the tokens before it, so that each step computes only the new token's (the end of this file).
"""
import tinyattn.functional as F
from tinyattn import arguments
from tinyattn.arguments import (at_least, between, door, floating_dtype, heads_fit, number,
                                optional)
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.nn.layers import Linear
from tinyattn.nn.module import Module
from tinyattn.ops import concatenate


def key_value_and_cache_fit(self, query, key=None, value=None, attn_mask=None, is_causal=False,
                            cache=None):
    """key and value (default: query) are (B, S, E) like the query; and the cache and mask fit."""
    key = query if key is None else key
    arguments.shapes(dtype=self.dtype, layer=self, query=(query, "(B, L, embed_dim)"),
                     key=(key, "(B, S, embed_dim)"),
                     value=(key if value is None else value, "(B, S, embed_dim)"))
    attention_call_fits(self.num_heads, query, key, attn_mask, is_causal, cache)


def attention_call_fits(num_heads, query, key, attn_mask, is_causal, cache):
    """What MultiHeadAttention.forward and the blocks that hand these arguments on check besides
    the shapes of query (B, L, E) and key (B, S, E): cache None or a KVCache of the same batch,
    and attn_mask fitting the scores (B, num_heads, L, S), S counting the cached keys too."""
    if cache is not None and not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache, got {type(cache).__name__}")
    (B, L, E), S = query.shape, key.shape[1] + (0 if cache is None else len(cache))
    if cache is not None:
        cache_fits(cache, "query", query.shape, query.dtype, num_heads, E // num_heads)
    arguments.attention_mask(attn_mask, (B, num_heads, L, S), query.dtype)


def cache_fits(cache, name, shape, dtype, num_heads, head_dim):
    """A KVCache that holds keys must hold keys that this layer made for this batch: of as many
    sequences as the batch `name` (of `shape`, batch first) continues, num_heads heads of head_dim
    features, of the layer's `dtype`."""
    if not len(cache):
        return
    B, H, _, D = cache.keys.shape
    if B != shape[0]:
        raise ValueError(f"the cache holds the keys of {B} sequences, but {name} is a batch of "
                         f"{shape[0]} (shape {shape})")
    if (H, D) != (num_heads, head_dim):
        raise ValueError(f"the cache holds keys of {H} heads of size {D}, but the layer has "
                         f"{num_heads} heads of size {head_dim}: was it filled by another layer?")
    if cache.keys.dtype != dtype:
        raise TypeError(f"the cache holds keys of dtype {cache.keys.dtype}, but the layer "
                        f"computes in {dtype}")


class MultiHeadAttention(Module):
    """Multi-head attention with batch-first inputs (B, T, E), as in "Attention Is All You Need".

    forward(query, key=None, value=None, attn_mask=None, is_causal=False, cache=None)
    -> (output, weights):
    `key` defaults to `query` (self-attention) and `value` to `key`; for cross-attention pass the
    other sequence as `key`. `weights` are per head, (B, num_heads, L, S).

    `scale` multiplies the scores; the default is 1 / sqrt(head_dim), `scale=1.0` leaves them
    unscaled. `dropout` is the probability of dropping an attention weight while training; the
    returned weights are those after dropout, so in training their rows need not sum to 1 (as in
    PyTorch). `dtype` is the parameters' dtype (default float64).

    `attn_mask` means what it means in `F.scaled_dot_product_attention`: True marks the (query, key)
    pairs that take part, a float mask is added to the scores; it broadcasts to (B, H, L, S), so a
    (L, S) mask applies to every batch and head and a (B, 1, 1, S) mask hides padding keys. A
    per-example mask needs its head axis: (B, 1, L, S), not (B, L, S), which NumPy would line up
    with (H, L, S). Note that PyTorch's `nn.MultiheadAttention` uses the opposite convention for
    boolean masks (True = masked).

    `rope=True` rotates every head's queries and keys by their positions (`F.rope`, RoFormer),
    counted from the start of the sequence, or of the cache.

    `cache` (a `KVCache`, see below) makes the call one step of generation: the keys and values
    of this call's tokens are appended to those of the earlier tokens, the queries attend over all
    of them, and the positions (for rope, and for the causal mask) continue from the cache.
    """

    @door(heads_fit, embed_dim=at_least(1), num_heads=at_least(1), bias=bool,
          dropout=between(0, 1), scale=optional(number), dtype=floating_dtype, rope=bool)
    def __init__(self, embed_dim, num_heads, bias=True, dropout=0.0, scale=None, dtype=None,
                 rope=False):
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.rope = bool(rope)
        self.dropout = float(dropout)
        self.scale = scale          # None: 1 / sqrt(head_dim); 1.0: unscaled (see demos)
        self.q_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.k_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.v_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)

    @door(key_value_and_cache_fit, is_causal=bool)
    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False, cache=None):
        key = query if key is None else key
        value = key if value is None else value
        (B, L, E), S = query.shape, key.shape[1]
        H, D = self.num_heads, self.head_dim
        start = 0 if cache is None else len(cache)              # tokens before this call's

        # 1. project
        q = self.q_proj(query)                                  # (B, L, E)
        k = self.k_proj(key)                                    # (B, S, E)
        v = self.v_proj(value)                                  # (B, S, E)
        # 2. split into heads: head h owns features h*D ... (h+1)*D - 1
        q = q.reshape(B, L, H, D).transpose(0, 2, 1, 3)         # (B, H, L, D)
        k = k.reshape(B, S, H, D).transpose(0, 2, 1, 3)         # (B, H, S, D)
        v = v.reshape(B, S, H, D).transpose(0, 2, 1, 3)         # (B, H, S, D)
        if self.rope:       # rotate queries and keys by their positions start, start + 1, ...
            q = F.rope(q, offset=start)                         # (B, H, L, D)
            k = F.rope(k, offset=start)                         # (B, H, S, D)
        if cache is not None:   # the earlier tokens' keys and values come first
            k, v = cache.append(k, v)                           # (B, H, start + S, D)
            if is_causal:       # the L queries are the last L positions: align the mask there
                attn_mask = causal_mask(L, start + S, attn_mask, offset=start + S - L)
                is_causal = False
        # 3. attend, every head at once (the head axis is a batch axis)
        dropout_p = self.dropout if self.training else 0.0
        heads, weights = F.attention(q, k, v, attn_mask, dropout_p, is_causal,
                                     self.scale)                # (B, H, L, D), (B, H, L, S)
        # 4. merge the heads side by side
        merged = heads.transpose(0, 2, 1, 3).reshape(B, L, E)   # (B, L, H, D) -> (B, L, E)
        # 5. project
        return self.out_proj(merged), weights                   # (B, L, E), (B, H, L, S)

    def extra_repr(self):
        rope = ", rope=True" if self.rope else ""
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}{rope}"


class KVCache:
    """The keys and values an attention layer has computed so far, (B, H, S, D) each.

    A model writing text predicts one token, appends it, and runs again on the longer sequence.
    Run plainly, every step recomputes the keys and values of the whole prefix. But with causal
    attention, a token's key and value depend only on the tokens up to it (in every layer), so they
    never change once computed: each step can compute the new token's alone, and take the others
    from here. A step then costs one token's projections and one query against the S keys of the
    prefix, instead of a forward pass over all S tokens.

    Use one KVCache per attention layer, empty at first, and pass it as `cache=` to every call on
    the same sequence: the first call may hold the whole prompt, the next ones each new token.
    Keys are stored after rope, so a cached key keeps the rotation of its own position.
    """

    def __init__(self):
        self.keys = self.values = None

    def __len__(self):
        """How many positions are cached."""
        return 0 if self.keys is None else self.keys.shape[2]

    def append(self, keys, values):
        """Append the new tokens' keys and values (B, H, L, D); returns all, (B, H, S, D) each."""
        if self.keys is not None:
            keys = concatenate([self.keys, keys], axis=2)           # (B, H, S, D)
            values = concatenate([self.values, values], axis=2)     # (B, H, S, D)
        self.keys, self.values = keys, values
        return keys, values
