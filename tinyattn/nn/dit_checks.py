"""Chapter 6. What makes an argument of DiT (nn/dit.py) bad: its settings, and latents, timesteps
and class labels that are not what the model was built for."""
import numbers

import numpy as np

from tinyattn.arguments import ids
from tinyattn.arrays import data_of, numeric_array

SIZES = ("sample_size", "patch_size", "in_channels", "out_channels", "num_layers", "num_heads",
         "head_dim", "num_classes")


def settings_fit(self, settings, dtype=None):
    """DiT: settings is a DiTSettings of positive integer sizes, the patch size divides the
    latents' side, and the width (num_heads head_dim) is a multiple of 4 (the 2-d positions
    give a quarter of it to each of sin and cos of the row and of the column)."""
    if type(settings).__name__ != "DiTSettings":
        raise TypeError(f"settings must be a DiTSettings, got {type(settings).__name__}")
    for name in SIZES:
        value = getattr(settings, name)
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"settings.{name} must be an integer of at least 1, got {value!r}")
    if settings.sample_size % settings.patch_size:
        raise ValueError(f"settings.patch_size {settings.patch_size} must divide "
                         f"settings.sample_size {settings.sample_size}")
    if settings.hidden_size % 4:
        raise ValueError(f"the width num_heads x head_dim = {settings.hidden_size} must be a "
                         f"multiple of 4 (the 2-d sin-cos positions)")
    eps = settings.norm_eps
    if isinstance(eps, bool) or not isinstance(eps, numbers.Real) or eps < 0:
        raise ValueError(f"settings.norm_eps must be a number >= 0, got {eps!r}")


def inputs_fit(self, latents, timesteps, class_labels):
    """DiT.forward: latents (B, in_channels, sample_size, sample_size); timesteps (B,) integers
    >= 0; class_labels (B,) integers in [0, num_classes] (num_classes: the null class)."""
    s = self.settings
    B, C, H, W = latents.shape
    if C != s.in_channels:
        raise ValueError(f"latents have {C} channels, the model takes {s.in_channels}: got "
                         f"shape {latents.shape}")
    if (H, W) != (s.sample_size, s.sample_size):
        raise ValueError(f"latents must be {s.sample_size} x {s.sample_size} (the config's "
                         f"sample_size), got {H} x {W}")
    steps = numeric_array(data_of(timesteps), "timesteps")
    if steps.dtype.kind not in "iu" or steps.shape != (B,):
        raise ValueError(f"timesteps must be {B} integers, one per latent, got {steps.dtype} "
                         f"{steps.shape}")
    if np.any(steps < 0):
        raise ValueError(f"timesteps must be >= 0, got {steps.min()}")
    labels = numeric_array(data_of(class_labels), "class_labels")
    if labels.shape != (B,):
        raise ValueError(f"class_labels must be {B} integers, one per latent, got shape "
                         f"{labels.shape}")
    ids("class_labels", labels, s.num_classes + 1, f"classes: {s.num_classes} and the null class")
