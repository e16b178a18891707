"""The checklist's rows for flash attention, each with a block size that leaves a short last block
(tests/test_flash_attention.py also compares it with plain attention, values and gradients)."""
import tinyattn.functional as F
from tinyattn.tools.checklist.cases import LayerCase, function

QKV = ((2, 5, 3), (2, 5, 3), (2, 5, 4))        # query (B, L, E), key (B, S, E), value (B, S, Ev)

LAYER_CASES = [
    LayerCase("attention: flash", function(F.flash_attention, *QKV, block_size=2)),
    LayerCase("attention: flash, causal",
              function(F.flash_attention, *QKV, is_causal=True, block_size=2)),
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
              function(F.flash_attention, *QKV, is_causal=True, block_size=1)),
]
