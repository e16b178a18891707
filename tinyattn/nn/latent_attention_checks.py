"""Chapter 5. What makes an argument of latent attention (nn/latent_attention.py) bad."""
from tinyattn.functional.rotate_half_checks import scaling_fits


def rotary_fits(qk_rope_head_dim, rope_base=10000.0, rope_scaling=None, **_):
    """LatentAttention: an even qk_rope_head_dim (the rotary key turns pairs of features), and a
    rope_scaling F.rope_frequencies computes."""
    if qk_rope_head_dim % 2:
        raise ValueError(f"the rotary key turns pairs of features, so qk_rope_head_dim must be "
                         f"even; got {qk_rope_head_dim}")
    scaling_fits(qk_rope_head_dim, rope_base, rope_scaling)


def input_and_cache_fit(self, x, start=0, cache=None):
    """LatentAttention.forward: cache None or a LatentCache whose sequences are x's."""
    if cache is None:
        return
    if not hasattr(cache, "latents"):
        raise TypeError(f"cache must be a LatentCache (nn/latent_attention.py), got "
                        f"{type(cache).__name__}")
    if cache.latents is not None and cache.batch_size != x.shape[0]:
        raise ValueError(f"the cache holds the latents of {cache.batch_size} sequences, but x is "
                         f"a batch of {x.shape[0]} (shape {x.shape})")
