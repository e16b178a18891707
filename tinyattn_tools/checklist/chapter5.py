"""The checklist's rows for chapter 5, the pieces of today's open models: RMSNorm, SiLU and the
rotate-half rotary as ops (against NumPy, finite differences, and the chains of primitive ops
they replace), grouped-query attention (against SDPA on key/value heads repeated by indexing, the
chain it replaces), the layers built from them, and each family's model on its page.

Gemma's norms scale by 1 + weight, with weights that start at zero, and QK-norm has gains of its
own: every row here gives the norms random gains first (`off_their_start`), so that a backward
which forgot a gain cannot pass where the gain is 1.
"""
import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.ops.rotate_half import RopeRotateHalf
from tinyattn_tools.checklist.cases import (FusedCase, LayerCase, OpCase, function,
                                            language_model_logits, leaves)

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}


def np_rms_norm(x, weight=1.0, eps=1e-6):
    return x / np.sqrt((x ** 2).mean(axis=-1, keepdims=True) + eps) * weight


def composed_rms_norm(x, weight=None, eps=1e-6):
    """F.rms_norm written with primitive ops (mul, mean, add, sqrt, div): the reference of the
    fused op."""
    normalized = x / ((x * x).mean(axis=-1, keepdims=True) + eps).sqrt()
    return normalized if weight is None else normalized * weight


def np_silu(x):
    return x / (1.0 + np.exp(-x))


def composed_silu(x):
    """F.silu written with primitive ops: x * 1 / (1 + exp(-x))."""
    return x * (1.0 / (1.0 + (-x).exp()))


def np_rope_rotate_half(x, offset=0, base=10000.0, frequencies=None):
    """The rotation with complex numbers: feature i and feature i + D/2 are z = x_i + i x_(i+h),
    turned by e^{i p theta}."""
    T, D = x.shape[-2:]
    h = D // 2
    theta = base ** (-np.arange(0, D, 2) / D) if frequencies is None else frequencies
    turned = (x[..., :h] + 1j * x[..., h:]) * np.exp(1j * np.arange(offset, offset + T)[:, None]
                                                     * theta)           # (..., T, h)
    return np.concatenate([turned.real, turned.imag], axis=-1)


def cos_sin(T, D, offset=0):
    angles = np.arange(offset, offset + T)[:, None] * F.rope_frequencies(D)     # (T, D/2)
    return np.cos(angles), np.sin(angles)


def fused_rotation(x):
    cos, sin = cos_sin(*x.shape[-2:])
    return RopeRotateHalf.apply(x, cos=cos, sin=sin)


def composed_rotation(x):
    """The rotate-half rotation written with primitive ops: two slices, four products, two sums
    and a concatenation."""
    cos, sin = cos_sin(*x.shape[-2:])
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return ta.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)


def repeated_heads_attention(query, key, value, **options):
    """Grouped-query attention as transformers' repeat_kv computes it: every key/value head
    copied for each query head of its group (an index: its backward adds the copies' gradients),
    then plain SDPA. The chain of primitive ops F.grouped_query_attention replaces."""
    group = query.shape[1] // key.shape[1]
    heads = np.arange(query.shape[1]) // group                   # (H,) the kv head of each head
    return F.scaled_dot_product_attention(query, key[:, heads], value[:, heads], **options)


def off_their_start(module):
    """`module` with every RMSNorm's weight drawn at random (seeded), as after training."""
    random = np.random.default_rng(2)
    for layer in module.modules():
        if isinstance(layer, nn.RMSNorm):
            layer.weight.data[...] = random.normal(0.0 if layer.unit_offset else 1.0, 0.3,
                                                   layer.weight.shape)
    return module


def built(make, *input_shapes, **kwargs):
    """A build function: a module made after seeding, its norms off their start, applied to
    standard normal inputs, checked against every input and parameter."""
    def build():
        ta.manual_seed(0)
        module = off_their_start(make())
        inputs = leaves(*input_shapes)

        def output(*args):
            out = module(*args[:len(inputs)], **kwargs)
            return out[0] if isinstance(out, tuple) else out       # attention: (out, weights)
        return output, [*inputs, *module.parameters()]
    return build


def attention_settings(**changes):
    """DecoderSettings of TINY's sizes (E 8, 4 query heads on 2 of 4 features) for an attention
    layer alone."""
    return nn.DecoderSettings(**{**TINY, **changes})


def cached_attention_step():
    """Six tokens into a sliding layer's cache (window 3), then two more: their output, which
    reaches the first six only through the cached keys and values (QK-norm, llama3 rotary)."""
    ta.manual_seed(0)
    attention = off_their_start(nn.qwen3.Qwen3Attention(
        attention_settings(rope_scaling=LLAMA3), window=3))
    x, = leaves((2, 8, 8))

    def step(x, *parameters):
        cache = nn.kv_cache.LayerCache(window=3)
        attention(x[:, :6], 0, cache)
        return attention(x[:, 6:], 6, cache)[0]                          # (2, 2, 8)
    return step, [x, *attention.parameters()]


TINY = dict(vocab_size=7, hidden_size=8, intermediate_size=12, num_layers=2, num_heads=4,
            num_kv_heads=2, head_dim=4)
SWITCHES = {      # Llama 3: llama3 rotary, biases, an untied head; Qwen3: QK-norm, a sliding layer,
    # a tied head; Gemma 3: multi-query, local/global layers, sandwich norms, softcapping
    "Llama 3's switches": dict(
        rope_scaling=LLAMA3, qkv_bias=True, out_bias=True, mlp_bias=True),
    "Qwen3's switches": dict(
        qk_norm=True, sliding_window=2, layer_types=("full", "sliding"), tied_head=True),
    "Gemma 3's switches": dict(
        num_kv_heads=1, norm_unit_offset=True, activation="gelu_tanh", qk_norm=True,
        query_pre_attn_scalar=6.0, sliding_window=2, layer_types=("sliding", "full"),
        local_rope_theta=100.0, rope_scaling={"rope_type": "linear", "factor": 4.0},
        embed_scale=True, sandwich_norms=True, final_logit_softcapping=2.0, tied_head=True),
}


# each family's page (nn/llama.py, qwen3.py, gemma3.py), its switches on: (class, settings)
FAMILIES = {
    "Llama": (nn.Llama, dict(SWITCHES["Llama 3's switches"], model_type="llama")),
    "Mistral": (nn.Mistral, dict(sliding_window=2, layer_types=("sliding",) * 2,
                                 model_type="mistral")),
    "Qwen2": (nn.Qwen2, dict(qkv_bias=True, sliding_window=2, layer_types=("full", "sliding"),
                             model_type="qwen2")),
    "Qwen3": (nn.Qwen3, dict(SWITCHES["Qwen3's switches"], model_type="qwen3")),
    "Gemma 3": (nn.Gemma3, dict(SWITCHES["Gemma 3's switches"], model_type="gemma3_text")),
}


def family_model(family, cached=False):
    """The family's model (FAMILIES) on fixed ids (5 tokens, longer than the window); `cached`:
    the last two positions' logits after the first three went into a cache."""
    def build():
        ta.manual_seed(0)
        model_class, switches = FAMILIES[family]
        model = off_their_start(model_class(nn.DecoderSettings(**{**TINY, **switches})))
        return language_model_logits(model, cached)
    return build


OP_CASES = [
    OpCase("rms_norm", F.rms_norm, np_rms_norm, ((2, 3, 5), (5,))),
    OpCase("rms_norm, no weight", F.rms_norm, np_rms_norm, ((4, 6),)),
    OpCase("rms_norm, eps 0.5, rows of one", lambda x, w: F.rms_norm(x, w, eps=0.5),
           lambda x, w: np_rms_norm(x, w, eps=0.5), ((3, 1), (1,))),
    OpCase("silu", F.silu, np_silu, ((3, 4),)),
    OpCase("silu, large inputs", lambda x: F.silu(8.0 * x), lambda x: np_silu(8.0 * x), ((2, 5),)),
    OpCase("rope_rotate_half", F.rope_rotate_half, np_rope_rotate_half, ((2, 5, 6),)),
    OpCase("rope_rotate_half, offset 7", lambda x: F.rope_rotate_half(x, offset=7),
           lambda x: np_rope_rotate_half(x, offset=7), ((2, 3, 4, 8),)),
    OpCase("rope_rotate_half, llama3 frequencies",
           lambda x: F.rope_rotate_half(x, 2, frequencies=F.rope_frequencies(8, 50.0, LLAMA3)),
           lambda x: np_rope_rotate_half(x, 2, frequencies=F.rope_frequencies(8, 50.0, LLAMA3)),
           ((6, 8),)),
]

GQA = ((2, 4, 5, 6), (2, 2, 5, 6), (2, 2, 5, 3))     # query (B, H, L, E), key, value (B, K, S, .)
MQA = ((2, 3, 4, 6), (2, 1, 5, 6), (2, 1, 5, 6))     # one key/value head, L != S
BAND = np.array([[True, True, False, False, False],
                 [False, True, True, False, False],
                 [False, False, True, True, True],
                 [True, False, False, True, True]])   # (L, S) = (4, 5)

LAYER_CASES = [
    LayerCase("F.grouped_query_attention, causal",
              function(F.grouped_query_attention, *GQA, is_causal=True)),
    LayerCase("F.grouped_query_attention, multi-query, mask, scale 0.3",
              function(F.grouped_query_attention, *MQA, attn_mask=BAND, scale=0.3)),
    LayerCase("RMSNorm", built(lambda: nn.RMSNorm(5), (2, 3, 5))),
    LayerCase("RMSNorm, Gemma's 1 + weight", built(lambda: nn.RMSNorm(5, unit_offset=True),
                                                   (2, 3, 5))),
    LayerCase("GatedFeedForward, SwiGLU", built(lambda: nn.GatedFeedForward(4, 6), (2, 3, 4))),
    LayerCase("GatedFeedForward, GeGLU, biases",
              built(lambda: nn.GatedFeedForward(4, 6, "gelu_tanh", bias=True), (2, 3, 4))),
    LayerCase("Qwen3Attention (QK-norm, q, k, v and out biases)",
              built(lambda: nn.qwen3.Qwen3Attention(attention_settings(
                  head_dim=6, qkv_bias=True, out_bias=True)), (2, 5, 8))),
    LayerCase("Gemma3Attention, window 2 (Gemma's norms, scale and local base)",
              built(lambda: nn.gemma3.Gemma3Attention(attention_settings(
                  num_kv_heads=1, query_pre_attn_scalar=6.25, rope_theta=1000.0,
                  local_rope_theta=100.0), window=2), (2, 5, 8))),
    LayerCase("Qwen3Attention, cached sliding step (random directions)",
              cached_attention_step, directions=6),
    *[LayerCase(f"{family} (random directions)", family_model(family), directions=4)
      for family in FAMILIES],
    LayerCase("Qwen3, cached step (random directions)", family_model("Qwen3", cached=True),
              directions=4),
    LayerCase("Gemma 3, cached step (random directions)", family_model("Gemma 3", cached=True),
              directions=4),
]

FUSED_CASES = [
    FusedCase("rms_norm = composed", F.rms_norm, composed_rms_norm, ((2, 3, 5), (5,))),
    FusedCase("rms_norm = composed, no weight", F.rms_norm, composed_rms_norm, ((4, 6),)),
    FusedCase("silu = composed", F.silu, composed_silu, ((3, 4),)),
    FusedCase("silu = composed, large inputs", lambda x: F.silu(6.0 * x),
              lambda x: composed_silu(6.0 * x), ((2, 5),)),
    FusedCase("rope_rotate_half = composed", fused_rotation, composed_rotation, ((2, 3, 5, 8),)),
    FusedCase("grouped_query_attention = SDPA on repeated heads, causal",
              lambda q, k, v: F.grouped_query_attention(q, k, v, is_causal=True),
              lambda q, k, v: repeated_heads_attention(q, k, v, is_causal=True), GQA),
    FusedCase("grouped_query_attention = SDPA on repeated heads, MQA, mask",
              lambda q, k, v: F.grouped_query_attention(q, k, v, attn_mask=BAND),
              lambda q, k, v: repeated_heads_attention(q, k, v, attn_mask=BAND), MQA),
]
