"""Chapter 5. Rotary positions in the "rotate half" layout as one op: the layout in which
Llama, Mistral, Qwen and Gemma checkpoints hold their queries and keys (tinyattn/functional/
rotate_half.py says how it relates to chapter 2's interleaved `F.rope`)."""
import numpy as np

from tinyattn.engine import Function


class RopeRotateHalf(Function):
    """Each row of x (..., T, D) turned by its position's angles, feature i paired with feature
    i + D/2 (h = D/2; x1 = x[..., :h], x2 = x[..., h:]; cos, sin (T, h), one angle per position
    and pair):

        out[..., :h] = x1 cos - x2 sin
        out[..., h:] = x2 cos + x1 sin

    Backward. A rotation's transpose is the rotation by the opposite angle, so with
    g1 = grad[..., :h], g2 = grad[..., h:]:

        dL/dx1 = g1 cos + g2 sin
        dL/dx2 = g2 cos - g1 sin

    (each element's gradient is the sum over the two outputs it went into: x1 went into the first
    half with cos and into the second with sin, x2 into the first with -sin and the second with
    cos). Written with the primitive ops it is two slices, four products, two sums and a
    concatenation, nine nodes; fused it saves only cos and sin, which no input owns.
    """

    def forward(self, x, cos, sin):
        h = x.shape[-1] // 2
        x1, x2 = x[..., :h], x[..., h:]                                  # (..., T, h) each
        self.saved = (cos, sin)
        return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)

    def backward(self, grad):
        cos, sin = self.saved
        h = grad.shape[-1] // 2
        g1, g2 = grad[..., :h], grad[..., h:]                            # (..., T, h) each
        return (np.concatenate([g1 * cos + g2 * sin, g2 * cos - g1 * sin], axis=-1),)
