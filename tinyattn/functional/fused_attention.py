"""Chapter 2. FlashAttention: the same function as scaled dot-product attention, computed block by
block; and block-sparse attention, the same algorithm over the pairs of blocks a layout marks
visible.

The algorithm, step by step with the paper's symbols, is the op `tinyattn/ops/flash_attention.py`;
these are its doors.
"""
import math

import numpy as np

from tinyattn.arguments import at_least, door, number, optional
from tinyattn.functional import checks
from tinyattn.functional import fused_attention_checks
from tinyattn.ops.flash_attention import FlashAttention

FLASH = dict(query="(..., L, E)", key="(..., S, E)", value="(..., S, Ev)", is_causal=bool,
             scale=optional(number), block_size=at_least(1))


def block_counts(L, S, block_size):
    """(Lb, Sb): how many blocks of `block_size` the L queries and the S keys make."""
    return -(-L // block_size), -(-S // block_size)


@door(checks.default_scale, **FLASH)
def flash_attention(query, key, value, is_causal=False, scale=None, block_size=64):
    """softmax(query @ key^T * scale) @ value, as `scaled_dot_product_attention(query, key, value,
    is_causal=is_causal, scale=scale)` computes it, without ever holding the (..., L, S) scores.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> output (..., L, Ev); the
    leading (batch, head) axes broadcast; L and S need not be equal nor multiples of `block_size`.
    `is_causal` lets query i see keys j <= i only. `scale` defaults to 1 / sqrt(E).

    Queries and keys are taken `block_size` at a time: no array of scores is larger than
    (..., block_size, block_size), and what is kept for backward besides the inputs and the output
    is one number per query. The algorithm is `tinyattn.ops.flash_attention.FlashAttention`'s
    docstring; the choice of the block size and the cost, docs/flash_attention.md. It is
    `block_sparse_attention` with every pair of blocks visible. Its causal mask is aligned at the
    top left (key j seen by query i when j <= i), as SDPA's: not the bottom-right alignment a
    cached decoding step needs.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    every_pair = np.ones(block_counts(query.shape[-2], key.shape[-2], block_size), bool)  # (Lb, Sb)
    return FlashAttention.apply(query, key, value, scale=scale, is_causal=is_causal,
                                    block_size=block_size, layout=every_pair)


@door(fused_attention_checks.layout_and_scale_fit, **FLASH)
def block_sparse_attention(query, key, value, layout, block_size=64, is_causal=False, scale=None):
    """Attention over the pairs of blocks that `layout` marks visible, computed FlashAttention's
    way over those pairs only: sparse attention that skips the work its mask hides.

    Queries and keys are cut into blocks of `block_size` (the last of each may be shorter):
    Lb = ceil(L / block_size) query blocks and Sb = ceil(S / block_size) key blocks. `layout[i, j]`
    is True when the queries of block i see the keys of block j. The result, and its gradients,
    are those of

        scaled_dot_product_attention(query, key, value, attn_mask=mask, is_causal=is_causal,
                                     scale=scale)
        with mask = kron(layout, ones((block_size, block_size)))[:L, :S]      (..., L, S)

    (`F.layout_mask(layout, block_size, L, S)` builds that mask), but no (L, S) array is made,
    and the time grows with the number of visible pairs, not with L S. A query whose blocks are
    all hidden (or, causal, lie after it) gets a zero output row and zero gradients, as in SDPA.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> output (..., L, Ev), the
    leading axes broadcasting; `layout` booleans (Lb, Sb), or (..., Lb, Sb) broadcasting to the
    batch: a layout per head, say. `is_causal` keeps key j <= i as well; `scale` defaults to
    1 / sqrt(E). The layouts of the patterns of the Sparse Transformer and Longformer are in
    `sparse_patterns` (`local_layout`, `strided_layout`, `sparse_transformer_layout`,
    `global_layout`); layouts combine with | and &. The algorithm is
    `tinyattn.ops.flash_attention.FlashAttention`'s: `flash_attention` is this function with every
    pair visible.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    return FlashAttention.apply(query, key, value, scale=scale, is_causal=is_causal,
                                    block_size=block_size, layout=layout)
