"""Functions on tensors, composed from the ops: `import tinyattn.functional as F`.

Read in this order: basics (activations, softmax, layer norm, dropout, cross-entropy), then
attention (scaled dot-product attention, with shape comments on every line), then flash_attention
(the same attention, block by block).
"""
from tinyattn.functional.basics import (softmax, log_softmax, relu, gelu, layer_norm, dropout,
                                        cross_entropy)
from tinyattn.functional.attention import attention, scaled_dot_product_attention
from tinyattn.functional.flash_attention import flash_attention

__all__ = ["softmax", "log_softmax", "relu", "gelu", "layer_norm", "dropout", "cross_entropy",
           "attention", "scaled_dot_product_attention", "flash_attention"]
