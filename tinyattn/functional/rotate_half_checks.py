"""Chapter 5. What makes an argument of the rotate-half rotary (functional/rotate_half.py) bad."""
import numbers

import numpy as np

SCALING_KEYS = {"default": (), "linear": ("factor",),
                "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                           "original_max_position_embeddings")}


def scaling_fits(dim, base=10000.0, scaling=None):
    """rope_frequencies: an even dim; scaling None or a dict of a rope_type this file computes,
    with its numbers (positive; for llama3 high_freq_factor above low_freq_factor)."""
    if dim % 2:
        raise ValueError(f"dim must be even (the features turn in pairs), got {dim}")
    if scaling is None:
        return
    if not isinstance(scaling, dict) or scaling.get("rope_type") not in SCALING_KEYS:
        kind = scaling.get("rope_type") if isinstance(scaling, dict) else scaling
        raise ValueError(f"scaling must be None or a dict with a rope_type of "
                         f"{', '.join(map(repr, SCALING_KEYS))}, got {kind!r}")
    for key in SCALING_KEYS[scaling["rope_type"]]:
        value = scaling.get(key)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value > 0:
            raise ValueError(f"scaling of rope_type {scaling['rope_type']!r} needs {key}, a "
                             f"positive number; got {value!r}")
    if scaling["rope_type"] == "llama3" and \
            not scaling["high_freq_factor"] > scaling["low_freq_factor"]:
        raise ValueError(f"llama3 scaling needs high_freq_factor > low_freq_factor, got "
                         f"{scaling['high_freq_factor']} and {scaling['low_freq_factor']}")


def pairs_and_frequencies_fit(x, offset=0, base=10000.0, frequencies=None):
    """rope_rotate_half: an even last axis D, and frequencies None or D/2 real numbers."""
    if x.shape[-1] % 2:
        raise ValueError(f"the last axis of x holds pairs of features, so it must be even; got x "
                         f"of shape {x.shape}")
    if frequencies is not None:
        theta = np.asarray(frequencies)
        if theta.shape != (x.shape[-1] // 2,) or theta.dtype.kind not in "fi":
            raise ValueError(f"frequencies must be {x.shape[-1] // 2} numbers (one per pair of "
                             f"the {x.shape[-1]} features), got {theta.dtype} {theta.shape}")
