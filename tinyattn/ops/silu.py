"""Chapter 5. SiLU (the "swish"), x * sigmoid(x), as one fused op: the activation of the gate in
Llama's, Mistral's and Qwen's feed-forward (SwiGLU: nn.GatedFeedForward)."""
import numpy as np

from tinyattn.engine import Function


class Silu(Function):
    """out = x * s,  s = sigmoid(x) = 1 / (1 + e^(-x))  (Elfwing et al. 2017; Ramachandran et
    al. 2017 call it swish)

    dL/dx = grad * dout/dx,   dout/dx = s + x s (1 - s) = s (1 + x (1 - s))

    since d sigmoid(x) / dx = s (1 - s). The sigmoid is computed from e = e^(-|x|), which is at
    most 1, as 1 / (1 + e) for x >= 0 and e / (1 + e) below: the same number, without the
    overflow of e^(-x) for x below about -88 (float32; -710 in float64), and without losing the
    tiny sigmoid of a very negative x (0.5 (1 + tanh(x / 2)) would round it to 0). Written with
    the primitive ops SiLU is five nodes; fused, it saves x and s, and its backward is the line
    above.
    """

    def forward(self, x):
        e = np.exp(-np.abs(x))                                           # at most 1
        s = np.where(x >= 0, 1.0, e) / (1.0 + e)                         # sigmoid(x)
        self.saved = (x, s)
        return x * s

    def backward(self, grad):
        x, s = self.saved
        return (grad * (s * (1.0 + x * (1.0 - s))),)
