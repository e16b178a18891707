"""Chapter 4 of the exercises: LoRA's adapter, forward and backward. Read chapter1.py first: the
entries are written the same way.

What the learner writes, in tinyattn/nn/lora.py: the forward and the backward of LowRankUpdate,
the op that computes a LoRALinear's update (alpha / r) x A^T B^T (tinyattn's LoRALinear runs it,
so its backward is the learner's, not the engine's chain of matmuls), and LoRALinear.__init__,
where the adapter is made: the Linear frozen, A random, B zero, the scale alpha / r.
"""
import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.nn.lora import LowRankUpdate
from tinyattn_tools.checklist.lora import SCALE
from tinyattn_tools.exercises.checks import (difference, float32, forward_rows, gradient_rows,
                                             holds, matches)
from tinyattn_tools.exercises.exercise import Exercise, WrongVersion as Wrong

UPDATE_ROWS = ("lora update", "lora update, one row", "lora update, rank 1, 4-d x")
LAYER_ROWS = ("LoRALinear (rank 2, alpha 5)", "LoRALinear, no bias",
              "TransformerBlock with LoRA on q, k, v, out (adapters only)")


def x_and_linear(dtype=np.float64):
    ta.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 6)).astype(dtype)
    return ta.tensor(x), nn.Linear(6, 4, dtype=dtype)


def a_new_adapter_changes_nothing():
    """A new LoRALinear's output minus its Linear's, exactly (B = 0 makes the update zero); plus
    1 unless it keeps its rank, alpha and scale alpha / rank."""
    x, linear = x_and_linear()
    before = linear(x).data
    layer = nn.LoRALinear(linear, rank=2, alpha=8)
    return difference(layer(x), before) + ((layer.rank, layer.alpha, layer.scale) != (2, 8, 4))


def the_frozen_linear_stays_put():
    """After a backward and an AdamW step (with weight decay) over trainable_parameters(), the
    Linear's weight and bias: how far they moved, plus 1 for each that got a gradient or still
    requires grad; and 1 unless lora_A and lora_B are what trains."""
    x, linear = x_and_linear()
    weight, bias = linear.weight.data.copy(), linear.bias.data.copy()
    layer = nn.LoRALinear(linear, rank=2)
    optimizer = ta.optim.AdamW(layer.trainable_parameters(), lr=0.1, weight_decay=0.5)
    for _ in range(2):
        layer(x).backward(np.random.default_rng(1).standard_normal((2, 3, 4)))
        optimizer.step()
    error = max(difference(layer.weight, weight), difference(layer.bias, bias))
    error += sum(p.grad is not None or p.requires_grad for p in (layer.weight, layer.bias))
    trains = [name for name, p in layer.named_parameters() if p.requires_grad]
    return error + (trains != ["lora_A", "lora_B"])


def the_papers_formula():
    """LoRALinear(rank 2, alpha 8), B given numbers, against x W^T + b + (alpha / r) x A^T B^T in
    NumPy; and its merge() against the same."""
    x, linear = x_and_linear()
    layer = nn.LoRALinear(linear, rank=2, alpha=8)
    layer.lora_B.data[...] = np.random.default_rng(2).standard_normal((4, 2))
    W, b, A, B = (p.data for p in (layer.weight, layer.bias, layer.lora_A, layer.lora_B))
    expected = x.data @ W.T + b + 4.0 * x.data @ A.T @ B.T
    return [(layer(x), expected), (layer.merge()(x), expected)]


def a_starts_as_a_linears_weight():
    """How far lora_A is from what it should be: random, every number within the bound
    1/sqrt(in_features) of a Linear(in, rank)'s weight, and not all of them tiny (0 if so)."""
    _, linear = x_and_linear()
    A = nn.LoRALinear(linear, rank=3).lora_A.data
    bound = 1 / np.sqrt(6)
    error = max(0.0, float(np.abs(A).max()) - bound) if A.shape == (3, 6) else float("inf")
    return error + (float(np.abs(A).max()) < bound / 4) + (len(np.unique(A)) < A.size)


def float32_adapters():
    """1 for each of lora_A and lora_B that is not float32 on a float32 Linear."""
    _, linear = x_and_linear(np.float32)
    layer = nn.LoRALinear(linear, rank=2)
    return sum(p.dtype != np.float32 for p in (layer.lora_A, layer.lora_B))


def lora_update(x, A, B):
    return LowRankUpdate.apply(x, A, B, scale=SCALE)


LORA = Exercise(
    "lora", 4, "LoRA's adapter: the low-rank update's forward and backward, and a new LoRALinear",
    "tinyattn.nn.lora", ("LowRankUpdate.forward", "LowRankUpdate.backward", "LoRALinear.__init__"),
    read_first="the top of tinyattn/nn/lora.py (the idea, and why B starts at zero), the "
               "docstrings of LowRankUpdate and LoRALinear, Matmul in tinyattn/ops/matmul.py, "
               "and section 4.1 of Hu et al. 2021, \"LoRA: Low-Rank Adaptation of Large "
               "Language Models\"",
    checks=(
        forward_rows(*UPDATE_ROWS)._replace(
            what="the update's outputs vs NumPy, scale * x A^T B^T: 3 rows of the checklist"),
        gradient_rows(*UPDATE_ROWS, *LAYER_ROWS)._replace(
            what="gradients vs finite differences: the update, LoRALinear, an adapted "
                 "TransformerBlock (6 rows of the checklist)"),
        holds("a new LoRALinear computes exactly what its Linear did (B starts at zero); its "
              "rank, alpha and scale", a_new_adapter_changes_nothing, 0.0),
        holds("the Linear's weight and bias are frozen: no gradient, not moved by AdamW; only "
              "lora_A and lora_B train", the_frozen_linear_stays_put, 0.0),
        matches("LoRALinear(rank 2, alpha 8) and its merge() vs x W^T + b + (alpha / r) x A^T B^T",
                the_papers_formula),
        holds("lora_A starts as a Linear(in, rank)'s weight: random, within 1/sqrt(in)",
              a_starts_as_a_linears_weight, 0.0),
        float32(lora_update, (2, 3, 5), (2, 5), (4, 2)),
        holds("a float32 Linear gets float32 adapters", float32_adapters, 0.0),
    ),
    hints=(
        "Re-read LowRankUpdate's docstring: h = x A^T is the input brought down to r numbers per "
        "row, and each gradient is the matmul adjoint applied to out = scale * h B^T, then to "
        "h = x A^T.",
        "Fold x's leading axes into rows first, x.reshape(-1, in): then dL/dA and dL/dB are each "
        "one 2-D product summed over all rows. Save what backward needs (the rows, h, A, B, the "
        "scale, x's shape) and reshape dL/dx back to x's shape.",
        "Do not forget dL/dx: x is no parameter, but every layer below, and its adapters, learn "
        "through it. The scale multiplies the output, so it multiplies dL/dh and dL/dB too.",
        "In __init__: take the Linear's weight and bias as they are and set their requires_grad "
        "to False; lora_A starts as a Linear(in, rank)'s weight would (`uniform`, bound "
        "1/sqrt(in)), lora_B as zeros of (out, rank), both in the weight's dtype; the scale is "
        "alpha / rank, with alpha = rank when not given.",
    ),
    equivalent_mutants=(
        ("LowRankUpdate.forward: rows = x.reshape(-1, x.shape[-1])"
         "                                # (N, in) :: 1 -> 2",
         "NumPy's reshape takes any negative size, -2 as well as -1, for 'the rest'"),
        ("LowRankUpdate.backward: grad = grad.reshape(-1, B.shape[0])"
         "                              # (N, out) :: 1 -> 2",
         "NumPy's reshape takes any negative size, -2 as well as -1, for 'the rest'"),
    ),
    wrong_versions=(
        Wrong("the alpha / r scale forgotten",
              (("out = scale * (h @ B.T)", "out = h @ B.T"),
               ("grad_h = scale * (grad @ B)", "grad_h = grad @ B"),
               ("grad_B = scale * (grad.T @ h)", "grad_B = grad.T @ h"))),
        Wrong("the frozen weight trained: the Linear's weight and bias left requiring grad",
              (("""        for parameter in (self.weight, self.bias):
            if parameter is not None:
                parameter.requires_grad = False
""", ""),)),
        Wrong("both factors initialised randomly: B drawn as A is",
              (("self.lora_B = Parameter(np.zeros((self.out_features, rank), dtype))",
                "self.lora_B = uniform((self.out_features, rank), 1.0 / math.sqrt(rank), dtype)"),
               )),
        Wrong("no gradient for x: it is no parameter",
              (("grad_x = (grad_h @ A).reshape(x_shape)", "grad_x = None"),)),
        Wrong("the scale left out of dL/dA and dL/dx (kept in the output and in dL/dB)",
              (("grad_h = scale * (grad @ B)", "grad_h = grad @ B"),)),
    ),
)


EXERCISES = (LORA,)
