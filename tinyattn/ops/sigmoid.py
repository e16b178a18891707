"""Chapter 5. The sigmoid, 1 / (1 + e^(-x)), as one op: DeepSeek-V3's router scores each expert
with it (nn/routed_experts.py), where Mixtral's and Qwen's take a softmax over the experts."""
import numpy as np

from tinyattn.engine import Function


class Sigmoid(Function):
    """out = s = sigmoid(x) = 1 / (1 + e^(-x))

    dL/dx = grad * s (1 - s)

    (d/dx (1 + e^(-x))^(-1) = e^(-x) / (1 + e^(-x))^2 = s (1 - s)): the output is all backward
    needs, so it is what is saved. As in SiLU (ops/silu.py), s is computed from e = e^(-|x|),
    at most 1: 1 / (1 + e) for x >= 0 and e / (1 + e) below, so no e^(-x) overflows.
    """

    def forward(self, x):
        e = np.exp(-np.abs(x))                                           # at most 1
        out = np.where(x >= 0, 1.0, e) / (1.0 + e)                       # sigmoid(x)
        self.saved = (out,)
        return out

    def backward(self, grad):
        out, = self.saved
        return (grad * (out * (1.0 - out)),)
