"""The checklist's rows for chapter 4's adapters (tinyattn/nn/lora.py): LoRA's update as an op
(against NumPy, finite differences, and the chain of primitive ops it replaces), a LoRALinear, and
a TransformerBlock whose attention projections carry adapters, with respect to its input and to
the adapters, the only parameters that require grad.

B starts at zero, and at zero dL/dA = scale (grad B)^T x is zero too: a check there would pass
a backward that forgot dL/dA. So every row here gives B random numbers first, as training would.
"""
import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.nn.lora import LowRankUpdate
from tinyattn_tools.checklist.cases import FusedCase, LayerCase, OpCase, leaves

SCALE = 2.5          # alpha / rank, e.g. alpha 5 and rank 2: not 1, so a forgotten scale shows


def lora_update(x, A, B):
    return LowRankUpdate.apply(x, A, B, scale=SCALE)


def np_lora_update(x, A, B):
    return SCALE * x @ A.T @ B.T


def composed_lora_update(x, A, B):
    """The same with primitive ops: two matmuls and a product with the scale."""
    return (x @ A.T) @ B.T * SCALE


def trained(layer):
    """`layer` with every lora_B given standard normal numbers (seeded), as after training."""
    random = np.random.default_rng(1)
    for module in layer.modules():
        if isinstance(module, nn.LoRALinear):
            module.lora_B.data[...] = random.standard_normal(module.lora_B.shape)
    return layer


def lora_linear(bias=True):
    """A LoRALinear (in 5, out 4, rank 2, alpha 5) and a batch of sequences (2, 3, 5)."""
    def build():
        ta.manual_seed(0)
        layer = trained(nn.LoRALinear(nn.Linear(5, 4, bias=bias), rank=2, alpha=5.0))
        x, = leaves((2, 3, 5))
        return (lambda x, *adapters: layer(x)), [x, *layer.trainable_parameters()]
    return build


def adapted_block():
    """A TransformerBlock (E 8, 2 heads) with adapters of rank 2 on q, k, v and out: the input
    and the 8 adapter matrices are checked; every other parameter is frozen, so none is given."""
    ta.manual_seed(0)
    block = nn.TransformerBlock(8, 2, hidden_dim=16)
    nn.add_lora(block, rank=2, alpha=4.0)
    trained(block)
    x, = leaves((2, 4, 8))
    return (lambda x, *adapters: block(x, is_causal=True)), [x, *block.trainable_parameters()]


OP_CASES = [
    OpCase("lora update", lora_update, np_lora_update, ((2, 3, 5), (2, 5), (4, 2))),
    OpCase("lora update, one row", lora_update, np_lora_update, ((5,), (3, 5), (4, 3))),
    OpCase("lora update, rank 1, 4-d x", lora_update, np_lora_update,
           ((2, 2, 3, 4), (1, 4), (6, 1))),
]

LAYER_CASES = [
    LayerCase("LoRALinear (rank 2, alpha 5)", lora_linear()),
    LayerCase("LoRALinear, no bias", lora_linear(bias=False)),
    LayerCase("TransformerBlock with LoRA on q, k, v, out (adapters only)", adapted_block),
]

FUSED_CASES = [
    FusedCase("lora update = composed", lora_update, composed_lora_update,
              ((2, 3, 5), (2, 5), (4, 2))),
]
