"""Functions on tensors, composed from the ops: `import tinyattn.functional as F`. This file is the
index of every chapter's functions; read the files in this order:

    chapter 1  basics (linear, activations, softmax, layer norm, dropout, cross-entropy), then
               scaled_dot_product (attention, with shape comments on every line)
    chapter 2  positions (the sinusoidal table, rotary embeddings, ALiBi), then attention that
               scales: fused_attention (FlashAttention's door: the same attention, block by block,
               and block-sparse attention over the visible blocks only), sparse_patterns (masks
               and block layouts of the Sparse Transformer and Longformer), sliding_window (a band
               computed chunk by chunk) and linear_attention (Katharopoulos et al. 2020, causal by
               chunks; and ELU, its feature map's piece)
    chapter 5  norms_and_gates (RMSNorm, SiLU, the sigmoid), rotate_half (rotary positions as
               today's checkpoints hold them, and their frequencies: a larger base, Llama 3.1's
               bands), grouped_query (several query heads on one key/value head)
    chapter 6  patches (an image as tokens: patchify, and unpatchify back)

What makes an argument bad is in checks.py for chapter 1, and beside its file for a later chapter
(positions_checks.py beside positions.py, grouped_query_checks.py beside grouped_query.py).
"""
from tinyattn.functional.basics import (linear, softmax, log_softmax, relu, gelu, layer_norm, dropout,
                                        cross_entropy)
from tinyattn.functional.scaled_dot_product import attention, scaled_dot_product_attention
from tinyattn.functional.positions import sinusoidal_positions, rope, alibi_slopes, alibi_bias
from tinyattn.functional.fused_attention import flash_attention, block_sparse_attention
from tinyattn.functional.sparse_patterns import (local_mask, strided_mask, sparse_transformer_mask,
                                                 global_mask, longformer_mask, local_layout,
                                                 strided_layout, sparse_transformer_layout,
                                                 global_layout, layout_mask)
from tinyattn.functional.sliding_window import sliding_window_attention
from tinyattn.functional.linear_attention import elu, linear_attention, linear_attention_step
from tinyattn.functional.norms_and_gates import rms_norm, silu, sigmoid
from tinyattn.functional.rotate_half import rope_frequencies, rope_rotate_half
from tinyattn.functional.grouped_query import grouped_query_attention
from tinyattn.functional.patches import patchify, unpatchify

__all__ = ["linear", "softmax", "log_softmax", "relu", "elu", "gelu", "layer_norm", "dropout",
           "cross_entropy", "attention", "scaled_dot_product_attention", "sinusoidal_positions",
           "rope", "alibi_slopes", "alibi_bias", "flash_attention", "block_sparse_attention",
           "local_mask", "strided_mask", "sparse_transformer_mask", "global_mask",
           "longformer_mask", "local_layout", "strided_layout", "sparse_transformer_layout",
           "global_layout", "layout_mask",
           "sliding_window_attention", "linear_attention", "linear_attention_step",
           "rms_norm", "silu", "sigmoid", "rope_frequencies", "rope_rotate_half",
           "grouped_query_attention", "patchify", "unpatchify"]
