"""FlashAttention: the same function as scaled dot-product attention, computed block by block.

The algorithm, step by step with the paper's symbols, is the op `tinyattn/ops/flash_attention.py`;
this is its door.
"""
from tinyattn import ops
from tinyattn.arguments import check_flags, check_ints, check_shapes
from tinyattn.functional.attention import check_scale


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
    sizes = check_shapes("flash_attention", same_dtype=True, floating=True,
                         query=(query, "... L E"), key=(key, "... S E"), value=(value, "... S Ev"))
    check_ints("flash_attention", low=1, block_size=block_size)
    check_flags("flash_attention", is_causal=is_causal)
    scale = check_scale("flash_attention", scale, sizes["E"])
    return ops.FlashAttention.apply(query, key, value, scale=scale, is_causal=is_causal,
                                    block_size=block_size)
