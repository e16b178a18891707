"""Functions on tensors, composed from the ops: `import tinyattn.functional as F`.

Read in this order: basics (activations, softmax, layer norm, dropout, cross-entropy), then
attention (scaled dot-product attention, with shape comments on every line), then positions (the
sinusoidal table, rotary embeddings, ALiBi).
"""
from tinyattn.functional.basics import (softmax, log_softmax, relu, gelu, layer_norm, dropout,
                                        cross_entropy)
from tinyattn.functional.attention import attention, scaled_dot_product_attention
from tinyattn.functional.positions import sinusoidal_positions, rope, alibi_slopes, alibi_bias

__all__ = ["softmax", "log_softmax", "relu", "gelu", "layer_norm", "dropout", "cross_entropy",
           "attention", "scaled_dot_product_attention", "sinusoidal_positions", "rope",
           "alibi_slopes", "alibi_bias"]
