"""Chapter 1. The ops: one class per differentiable operation, each a `Function` with forward and
backward.

Read them in this order: elementwise (with erf.py, the error function GELU needs), reductions,
shape, matmul, linear, softmax, layer_norm. What makes an op's input bad is in checks.py, one
line in each op names its check. Later chapters add files, imported where they are used, each
with its checks beside it: chapter 2's elu_and_cumsum.py (ELU and the running sum, for linear
attention) and flash_attention.py (a whole attention fused into one op); chapter 5's
rms_norm.py, silu.py, sigmoid.py and rotate_half.py.
"""
from tinyattn.ops.elementwise import (Add, Sub, Mul, Div, Pow, Neg, Exp, Log, Sqrt, Tanh, Relu,
                                      Gelu, GeluExact, Where, where)
from tinyattn.ops.reductions import Sum, Mean, Max
from tinyattn.ops.shape import (Reshape, Transpose, Index, Concatenate, as_index, unpacked,
                                concatenate, stack)
from tinyattn.ops.checks import swapped_axes
from tinyattn.ops.matmul import Matmul
from tinyattn.ops.linear import Linear
from tinyattn.ops.softmax import Softmax, LogSoftmax
from tinyattn.ops.layer_norm import LayerNorm
