"""Chapter 5. Multi-head latent attention (DeepSeek-V2, 2024; DeepSeek-V3): every head's keys and
values rebuilt from one small vector per token, so that the key/value cache holds that vector.

Generating text, each layer keeps every past token's keys and values: 2 H D numbers per token with
H heads of D features (multi-head attention), 2 K D with K key/value heads (grouped-query and
multi-query attention, nn/open_layers.py). Latent attention keeps, per token and layer,

    c_kv = W_DKV x                r = kv_lora_rank numbers    the compressed latent vector
    k_R  = RoPE(W_KR x)           d_R = qk_rope_head_dim      one rotary key, shared by all heads

r + d_R numbers (DeepSeek-V2: r = 4 D and d_R = D / 2, 4.5 D against multi-head's 2 H D = 256 D
for its H = 128 heads). From c_kv each head h rebuilds its key and value:

    k_C^h = W_UK^h c_kv          d_C = qk_nope_head_dim      head h's content key
    v^h   = W_UV^h c_kv          d_v = v_head_dim            head h's value
    k^h   = [k_C^h; k_R]                                     its key: d_C + d_R features
    q^h   = [q_C^h; RoPE(q_R^h)]   from W_UQ c_q, c_q = W_DQ x (q_lora_rank), or from W_Q x
    o^h   = sum_s softmax_s(q^h . k^h_s / sqrt(d_C + d_R)) v^h_s,   out = W_O [o^1; ...; o^H]

The absorption, why generation needs no rebuilt keys. A content score is

    q_C^h . k_C^h_s = q_C^h . (W_UK^h c_kv_s) = ((W_UK^h)^T q_C^h) . c_kv_s

so a query multiplied once by W_UK^h (r numbers per head) scores the cached latents themselves;
and a head's output sum_s a_s v^h_s = W_UV^h (sum_s a_s c_kv_s) is W_UV^h applied once, after the
latents are mixed. (The paper folds W_UK into W_UQ and W_UV into W_O: the same products,
multiplied in another order.) Attention then runs on the compressed cache, as a multi-query
attention whose one key/value head is the latent: keys [c_kv; k_R] (r + d_R), values c_kv (r),
head h's query [(W_UK^h)^T q_C^h; RoPE(q_R^h)].

Why the rotary key is decoupled. Rotary positions turn a key by its position s: R_s W_UK c_kv_s.
The score q^T R_t^T R_s W_UK c_kv_s has a matrix between the query and W_UK that depends on both
positions, so W_UK could not be absorbed. The positions go into a small separate key k_R, carried
in the cache beside c_kv, and the content part is not turned.

Two paths, one result (tests/test_latent_attention.py: equal to 1e-12 in float64):

    expanded   without a cache (training, scoring a text): every head's content keys and values
               rebuilt, (B, H, S, d_C) and (B, H, S, d_v), as the paper's equations and
               transformers' DeepseekV3Attention compute them; a score is q_C . k_C + q_R . k_R
    absorbed   with a LatentCache (generation): the latents (B, S, r + d_R) are all it holds and
               all that is read; no (S, H, head_dim) array is built

Per new token the expanded path would rebuild S keys and values, S r H (d_C + d_v) products; the
absorbed one costs H d_C r + H S (2 r + d_R) + H r d_v, and reads r + d_R numbers per cached token.

transformers' names for the weights: kv_a_proj_with_mqa is [W_DKV; W_KR] (kv_down here),
kv_a_layernorm a norm of c_kv (kv_norm), kv_b_proj is [W_UK^h; W_UV^h] head by head (kv_up),
q_a_proj, q_a_layernorm and q_b_proj are W_DQ, a norm of c_q and [W_UQ^h; W_QR^h] head by head
(q_down, q_norm, q_up), or q_proj when q_lora_rank is None (DeepSeek-V2-Lite), o_proj is W_O.
What differs from the paper's equations is DeepSeek's code, which transformers follows: the two
RMSNorms (eps 1e-6, whatever the model's rms_norm_eps: transformers builds them without it), and
biases on q_down, kv_down and out_proj with attention_bias. `rope_interleave` (DeepSeek's
checkpoints): the rotary features are in RoFormer's interleaved pairs (2i, 2i + 1), which are
de-interleaved (the even features, then the odd ones) and turned in the rotate-half layout, as
transformers does: the same scores.
"""
import dataclasses
import math

import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype, optional
from tinyattn.functional.grouped_query import grouped_values, grouped_weights, visible_keys
from tinyattn.nn import latent_attention_checks as checks
from tinyattn.nn.layers import Linear
from tinyattn.nn.module import Module
from tinyattn.nn.open_layers import RMSNorm
from tinyattn.ops import concatenate, where

NORM_EPS = 1e-6      # kv_norm's and q_norm's, DeepseekV3RMSNorm's default


@dataclasses.dataclass(frozen=True)
class LatentSettings:
    """A decoder's latent attention (DecoderSettings' `latent`): LatentAttention's sizes and
    layout, DeepSeek's config.json keys of the same names."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = None
    rope_interleave: bool = False


class LatentAttention(Module):
    """Causal self-attention of `num_heads` heads whose keys and values come from a latent of
    `kv_lora_rank` numbers per token (see the top of this file). Inputs and outputs (B, T, E).

        1. queries   q = q_proj(x), or q_up(q_norm(q_down(x))) with q_lora_rank; per head the
                     content part q_C (d_C) and the rotary part q_R (d_R), turned
        2. latent    kv_down(x) split into c_kv (r, then kv_norm) and k_R (d_R, turned): all a
                     cache keeps, side by side, the latent [c_kv; k_R] (B, T, r + d_R)
        3. attend    expanded (no cache): kv_up(c_kv) gives every head's k_C and v; or absorbed
                     (a LatentCache): the queries times W_UK score the latents, and W_UV turns
                     the mixed latents into each head's output
        4. merge     the heads side by side (B, T, H d_v), and out_proj (H d_v -> E)

    Scores are scaled by (d_C + d_R)^(-1/2). `bias` gives q_down, kv_down and out_proj a bias
    (DeepSeek's attention_bias); `rope_base` and `rope_scaling` give the rotary frequencies
    (F.rope_frequencies) of the d_R rotary features.

    forward(x, start=0, cache=None) -> (output (B, T, E), weights (B, H, T, S)), the tokens at
    positions start, start + 1, ...; `cache` is this layer's LatentCache, whose latents come
    before the new ones. The activations it names (`Module.hook`): "c_kv" (B, T, r) and
    "k_rope" (B, T, d_R), turned, the new tokens' (before the cache adds its own); "weights"
    (B, H, T, S), "heads" (B, H, T, d_v) and "out" (B, T, E).
    """

    activations = ("c_kv", "k_rope", "weights", "heads", "out")

    @door(checks.rotary_fits, embed_dim=at_least(1), num_heads=at_least(1),
          kv_lora_rank=at_least(1), qk_rope_head_dim=at_least(2), qk_nope_head_dim=at_least(1),
          v_head_dim=at_least(1), q_lora_rank=optional(at_least(1)), rope_interleave=bool,
          bias=bool, rope_base=between(1), dtype=floating_dtype)
    def __init__(self, embed_dim, num_heads, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim,
                 v_head_dim, q_lora_rank=None, rope_interleave=False, bias=False,
                 rope_base=10000.0, rope_scaling=None, dtype=None):
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.kv_lora_rank, self.q_lora_rank = kv_lora_rank, q_lora_rank
        self.qk_rope_head_dim, self.qk_nope_head_dim = qk_rope_head_dim, qk_nope_head_dim
        self.v_head_dim, self.rope_interleave = v_head_dim, rope_interleave
        H, r, d_R, d_C, d_v = num_heads, kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim, \
            v_head_dim
        self.scale = (d_C + d_R) ** -0.5
        self.frequencies = F.rope_frequencies(d_R, rope_base, rope_scaling)    # (d_R / 2,)
        self.deinterleaved = np.concatenate([np.arange(0, d_R, 2), np.arange(1, d_R, 2)])
        if q_lora_rank is None:
            self.q_proj = Linear(embed_dim, H * (d_C + d_R), bias=False, dtype=dtype)
            self.q_down = self.q_norm = self.q_up = None
        else:
            self.q_proj = None
            self.q_down = Linear(embed_dim, q_lora_rank, bias=bias, dtype=dtype)
            self.q_norm = RMSNorm(q_lora_rank, NORM_EPS, dtype=dtype)
            self.q_up = Linear(q_lora_rank, H * (d_C + d_R), bias=False, dtype=dtype)
        self.kv_down = Linear(embed_dim, r + d_R, bias=bias, dtype=dtype)
        self.kv_norm = RMSNorm(r, NORM_EPS, dtype=dtype)
        self.kv_up = Linear(r, H * (d_C + d_v), bias=False, dtype=dtype)
        self.out_proj = Linear(H * d_v, embed_dim, bias=bias, dtype=dtype)

    @door(checks.input_and_cache_fit, x="(B, T, embed_dim)", start=at_least(0))
    def forward(self, x, start=0, cache=None):
        B, T, _ = x.shape
        H, r, d_R, d_C, d_v = self.num_heads, self.kv_lora_rank, self.qk_rope_head_dim, \
            self.qk_nope_head_dim, self.v_head_dim

        # 1. the queries, content and rotary parts, per head
        if self.q_proj is not None:
            q = self.q_proj(x)                                          # (B, T, H (d_C + d_R))
        else:
            q = self.q_up(self.q_norm(self.q_down(x)))                  # (B, T, H (d_C + d_R))
        q = q.reshape(B, T, H, d_C + d_R).transpose(0, 2, 1, 3)         # (B, H, T, d_C + d_R)
        q_C, q_R = q[..., :d_C], self.turned(q[..., d_C:], start)       # (B, H, T, d_C), d_R
        # 2. the latent: c_kv and the rotary key k_R
        compressed = self.kv_down(x)                                    # (B, T, r + d_R)
        c_kv = self.hook("c_kv", self.kv_norm(compressed[..., :r]))     # (B, T, r)
        k_R = self.hook("k_rope", self.turned(compressed[..., r:], start))    # (B, T, d_R)
        # 3. attend: expanded without a cache, absorbed on the cache's latents
        if cache is None:
            heads, weights = self.expanded(q_C, q_R, c_kv, k_R)         # (B, H, T, d_v), ...
        else:
            latents = cache.extended(c_kv, k_R)                         # (B, S, r + d_R)
            heads, weights = self.absorbed(q_C, q_R, latents)           # (B, H, T, d_v), ...
        weights = self.hook("weights", weights)                         # (B, H, T, S)
        heads = self.hook("heads", heads)                               # (B, H, T, d_v)
        # 4. merge the heads side by side, and project
        merged = heads.transpose(0, 2, 1, 3).reshape(B, T, H * d_v)     # (B, T, H d_v)
        return self.hook("out", self.out_proj(merged)), weights         # (B, T, E), (B, H, T, S)

    def turned(self, x, start):
        """Rotary features x (..., T, d_R) turned by the positions start ... start + T - 1 (in
        the rotate-half layout, DeepSeek's interleaved pairs de-interleaved first)."""
        if self.rope_interleave:
            x = x[..., self.deinterleaved]                 # (..., T, d_R): 0, 2, ..., 1, 3, ...
        return F.rope_rotate_half(x, start, frequencies=self.frequencies)  # (..., T, d_R)

    def up_projections(self):
        """(W_UK (H, d_C, r), W_UV (H, d_v, r)): kv_up's weight, head by head."""
        H, d_C, d_v = self.num_heads, self.qk_nope_head_dim, self.v_head_dim
        per_head = self.kv_up.weight.reshape(H, d_C + d_v, self.kv_lora_rank)   # (H, d_C + d_v, r)
        return per_head[:, :d_C], per_head[:, d_C:]                     # (H, d_C, r), (H, d_v, r)

    def expanded(self, q_C, q_R, c_kv, k_R):
        """Attention as the paper's equations write it: every head's content keys and values
        rebuilt from c_kv (B, S, r); the rotary key k_R (B, S, d_R) is one for all heads.
        (heads (B, H, T, d_v), weights (B, H, T, S))."""
        B, H, T, _ = q_C.shape
        S, d_C = c_kv.shape[1], self.qk_nope_head_dim
        kv = self.kv_up(c_kv).reshape(B, S, H, d_C + self.v_head_dim)   # (B, S, H, d_C + d_v)
        kv = kv.transpose(0, 2, 1, 3)                                   # (B, H, S, d_C + d_v)
        k_C, v = kv[..., :d_C], kv[..., d_C:]                           # (B, H, S, d_C), d_v
        # q . k = [q_C; q_R] . [k_C; k_R] = q_C . k_C + q_R . k_R, the second for every head
        shared = k_R.reshape(B, 1, S, self.qk_rope_head_dim)            # (B, 1, S, d_R)
        scores = (q_C @ k_C.mT + q_R @ shared.mT) * self.scale          # (B, H, T, S)
        seen = visible_keys(T, S)                                       # (T, S) causal, or None
        if seen is not None:
            scores = where(seen, scores, -math.inf)                     # (B, H, T, S)
        weights = F.softmax(scores, axis=-1)                            # (B, H, T, S)
        return weights @ v, weights                                     # (B, H, T, d_v)

    def absorbed(self, q_C, q_R, latents):
        """Attention on the latents (B, S, r + d_R) themselves: W_UK absorbed into the queries,
        W_UV applied after the weighted sum; multi-query attention whose one key/value head is
        the latent. The same (heads, weights) as `expanded`."""
        B, H, T, _ = q_C.shape
        S, r = latents.shape[1], self.kv_lora_rank
        W_UK, W_UV = self.up_projections()                              # (H, d_C, r), (H, d_v, r)
        query = concatenate([q_C @ W_UK, q_R], axis=-1)                 # (B, H, T, r + d_R)
        key = latents.reshape(B, 1, S, r + self.qk_rope_head_dim)       # (B, 1, S, r + d_R)
        weights = grouped_weights(query, key, visible_keys(T, S), self.scale)   # (B, H, T, S)
        mixed = grouped_values(weights, key[..., :r])                   # (B, H, T, r)
        return mixed @ W_UV.mT, weights                                 # (B, H, T, d_v)

    def extra_repr(self):
        q_lora = "" if self.q_lora_rank is None else f", q_lora_rank={self.q_lora_rank}"
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"kv_lora_rank={self.kv_lora_rank}, qk_rope_head_dim={self.qk_rope_head_dim}, "
                f"qk_nope_head_dim={self.qk_nope_head_dim}, v_head_dim={self.v_head_dim}{q_lora}")


class LatentCache:
    """One latent-attention layer's cache: for each token seen, its latent [c_kv; k_R], (B, S,
    r + d_R), c_kv and the turned rotary key side by side (as DeepSeek's inference code keeps
    them: 512 + 64 numbers a token in DeepSeek-V3), and nothing else. Its bytes are
    B S (r + d_R) itemsize, where a grouped-query layer's are 2 B K S D itemsize."""

    window = None                               # every token is kept

    def __init__(self):
        self.latents = None                     # a tensor (B, S, r + d_R), once filled

    def extended(self, c_kv, k_R):
        """The cached latents followed by the new tokens' [c_kv; k_R] ((B, T, r) and (B, T,
        d_R)): (B, S + T, r + d_R), all of which the layer keeps."""
        latent = concatenate([c_kv, k_R], axis=-1)                      # (B, T, r + d_R)
        if self.latents is not None:
            latent = concatenate([self.latents, latent], axis=1)        # (B, S + T, r + d_R)
        self.latents = latent
        return latent

    @property
    def batch_size(self):
        return None if self.latents is None else self.latents.shape[0]

    @property
    def nbytes(self):
        return 0 if self.latents is None else self.latents.data.nbytes
