"""F.block_sparse_attention computes what SDPA computes under the mask its layout stands for,
kron(layout, ones((b, b)))[:L, :S] (and-ed with the causal mask when causal), values and every
gradient (random upstream gradients); a query that sees no key gets a zero row and zero gradients;
it visits the visible pairs of blocks only and makes no (L, S) array; bad layouts are named at the
door. (Its gradients against finite differences: the block-sparse rows of tests/test_checklist.py.)
"""
import numpy as np
import pytest
from references import arrays, assert_refused_before_any_node, forward_and_backward, peak_bytes

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.ops import flash_attention


def expanded(layout, block_size, L, S):
    """The mask of the API's definition, written with np.kron: (..., Lb, Sb) -> (..., L, S)."""
    ones = np.ones((1,) * (layout.ndim - 2) + (block_size, block_size), bool)
    return np.kron(layout, ones).astype(bool)[..., :L, :S]


def sparse_and_masked(shapes, layout, block_size, is_causal, scale=None, dtype=np.float64):
    inputs = [x.astype(dtype) for x in arrays(*shapes)]
    sparse = forward_and_backward(lambda q, k, v: F.block_sparse_attention(
        q, k, v, layout, block_size, is_causal=is_causal, scale=scale), inputs)
    mask = expanded(layout, block_size, shapes[0][-2], shapes[1][-2])
    masked = forward_and_backward(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=is_causal, scale=scale), inputs)
    return sparse, masked


def random_layout(shape, seed=2):
    return np.random.default_rng(seed).random(shape) < 0.5


EQUAL = ((2, 7, 5), (2, 7, 5), (2, 7, 3))        # query (B, L, E), key (B, S, E), value (B, S, Ev)
SHORTER_QUERIES = ((2, 5, 4), (2, 9, 4), (2, 9, 3))     # L < S
LONGER_QUERIES = ((2, 9, 4), (2, 5, 4), (2, 5, 3))      # L > S
HEADS = ((2, 1, 7, 4), (1, 3, 7, 4), (3, 7, 2))         # batch (2, 1), (1, 3), (3,): (2, 3)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("shapes, layout, block_size, scale", [
    (EQUAL, random_layout((3, 3)), 3, None),             # blocks 3, 3, 1: a short last block
    (EQUAL, random_layout((7, 7)), 1, None),             # the layout is a mask of positions
    (EQUAL, np.array([[True]]), 64, None),               # one block, larger than L
    (SHORTER_QUERIES, random_layout((3, 5)), 2, 1.0),
    (LONGER_QUERIES, random_layout((3, 2), seed=3), 4, 0.3),
    (HEADS, random_layout((3, 4, 4)), 2, None),          # a layout per head
    (HEADS, random_layout((2, 3, 4, 4)), 2, None),       # a layout per batch entry and head
    (HEADS, random_layout((2, 1, 4, 4)), 2, None),       # per batch entry, broadcast over heads
    (((3, 1, 11, 8), (3, 1, 10, 8), (3, 2, 10, 8)), random_layout((3, 1, 3, 3)), 4, 3.0),
], ids=["ragged", "block 1", "block > L", "L < S", "L > S", "per head", "per batch and head",
        "per batch", "sharp"])
def test_equals_sdpa_under_the_expanded_mask(shapes, layout, block_size, scale, is_causal):
    sparse, masked = sparse_and_masked(shapes, layout, block_size, is_causal, scale)
    for name, got, want in zip(["output", "query", "key", "value"], sparse, masked):
        assert got.shape == want.shape, name
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=name)


def test_layout_mask_is_the_expanded_mask():
    layout = random_layout((2, 3, 4, 3))
    np.testing.assert_array_equal(F.layout_mask(layout, 3, 10, 8), expanded(layout, 3, 10, 8))
    np.testing.assert_array_equal(F.layout_mask(layout[0, 0, :3, :3], 2, 5),
                                  expanded(layout[0, 0, :3, :3], 2, 5, 5))


def test_every_pair_visible_is_flash_attention():
    inputs = arrays(*LONGER_QUERIES)
    every_pair = np.ones((3, 2), bool)
    for is_causal in (False, True):
        sparse = forward_and_backward(lambda q, k, v: F.block_sparse_attention(
            q, k, v, every_pair, 4, is_causal=is_causal), inputs)
        flash = forward_and_backward(lambda q, k, v: F.flash_attention(
            q, k, v, is_causal=is_causal, block_size=4), inputs)
        for got, want in zip(sparse, flash):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("layout, is_causal, hidden_queries", [
    (np.array([[1, 0, 1], [0, 0, 0], [1, 1, 0]], bool), False, slice(3, 6)),   # a hidden row
    (np.array([[1, 0, 0], [0, 0, 1], [1, 1, 1]], bool), True, slice(3, 6)),    # only a later block
], ids=["a row of hidden blocks", "causal: only keys after it"])
def test_a_query_that_sees_no_key_gets_a_zero_row_and_zero_gradients(
        layout, is_causal, hidden_queries):
    shapes = ((2, 7, 4), (2, 7, 4), (2, 7, 3))
    sparse, masked = sparse_and_masked(shapes, layout, 3, is_causal)
    out, grad_query, _, _ = sparse
    assert all(np.isfinite(x).all() for x in sparse)
    np.testing.assert_array_equal(out[:, hidden_queries], 0)
    np.testing.assert_array_equal(grad_query[:, hidden_queries], 0)
    assert np.abs(out[:, :3]).min() > 0                  # the other rows are not zeros
    for got, want in zip(sparse, masked):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_pair_hidden_from_one_head_only_is_hidden_from_that_head_only():
    layout = np.ones((3, 3, 3), bool)                    # (H, Lb, Sb)
    layout[1, 1, :] = False                              # head 1: queries 3..5 see nothing
    sparse, masked = sparse_and_masked(((3, 7, 4), (3, 7, 4), (3, 7, 2)), layout, 3, False)
    out = sparse[0]
    np.testing.assert_array_equal(out[1, 3:6], 0)
    assert np.abs(out[[0, 2], 3:6]).min() > 0
    for got, want in zip(sparse, masked):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("is_causal", [False, True], ids=["full", "causal"])
def test_float32_stays_float32_and_close_to_float64(is_causal):
    layout = random_layout((3, 2), seed=3)
    sparse32, _ = sparse_and_masked(LONGER_QUERIES, layout, 4, is_causal, dtype=np.float32)
    _, masked64 = sparse_and_masked(LONGER_QUERIES, layout, 4, is_causal)
    for got, want in zip(sparse32, masked64):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_only_the_visible_pairs_of_blocks_are_scored(monkeypatch):
    """Time grows with the visible pairs: forward and backward each score those and no others."""
    scored = []
    block_scores = flash_attention.block_scores

    def counted(Q_i, K_j, rows, cols, *args):
        scored.append((rows.start // 4, cols.start // 4))
        return block_scores(Q_i, K_j, rows, cols, *args)
    monkeypatch.setattr(flash_attention, "block_scores", counted)
    layout = F.local_layout(5, 1) | F.global_layout(5, [0])            # (5, 5)
    layout[3, 4] = True                                                # a pair after the diagonal
    forward_and_backward(lambda q, k, v: F.block_sparse_attention(q, k, v, layout, 4,
                                                                  is_causal=True),
                         arrays((18, 2), (18, 2), (18, 2)))
    visible = {(0, 0), (1, 0), (1, 1), (2, 0), (2, 2), (3, 0), (3, 3), (4, 0), (4, 4)}
    assert sorted(scored) == sorted(2 * list(visible))                 # forward, then backward


def test_no_array_of_the_scores_size_is_made():
    L = S = 1024
    inputs = arrays((L, 4), (S, 4), (S, 4))          # 32 KiB each; one (L, S) array is 8 MiB
    layout = F.local_layout(16, 2) | F.global_layout(16, [0])     # blocks of 64
    scores_bytes = L * S * 8
    sparse = peak_bytes(lambda q, k, v: F.block_sparse_attention(q, k, v, layout, 64,
                                                                 is_causal=True), inputs)
    mask = F.layout_mask(layout, 64, L)
    masked = peak_bytes(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=True), inputs)
    assert masked > 2 * scores_bytes                 # the measurement sees (L, S) arrays
    assert sparse < scores_bytes / 8                 # all of block-sparse's arrays: under 1 MiB


def test_the_op_saves_the_inputs_output_logsumexp_and_layout():
    query, key, value = (ta.tensor(x, requires_grad=True) for x in arrays(*LONGER_QUERIES))
    layout = random_layout((3, 2))
    out = F.block_sparse_attention(query, key, value, layout.tolist(), 4)    # a list is taken
    assert out._node.name == "flash_attention"
    saved = [x for x in out._node.saved if isinstance(x, np.ndarray)]
    assert [x.shape for x in saved] == [(2, 9, 4), (2, 5, 4), (2, 5, 3), (2, 9, 3), (2, 9), (3, 2)]
    np.testing.assert_array_equal(saved[-1], layout)


QKV = ((2, 5, 4), (2, 3, 4), (2, 3, 6))      # L = 5, S = 3: blocks of 2 make (3, 2) pairs
OK = np.ones((3, 2), bool)


@pytest.mark.parametrize("layout, kwargs, shapes, error, message", [
    (np.ones((2, 2), bool), {}, QKV, ValueError,
     r"block_sparse_attention: layout of shape \(2, 2\) does not broadcast to \(\.\.\., Lb, Sb\) "
     r"= \(2, 3, 2\): L = 5 queries and S = 3 keys in blocks of 2 make 3 x 2 pairs of blocks"),
    (OK, dict(block_size=3), QKV, ValueError,
     r"block_sparse_attention: layout of shape \(3, 2\) does not broadcast to \(\.\.\., Lb, Sb\) "
     r"= \(2, 2, 1\): L = 5 queries and S = 3 keys in blocks of 3"),
    (np.ones((3, 3, 2), bool), {}, QKV, ValueError,                    # batch 3 against 2
     r"block_sparse_attention: layout of shape \(3, 3, 2\) does not broadcast"),
    (np.ones((4, 2, 3, 2), bool), {}, QKV, ValueError,                 # more axes than the batch
     r"block_sparse_attention: layout of shape \(4, 2, 3, 2\) does not broadcast"),
    (np.ones(2, bool), {}, QKV, ValueError,
     r"block_sparse_attention: layout of shape \(2,\) does not broadcast"),
    (np.True_, {}, QKV, ValueError, r"block_sparse_attention: layout of shape \(\) does not"),
    (OK.astype(int), {}, QKV, TypeError,
     r"block_sparse_attention: layout must hold booleans \(True: the pair of blocks is "
     r"visible\), got dtype int64"),
    (OK.astype(float), {}, QKV, TypeError, r"layout must hold booleans .*got dtype float64"),
    ([["a", "b"]] * 3, {}, QKV, TypeError,
     r"block_sparse_attention: layout: expected numbers, got an array of dtype <U1"),
    (OK, dict(block_size=0), QKV, ValueError,
     r"block_sparse_attention: block_size must be at least 1, got 0"),
    (OK, dict(block_size=2.0), QKV, TypeError,
     r"block_sparse_attention: block_size must be an int, got 2.0"),
    (OK, dict(is_causal="yes"), QKV, TypeError,
     r"block_sparse_attention: is_causal must be a bool, got 'yes'"),
    (OK, dict(scale=float("nan")), QKV, ValueError,
     r"block_sparse_attention: scale must not be NaN"),
    (OK, {}, ((2, 5, 4), (2, 3, 5), (2, 3, 6)), ValueError,
     r"block_sparse_attention: query and key disagree on E \(4 and 5\)"),
    (OK, {}, ((2, 5, 0), (2, 3, 0), (2, 3, 6)), ValueError,
     r"block_sparse_attention: queries and keys need a width E of 1 or more"),
])
def test_bad_input_is_named_before_any_node_is_built(layout, kwargs, shapes, error, message):
    assert_refused_before_any_node(F.block_sparse_attention, shapes,
                                   dict(layout=layout, block_size=2) | kwargs, error, message)
