"""Chapter 5. What makes an argument of a family's attention (nn/llama.py's LlamaAttention and
its subclasses) bad."""
from tinyattn.functional.rotate_half_checks import scaling_fits


def heads_fit_groups(embed_dim, num_heads, num_kv_heads=None, head_dim=None, rope_base=10000.0,
                     rope_scaling=None, **_):
    """The key/value heads divide the query heads; an even head_dim (the rotary turns pairs),
    E / H when not given; a rope_scaling F.rope_frequencies computes."""
    kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    if num_heads % kv_heads:
        raise ValueError(f"num_kv_heads {kv_heads} must divide num_heads {num_heads} (each "
                         f"key/value head serves a group of num_heads / num_kv_heads query heads)")
    if head_dim is None and embed_dim % num_heads:
        raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}; give "
                         f"head_dim")
    size = embed_dim // num_heads if head_dim is None else head_dim
    if size % 2:
        raise ValueError(f"the rotary positions turn pairs of features, so head_dim must be "
                         f"even; got {size}")
    scaling_fits(size, rope_base, rope_scaling)


def input_and_cache_fit(self, x, start=0, cache=None):
    """LlamaAttention.forward: cache None or a LayerCache whose sequences are x's."""
    if cache is None:
        return
    if not callable(getattr(cache, "extended", None)):
        raise TypeError(f"cache must be a LayerCache (nn/kv_cache.py), got "
                        f"{type(cache).__name__}")
    if cache.keys is not None and cache.keys.shape[0] != x.shape[0]:
        raise ValueError(f"the cache holds the keys of {cache.keys.shape[0]} sequences, but x is "
                         f"a batch of {x.shape[0]} (shape {x.shape})")


def attention_fits(self, settings, window=None, dtype=None):
    """LlamaAttention (and its subclasses): settings a DecoderSettings whose heads and rotary
    fit (heads_fit_groups)."""
    if type(settings).__name__ != "DecoderSettings":
        raise TypeError(f"settings must be a DecoderSettings, got {type(settings).__name__}")
    heads_fit_groups(settings.hidden_size, settings.num_heads, settings.num_kv_heads,
                     settings.head_dim, settings.rope_theta, settings.rope_scaling)
