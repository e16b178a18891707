"""Sparse attention patterns as boolean masks: which keys each query may see.

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
`F.sliding_window_attention` computes the band of `local_mask` in L * window work.
"""
import numpy as np

from tinyattn import arguments
from tinyattn.arguments import at_least, door
from tinyattn.plumbing import numeric_array


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


def positions_fit(length, positions, **_):
    """The global positions: ints in [0, length) ([] is none)."""
    positions = numeric_array(positions, "positions")
    arguments.ids("positions", positions.astype(int) if positions.size == 0 else positions,
                  length, "positions")


@door(positions_fit, length=at_least(0))
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


@door(positions_fit, length=at_least(0), window=at_least(1))
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
