"""F.flash_attention computes what plain F.scaled_dot_product_attention computes, values and every
gradient (random upstream gradients), for any lengths and block sizes; it keeps only O(L) numbers
besides its inputs and output, and refuses bad input at the door. (Its gradients against finite
differences: the flash rows of tests/test_checklist.py.)"""
import numpy as np
import pytest
from references import arrays, forward_and_backward, peak_bytes

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.ops.flash_attention import FlashAttention


def flash_and_plain(shapes, is_causal, block_size, scale=None, dtype=np.float64):
    inputs = [x.astype(dtype) for x in arrays(*shapes)]
    flash = forward_and_backward(lambda q, k, v: F.flash_attention(
        q, k, v, is_causal=is_causal, scale=scale, block_size=block_size), inputs)
    plain = forward_and_backward(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=is_causal, scale=scale), inputs)
    return flash, plain


EQUAL = ((2, 7, 5), (2, 7, 5), (2, 7, 3))        # query (B, L, E), key (B, S, E), value (B, S, Ev)
SHORTER_QUERIES = ((2, 5, 4), (2, 9, 4), (2, 9, 3))     # L < S
LONGER_QUERIES = ((2, 9, 4), (2, 5, 4), (2, 5, 3))      # L > S
BROADCAST = ((2, 1, 6, 4), (1, 3, 7, 4), (3, 7, 2))     # leading axes (2, 1), (1, 3), (3,)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shapes, block_size, scale", [
    (EQUAL, 3, None),                       # blocks 3, 3, 1: a short last block
    (EQUAL, 1, None),
    (EQUAL, 7, None),                       # one block, exactly L
    (EQUAL, 64, None),                      # one block, larger than L
    (SHORTER_QUERIES, 4, None),
    (SHORTER_QUERIES, 2, 1.0),
    (LONGER_QUERIES, 2, None),
    (LONGER_QUERIES, 4, 0.3),
    (BROADCAST, 2, None),
    (((6, 4), (2, 6, 4), (6, 3)), 4, None),     # a 2-D query against a batch of keys
    (((3, 1, 11, 8), (3, 1, 10, 8), (3, 2, 10, 8)), 4, 3.0),   # sharp weights: the max moves
], ids=["ragged", "block 1", "block L", "block > L", "L < S", "L < S, scale 1", "L > S",
        "L > S, scale 0.3", "broadcast", "2-D query", "sharp"])
def test_flash_equals_plain_attention_values_and_gradients(shapes, block_size, scale, is_causal):
    flash, plain = flash_and_plain(shapes, is_causal, block_size, scale)
    for name, got, want in zip(["output", "query", "key", "value"], flash, plain):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_float32_stays_float32_and_close_to_float64(is_causal):
    flash32, _ = flash_and_plain(LONGER_QUERIES, is_causal, 2, dtype=np.float32)
    _, plain64 = flash_and_plain(LONGER_QUERIES, is_causal, 2)
    for got, want in zip(flash32, plain64):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_no_keys_gives_zeros_never_nan():
    flash, plain = flash_and_plain(((3, 4), (0, 4), (0, 2)), True, 2)
    out, grad_query, grad_key, grad_value = flash
    np.testing.assert_array_equal(out, np.zeros((3, 2)))
    np.testing.assert_array_equal(grad_query, np.zeros((3, 4)))
    assert grad_key.shape == (0, 4) and grad_value.shape == (0, 2)
    np.testing.assert_array_equal(out, plain[0])


def test_one_op_saving_only_inputs_output_logsumexp_and_its_layout():
    query, key, value = (ta.tensor(x, requires_grad=True) for x in arrays(*LONGER_QUERIES))
    out = F.flash_attention(query, key, value, is_causal=True, block_size=2)
    node = out._node
    assert node.name == "flash_attention"
    assert [p.tensor() for p in node.parents] == [query, key, value]   # one node, no others
    saved = [x for x in node.saved if isinstance(x, np.ndarray)]
    assert [x.shape for x in saved] == [(2, 9, 4), (2, 5, 4), (2, 5, 3), (2, 9, 3), (2, 9), (5, 3)]
    assert saved[3] is out.data
    assert saved[5].dtype == bool and saved[5].all()            # every pair of blocks visible


def test_no_array_of_the_scores_size_is_made():
    L = S = 1024
    inputs = arrays((L, 4), (S, 4), (S, 4))          # 32 KiB each; one (L, S) array is 8 MiB
    scores_bytes = L * S * 8
    flash = peak_bytes(lambda q, k, v: F.flash_attention(q, k, v, is_causal=True), inputs)
    plain = peak_bytes(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                       inputs)
    assert plain > 2 * scores_bytes                  # the measurement sees (L, S) arrays
    assert flash < scores_bytes / 8                  # all of flash's arrays: under 1 MiB


def t(*shape, dtype=np.float64):
    return ta.tensor(np.ones(shape, dtype), requires_grad=True)


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.flash_attention(t(2, 3, 4), t(2, 5, 3), t(2, 5, 6)), ValueError,
     r"flash_attention: query and key disagree on E \(4 and 3\): expected query \(\.\.\., L, E\), "
     r"key \(\.\.\., S, E\), value \(\.\.\., S, Ev\); got query \(2, 3, 4\), key \(2, 5, 3\), "
     r"value \(2, 5, 6\)"),
    (lambda: F.flash_attention(t(2, 3, 4), t(2, 5, 4), t(2, 4, 6)), ValueError,
     r"flash_attention: key and value disagree on S \(5 and 4\)"),
    (lambda: F.flash_attention(t(2, 3, 4), t(3, 5, 4), t(3, 5, 6)), ValueError,
     r"flash_attention: the leading \(batch\) axes do not broadcast: .*query \(2, 3, 4\), "
     r"key \(3, 5, 4\)"),
    (lambda: F.flash_attention(t(4), t(5, 4), t(5, 6)), ValueError,
     r"flash_attention: query must have shape \(\.\.\., L, E\), got \(4,\)"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2, dtype=np.float32)), TypeError,
     r"flash_attention: query, key and value must have the same dtype, got float64, float64 and "
     r"float32"),
    (lambda: F.flash_attention(*(ta.tensor(np.ones((3, 2), int)) for _ in range(3))), TypeError,
     r"flash_attention: query must hold floating-point numbers, got int64"),
    (lambda: F.flash_attention(np.ones((3, 2)), t(3, 2), t(3, 2)), TypeError,
     r"flash_attention: query must be a Tensor, got ndarray"),
    (lambda: F.flash_attention(t(3, 0), t(3, 0), t(3, 2)), ValueError,
     r"flash_attention: queries and keys need a width E of 1 or more, got a width E of 0"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2), block_size=0), ValueError,
     r"flash_attention: block_size must be at least 1, got 0"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2), block_size=-4), ValueError,
     r"flash_attention: block_size must be at least 1, got -4"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2), block_size=2.0), TypeError,
     r"flash_attention: block_size must be an int, got 2.0"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2), block_size=True), TypeError,
     r"flash_attention: block_size must be an int, got True"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2), scale="a"), TypeError,
     r"flash_attention: scale must be a number, got 'a'"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2), scale=float("nan")), ValueError,
     r"flash_attention: scale must not be NaN"),
])
def test_bad_input_is_named_before_the_op_runs(call, error, message, monkeypatch):
    def reached(*args, **kwargs):
        raise AssertionError("the op ran, so a graph node was built")
    monkeypatch.setattr(FlashAttention, "apply", reached)
    with pytest.raises(error, match=message):
        call()
