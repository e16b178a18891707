"""Chapter 2. What makes an argument of nn/positions.py's layers bad (each door names its rule)."""
from tinyattn.arguments import shapes
from tinyattn.functional.checks import attention_mask
from tinyattn.nn.checks import heads_fit
from tinyattn.nn.kv_cache import LayerCache


def within_the_table(self, x, offset=0):
    """PositionalEncoding: positions offset ... offset + T - 1 are rows of the table."""
    if offset + x.shape[-2] > self.max_len:
        raise ValueError(f"sequence length {offset + x.shape[-2]} exceeds max_len {self.max_len}")


def heads_fit_rope(embed_dim, num_heads=1, rope=False, **_):
    """num_heads divides embed_dim, into an even head_dim with rope (it rotates pairs)."""
    heads_fit(embed_dim, num_heads)
    if rope:
        even_head_dim(embed_dim, num_heads)


def even_head_dim(embed_dim, num_heads):
    if (embed_dim // num_heads) % 2:
        raise ValueError(f"rope rotates pairs of features, so it needs an even head_dim; got "
                         f"embed_dim {embed_dim} / num_heads {num_heads} = "
                         f"{embed_dim // num_heads}")


def inputs_and_cache_fit(self, query, key=None, value=None, attn_mask=None, cache=None, **_):
    """MultiHeadAttention (chapter 2): key and value (default: query) are (B, T, E) like the query
    (B, L, E); cache None or a LayerCache of keys (B, H, c, D) in the layer's dtype; attn_mask
    broadcasts to the scores (B, H, L, S), S = c + T."""
    key = query if key is None else key
    shapes(dtype=self.dtype, layer=self, query=(query, "(B, L, embed_dim)"),
           key=(key, "(B, T, embed_dim)"), value=(key if value is None else value,
                                                  "(B, T, embed_dim)"))
    (B, L, _), T = query.shape, key.shape[1]
    if cache is not None and not isinstance(cache, LayerCache):
        raise TypeError(f"cache must be an nn.LayerCache (one layer's keys and values) or None, "
                        f"got {type(cache).__name__}")
    cached = 0 if cache is None or cache.keys is None else cache.keys.shape[2]
    new = (B, self.num_heads, T, self.head_dim)                          # the new keys' shape
    if cached and (cache.keys.shape[:2] + cache.keys.shape[3:] != new[:2] + new[3:]
                   or cache.keys.dtype != query.dtype):
        raise ValueError(f"the cache holds keys {cache.keys.shape} of {cache.keys.dtype}, but "
                         f"the new ones are (B, H, T, D) = {new} of {query.dtype}: a cache "
                         f"serves one layer and one batch of sequences")
    attention_mask(attn_mask, (B, self.num_heads, L, cached + T), query.dtype)
