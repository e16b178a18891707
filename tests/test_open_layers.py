"""Chapter 5's pieces (tinyattn/ops/rms_norm.py, silu.py, rotate_half.py; tinyattn/functional/
norms_and_gates.py, rotate_half.py, grouped_query.py; tinyattn/nn/open_layers.py, and the
attention of tinyattn/nn/llama.py and qwen3.py): what each
docstring claims, beyond the checklist's gradient rows (tinyattn_tools/checklist/chapter5.py):
the two rotary layouts differ by a permutation, Llama 3.1's bands, a shared key head's gradient
is its group's sum, the sliding window is chapter 2's band, and bad arguments are named."""
import math
import warnings

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from references import arrays, largest_saved_array
from tinyattn.functional.grouped_query import visible_keys
from tinyattn.nn.llama import LlamaAttention
from tinyattn.nn.qwen3 import Qwen3Attention
from tinyattn_tools.checklist.chapter5 import LLAMA3, repeated_heads_attention


def attention_settings(embed_dim, num_heads, num_kv_heads, head_dim):
    """DecoderSettings for an attention layer alone (the other sizes are the model's)."""
    return nn.DecoderSettings(vocab_size=1, hidden_size=embed_dim, intermediate_size=1,
                              num_layers=1, num_heads=num_heads, num_kv_heads=num_kv_heads,
                              head_dim=head_dim)


def halves_interleaved(D):
    """[0, D/2, 1, D/2 + 1, ...]: the rotate-half layout's pairs (i, i + D/2) as neighbours."""
    h = D // 2
    return np.stack([np.arange(h), np.arange(h) + h], axis=-1).ravel()


# ------------------------------------------------------------------------------------------------
# RMSNorm and SiLU

def test_rms_norm_divides_each_row_by_its_root_mean_square():
    x, = arrays((3, 4, 8))
    out = F.rms_norm(ta.tensor(x)).data
    np.testing.assert_allclose(np.sqrt((out ** 2).mean(axis=-1)), 1.0, atol=1e-5)
    np.testing.assert_allclose(out, x / np.sqrt((x ** 2).mean(-1, keepdims=True) + 1e-6),
                               rtol=1e-14)
    # no centring: unlike LayerNorm, a row's mean survives, scaled
    assert np.abs(out.mean(axis=-1)).max() > 0.1


def test_gemmas_norm_scales_by_one_plus_its_weight_which_starts_at_zero():
    x = ta.tensor(arrays((2, 3, 5))[0])
    gemma, llama = nn.RMSNorm(5, unit_offset=True), nn.RMSNorm(5)
    assert np.all(gemma.weight.data == 0) and np.all(llama.weight.data == 1)
    np.testing.assert_array_equal(gemma(x).data, llama(x).data)
    gemma.weight.data[...] = llama.weight.data[...] = [0.5, -1.0, 2.0, 0.0, 0.25]
    np.testing.assert_allclose(gemma(x).data, F.rms_norm(x, ta.tensor(llama.weight.data + 1)).data,
                               rtol=1e-15)


def test_silu_is_x_times_sigmoid_and_never_overflows():
    for dtype in (np.float32, np.float64):
        x = np.array([-1000.0, -88.5, -20.0, 0.0, 3.0, 1000.0], dtype)
        t = ta.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")               # an overflow in exp would warn
            out = F.silu(t)
            out.backward(np.ones_like(x))
        assert out.dtype == t.grad.dtype == dtype
        expected = x.astype(np.float64) / (1 + np.exp(-np.clip(x.astype(np.float64), -700, 700)))
        np.testing.assert_allclose(out.data, expected, rtol=1e-6, atol=1e-30)
        np.testing.assert_allclose(t.grad[[0, 3, 5]], [0.0, 0.5, 1.0], atol=1e-30)


# ------------------------------------------------------------------------------------------------
# Rotary positions in the rotate-half layout

def test_the_layouts_differ_by_a_fixed_permutation_of_the_features():
    """rope_rotate_half(x)[..., perm] == F.rope(x[..., perm]), perm interleaving the halves."""
    x, = arrays((2, 3, 7, 8))
    perm = halves_interleaved(8)
    half = F.rope_rotate_half(ta.tensor(x), offset=5, base=100.0).data
    interleaved = F.rope(ta.tensor(x[..., perm]), offset=5, base=100.0).data
    np.testing.assert_allclose(half[..., perm], interleaved, rtol=1e-13, atol=1e-14)


def test_a_checkpoints_weights_fix_the_layout():
    """Queries and keys projected by W_q, W_k score the same in the rotate-half layout as with
    the rows of W_q and W_k permuted in the interleaved one; with the rows as they are, the
    interleaved layout scrambles every score."""
    x, W_q, W_k = arrays((6, 16), (8, 16), (8, 16))
    perm = halves_interleaved(8)

    def scores(rotate, W_q, W_k):
        q, k = rotate(ta.tensor(x @ W_q.T)).data, rotate(ta.tensor(x @ W_k.T)).data   # (6, 8)
        return q @ k.T                                                             # (6, 6)
    half = scores(F.rope_rotate_half, W_q, W_k)
    np.testing.assert_allclose(scores(F.rope, W_q[perm], W_k[perm]), half, rtol=1e-12,
                               atol=1e-12)
    assert np.abs(scores(F.rope, W_q, W_k) - half).max() > 1.0


def test_a_score_depends_only_on_the_distance():
    q, k = arrays((1, 8), (1, 8))

    def score(m, n):
        rotated_q = F.rope_rotate_half(ta.tensor(q), offset=m, base=50.0).data
        rotated_k = F.rope_rotate_half(ta.tensor(k), offset=n, base=50.0).data
        return float((rotated_q @ rotated_k.T)[0, 0])
    assert score(7, 3) == pytest.approx(score(4, 0), rel=1e-12)
    assert score(7, 3) != pytest.approx(score(7, 4), rel=1e-3)


def meta_apply_scaling(theta, factor, low_freq_factor, high_freq_factor, old_context_len):
    """Llama 3.1's scaling as Meta's released code writes it (`apply_scaling`), one frequency at
    a time."""
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor
    scaled = []
    for freq in theta:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            scaled.append(freq)
        elif wavelen > low_freq_wavelen:
            scaled.append(freq / factor)
        else:
            smooth = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor -
                                                                      low_freq_factor)
            scaled.append((1 - smooth) * freq / factor + smooth * freq)
    return np.array(scaled)


def test_llama3_scaling_is_metas_three_bands():
    theta = F.rope_frequencies(16, 50.0)                            # (8,)
    np.testing.assert_allclose(theta, 50.0 ** (-np.arange(0, 16, 2) / 16), rtol=1e-15)
    scaled = F.rope_frequencies(16, 50.0, LLAMA3)
    np.testing.assert_allclose(scaled, meta_apply_scaling(theta, 8.0, 1.0, 4.0, 64), rtol=1e-15)
    kept, divided = scaled == theta, np.isclose(scaled, theta / 8, rtol=1e-15)
    blended = ~kept & ~divided
    assert kept.any() and divided.any() and blended.any()          # every band is tested
    assert np.all((theta[blended] / 8 < scaled[blended]) & (scaled[blended] < theta[blended]))
    np.testing.assert_allclose(F.rope_frequencies(16, 50.0, {"rope_type": "linear",
                                                             "factor": 4.0}), theta / 4)
    assert F.rope_frequencies(16, 50.0, {"rope_type": "default"}).tolist() == theta.tolist()


def test_float32_rotation_stays_float32():
    x = ta.tensor(arrays((2, 5, 6))[0].astype(np.float32), requires_grad=True)
    out = F.rope_rotate_half(x, offset=3)
    out.backward(np.ones(out.shape, np.float32))
    assert out.dtype == x.grad.dtype == np.float32


# ------------------------------------------------------------------------------------------------
# Grouped-query attention

def test_grouped_query_attention_is_sdpa_with_each_key_head_repeated_for_its_group():
    q, k, v = (ta.tensor(a) for a in arrays((2, 6, 4, 5), (2, 2, 7, 5), (2, 2, 7, 3)))
    heads = np.array([0, 0, 0, 1, 1, 1])                     # query head h reads h // 3
    expected = F.scaled_dot_product_attention(q, k[:, heads], v[:, heads], is_causal=True)
    np.testing.assert_allclose(F.grouped_query_attention(q, k, v, is_causal=True).data,
                               expected.data, rtol=1e-13, atol=1e-14)
    padding = np.array([True] * 5 + [False] * 2)[None, None, None, :].repeat(2, 0)   # (B,1,1,S)
    padding[1, ..., 3] = False
    expected = F.scaled_dot_product_attention(q, k[:, heads], v[:, heads], attn_mask=padding)
    np.testing.assert_allclose(F.grouped_query_attention(q, k, v, attn_mask=padding).data,
                               expected.data, rtol=1e-13, atol=1e-14)
    # one key/value head per query head is chapter 1's attention
    k6, v6 = (ta.tensor(a) for a in arrays((2, 6, 7, 5), (2, 6, 7, 3), seed=1))
    np.testing.assert_allclose(F.grouped_query_attention(q, k6, v6).data,
                               F.scaled_dot_product_attention(q, k6, v6).data, rtol=1e-13)


def test_a_shared_key_heads_gradient_is_the_sum_over_its_group():
    """The derivation in functional/grouped_query.py: the gradient a key/value head gets equals
    the sum of what each query head of its group would send to a copy of its own."""
    q_data, k_data, v_data = arrays((1, 4, 3, 6), (1, 2, 5, 6), (1, 2, 5, 2))
    upstream = np.random.default_rng(1).standard_normal((1, 4, 3, 2))
    k, v = ta.tensor(k_data, requires_grad=True), ta.tensor(v_data, requires_grad=True)
    F.grouped_query_attention(ta.tensor(q_data), k, v).backward(upstream)
    copies = [(ta.tensor(k_data[:, [h // 2]], requires_grad=True),
               ta.tensor(v_data[:, [h // 2]], requires_grad=True)) for h in range(4)]
    for h, (k_h, v_h) in enumerate(copies):
        out = F.scaled_dot_product_attention(ta.tensor(q_data[:, [h]]), k_h, v_h)
        out.backward(upstream[:, [h]])
    for j in range(2):                                        # kv head j serves heads 2j, 2j + 1
        np.testing.assert_allclose(k.grad[:, [j]], copies[2 * j][0].grad +
                                   copies[2 * j + 1][0].grad, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(v.grad[:, [j]], copies[2 * j][1].grad +
                                   copies[2 * j + 1][1].grad, rtol=1e-12, atol=1e-14)


def test_no_key_head_is_copied_for_its_group():
    """One new query against a long cache of one key/value head for 8 query heads: the graph
    keeps nothing as large as the keys repeated for every head, (8, S, D)."""
    S, D = 50, 16
    q, k, v = (ta.tensor(a, requires_grad=True) for a in arrays((1, 8, 1, D), (1, 1, S, D),
                                                                (1, 1, S, D)))
    out = F.grouped_query_attention(q, k, v)
    assert largest_saved_array(out) <= S * D < 8 * S * D
    assert largest_saved_array(repeated_heads_attention(q, k, v)) >= 8 * S * D


def test_visible_keys_is_chapter_2s_band_shifted_to_the_newest_positions():
    np.testing.assert_array_equal(visible_keys(6, 6, 3), F.local_mask(6, 3))
    np.testing.assert_array_equal(visible_keys(6, 6), np.tril(np.ones((6, 6), bool)))
    np.testing.assert_array_equal(visible_keys(2, 5, 3), F.local_mask(5, 3)[3:])
    np.testing.assert_array_equal(visible_keys(2, 5), np.tril(np.ones((5, 5), bool))[3:])
    assert visible_keys(1, 9) is None and visible_keys(1, 3, 3) is None
    np.testing.assert_array_equal(visible_keys(1, 4, 3), [[False, True, True, True]])


def test_a_sliding_layer_is_chapter_2s_sliding_window_attention_where_it_fits():
    """Without a cache (as many keys as queries), the layer's attention equals
    F.sliding_window_attention (chapter 2, chunked) on the key heads repeated for their groups."""
    ta.manual_seed(0)
    layer = LlamaAttention(attention_settings(12, 4, 2, 6), window=3)
    x = ta.tensor(arrays((2, 9, 12))[0])
    _, cache = layer.run_with_cache(x)
    q, k, v = (ta.tensor(cache[name]) for name in ("q", "k", "v"))
    heads = np.arange(4) // 2
    chunked = F.sliding_window_attention(q, k[:, heads], v[:, heads], window=3)
    np.testing.assert_allclose(cache["heads"], chunked.data, rtol=1e-12, atol=1e-14)
    assert np.all(cache["weights"][..., np.triu_indices(9, 1)[0], np.triu_indices(9, 1)[1]] == 0)
    assert np.all(cache["weights"][:, :, 5, :3] == 0) and np.all(cache["weights"][:, :, 5, 3:6] > 0)


def test_qk_norm_normalises_each_heads_queries_and_keys_before_the_rotation():
    ta.manual_seed(0)
    layer = Qwen3Attention(attention_settings(8, 2, 1, 4))
    _, cache = layer.run_with_cache(ta.tensor(arrays((1, 5, 8))[0] * 30.0))
    for name in ("q", "k"):                    # a rotation keeps each pair's length, so the rms
        np.testing.assert_allclose(np.sqrt((cache[name] ** 2).mean(axis=-1)), 1.0, atol=1e-5)


# ------------------------------------------------------------------------------------------------
# Bad arguments, named

@pytest.mark.parametrize("call, error, message", [
    (lambda: F.grouped_query_attention(*map(ta.tensor, arrays((1, 3, 2, 4), (1, 2, 2, 4),
                                                              (1, 2, 2, 4)))), ValueError,
     r"^grouped_query_attention: the 2 key/value heads must divide the 3 query heads"),
    (lambda: F.grouped_query_attention(*map(ta.tensor, arrays((1, 2, 2, 4), (1, 1, 3, 4),
                                                              (1, 1, 3, 4))),
                                       attn_mask=ta.tensor(np.zeros((2, 3)))), TypeError,
     r"^grouped_query_attention: attn_mask must be a NumPy array here"),
    (lambda: F.grouped_query_attention(*map(ta.tensor, arrays((1, 2, 2, 4), (1, 1, 3, 5),
                                                              (1, 1, 3, 4)))), ValueError,
     r"^grouped_query_attention: query and key disagree on E"),
    (lambda: F.rope_frequencies(8, 10.0, {"rope_type": "yarn", "factor": 4.0}), ValueError,
     r"^rope_frequencies: scaling must be None or a dict with a rope_type of 'default', "
     r"'linear', 'llama3', got 'yarn'"),
    (lambda: F.rope_frequencies(8, 10.0, {"rope_type": "llama3", "factor": 8.0}), ValueError,
     r"^rope_frequencies: scaling of rope_type 'llama3' needs low_freq_factor, a positive number"),
    (lambda: F.rope_frequencies(7), ValueError, r"^rope_frequencies: dim must be even"),
    (lambda: F.rope_rotate_half(ta.tensor(np.ones((3, 6))), frequencies=np.ones(2)), ValueError,
     r"^rope_rotate_half: frequencies must be 3 numbers"),
    (lambda: F.rms_norm(ta.tensor(np.ones((2, 3))), ta.tensor(np.ones(4))), ValueError,
     r"^rms_norm: x and weight disagree on N"),
    (lambda: LlamaAttention(attention_settings(8, 4, 3, 2)), ValueError,
     r"^LlamaAttention: num_kv_heads 3 must divide num_heads 4"),
    (lambda: Qwen3Attention(attention_settings(12, 4, 4, 5)), ValueError,
     r"^Qwen3Attention: the rotary positions turn pairs of features, so head_dim must be "
     r"even; got 5"),
    (lambda: LlamaAttention(attention_settings(8, 4, 2, 2), window=0), ValueError,
     r"^LlamaAttention: window must be at least 1, got 0"),
    (lambda: LlamaAttention(attention_settings(8, 4, 2, 2))(ta.tensor(np.ones((1, 3, 8))), -1),
     ValueError, r"^LlamaAttention: start must be at least 0, got -1"),
    (lambda: LlamaAttention(dict(hidden_size=8)), TypeError,
     r"^LlamaAttention: settings must be a DecoderSettings, got dict"),
    (lambda: nn.GatedFeedForward(4, 8, activation="relu"), ValueError,
     r"^GatedFeedForward: activation must be one of 'silu', 'gelu_tanh', got 'relu'"),
    (lambda: nn.RMSNorm(4)(ta.tensor(np.ones((2, 5)))), ValueError,
     r"^RMSNorm: x must have shape \(\.\.\., 4\), got \(2, 5\)"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
