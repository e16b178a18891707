"""Chapter 5. SiLU (the "swish"), x * sigmoid(x), as one fused op: the activation of the gate in
Llama's, Mistral's and Qwen's feed-forward (SwiGLU: nn.GatedFeedForward)."""
import numpy as np

from tinyattn.engine import Function


class Silu(Function):
    """out = x * s,  s = sigmoid(x) = 1 / (1 + e^(-x))  (Elfwing et al. 2017; Ramachandran et
    al. 2017 call it swish)

    dL/dx = grad * dout/dx,   dout/dx = s + x s (1 - s) = s (1 + x (1 - s))

    since d sigmoid(x) / dx = s (1 - s). The sigmoid is computed as 0.5 (1 + tanh(x / 2)), the
    same number, which neither overflows (e^(-x) does for x below about -710 in float64, -88 in
    float32) nor divides. Written with the primitive ops it is five nodes; fused, it saves x and
    s, and its backward is the line above.
    """

    def forward(self, x):
        s = 0.5 * (1.0 + np.tanh(0.5 * x))
        self.saved = (x, s)
        return x * s

    def backward(self, grad):
        x, s = self.saved
        return (grad * (s * (1.0 + x * (1.0 - s))),)
