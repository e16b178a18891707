"""Chapter 5. What replaced LayerNorm and GELU in today's open models: RMSNorm and the SiLU of
the gated feed-forward.

    rms_norm   x / sqrt(mean(x^2) + eps) * weight: LayerNorm without its centring and its bias
               (Zhang & Sennrich 2019), in Llama, Mistral, Qwen and Gemma
    silu       x * sigmoid(x) (Elfwing et al. 2017; "swish" in Ramachandran et al. 2017), the
               activation of the SwiGLU gate (Shazeer 2020); Gemma gates with GELU (F.gelu,
               chapter 1) instead, GeGLU
    sigmoid    1 / (1 + e^(-x)), each expert's score in DeepSeek-V3's router
               (nn/routed_experts.py)

Each is one op (tinyattn/ops/rms_norm.py, silu.py, sigmoid.py, where their backward rules are
derived); the checklist compares each with the chain of primitive ops it replaces. The gated
feed-forward that uses them is a layer, nn.GatedFeedForward.
"""
from tinyattn.arguments import any_tensor, between, door, optional
from tinyattn.ops.rms_norm import RMSNorm
from tinyattn.ops.sigmoid import Sigmoid
from tinyattn.ops.silu import Silu


@door(x="(..., N)", weight=optional("(N)"), eps=between(0))
def rms_norm(x, weight=None, eps=1e-6):
    """Each row (the last axis) divided by its root mean square, then scaled by `weight` (the
    row's size, or None for no gain), as PyTorch's `F.rms_norm` over the last axis:

        y = x / sqrt(mean(x^2) + eps) * weight

    One fused op (`ops.rms_norm.RMSNorm`); no mean is subtracted and there is no bias.
    """
    return RMSNorm.apply(x, 1.0 if weight is None else weight, eps=float(eps))


@door(x=any_tensor)
def silu(x):
    """x * sigmoid(x), elementwise (PyTorch's `F.silu`). One fused op (`ops.silu.Silu`)."""
    return Silu.apply(x)


@door(x=any_tensor)
def sigmoid(x):
    """1 / (1 + e^(-x)), elementwise (PyTorch's `torch.sigmoid`), without overflow for any x. One
    op (`ops.sigmoid.Sigmoid`)."""
    return Sigmoid.apply(x)
