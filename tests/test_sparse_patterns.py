"""tinyattn.functional.sparse_patterns: each mask against its definition written out pair by pair,
the printed examples in the docstrings, what the Sparse Transformer paper claims of its pattern
(two steps reach every earlier position), SDPA under each mask against plain NumPy attention, and
each block layout, expanded to positions, against the pattern its docstring says it contains."""
import doctest
import itertools

import numpy as np
import pytest
from references import arrays

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.functional import sparse_patterns
from tinyattn_tools.checklist.ops import np_attention


def by_pairs(length, sees):
    """The (length, length) mask whose entry (i, j) is sees(i, j), one pair at a time."""
    mask = np.zeros((length, length), dtype=bool)
    for i, j in itertools.product(range(length), repeat=2):
        mask[i, j] = sees(i, j)
    return mask


LENGTHS, SIZES = (0, 1, 2, 5, 9), (1, 2, 3, 4, 10)


@pytest.mark.parametrize("length, size", list(itertools.product(LENGTHS, SIZES)))
def test_each_mask_against_its_definition(length, size):
    local = by_pairs(length, lambda i, j: max(0, i - size + 1) <= j <= i)
    strided = by_pairs(length, lambda i, j: j <= i and (i - j) % size == 0)
    np.testing.assert_array_equal(F.local_mask(length, size), local)
    np.testing.assert_array_equal(F.local_mask(length, size, is_causal=False),
                                  by_pairs(length, lambda i, j: -size < i - j < size))
    np.testing.assert_array_equal(F.strided_mask(length, size), strided)
    np.testing.assert_array_equal(F.sparse_transformer_mask(length, size), local | strided)
    chosen = [p for p in (0, 3, 4) if p < length]
    is_global = by_pairs(length, lambda i, j: i in chosen or j in chosen)
    np.testing.assert_array_equal(F.global_mask(length, chosen), is_global)
    np.testing.assert_array_equal(F.longformer_mask(length, size, chosen),
                                  is_global | by_pairs(length, lambda i, j: abs(i - j) < size))
    for mask in (F.local_mask(length, size), F.longformer_mask(length, size, chosen)):
        assert mask.dtype == np.bool_ and mask.shape == (length, length)


def test_the_printed_examples():
    assert doctest.testmod(sparse_patterns).failed == 0
    assert doctest.testmod(sparse_patterns).attempted >= 6


@pytest.mark.parametrize("length, stride", [(9, 3), (16, 4), (17, 4), (12, 5)])
def test_two_steps_of_the_sparse_transformer_reach_every_earlier_position(length, stride):
    mask = F.sparse_transformer_mask(length, stride).astype(int)
    reached = (mask @ mask) > 0                  # i attends to m, which attends to j
    np.testing.assert_array_equal(reached, np.tril(np.ones((length, length), bool)))
    assert mask.sum() < np.tril(np.ones((length, length))).sum()   # with fewer pairs than causal


def test_a_global_token_links_every_pair_in_two_steps():
    mask = F.longformer_mask(12, 2, [0]).astype(int)
    assert np.all((mask @ mask) > 0) and not np.all(mask > 0)


@pytest.mark.parametrize("mask", [F.local_mask(6, 2), F.local_mask(6, 3, is_causal=False),
                                  F.strided_mask(6, 2), F.sparse_transformer_mask(6, 2),
                                  F.global_mask(6, [2]), F.longformer_mask(6, 2, [0, 5])],
                         ids=["local", "local symmetric", "strided", "sparse transformer",
                              "global", "longformer"])
def test_sdpa_under_each_mask_is_plain_attention_under_it(mask):
    q, k, v = arrays((2, 6, 4), (2, 6, 4), (2, 6, 3))
    out = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), attn_mask=mask)
    np.testing.assert_allclose(out.data, np_attention(q, k, v, mask)[0], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("num_blocks, size, b",
                         list(itertools.product((1, 3, 6), (1, 2, 3), (1, 2, 4))))
def test_each_layout_expanded_contains_its_pattern(num_blocks, size, b):
    """`size` blocks of window or stride; b positions a block, the last block one short."""
    L = num_blocks * b - (b > 1)
    causal = F.local_mask(L, L)

    def expanded(layout, is_causal=True):
        return F.layout_mask(layout, b, L) & (causal if is_causal else True)

    def within(small, large):
        assert not np.any(small & ~large)

    for is_causal in (True, False):
        local = expanded(F.local_layout(num_blocks, size, is_causal), is_causal)
        within(F.local_mask(L, (size - 1) * b + 1, is_causal), local)
        within(local, F.local_mask(L, size * b, is_causal))
    within(F.strided_mask(L, size * b), expanded(F.strided_layout(num_blocks, size)))
    within(F.sparse_transformer_mask(L, size * b),
           expanded(F.sparse_transformer_layout(num_blocks, size)))
    chosen = [p for p in (0, 2) if p < num_blocks]
    tokens = [p for p in range(L) if p // b in chosen]
    np.testing.assert_array_equal(F.layout_mask(F.global_layout(num_blocks, chosen), b, L),
                                  F.global_mask(L, tokens))
    within(F.global_mask(L, [p * b for p in chosen]),
           F.layout_mask(F.global_layout(num_blocks, chosen), b, L))


@pytest.mark.parametrize("num_blocks, size", list(itertools.product((0, 1, 4, 7), (1, 2, 3))))
def test_each_layout_is_its_pattern_on_the_grid_of_blocks(num_blocks, size):
    n = num_blocks
    np.testing.assert_array_equal(F.local_layout(n, size), F.local_mask(n, size))
    np.testing.assert_array_equal(F.local_layout(n, size, is_causal=False),
                                  by_pairs(n, lambda i, j: abs(i - j) < size))
    np.testing.assert_array_equal(F.strided_layout(n, size),
                                  by_pairs(n, lambda i, j: j <= i and (i - j) % size == 0))
    np.testing.assert_array_equal(F.sparse_transformer_layout(n, size),
                                  F.sparse_transformer_mask(n, size))
    np.testing.assert_array_equal(F.global_layout(n, [0] if n else []),
                                  by_pairs(n, lambda i, j: i == 0 or j == 0))


def test_a_local_layout_is_a_staircase_not_a_band():
    """Blocks of 4, a window of 2 blocks: the first query of a block sees 5 keys, the last 8."""
    seen = (F.layout_mask(F.local_layout(4, 2), 4, 16) & F.local_mask(16, 16)).sum(axis=1)
    np.testing.assert_array_equal(seen[4:8], [5, 6, 7, 8])
    np.testing.assert_array_equal(seen[12:], [5, 6, 7, 8])


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.local_mask(-1, 2), ValueError, r"local_mask: length must be at least 0, got -1"),
    (lambda: F.local_mask(5, 0), ValueError, r"local_mask: window must be at least 1, got 0"),
    (lambda: F.strided_mask(5, 1.5), TypeError, r"strided_mask: stride must be an int, got 1.5"),
    (lambda: F.sparse_transformer_mask(5, 0), ValueError,
     r"sparse_transformer_mask: stride must be at least 1, got 0"),
    (lambda: F.global_mask(5, [0, 5]), IndexError,
     r"global_mask: positions must lie in \[0, 5\) \(5 positions\), got 5"),
    (lambda: F.global_mask(5, [0.0]), TypeError, r"global_mask: positions must be integers"),
    (lambda: F.longformer_mask(5, True, [0]), TypeError,
     r"longformer_mask: window must be an int, got True"),
    (lambda: F.longformer_mask(5, 2, [-1]), IndexError,
     r"longformer_mask: positions must lie in \[0, 5\)"),
    (lambda: F.local_layout(-1, 1), ValueError,
     r"local_layout: num_blocks must be at least 0, got -1"),
    (lambda: F.local_layout(3, 0), ValueError,
     r"local_layout: window_blocks must be at least 1, got 0"),
    (lambda: F.strided_layout(3, 1.0), TypeError,
     r"strided_layout: stride_blocks must be an int, got 1.0"),
    (lambda: F.sparse_transformer_layout(3, 0), ValueError,
     r"sparse_transformer_layout: stride_blocks must be at least 1, got 0"),
    (lambda: F.global_layout(3, [3]), IndexError,
     r"global_layout: positions must lie in \[0, 3\) \(3 blocks\), got 3"),
    (lambda: F.layout_mask(np.ones((2, 3), bool), 2, 4), ValueError,
     r"layout_mask: layout must have shape \(\.\.\., 2, 2\) for 4 queries and 4 keys in "
     r"blocks of 2, got \(2, 3\)"),
    (lambda: F.layout_mask(np.ones((2, 3), bool), 2, 4, 7), ValueError,
     r"layout_mask: layout must have shape \(\.\.\., 2, 4\) for 4 queries and 7 keys"),
    (lambda: F.layout_mask(np.ones((2, 2)), 2, 4), TypeError,
     r"layout_mask: layout must hold booleans, got dtype float64"),
    (lambda: F.layout_mask(np.ones((2, 2), bool), 0, 4), ValueError,
     r"layout_mask: block_size must be at least 1, got 0"),
])
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
