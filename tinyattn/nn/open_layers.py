"""Chapter 5. The layers today's open models are made of, besides chapter 1's Linear and
Embedding: RMSNorm, the gated feed-forward, and grouped-query attention with its rotary
positions, QK-norm and sliding window.

    RMSNorm                x / sqrt(mean(x^2) + eps) * weight (Gemma: * (1 + weight))
    GatedFeedForward       down(act(gate(x)) * up(x)): SwiGLU with SiLU, GeGLU with GELU
    GroupedQueryAttention  H query heads on K key/value heads (functional/grouped_query.py),
                           queries and keys turned by rotary positions in the rotate-half layout
                           (functional/rotate_half.py), optionally RMS-normed first (QK-norm),
                           each query seeing the `window` newest keys only on a sliding layer

nn/open_decoder.py stacks them into the one decoder of Llama, Mistral, Qwen and Gemma.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype, number, one_of, optional
from tinyattn.functional.grouped_query import grouped_values, grouped_weights, visible_keys
from tinyattn.nn import open_layers_checks as checks
from tinyattn.nn.layers import Linear
from tinyattn.nn.module import Module, Parameter

ACTIVATIONS = {"silu": F.silu, "gelu_tanh": F.gelu}     # the gate's activation, by name


class RMSNorm(Module):
    """RMSNorm over the last axis (`F.rms_norm`): x / sqrt(mean(x^2) + eps) * weight, `weight`
    (normalized_shape,) starting at ones, as PyTorch's `nn.RMSNorm`.

    `unit_offset=True` is Gemma's variant: the stored weight starts at zeros and the norm scales
    by 1 + weight (the gain is learned as a change from 1, which a weight decay pulls towards 1,
    not 0). The sum 1 + weight is taken in the weight's dtype, as transformers does.
    """

    @door(normalized_shape=at_least(1), eps=between(0), unit_offset=bool, dtype=floating_dtype)
    def __init__(self, normalized_shape, eps=1e-6, unit_offset=False, dtype=None):
        self.normalized_shape, self.eps = normalized_shape, float(eps)
        self.unit_offset = unit_offset
        start = np.zeros if unit_offset else np.ones
        self.weight = Parameter(start(normalized_shape, dtype=dtype))

    @door(x="(..., normalized_shape)")
    def forward(self, x):
        weight = self.weight + 1.0 if self.unit_offset else self.weight      # (N,)
        return F.rms_norm(x, weight, self.eps)                               # (..., N)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}"
                + (", unit_offset=True" if self.unit_offset else ""))


class GatedFeedForward(Module):
    """The gated feed-forward block (Shazeer 2020, "GLU Variants Improve Transformer"):

        down(act(gate(x)) * up(x))        gate, up: Linear(E, hidden); down: Linear(hidden, E)

    Chapter 1's FeedForward is down(act(up(x))). Here a second projection of the same input, the
    gate, multiplies the activation element by element: each hidden unit is opened or closed by
    the token itself. `activation` "silu" makes it SwiGLU (Llama, Mistral, Qwen), "gelu_tanh"
    GeGLU (Gemma: F.gelu, transformers' "gelu_pytorch_tanh"). With three matrices instead of
    two, models shrink `hidden` to keep the parameters: Llama's 8/3 E instead of 4 E, about.
    """

    @door(embed_dim=at_least(1), hidden_dim=at_least(1), activation=one_of(*ACTIVATIONS),
          bias=bool, dtype=floating_dtype)
    def __init__(self, embed_dim, hidden_dim, activation="silu", bias=False, dtype=None):
        self.embed_dim, self.activation = embed_dim, activation
        self.gate = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)
        self.up = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)
        self.down = Linear(hidden_dim, embed_dim, bias=bias, dtype=dtype)

    @door(x="(..., embed_dim)")
    def forward(self, x):
        opened = ACTIVATIONS[self.activation](self.gate(x)) * self.up(x)    # (..., hidden)
        return self.down(opened)                                             # (..., E)

    def extra_repr(self):
        return f"activation={self.activation!r}"


class GroupedQueryAttention(Module):
    """Causal self-attention of `num_heads` query heads on `num_kv_heads` key/value heads, as
    Llama, Mistral, Qwen and Gemma compute it. Inputs and outputs (B, T, E).

        1. project   q_proj (E -> H D), k_proj, v_proj (E -> K D); head_dim D need not be E / H
        2. split     into heads: q (B, H, T, D), k and v (B, K, T, D)
        3. QK-norm   with `qk_norm`, each head's query and key RMS-normed over D (Qwen3, Gemma 3:
                     their scores cannot grow without bound as the weights do)
        4. rotate    queries and keys turned by their positions, rotate-half layout, frequencies
                     `rope_base`^(-2i/D) rescaled by `rope_scaling` (F.rope_frequencies)
        5. cache     with a cache, the keys and values of earlier tokens put in front
        6. attend    each group of H / K query heads on its key/value head, causal; a sliding
                     layer (`window`) lets each query see its `window` newest keys only
        7. merge     the heads side by side, (B, T, H D), and out_proj (H D -> E)

    `scale` multiplies the scores (None: 1 / sqrt(D); Gemma: query_pre_attn_scalar^(-1/2)).
    `qkv_bias` gives q_proj, k_proj and v_proj a bias (Qwen2), `out_bias` out_proj (Llama's
    attention_bias gives both).

    forward(x, start=0, cache=None) -> (output (B, T, E), weights (B, H, T, S)): the tokens are
    at positions start, start + 1, ...; `cache` is this layer's LayerCache (nn/kv_cache.py),
    whose keys come before the new ones. The activations it names (`Module.hook`): "q" (B, H, T,
    D) and "k", "v" (B, K, T, D), the new tokens' after rotation (before the cache adds its own),
    "weights" (B, H, T, S), "heads" (B, H, T, D) and "out" (B, T, E).
    """

    activations = ("q", "k", "v", "weights", "heads", "out")

    @door(checks.heads_fit_groups, embed_dim=at_least(1), num_heads=at_least(1),
          num_kv_heads=optional(at_least(1)), head_dim=optional(at_least(2)), qkv_bias=bool,
          out_bias=bool, qk_norm=bool, norm_eps=between(0), norm_unit_offset=bool,
          rope_base=between(1), window=optional(at_least(1)), scale=optional(number),
          dtype=floating_dtype)
    def __init__(self, embed_dim, num_heads, num_kv_heads=None, head_dim=None, qkv_bias=False,
                 out_bias=False, qk_norm=False, norm_eps=1e-6, norm_unit_offset=False,
                 rope_base=10000.0, rope_scaling=None, window=None, scale=None, dtype=None):
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
        self.head_dim = embed_dim // num_heads if head_dim is None else head_dim
        self.window, self.scale = window, scale
        self.frequencies = F.rope_frequencies(self.head_dim, rope_base, rope_scaling)  # (D/2,)
        H, K, D = num_heads, self.num_kv_heads, self.head_dim
        self.q_proj = Linear(embed_dim, H * D, bias=qkv_bias, dtype=dtype)
        self.k_proj = Linear(embed_dim, K * D, bias=qkv_bias, dtype=dtype)
        self.v_proj = Linear(embed_dim, K * D, bias=qkv_bias, dtype=dtype)
        self.out_proj = Linear(H * D, embed_dim, bias=out_bias, dtype=dtype)
        self.q_norm = RMSNorm(D, norm_eps, norm_unit_offset, dtype) if qk_norm else None
        self.k_norm = RMSNorm(D, norm_eps, norm_unit_offset, dtype) if qk_norm else None

    @door(checks.input_and_cache_fit, x="(B, T, embed_dim)", start=at_least(0))
    def forward(self, x, start=0, cache=None):
        B, T, _ = x.shape
        H, K, D = self.num_heads, self.num_kv_heads, self.head_dim

        # 1. project, 2. split into heads (head h owns features h D ... (h + 1) D - 1)
        q = self.q_proj(x).reshape(B, T, H, D)                          # (B, T, H, D)
        k = self.k_proj(x).reshape(B, T, K, D)                          # (B, T, K, D)
        v = self.v_proj(x).reshape(B, T, K, D)                          # (B, T, K, D)
        # 3. QK-norm, over each head's D features
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)                       # (B, T, H or K, D)
        q, k, v = (y.transpose(0, 2, 1, 3) for y in (q, k, v))          # (B, H or K, T, D)
        # 4. rotate by the positions start ... start + T - 1
        q = F.rope_rotate_half(q, start, frequencies=self.frequencies)  # (B, H, T, D)
        k = F.rope_rotate_half(k, start, frequencies=self.frequencies)  # (B, K, T, D)
        q, k, v = self.hook("q", q), self.hook("k", k), self.hook("v", v)    # named as in ch. 1
        # 5. the keys and values the cache kept, before the new ones: S in all
        if cache is not None:
            k, v = cache.extended(k, v)                                 # (B, K, S, D)
        S = k.shape[2]                                                  # T without a cache
        # 6. attend, each group of query heads on its key/value head
        mask = visible_keys(T, S, self.window)                          # (T, S) or None
        weights = self.hook("weights", grouped_weights(q, k, mask, self.scale))   # (B, H, T, S)
        heads = self.hook("heads", grouped_values(weights, v))          # (B, H, T, D)
        # 7. merge the heads side by side, and project
        merged = heads.transpose(0, 2, 1, 3).reshape(B, T, H * D)       # (B, T, H D)
        return self.hook("out", self.out_proj(merged)), weights         # (B, T, E), (B, H, T, S)

    def extra_repr(self):
        window = "" if self.window is None else f", window={self.window}"
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}{window}")
