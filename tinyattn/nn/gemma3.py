"""Chapter 5. Gemma 3 on a page: Qwen3 (nn/qwen3.py, itself Llama with QK-norm) with Gemma's own
pieces, each an override here:

    the norms         RMSNorm scaling by 1 + weight, the weight starting at zero (GemmaRMSNorm)
    the block         a norm on the attention's output and on the feed-forward's as well as on
                      their inputs ("sandwich" norms), and a GeGLU feed-forward (tanh GELU)
    the attention     scores scaled by query_pre_attn_scalar^(-1/2), not head_dim's; five layers
                      of six slide over a window of recent keys with a rotary base of their own
                      (local_rope_theta, unscaled), the sixth sees every key with the global
                      base (rope_theta, its scaling: linear, factor 8, from 4B up)
    the model         the embedding times sqrt(hidden_size); the logits softly capped,
                      c tanh(logits / c), when the config gives c (final_logit_softcapping)

What one forward pass computes, Gemma 3 1B's sizes in brackets (GEMMA_3_1B below):

    x = embed(ids) * sqrt(E)                                     [E = 1152]
    26 times, layer i sliding unless (i + 1) % 6 == 0:
        x = x + attn_out_norm(attn(attn_norm(x)))                [4 query heads on 1 key/value
                                                                  head of 256; window 512]
        x = x + mlp_out_norm(mlp(mlp_norm(x)))                   [GeGLU, 6912 wide]
    logits = head(norm(x))                                       [262,144, tied to the embedding]

The sliding layers make the cache small: 22 of the 26 layers keep 512 tokens' keys and values at
most, whatever the length of the text.
"""
import math

import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype
from tinyattn.arrays import data_of
from tinyattn.nn import llama_checks as checks
from tinyattn.nn.llama import Llama, LlamaBlock, sliding_window
from tinyattn.nn.open_decoder import DecoderSettings
from tinyattn.nn.open_layers import RMSNorm
from tinyattn.nn.qwen3 import Qwen3Attention

# google/gemma-3-1b-pt's config.json: five sliding layers (window 512, base 10,000) to one global
# (base 1,000,000); scores scaled by 256^(-1/2); 999,885,952 parameters
GEMMA_3_1B = DecoderSettings(
    vocab_size=262144, hidden_size=1152, intermediate_size=6912, num_layers=26, num_heads=4,
    num_kv_heads=1, head_dim=256, norm_eps=1e-6, norm_unit_offset=True, activation="gelu_tanh",
    qk_norm=True, query_pre_attn_scalar=256.0, rope_theta=1000000.0, local_rope_theta=10000.0,
    sliding_window=512, layer_types=tuple("full" if (i + 1) % 6 == 0 else "sliding"
                                          for i in range(26)),
    embed_scale=True, sandwich_norms=True, tied_head=True, model_type="gemma3_text")


class GemmaRMSNorm(RMSNorm):
    """RMSNorm scaling by 1 + weight, the weight starting at zeros (RMSNorm's unit_offset: the
    gain is learned as a change from 1, which a weight decay pulls towards 1, not 0)."""

    @door(normalized_shape=at_least(1), eps=between(0), dtype=floating_dtype)
    def __init__(self, normalized_shape, eps=1e-6, dtype=None):
        super().__init__(normalized_shape, eps, unit_offset=True, dtype=dtype)


class Gemma3Attention(Qwen3Attention):
    """Qwen3's attention with Gemma's norms on q and k, scores scaled by
    query_pre_attn_scalar^(-1/2), and on a sliding layer the local rotary base, unscaled."""

    def __init__(self, settings, window=None, dtype=None):
        super().__init__(settings, window, dtype)
        s, D = settings, settings.head_dim
        self.q_norm = GemmaRMSNorm(D, s.norm_eps, dtype=dtype)
        self.k_norm = GemmaRMSNorm(D, s.norm_eps, dtype=dtype)
        if s.query_pre_attn_scalar is not None:
            self.scale = s.query_pre_attn_scalar ** -0.5
        if window is not None and s.local_rope_theta is not None:      # a local layer
            self.frequencies = F.rope_frequencies(D, s.local_rope_theta)   # (D/2,)


class Gemma3Block(LlamaBlock):
    """Gemma 3's block: Gemma's norms around the attention and the feed-forward (GeGLU), each
    output normed too:

        x = x + attn_out_norm(attn(attn_norm(x)))
        x = x + mlp_out_norm(mlp(mlp_norm(x)))
    """

    def __init__(self, settings, attention, mlp, dtype=None):
        def norm():
            return GemmaRMSNorm(settings.hidden_size, settings.norm_eps, dtype=dtype)

        self.attn_norm = norm()
        self.attn = attention
        self.attn_out_norm = norm()
        self.mlp_norm = norm()
        self.mlp = mlp                      # GeGLU: the settings' activation, gelu_tanh
        self.mlp_out_norm = norm()

    def forward(self, x, start=0, cache=None):
        x = self.hook("resid_pre", x)                                       # (B, T, E)
        attended, weights = self.attn(self.attn_norm(x), start, cache)      # (B, T, E)
        x = self.hook("resid_mid", x + self.attn_out_norm(attended))        # (B, T, E)
        transformed = self.mlp_out_norm(self.mlp(self.mlp_norm(x)))         # (B, T, E)
        x = self.hook("resid_post", x + self.hook("mlp_out", transformed))  # (B, T, E)
        return x, weights


class Gemma3(Llama):
    """Gemma 3 (text): token ids (B, T) -> next-token logits (B, T, vocab_size).

        embed x sqrt(E) -> num_layers Gemma3Blocks -> norm -> head (-> c tanh(logits / c))
    """

    model_type = "gemma3_text"
    Attention = Gemma3Attention
    Block = Gemma3Block
    Norm = GemmaRMSNorm

    def window(self, layer):
        return sliding_window(self.settings, layer)

    @door(checks.ids_and_cache_fit, return_weights=bool, last_only=bool)
    def forward(self, ids, cache=None, return_weights=False, last_only=False):
        """As Llama.forward: logits (B, T or 1, vocab_size), and with return_weights each
        block's attention weights (B, H, T, S)."""
        ids = np.asarray(data_of(ids))                                  # (B, T)
        start = 0 if cache is None else len(cache)                      # positions already seen
        x = self.embed(ids) * math.sqrt(self.settings.hidden_size)     # (B, T, E)
        x = self.hook("embed", x)                                       # (B, T, E)
        weights = []
        for i, block in enumerate(self.blocks):
            x, block_weights = block(x, start, None if cache is None else cache.layers[i])
            weights.append(block_weights)                               # (B, H, T, S)
        if cache is not None:
            cache.length += ids.shape[1]
        if last_only:
            x = x[:, -1:]                                               # (B, 1, E)
        logits = self.head(self.hook("final", self.norm(x)))            # (B, T or 1, vocab)
        cap = self.settings.final_logit_softcapping
        if cap is not None:
            logits = (logits / cap).tanh() * cap                        # in (-cap, cap)
        return (logits, weights) if return_weights else logits
