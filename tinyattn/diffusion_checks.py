"""Chapter 6. What makes an argument of the DDPM schedule (diffusion.py) bad: betas outside
(0, 1), timesteps outside [0, T), arrays that are not of one shape and dtype, a sampler's
shape, labels or generator."""
import numbers

import numpy as np

from tinyattn.arguments import integer
from tinyattn.arrays import data_of
from tinyattn.engine import Tensor


def betas_fit(self, num_train_timesteps, beta_start, beta_end):
    """DDPMSchedule: every beta is a variance in (0, 1), so abar_t is in (0, 1) too."""
    for name, value in (("beta_start", beta_start), ("beta_end", beta_end)):
        if not 0 < value < 1:
            raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")


def floating(name, value):
    """The NumPy array of `value`, a NumPy array or a Tensor of floating-point numbers."""
    if not isinstance(value, (np.ndarray, Tensor)):
        raise TypeError(f"{name} must be a NumPy array or a Tensor, got {type(value).__name__}")
    array = data_of(value)
    if array.dtype.kind != "f":
        raise TypeError(f"{name} must hold floating-point numbers, got {array.dtype}")
    return array


def alike(**named):
    """The arrays or Tensors `named` have one shape and one dtype."""
    arrays = {name: floating(name, value) for name, value in named.items()}
    (first, array), *others = arrays.items()
    for name, other in others:
        if other.shape != array.shape or other.dtype != array.dtype:
            raise ValueError(f"{first} and {name} must have one shape and dtype, got "
                             f"{array.dtype} {array.shape} and {other.dtype} {other.shape}")
    return array


def timesteps_in_range(name, steps, count):
    if steps.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got {steps.dtype}")
    if steps.size and (steps.min() < 0 or steps.max() >= count):
        raise ValueError(f"{name} must lie in [0, {count}) (the schedule's steps), got "
                         f"{steps.min() if steps.min() < 0 else steps.max()}")


def noise_fits(self, x0, noise, timesteps):
    """DDPMSchedule.add_noise: x0 and noise of one shape (B, ...) and dtype; timesteps (B,)
    integers in [0, T)."""
    array = alike(x0=x0, noise=noise)
    steps = np.asarray(data_of(timesteps))
    if array.ndim < 1 or steps.shape != array.shape[:1]:
        raise ValueError(f"timesteps must be one per row of x0 {array.shape}, got shape "
                         f"{steps.shape}")
    timesteps_in_range("timesteps", steps, self.num_train_timesteps)


def step_fits(self, model_output, t, sample, noise):
    """DDPMSchedule.step: t an int in [0, T); model_output, sample and noise (None at t = 0 is
    allowed) of one shape and dtype."""
    integer("t", t)
    timesteps_in_range("t", np.asarray(t), self.num_train_timesteps)
    if noise is None and t > 0:
        raise ValueError(f"noise is needed at t = {t} (it may be None at t = 0 only)")
    alike(model_output=model_output, sample=sample,
          **({} if noise is None else {"noise": noise}))


def sampling_fits(self, model, shape, class_labels, generator, guidance_scale):
    """DDPMSchedule.sample: shape four positive sizes (B, C, H, W); class_labels B integers;
    generator a NumPy Generator."""
    if (not isinstance(shape, tuple) or len(shape) != 4
            or any(isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1
                   for size in shape)):
        raise ValueError(f"shape must be a tuple of four positive sizes (B, C, H, W), got "
                         f"{shape!r}")
    labels_fit(class_labels, shape[0])
    generator_fits(generator)


def training_fits(self, model, x0, class_labels, generator):
    """DDPMSchedule.training_loss: x0 (B, C, H, W) floating point; class_labels B integers;
    generator a NumPy Generator."""
    array = floating("x0", x0)
    if array.ndim != 4:
        raise ValueError(f"x0 must have shape (B, C, H, W), got {array.shape}")
    labels_fit(class_labels, array.shape[0])
    generator_fits(generator)


def labels_fit(class_labels, count):
    labels = np.asarray(data_of(class_labels))
    if labels.dtype.kind not in "iu" or labels.shape != (count,):
        raise ValueError(f"class_labels must be {count} integers, one per image, got "
                         f"{labels.dtype} {labels.shape}")


def generator_fits(generator):
    if not isinstance(generator, np.random.Generator):
        raise TypeError(f"generator must be a NumPy Generator (np.random.default_rng(seed)), "
                        f"got {type(generator).__name__}")
