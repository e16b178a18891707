"""The checklist's rows for positions: rotary embeddings against a NumPy reference, ALiBi's bias
through attention, attention with rope, a cached step of generation, and the causal language
model with each way of encoding positions."""
import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn_tools.checklist.cases import (LayerCase, OpCase, function,
                                            language_model_logits, layer, leaves)


def np_rope(x, offset=0, base=10000.0):
    """RoPE with complex numbers: pair (x0, x1) is z = x0 + i x1, turned by e^{i p theta}."""
    T, D = x.shape[-2:]
    theta = base ** (-np.arange(0, D, 2) / D)                        # (D/2,)
    positions = np.arange(offset, offset + T)[:, None]               # (T, 1)
    turned = (x[..., 0::2] + 1j * x[..., 1::2]) * np.exp(1j * positions * theta)   # (..., T, D/2)
    return np.stack([turned.real, turned.imag], axis=-1).reshape(x.shape)


def cached_attention_step():
    """Three tokens run through attention into a LayerCache, then two more at positions 3 and 4:
    the output of those two, which reach the first three only through the cache (with rope, and
    is_causal letting the new queries see the cached keys)."""
    ta.manual_seed(0)
    attention = nn.MultiHeadAttention(8, 2, rope=True)
    x, = leaves((2, 5, 8))

    def step(x, *parameters):
        cache = nn.LayerCache()
        attention(x[:, :3], is_causal=True, cache=cache)
        return attention(x[:, 3:], is_causal=True, start=3, cache=cache)[0]     # (2, 2, 8)
    return step, [x, *attention.parameters()]


def language_model(positional, cached=False, num_layers=1, **options):
    """A causal transformer with the given positions (and other `options` of CausalTransformer),
    on fixed ids; `cached`: the last two positions' logits, computed after the first three went
    into a cache."""
    def build():
        ta.manual_seed(0)
        model = nn.CausalTransformer(vocab_size=7, embed_dim=8, num_heads=2, num_layers=num_layers,
                                     max_len=8, positional=positional, **options)
        return language_model_logits(model, cached)
    return build


OP_CASES = [
    OpCase("F.rope", F.rope, np_rope, ((2, 5, 6),)),
    OpCase("F.rope, offset 7", lambda x: F.rope(x, offset=7), lambda x: np_rope(x, offset=7),
           ((2, 3, 4, 8),)),
    OpCase("F.rope, offset 2, base 100", lambda x: F.rope(x, offset=2, base=100.0),
           lambda x: np_rope(x, offset=2, base=100.0), ((6, 4),)),
]

LAYER_CASES = [
    LayerCase("attention: sdpa, ALiBi bias, causal",
              function(F.scaled_dot_product_attention, (2, 4, 5, 6), (2, 4, 5, 6), (2, 4, 5, 3),
                       attn_mask=F.alibi_bias(4, 5), is_causal=True)),
    LayerCase("MultiHeadAttention, rope, causal",
              layer(lambda: nn.MultiHeadAttention(8, 2, rope=True), (2, 5, 8), is_causal=True)),
    LayerCase("MultiHeadAttention, rope, cross, key != value, from position 3",
              layer(lambda: nn.MultiHeadAttention(8, 2, rope=True), (2, 3, 8), (2, 5, 8),
                    (2, 5, 8), start=3)),
    LayerCase("MultiHeadAttention, cached step (rope, random directions)", cached_attention_step,
              directions=6),
    LayerCase("CausalBlock, rope, causal",
              layer(lambda: nn.CausalBlock(8, 2, rope=True), (2, 5, 8), is_causal=True)),
    *[LayerCase(f"CausalTransformer, {positional} (random directions)",
                language_model(positional), directions=4)
      for positional in ("learned", "rope", "alibi", "none")],
    LayerCase("CausalTransformer, alibi, cached step (random directions)",
              language_model("alibi", cached=True), directions=4),
]
