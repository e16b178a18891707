"""Chapter 2. Sparse attention patterns as boolean masks: which keys each query may see; and as
block layouts: which blocks of keys each block of queries may see.

Each function returns an (L, L) NumPy array of booleans, True where query i (the row) may attend
to key j (the column), to pass as the `attn_mask` of `F.scaled_dot_product_attention`:

    local_mask               a band of the `window` nearest keys: the Sparse Transformer's first
                             head, Mistral's sliding window (causal), Longformer's (not causal)
    strided_mask             every `stride`-th key back: the Sparse Transformer's second head
    sparse_transformer_mask  the union of the two, with window = stride
    global_mask              chosen positions see every key and are seen by every query
    longformer_mask          a symmetric band and global positions: Longformer's pattern

Papers: Child et al. 2019, "Generating Long Sequences with Sparse Transformers"; Beltagy et al.
2020, "Longformer: The Long-Document Transformer"; Jiang et al. 2023, "Mistral 7B".

A mask changes what attention computes, not what it costs: SDPA still scores all L x L pairs and
then throws the masked ones away. The savings come from code that never scores those pairs:
`F.sliding_window_attention` computes the band of `local_mask` in L * window work, and
`F.block_sparse_attention` computes attention over the pairs of blocks that a block layout marks
visible, skipping the others. A block layout is an (Lb, Sb) array of booleans, one per pair of a
block of queries and a block of keys (blocks of b positions): the coarse version of a pattern,
which hardware and kernels can skip a block at a time (the Sparse Transformer's own kernels work
so, with blocks of 32 to 128). The layouts below are the patterns above drawn on the grid of
blocks instead of positions, so each is the mask of the same name with sizes counted in blocks:

    local_layout               query block i sees the window_blocks nearest key blocks
    strided_layout             every stride_blocks-th key block back
    sparse_transformer_layout  the union of the two
    global_layout              chosen blocks see every block and are seen by every block

Layouts combine with | (Longformer's: local_layout(n, w, is_causal=False) | global_layout(n,
[0])), and `layout_mask` expands one to the (L, S) mask it stands for. Expanded, a layout keeps
whole blocks, so it contains its pattern's mask (each docstring says which, and where it equals
one); tests/test_sparse_patterns.py checks each claim.
"""
import numpy as np

from tinyattn.arguments import at_least, door, optional
from tinyattn.functional import sparse_patterns_checks


def in_band(i, j, window, is_causal=True):
    """Whether key position j lies in query position i's window (arrays of positions broadcast):
    i - window < j <= i when causal (`window` keys, i itself included), |i - j| < window when
    not (2 window - 1 keys, centred on i)."""
    if is_causal:
        return (i - window < j) & (j <= i)
    return abs(i - j) < window


@door(length=at_least(0), window=at_least(1), is_causal=bool)
def local_mask(length, window, is_causal=True):
    """The band: query i sees the keys j with i - window < j <= i (causal) or |i - j| < window.

    The Sparse Transformer's first head, A(1)_i = {max(0, i - l), ..., i}, is the causal band
    with window = l + 1; the paper's released code (`get_attn_mask`, mode "local") keeps one key
    fewer, window = l, and so does `sparse_transformer_mask`. Longformer's window w (w / 2 keys
    on each side of i) is the symmetric band with window = w / 2 + 1.

    >>> print(local_mask(5, 2).astype(int))
    [[1 0 0 0 0]
     [1 1 0 0 0]
     [0 1 1 0 0]
     [0 0 1 1 0]
     [0 0 0 1 1]]
    >>> print(local_mask(5, 2, is_causal=False).astype(int))
    [[1 1 0 0 0]
     [1 1 1 0 0]
     [0 1 1 1 0]
     [0 0 1 1 1]
     [0 0 0 1 1]]
    """
    positions = np.arange(length)
    return in_band(positions[:, None], positions[None, :], window, is_causal)   # (L, L)


@door(length=at_least(0), stride=at_least(1))
def strided_mask(length, stride):
    """Causal, every `stride`-th key back: j <= i and (i - j) a multiple of stride.

    The Sparse Transformer's second head, A(2)_i = {j : (i - j) mod l = 0}, with l = stride.

    >>> print(strided_mask(6, 3).astype(int))
    [[1 0 0 0 0 0]
     [0 1 0 0 0 0]
     [0 0 1 0 0 0]
     [1 0 0 1 0 0]
     [0 1 0 0 1 0]
     [0 0 1 0 0 1]]
    """
    positions = np.arange(length)
    i, j = positions[:, None], positions[None, :]                    # (L, 1), (1, L)
    return (j <= i) & ((i - j) % stride == 0)                        # (L, L)


@door(length=at_least(0), stride=at_least(1))
def sparse_transformer_mask(length, stride):
    """The Sparse Transformer's "strided" pattern with both heads merged into one: the last
    `stride` keys (i itself included) and every stride-th key before them. With stride near
    sqrt(L) each query sees about 2 sqrt(L) keys, and any key reaches any later query in two
    steps of attention (a local one, then a strided one), which is the paper's point.

    >>> print(sparse_transformer_mask(6, 2).astype(int))
    [[1 0 0 0 0 0]
     [1 1 0 0 0 0]
     [1 1 1 0 0 0]
     [0 1 1 1 0 0]
     [1 0 1 1 1 0]
     [0 1 0 1 1 1]]
    """
    return local_mask(length, stride) | strided_mask(length, stride)


@door(sparse_patterns_checks.positions_fit, length=at_least(0))
def global_mask(length, positions):
    """Global attention (Longformer): the chosen positions see every key, and every query sees
    them (their rows and columns are True); nothing else is.

    >>> print(global_mask(5, [0, 3]).astype(int))
    [[1 1 1 1 1]
     [1 0 0 1 0]
     [1 0 0 1 0]
     [1 1 1 1 1]
     [1 0 0 1 0]]
    """
    positions = np.asarray(positions, dtype=int)
    mask = np.zeros((length, length), dtype=bool)    # (L, L)
    mask[positions, :] = True                        # a global query sees every key
    mask[:, positions] = True                        # every query sees a global key
    return mask


@door(sparse_patterns_checks.positions_fit, length=at_least(0), window=at_least(1))
def longformer_mask(length, window, positions):
    """Longformer's pattern: the symmetric band |i - j| < window and the global positions.

    Longformer's encoder is not causal; a [CLS] token at position 0 is its usual global token.

    >>> print(longformer_mask(6, 2, [0]).astype(int))
    [[1 1 1 1 1 1]
     [1 1 1 0 0 0]
     [1 1 1 1 0 0]
     [1 0 1 1 1 0]
     [1 0 0 1 1 1]
     [1 0 0 0 1 1]]
    """
    return local_mask(length, window, is_causal=False) | global_mask(length, positions)


# ------------------------------------------------------------------------------------------------
# Block layouts: the patterns on the grid of blocks, for `F.block_sparse_attention`

@door(num_blocks=at_least(0), window_blocks=at_least(1), is_causal=bool)
def local_layout(num_blocks, window_blocks, is_causal=True):
    """The band on blocks: query block i sees key blocks j with i - window_blocks < j <= i
    (causal) or |i - j| < window_blocks; `local_mask` with sizes counted in blocks.

    Contains, does not equal, the band of positions: expanded with blocks of b (and-ed with the
    causal mask when causal), the mask lies between local_mask(L, (window_blocks - 1) b + 1) and
    local_mask(L, window_blocks b), both with the same is_causal: a staircase, in which the
    first query of a block sees the fewest keys behind it and the last one the most.

    >>> print(local_layout(4, 2).astype(int))
    [[1 0 0 0]
     [1 1 0 0]
     [0 1 1 0]
     [0 0 1 1]]
    >>> print((layout_mask(local_layout(4, 2), 2, 7) & local_mask(7, 7)).astype(int))
    [[1 0 0 0 0 0 0]
     [1 1 0 0 0 0 0]
     [1 1 1 0 0 0 0]
     [1 1 1 1 0 0 0]
     [0 0 1 1 1 0 0]
     [0 0 1 1 1 1 0]
     [0 0 0 0 1 1 1]]
    """
    return local_mask(num_blocks, window_blocks, is_causal)                # (Lb, Lb)


@door(num_blocks=at_least(0), stride_blocks=at_least(1))
def strided_layout(num_blocks, stride_blocks):
    """Causal, every `stride_blocks`-th key block back: j <= i and (i - j) a multiple of
    stride_blocks; `strided_mask` with sizes counted in blocks.

    Contains, does not equal, the strided pattern of positions with stride stride_blocks b:
    (i - j) a multiple of stride_blocks b puts i and j at the same place in their blocks, in
    blocks a multiple of stride_blocks apart; the layout keeps those blocks whole.

    In blocks of 2, with stride_blocks = 2 (which contains strided_mask(8, 4)):

    >>> print((layout_mask(strided_layout(4, 2), 2, 8) & local_mask(8, 8)).astype(int))
    [[1 0 0 0 0 0 0 0]
     [1 1 0 0 0 0 0 0]
     [0 0 1 0 0 0 0 0]
     [0 0 1 1 0 0 0 0]
     [1 1 0 0 1 0 0 0]
     [1 1 0 0 1 1 0 0]
     [0 0 1 1 0 0 1 0]
     [0 0 1 1 0 0 1 1]]
    """
    return strided_mask(num_blocks, stride_blocks)                         # (Lb, Lb)


@door(num_blocks=at_least(0), stride_blocks=at_least(1))
def sparse_transformer_layout(num_blocks, stride_blocks):
    """The Sparse Transformer's strided pattern on blocks: `local_layout` | `strided_layout`
    with window = stride = stride_blocks.

    Contains, does not equal, sparse_transformer_mask(L, stride_blocks b): the last
    stride_blocks b keys of query i reach back at most into block i - stride_blocks, a strided
    block, and the strided keys are in the strided blocks. As with positions, two steps of
    attention take any key block to any later query block.

    >>> print(sparse_transformer_layout(4, 2).astype(int))
    [[1 0 0 0]
     [1 1 0 0]
     [1 1 1 0]
     [0 1 1 1]]
    """
    return sparse_transformer_mask(num_blocks, stride_blocks)              # (Lb, Lb)


@door(sparse_patterns_checks.block_positions_fit, num_blocks=at_least(0))
def global_layout(num_blocks, positions):
    """Global blocks: the blocks at `positions` see every block and every block sees them;
    `global_mask` with positions counted in blocks.

    Equals global_mask(L, every position of those blocks) once expanded, so it contains
    global_mask(L, positions) for any global positions that lie in those blocks: a global token
    at position p needs the block p // b.

    >>> print(global_layout(4, [0]).astype(int))
    [[1 1 1 1]
     [1 0 0 0]
     [1 0 0 0]
     [1 0 0 0]]
    """
    return global_mask(num_blocks, positions)                              # (Lb, Lb)


@door(sparse_patterns_checks.layout_fits, block_size=at_least(1), length=at_least(0),
      key_length=optional(at_least(0)))
def layout_mask(layout, block_size, length, key_length=None):
    """The mask of positions a block layout stands for: kron(layout, ones((b, b)))[:L, :S], each
    entry of the layout (..., Lb, Sb) repeated over a block of b x b pairs, cut to the `length`
    queries and `key_length` keys (default: as many as queries), for a last block that is short.
    What `F.block_sparse_attention(..., layout, block_size)` computes is SDPA under this mask.

    >>> print(layout_mask(np.array([[True, False], [True, True]]), 2, 3).astype(int))
    [[1 1 0]
     [1 1 0]
     [1 1 1]]
    """
    S = length if key_length is None else key_length
    mask = layout.repeat(block_size, axis=-2).repeat(block_size, axis=-1)  # (..., Lb b, Sb b)
    return mask[..., :length, :S]                                          # (..., L, S)
