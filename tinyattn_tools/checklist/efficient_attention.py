"""The checklist's rows for attention that scales: flash attention (each row with a block size
that leaves a short last block; tests/test_flash_attention.py also compares it with plain
attention, values and gradients), block-sparse attention (also against SDPA under the mask its
layout stands for, number by number), sliding-window attention, attention under the sparse
patterns' masks, and linear attention (all keys, causal by chunks, one step at a time). Each is
checked as a whole with respect to query, key and value."""
import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn_tools.checklist.cases import FusedCase, LayerCase, function

QKV = ((2, 5, 4), (2, 5, 4), (2, 5, 3))     # query, key, value (B, L, E|Ev): L = 5 leaves a
BROADCAST = ((2, 1, 5, 4), (1, 3, 5, 4), (3, 5, 3))   # short last block for blocks of 2 and 3


def linear_attention_by_steps(query, key, value):
    """`F.linear_attention_step` over every position of (B, L, E) inputs, outputs stacked."""
    outputs, state = [], None
    for t in range(query.shape[-2]):
        out, state = F.linear_attention_step(query[..., t, :], key[..., t, :], value[..., t, :],
                                             state)
        outputs.append(out)                                # (B, Ev)
    return ta.stack(outputs, axis=-2)                      # (B, L, Ev)


FLASH_QKV = ((2, 5, 3), (2, 5, 3), (2, 5, 4))

# Block-sparse rows, in blocks of 2: L = 5 makes blocks 2, 2, 1 (a short last block)
LAYOUT = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 1]], bool)     # (Lb, Sb) = (3, 3)
EMPTY_ROW = np.array([[1, 0, 0], [0, 0, 0], [0, 1, 1]], bool)  # queries 2, 3 see no key
WIDE = np.array([[1, 0, 1], [1, 1, 0]], bool)                  # L = 3, S = 5: (2, 3)
PER_HEAD = np.array([LAYOUT, EMPTY_ROW, ~LAYOUT])              # (H, Lb, Sb) = (3, 3, 3)
PER_HEAD_QKV = ((2, 1, 5, 4), (1, 3, 5, 4), (3, 5, 3))         # batch (2, 1), (1, 3), (3,)
BLOCK_SPARSE = [      # name, shapes, layout, is_causal
    ("ragged", FLASH_QKV, LAYOUT, False),
    ("causal", FLASH_QKV, LAYOUT, True),
    ("an empty row", FLASH_QKV, EMPTY_ROW, False),
    ("L != S, causal", ((2, 3, 4), (2, 5, 4), (2, 5, 2)), WIDE, True),
    ("a layout per head, broadcast batch", PER_HEAD_QKV, PER_HEAD, True),
]


def block_sparse(layout, is_causal):
    return lambda q, k, v: F.block_sparse_attention(q, k, v, layout, block_size=2,
                                                    is_causal=is_causal)


def sdpa_under_layout(layout, is_causal):
    """SDPA under the mask `layout` stands for: what block_sparse_attention must compute."""
    def attend(q, k, v):
        mask = F.layout_mask(layout, 2, q.shape[-2], k.shape[-2])       # (..., L, S)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal)
    return attend


LAYER_CASES = [
    LayerCase("attention: flash", function(F.flash_attention, *FLASH_QKV, block_size=2)),
    LayerCase("attention: flash, causal",
              function(F.flash_attention, *FLASH_QKV, is_causal=True, block_size=2)),
    LayerCase("attention: flash, causal, L > S",
              function(F.flash_attention, (2, 7, 3), (2, 4, 3), (2, 4, 2), is_causal=True,
                       block_size=3)),
    LayerCase("attention: flash, causal, L < S",
              function(F.flash_attention, (1, 4, 3), (1, 7, 3), (1, 7, 2), is_causal=True,
                       block_size=3)),
    LayerCase("attention: flash, L != S, scale=1",
              function(F.flash_attention, (2, 3, 4), (2, 5, 4), (2, 5, 2), scale=1.0,
                       block_size=2)),
    LayerCase("attention: flash, causal, broadcast batch",
              function(F.flash_attention, (2, 1, 3, 4), (1, 2, 5, 4), (2, 5, 3), is_causal=True,
                       block_size=2)),
    LayerCase("attention: flash, causal, block 1",
              function(F.flash_attention, *FLASH_QKV, is_causal=True, block_size=1)),
    *(LayerCase(f"block-sparse: {name}",
                function(F.block_sparse_attention, *shapes, layout=layout, block_size=2,
                         is_causal=causal))
      for name, shapes, layout, causal in BLOCK_SPARSE),
    LayerCase("sliding window: causal, window 2",
              function(F.sliding_window_attention, *QKV, window=2)),
    LayerCase("sliding window: not causal, window 2",
              function(F.sliding_window_attention, *QKV, window=2, is_causal=False)),
    LayerCase("sliding window: causal, window 3, scale 0.7",
              function(F.sliding_window_attention, *QKV, window=3, scale=0.7)),
    LayerCase("sliding window: window 1 (itself only)",
              function(F.sliding_window_attention, *QKV, window=1, is_causal=False)),
    LayerCase("sliding window: window > L",
              function(F.sliding_window_attention, *QKV, window=8, is_causal=False)),
    LayerCase("sliding window: broadcast batch",
              function(F.sliding_window_attention, *BROADCAST, window=2, is_causal=False)),
    LayerCase("attention: sdpa, Sparse Transformer mask",
              function(F.scaled_dot_product_attention, *QKV,
                       attn_mask=F.sparse_transformer_mask(5, 2))),
    LayerCase("attention: sdpa, Longformer mask",
              function(F.scaled_dot_product_attention, *QKV,
                       attn_mask=F.longformer_mask(5, 2, [0]))),
    LayerCase("linear attention: L != S",
              function(F.linear_attention, (2, 3, 4), (2, 5, 4), (2, 5, 3))),
    LayerCase("linear attention: broadcast batch", function(F.linear_attention, *BROADCAST)),
    LayerCase("linear attention: causal, chunks of 2",
              function(F.linear_attention, *QKV, is_causal=True, chunk_size=2)),
    LayerCase("linear attention: causal, chunks of 1",
              function(F.linear_attention, *QKV, is_causal=True, chunk_size=1)),
    LayerCase("linear attention: causal, C > L, eps 0",
              function(F.linear_attention, *QKV, is_causal=True, chunk_size=8, eps=0.0)),
    LayerCase("linear attention: causal, broadcast batch",
              function(F.linear_attention, *BROADCAST, is_causal=True, chunk_size=3)),
    LayerCase("linear attention: one step at a time", function(linear_attention_by_steps, *QKV)),
]

FUSED_CASES = [FusedCase(f"block-sparse = SDPA under its layout's mask: {name}",
                         block_sparse(layout, causal), sdpa_under_layout(layout, causal), shapes)
               for name, shapes, layout, causal in BLOCK_SPARSE]
