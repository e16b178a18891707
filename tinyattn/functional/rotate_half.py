"""Chapter 5. Rotary positions as today's checkpoints hold them: the "rotate half" layout, and the
frequencies of a larger base or of Llama 3.1's long-context scaling.

Chapter 2's `F.rope` (RoFormer's layout) turns the pairs of neighbouring features (2i, 2i + 1).
Llama, Mistral, Qwen and Gemma, as transformers holds them, pair feature i with feature i + D/2
instead (GPT-NeoX's layout; transformers' `rotate_half`):

    out[..., :h] = x1 cos - x2 sin,   out[..., h:] = x2 cos + x1 sin,    x1 = x[..., :h],
                                                                         x2 = x[..., h:], h = D/2

The rotations are the same; only which two features make a pair differs. So the layouts differ
by a fixed permutation of the features: with `perm = [0, h, 1, h + 1, ..., h - 1, D - 1]` (the
halves interleaved),

    rope_rotate_half(x)[..., perm] == F.rope(x[..., perm])

(tests/test_open_layers.py checks it). Since a score is a dot product, q . k = q[perm] . k[perm],
either layout gives the same attention once the rows of W_q and W_k of every head are permuted
alike. Which layout is right is therefore fixed by the checkpoint's weights, not by the model:
Meta's original Llama weights were trained with the interleaved layout (complex numbers in its
code), and transformers' conversion script permutes their W_q and W_k rows into this one
(`permute` in convert_llama_weights_to_hf.py). Run a checkpoint with the other layout and every
head's positions come out scrambled.

The frequencies: pair i turns by theta_i = base^(-2i/D) radians per position (`rope_frequencies`),
with base 10,000 in RoFormer and GPT-NeoX, 500,000 in Llama 3, 1,000,000 in Qwen3 and Gemma 3's
global layers: a larger base has slower pairs, whose angles stay apart over longer distances. Two
rescalings stretch a model's context beyond its training length:

    linear   (Position Interpolation, Chen et al. 2023)  every theta_i / factor: positions
             squeezed into the trained range (Gemma 3's global layers, factor 8 from 4B up)
    llama3   Llama 3.1's bands (Meta's released code, `apply_scaling`; transformers'
             `_compute_llama3_parameters`): with L the original context length,
             wavelength_i = 2 pi / theta_i, and the band edges L / high_freq_factor and
             L / low_freq_factor,
               wavelength below L / high_freq_factor: theta_i kept (fast pairs: local order)
               wavelength above L / low_freq_factor:  theta_i / factor (slow pairs: interpolated)
               between: (1 - s) theta_i / factor + s theta_i, s = (L / wavelength_i - low) /
                        (high - low), a smooth blend of the two
"""
import math

import numpy as np

from tinyattn.arguments import at_least, between, door
from tinyattn.functional import rotate_half_checks as checks
from tinyattn.functional.positions import frequencies
from tinyattn.ops.rotate_half import RopeRotateHalf

ROPE_TYPES = ("default", "linear", "llama3")


@door(checks.scaling_fits, dim=at_least(2), base=between(1))
def rope_frequencies(dim, base=10000.0, scaling=None):
    """theta_i for i = 0 ... dim/2 - 1, a NumPy float64 array: base^(-2i/dim), rescaled as
    `scaling` says (see the top of this file). `scaling` is None or a dict as transformers' config
    holds it: {"rope_type": "default"}, {"rope_type": "linear", "factor": f}, or
    {"rope_type": "llama3", "factor": f, "low_freq_factor": a, "high_freq_factor": b,
    "original_max_position_embeddings": L}."""
    theta = frequencies(dim, base)                                   # (dim/2,) base^(-2i/dim)
    kind = "default" if scaling is None else scaling["rope_type"]
    if kind == "default":                                            # the plain case
        return theta
    if kind == "linear":                                             # Position Interpolation
        return theta / scaling["factor"]
    factor, low, high = (scaling[key] for key in ("factor", "low_freq_factor",
                                                  "high_freq_factor"))   # llama3: three bands
    length = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / theta                                 # (dim/2,) positions per turn
    blend = (length / wavelength - low) / (high - low)               # (dim/2,) 0 ... 1 in the band
    blended = (1 - blend) * theta / factor + blend * theta
    return np.where(wavelength < length / high, theta,
                    np.where(wavelength > length / low, theta / factor, blended))


@door(checks.pairs_and_frequencies_fit, x="(..., T, D)", offset=at_least(0), base=between(1))
def rope_rotate_half(x, offset=0, base=10000.0, frequencies=None):
    """Rotary positions in the rotate-half layout: x (..., T, D), D even, the row of position
    p = offset + t turned pair by pair, feature i with feature i + D/2, by the angles p theta_i;
    theta_i = base^(-2i/D), or the given `frequencies` (D/2,) (from `rope_frequencies`, for a
    scaled rotary). One op (`ops.rotate_half.RopeRotateHalf`); see the top of this file for how
    it relates to `F.rope`."""
    T, D = x.shape[-2:]
    theta = rope_frequencies(D, base) if frequencies is None else frequencies        # (D/2,)
    angles = np.arange(offset, offset + T)[:, None] * theta                        # (T, D/2)
    return RopeRotateHalf.apply(x, cos=np.cos(angles).astype(x.dtype),
                                sin=np.sin(angles).astype(x.dtype))
