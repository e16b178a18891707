"""Chapter 5. The layers every family of today's open models shares, besides chapter 1's Linear
and Embedding:

    RMSNorm                x / sqrt(mean(x^2) + eps) * weight (Gemma: * (1 + weight))
    GatedFeedForward       down(act(gate(x)) * up(x)): SwiGLU with SiLU, GeGLU with GELU

The attention is on each family's page: nn/llama.py's LlamaAttention (grouped-query attention,
rotary positions, the cache), which Qwen3, Gemma 3 and Qwen3-MoE extend.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype, one_of
from tinyattn.nn.layers import Linear
from tinyattn.nn.module import Module, Parameter

ACTIVATIONS = {"silu": F.silu, "gelu_tanh": F.gelu}     # the gate's activation, by name


class RMSNorm(Module):
    """RMSNorm over the last axis (`F.rms_norm`): x / sqrt(mean(x^2) + eps) * weight, `weight`
    (normalized_shape,) starting at ones, as PyTorch's `nn.RMSNorm`.

    `unit_offset=True` is Gemma's variant: the stored weight starts at zeros and the norm scales
    by 1 + weight (the gain is learned as a change from 1, which a weight decay pulls towards 1,
    not 0). The sum 1 + weight is taken in the weight's dtype, as transformers does.
    """

    @door(normalized_shape=at_least(1), eps=between(0), unit_offset=bool, dtype=floating_dtype)
    def __init__(self, normalized_shape, eps=1e-6, unit_offset=False, dtype=None):
        self.normalized_shape, self.eps = normalized_shape, float(eps)
        self.unit_offset = unit_offset
        start = np.zeros if unit_offset else np.ones
        self.weight = Parameter(start(normalized_shape, dtype=dtype))

    @door(x="(..., normalized_shape)")
    def forward(self, x):
        weight = self.weight + 1.0 if self.unit_offset else self.weight      # (N,)
        return F.rms_norm(x, weight, self.eps)                               # (..., N)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}"
                + (", unit_offset=True" if self.unit_offset else ""))


class GatedFeedForward(Module):
    """The gated feed-forward block (Shazeer 2020, "GLU Variants Improve Transformer"):

        down(act(gate(x)) * up(x))        gate, up: Linear(E, hidden); down: Linear(hidden, E)

    Chapter 1's FeedForward is down(act(up(x))). Here a second projection of the same input, the
    gate, multiplies the activation element by element: each hidden unit is opened or closed by
    the token itself. `activation` "silu" makes it SwiGLU (Llama, Mistral, Qwen), "gelu_tanh"
    GeGLU (Gemma: F.gelu, transformers' "gelu_pytorch_tanh"). With three matrices instead of
    two, models shrink `hidden` to keep the parameters: Llama's 8/3 E instead of 4 E, about.
    """

    @door(embed_dim=at_least(1), hidden_dim=at_least(1), activation=one_of(*ACTIVATIONS),
          bias=bool, dtype=floating_dtype)
    def __init__(self, embed_dim, hidden_dim, activation="silu", bias=False, dtype=None):
        self.embed_dim, self.activation = embed_dim, activation
        self.gate = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)
        self.up = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)
        self.down = Linear(hidden_dim, embed_dim, bias=bias, dtype=dtype)

    @door(x="(..., embed_dim)")
    def forward(self, x):
        opened = ACTIVATIONS[self.activation](self.gate(x)) * self.up(x)    # (..., hidden)
        return self.down(opened)                                             # (..., E)

    def extra_repr(self):
        return f"activation={self.activation!r}"
