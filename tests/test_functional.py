"""tinyattn.functional: attention, layer norm, cross-entropy, dropout against NumPy references of
their formulas; masking, broadcasting and dtypes. (Their gradients: tests/test_checklist.py.)"""
import numpy as np
import pytest
from references import arrays

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn_tools.checklist.fused import np_gelu, np_layer_norm
from tinyattn_tools.checklist.layers import MASK, ROW_FULLY_MASKED
from tinyattn_tools.checklist.ops import np_attention, np_softmax


@pytest.mark.parametrize("mask, causal, scale", [
    (None, False, None), (None, True, None), (None, False, 1.0), (MASK, False, 0.3),
    (MASK, True, None)])
def test_sdpa_matches_numpy(mask, causal, scale):
    q, k, v = arrays((2, 3, 4), (2, 5, 4), (2, 5, 6))
    allowed = mask
    if causal:
        causal_mask = np.tril(np.ones((3, 5), bool))
        allowed = causal_mask if mask is None else mask & causal_mask
    expected, expected_weights = np_attention(q, k, v, allowed, scale)
    out, weights = F.attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), attn_mask=mask,
                               is_causal=causal, scale=scale)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights.data, expected_weights, rtol=1e-12, atol=1e-12)
    sdpa = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), mask,
                                          is_causal=causal, scale=scale)
    np.testing.assert_array_equal(sdpa.data, out.data)


def test_sdpa_float_mask_is_added_to_the_scores():
    q, k, v, bias = arrays((2, 3, 4), (2, 5, 4), (2, 5, 6), (3, 5))
    scores = q @ np.swapaxes(k, -1, -2) / 2.0 + bias
    out = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), bias)
    np.testing.assert_allclose(out.data, np_softmax(scores) @ v, rtol=1e-12, atol=1e-12)


def test_sdpa_broadcasts_leading_axes():
    q, k, v = arrays((2, 1, 3, 4), (1, 4, 5, 4), (4, 5, 6))
    out = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v))
    assert out.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(out.data, np_attention(q, k, v)[0], rtol=1e-12, atol=1e-12)


def test_fully_masked_query_row_gives_zeros_and_zero_gradients_not_nan():
    q, k, v = (ta.tensor(a, requires_grad=True) for a in arrays((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    out, weights = F.attention(q, k, v, attn_mask=ROW_FULLY_MASKED)
    assert np.all(weights.data[:, 1] == 0) and np.all(out.data[:, 1] == 0)
    np.testing.assert_allclose(weights.data[:, [0, 2]].sum(axis=-1), 1.0)
    out.backward(np.ones(out.shape))
    for t in (q, k, v):
        assert np.all(np.isfinite(t.grad))
    assert np.all(q.grad[:, 1] == 0)                   # the masked query gets no gradient
    assert np.any(q.grad[:, 0] != 0)


def test_float32_attention_stays_float32():
    q, k, v = (ta.tensor(a.astype(np.float32), requires_grad=True)
               for a in arrays((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=MASK, is_causal=True)
    assert out.dtype == np.float32
    out.backward(np.ones(out.shape, np.float32))
    assert q.grad.dtype == k.grad.dtype == v.grad.dtype == np.float32


def test_functions_match_numpy():
    x, weight, bias = arrays((2, 3, 5), (5,), (5,))
    np.testing.assert_allclose(F.layer_norm(ta.tensor(x), ta.tensor(weight), ta.tensor(bias)).data,
                               np_layer_norm(x, weight, bias), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(F.gelu(ta.tensor(x)).data, np_gelu(x), rtol=1e-12, atol=1e-12)
    integers = np.array([-2, 0, 3])                 # computed in float64, as NumPy's x * 0.5 is
    np.testing.assert_allclose(F.gelu(ta.tensor(integers)).data, np_gelu(integers), rtol=1e-12)
    logits, targets = x[0], np.array([4, 0, 2])
    log_probabilities = np.log(np_softmax(logits))
    expected = -log_probabilities[np.arange(3), targets].mean()
    np.testing.assert_allclose(F.cross_entropy(ta.tensor(logits), targets).item(), expected)


def test_cross_entropy_over_extra_axes_leaves_out_ignored_targets():
    logits = arrays((2, 4, 3))[0]                             # (N, C, d)
    targets = np.array([[1, -100, 3], [0, 2, -100]])
    log_probabilities = np.log(np_softmax(np.moveaxis(logits, 1, -1)))    # (N, d, C)
    kept = [(0, 0, 1), (0, 2, 3), (1, 0, 0), (1, 1, 2)]
    expected = -np.mean([log_probabilities[n, d, c] for n, d, c in kept])
    np.testing.assert_allclose(F.cross_entropy(ta.tensor(logits), targets).item(), expected)


def test_dropout_scales_survivors_and_is_off_in_eval():
    ta.manual_seed(0)
    x = ta.tensor(np.ones((200, 50)))
    dropped = F.dropout(x, p=0.2)
    assert set(np.unique(dropped.data)) == {0.0, 1.25}
    assert 0.17 < np.mean(dropped.data == 0) < 0.23
    layer = nn.Dropout(0.2).eval()
    assert layer(x) is x


def test_a_float64_numpy_mask_keeps_float32_attention_float32():
    mha = nn.MultiHeadAttention(8, 2, dtype=np.float32)
    x = ta.tensor(arrays((2, 4, 8))[0].astype(np.float32), requires_grad=True)
    additive = np.triu(np.full((4, 4), -np.inf), k=1)           # float64, as NumPy makes it
    out, weights = mha(x, attn_mask=additive)
    assert out.dtype == weights.dtype == np.float32
    out.backward(np.ones(out.shape, np.float32))
    assert x.grad.dtype == np.float32


def test_attention_over_no_keys_gives_zeros():
    """S = 0: every key is missing, like a fully masked row, so the output row is zero."""
    random = np.random.default_rng(0)
    q = ta.tensor(random.standard_normal((3, 4)), requires_grad=True)
    k, v = ta.tensor(np.zeros((0, 4)), requires_grad=True), ta.tensor(np.zeros((0, 2)))
    out = F.scaled_dot_product_attention(q, k, v)
    np.testing.assert_array_equal(out.data, np.zeros((3, 2)))
    out.backward(random.standard_normal((3, 2)))
    np.testing.assert_array_equal(q.grad, np.zeros((3, 4)))
    assert k.grad.shape == (0, 4)
