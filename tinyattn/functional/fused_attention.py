"""FlashAttention: the same function as scaled dot-product attention, computed block by block.

The algorithm, step by step with the paper's symbols, is the op `tinyattn/ops/flash_attention.py`;
this is its door.
"""
import math

from tinyattn import ops
from tinyattn.arguments import at_least, default_scale, door, number, optional


@door(default_scale, query="(..., L, E)", key="(..., S, E)", value="(..., S, Ev)",
      is_causal=bool, scale=optional(number), block_size=at_least(1))
def flash_attention(query, key, value, is_causal=False, scale=None, block_size=64):
    """softmax(query @ key^T * scale) @ value, as `scaled_dot_product_attention(query, key, value,
    is_causal=is_causal, scale=scale)` computes it, without ever holding the (..., L, S) scores.

    Shapes: query (..., L, E), key (..., S, E), value (..., S, Ev) -> output (..., L, Ev); the
    leading (batch, head) axes broadcast; L and S need not be equal nor multiples of `block_size`.
    `is_causal` lets query i see keys j <= i only. `scale` defaults to 1 / sqrt(E).

    Queries and keys are taken `block_size` at a time: no array of scores is larger than
    (..., block_size, block_size), and what is kept for backward besides the inputs and the output
    is one number per query. See `tinyattn.ops.FlashAttention` for the algorithm and for where its
    cost is measured.
    """
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    return ops.FlashAttention.apply(query, key, value, scale=scale, is_causal=is_causal,
                                    block_size=block_size)
