"""The ops: one class per differentiable operation, each a `Function` with forward and backward.

Read them in this order: elementwise, reductions, shape, matmul, softmax, layer_norm (chapter 1);
flash_attention (a whole attention fused into one op, block by block, over the pairs of blocks a
layout marks visible) belongs to chapter 2, with attention that scales.
"""
from tinyattn.ops.elementwise import (Add, Sub, Mul, Div, Pow, Neg, Exp, Log, Sqrt, Tanh, Relu,
                                      Elu, Gelu, Where, where)
from tinyattn.ops.reductions import Sum, Mean, Max, Cumsum
from tinyattn.ops.shape import (Reshape, Transpose, Index, Concatenate, as_index, swapped_axes,
                                unpacked, concatenate, stack)
from tinyattn.ops.matmul import Matmul
from tinyattn.ops.softmax import Softmax, LogSoftmax
from tinyattn.ops.layer_norm import LayerNorm
from tinyattn.ops.flash_attention import FlashAttention
