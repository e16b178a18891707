"""The checklist's rows for DiT (tinyattn/nn/dit.py): an adaLN-Zero block and the whole model,
against finite differences. DiT starts its adaLN and output Linears at zero, where a backward
that forgot a gate, a shift or a scale would still pass: every row draws all parameters at
random first (`off_zero`)."""
import numpy as np

import tinyattn as ta
from tinyattn.nn.dit import DiT, DiTBlock, DiTSettings
from tinyattn_tools.checklist.cases import LayerCase, leaves

TINY = DiTSettings(sample_size=4, patch_size=2, in_channels=1, out_channels=2, num_layers=2,
                   num_heads=2, head_dim=2, num_classes=3)
LABELS = np.array([2, 3])                   # a class and the null class
TIMESTEPS = np.array([7, 900])


def off_zero(module):
    """`module` with every parameter drawn from N(0, 0.5^2)."""
    random = np.random.default_rng(1)
    for parameter in module.parameters():
        parameter.data[...] = 0.5 * random.standard_normal(parameter.shape)
    return module


def block():
    """A DiTBlock on patches (2, 4, E) and timestep sinusoids (2, 256), both checked."""
    ta.manual_seed(0)
    module = off_zero(DiTBlock(TINY))
    x, sinusoids = leaves((2, 4, TINY.hidden_size), (2, 256))
    return (lambda *args: module(args[0], args[1], LABELS)), [x, sinusoids, *module.parameters()]


def model():
    """A whole DiT on latents (2, 1, 4, 4)."""
    ta.manual_seed(0)
    module = off_zero(DiT(TINY))
    latents, = leaves((2, 1, 4, 4))
    return (lambda *args: module(args[0], TIMESTEPS, LABELS)), [latents, *module.parameters()]


LAYER_CASES = [
    LayerCase("DiTBlock, adaLN-Zero off zero (random directions)", block, directions=6),
    LayerCase("DiT, 2 blocks, learned sigma (random directions)", model, directions=4),
]
