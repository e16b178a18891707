"""F.sliding_window_attention: the same output and gradients as SDPA under the banded mask (to
1e-12 in float64, random upstream gradient), causal and not, windows from 1 to past L (a short last
chunk included), broadcast leading axes; float32 kept; a graph whose saved arrays grow as
L * window, not L^2; bad input named before any graph node is built."""
import numpy as np
import pytest
from references import (arrays, assert_refused_before_any_node, largest_saved_array,
                        output_and_gradients)

import tinyattn as ta
import tinyattn.functional as F


def sdpa_in_band(query, key, value, window, is_causal=True, scale=None):
    """The reference: plain attention with the band as its boolean mask."""
    mask = F.local_mask(query.shape[-2], window, is_causal)
    return F.scaled_dot_product_attention(query, key, value, attn_mask=mask, scale=scale)


def assert_same(got, want, tolerance=1e-12):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("is_causal", [True, False])
@pytest.mark.parametrize("L, window", [(1, 1), (5, 1), (5, 2), (7, 3), (12, 4), (12, 5),
                                       (6, 6), (5, 9)])
def test_equals_sdpa_with_the_banded_mask(L, window, is_causal):
    inputs = arrays((2, L, 4), (2, L, 4), (2, L, 3), seed=L * 10 + window)
    upstream = arrays((2, L, 3), seed=99)[0]
    got = output_and_gradients(F.sliding_window_attention, inputs, upstream, window=window,
                               is_causal=is_causal)
    want = output_and_gradients(sdpa_in_band, inputs, upstream, window=window,
                                is_causal=is_causal)
    assert_same(got, want)


def test_broadcast_leading_axes_and_scale():
    inputs = arrays((2, 1, 9, 4), (1, 3, 9, 4), (3, 9, 5))
    upstream = arrays((2, 3, 9, 5), seed=1)[0]
    for is_causal in (True, False):
        got = output_and_gradients(F.sliding_window_attention, inputs, upstream, window=4,
                                   is_causal=is_causal, scale=0.3)
        want = output_and_gradients(sdpa_in_band, inputs, upstream, window=4,
                                    is_causal=is_causal, scale=0.3)
        assert_same(got, want)


def test_the_band_itself():
    """Value vectors that are one-hot in their position show which keys each query averaged."""
    L, window = 7, 3
    value = ta.tensor(np.eye(L))                          # value j = e_j
    zeros = ta.tensor(np.zeros((L, 2)))                   # equal scores: a plain average
    for is_causal in (True, False):
        weights = F.sliding_window_attention(zeros, zeros, value, window, is_causal).data
        i, j = np.arange(L)[:, None], np.arange(L)[None, :]
        band = (i - window < j) & (j <= i) if is_causal else abs(i - j) < window
        np.testing.assert_allclose(weights, band / band.sum(axis=1, keepdims=True), atol=1e-15)


def test_float32_stays_float32():
    inputs = [a.astype(np.float32) for a in arrays((2, 6, 4), (2, 6, 4), (2, 6, 3))]
    upstream = arrays((2, 6, 3), seed=1)[0]
    got = output_and_gradients(F.sliding_window_attention, inputs, upstream.astype(np.float32),
                               window=2)
    want = output_and_gradients(F.sliding_window_attention,
                                [a.astype(np.float64) for a in inputs], upstream, window=2)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_what_the_graph_keeps_grows_as_L_times_window():
    L, window = 256, 8
    query, key, value = (ta.tensor(a, requires_grad=True) for a in arrays(*[(L, 4)] * 3))
    for is_causal in (True, False):
        out = F.sliding_window_attention(query, key, value, window, is_causal)
        assert largest_saved_array(out) <= 3 * L * window       # the (L / w, w, 3w) scores
    assert largest_saved_array(sdpa_in_band(query, key, value, window)) == L * L


QKV = ((2, 5, 4), (2, 5, 4), (2, 5, 3))


@pytest.mark.parametrize("shapes, kwargs, error, message", [
    (((2, 5, 4), (2, 4, 4), (2, 4, 3)), dict(window=2), ValueError,
     r"sliding_window_attention: query and key disagree on L \(5 and 4\): expected query "
     r"\(\.\.\., L, E\), key \(\.\.\., L, E\), value \(\.\.\., L, Ev\); got query \(2, 5, 4\), "
     r"key \(2, 4, 4\), value \(2, 4, 3\)"),
    (QKV, dict(window=0), ValueError,
     r"sliding_window_attention: window must be at least 1, got 0"),
    (QKV, dict(window=2.0), TypeError, r"sliding_window_attention: window must be an int, got 2.0"),
    (QKV, dict(window=True), TypeError,
     r"sliding_window_attention: window must be an int, got True"),
    (QKV, dict(window=2, scale="a"), TypeError,
     r"sliding_window_attention: scale must be a number, got 'a'"),
    (((2, 5, 0), (2, 5, 0), (2, 5, 3)), dict(window=2), ValueError,
     r"sliding_window_attention: queries and keys need a width E of 1 or more"),
])
def test_bad_input_is_named_before_any_node(shapes, kwargs, error, message):
    assert_refused_before_any_node(F.sliding_window_attention, shapes, kwargs, error, message)


def test_mixed_dtypes_are_refused():
    query, key = (ta.tensor(a) for a in arrays((2, 5, 4), (2, 5, 4)))
    value = ta.tensor(np.ones((2, 5, 3), np.float32))
    with pytest.raises(TypeError, match=r"sliding_window_attention: query, key and value must "
                                        r"have the same dtype, got float64, float64 and float32"):
        F.sliding_window_attention(query, key, value, 2)


def test_mistrals_window_of_w_keeps_w_plus_1_keys_and_hugging_faces_keeps_w():
    """The docstring's claim, with each source's rule written out in NumPy: Mistral's reference
    code masks a prompt with triu(tril(ones), diagonal=-W) (positions i - W ... i: window W + 1
    here); Hugging Face's sliding-window overlay keeps kv_idx > q_idx - W on top of the causal
    mask (window W here)."""
    L, W = 9, 3
    mistral = np.triu(np.tril(np.ones((L, L), dtype=bool)), -W)
    i, j = np.arange(L)[:, None], np.arange(L)
    hugging_face = (j > i - W) & (j <= i)
    np.testing.assert_array_equal(F.local_mask(L, W + 1), mistral)
    np.testing.assert_array_equal(F.local_mask(L, W), hugging_face)
    assert mistral.sum(axis=-1).max() == W + 1 and hugging_face.sum(axis=-1).max() == W
