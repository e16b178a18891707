"""Chapter 6. Diffusion (Ho, Jain & Abbeel 2020, "Denoising Diffusion Probabilistic Models"):
learn to remove noise, then draw an image by removing noise from pure noise, step by step.

The forward process adds Gaussian noise over T steps, with a variance beta_t at step t (betas
linear from beta_start to beta_end: 1e-4 to 0.02 over T = 1000, the paper's):

    q(x_t | x_{t-1}) = N(sqrt(1 - beta_t) x_{t-1}, beta_t I)                            (2)

Noise added to noise is noise, so any step is reached from x_0 in one jump (eq. 4): with
alpha_t = 1 - beta_t and abar_t = alpha_1 ... alpha_t (`alphas_cumprod`),

    q(x_t | x_0) = N(sqrt(abar_t) x_0, (1 - abar_t) I),
    x_t = sqrt(abar_t) x_0 + sqrt(1 - abar_t) epsilon,  epsilon ~ N(0, I)          `add_noise`

abar_t falls from ~1 (t = 0: the image) to ~4e-5 (t = 999: nearly pure noise).

The epsilon objective (eq. 14, "L_simple"). A network epsilon_theta(x_t, t) learns to say which
noise was added: draw x_0 from the data, t uniformly, epsilon from N(0, I), and minimise

    L = || epsilon - epsilon_theta(sqrt(abar_t) x_0 + sqrt(1 - abar_t) epsilon, t) ||^2

the mean squared error between the model's output and the noise (`training_loss`, the
paper's Algorithm 1; DiT, nn/dit.py, is such a network, told a class label too).

Ancestral sampling (Algorithm 2) runs the process backwards. From x_t and the predicted noise,
the image it implies is (eq. 15)

    x0_hat = (x_t - sqrt(1 - abar_t) epsilon_theta) / sqrt(abar_t)

and the posterior q(x_{t-1} | x_t, x_0) is Gaussian (eq. 6, 7) with mean and variance

    mu_t = sqrt(abar_{t-1}) beta_t / (1 - abar_t) x0_hat
           + sqrt(alpha_t) (1 - abar_{t-1}) / (1 - abar_t) x_t
    sigma_t^2 = beta_t (1 - abar_{t-1}) / (1 - abar_t)          (the "fixed_small" variance)

so x_{t-1} = mu_t + sigma_t z with z ~ N(0, I), and at t = 0 no noise: x_0 = mu_0 (`step`).
(Substituting x0_hat gives the paper's mean, eq. 11, and its Algorithm 2 line, x_{t-1} =
(x_t - beta_t / sqrt(1 - abar_t) epsilon_theta) / sqrt(alpha_t) + sigma_t z: the same numbers;
the form above is diffusers', which the numbers are tested against: DDPMScheduler(
variance_type="fixed_small", clip_sample=False).) abar_{-1} is 1, and beta_t is computed as
1 - abar_t / abar_{t-1}, as diffusers does.

Classifier-free guidance (Ho & Salimans 2022), in `sample`: the network trained sometimes with
the null class ("no label") predicts epsilon_y for a class y and epsilon_0 for none; sampling
with epsilon_0 + s (epsilon_y - epsilon_0), s > 1, pushes the image further towards its class.

The schedule's numbers are float64 NumPy arrays; `add_noise` and `step` take NumPy arrays or
Tensors, and give the same kind, in the dtype of their x0 or sample (no graph: a schedule
applies fixed numbers to data).
"""
import math

import numpy as np

from tinyattn import diffusion_checks as checks
from tinyattn.arguments import at_least, between, door, optional
from tinyattn.arrays import data_of
from tinyattn.engine import Tensor, no_grad, tensor


class DDPMSchedule:
    """Ho et al. 2020's noise schedule: betas linear from beta_start to beta_end over
    num_train_timesteps steps (the top of this file). `.betas`, `.alphas`, `.alphas_cumprod`
    (T,) float64; `.add_noise(x0, noise, timesteps)`, the forward process in one jump;
    `.step(model_output, t, sample, noise)`, one step of ancestral sampling."""

    @door(checks.betas_fit, num_train_timesteps=at_least(1), beta_start=between(0, 1),
          beta_end=between(0, 1))
    def __init__(self, num_train_timesteps=1000, beta_start=1e-4, beta_end=0.02):
        self.num_train_timesteps = num_train_timesteps
        self.betas = np.linspace(beta_start, beta_end, num_train_timesteps)   # (T,)
        self.alphas = 1.0 - self.betas                                        # (T,)
        self.alphas_cumprod = np.cumprod(self.alphas)                         # (T,) abar_t

    @door(checks.noise_fits)
    def add_noise(self, x0, noise, timesteps):
        """x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) noise (eq. 4), for x0 and noise (B, ...) of
        one shape and timesteps (B,) integers in [0, T), each row at its own t."""
        x0_data = data_of(x0)
        abar = self.alphas_cumprod[np.asarray(data_of(timesteps))].astype(x0_data.dtype)
        abar = abar.reshape(-1, *[1] * (x0_data.ndim - 1))                   # (B, 1, ..., 1)
        x_t = np.sqrt(abar) * x0_data + np.sqrt(1.0 - abar) * data_of(noise)
        return kind_of(x0, x_t)

    @door(checks.step_fits)
    def step(self, model_output, t, sample, noise):
        """x_{t-1} from x_t = `sample` and the noise epsilon_theta = `model_output` the model
        predicted at step t (an int in [0, T)): mu_t + sigma_t noise, with `noise` drawn by the
        caller from N(0, I) (not used at t = 0, where it may be None). Arrays or Tensors of one
        shape and dtype; the result of sample's kind."""
        abar_t = float(self.alphas_cumprod[t])
        abar_prev = float(self.alphas_cumprod[t - 1]) if t > 0 else 1.0
        alpha_t = abar_t / abar_prev
        beta_t = 1.0 - alpha_t
        x_t, epsilon = data_of(sample), data_of(model_output)
        # eq. 15: the image the predicted noise implies
        x0_hat = (x_t - math.sqrt(1.0 - abar_t) * epsilon) / math.sqrt(abar_t)
        # eq. 7: the posterior's mean ...
        mean = (math.sqrt(abar_prev) * beta_t / (1.0 - abar_t) * x0_hat
                + math.sqrt(alpha_t) * (1.0 - abar_prev) / (1.0 - abar_t) * x_t)
        if t == 0:
            return kind_of(sample, mean)
        # ... and its variance, beta_t (1 - abar_{t-1}) / (1 - abar_t)
        variance = beta_t * (1.0 - abar_prev) / (1.0 - abar_t)
        return kind_of(sample, mean + math.sqrt(variance) * data_of(noise))

    @door(checks.training_fits)
    def training_loss(self, model, x0, class_labels, generator):
        """Algorithm 1's loss on a batch x0 (B, C, H, W), L_simple (eq. 14): t drawn uniformly
        from [0, T) and epsilon from N(0, I) for each image (from the NumPy `generator`), x_t
        by `add_noise`, and the mean squared error between epsilon and the model's first C
        output channels at (x_t, t, class_labels), a Tensor to call backward on. (To train for
        classifier-free guidance, pass some images with the null class, as DiT drops 10% of
        its labels.)"""
        x0 = data_of(x0)
        B, C = x0.shape[:2]
        t = generator.integers(0, self.num_train_timesteps, B)                # (B,)
        epsilon = generator.standard_normal(x0.shape).astype(x0.dtype)        # (B, C, H, W)
        x_t = self.add_noise(x0, epsilon, t)                                  # eq. 4
        predicted = model(tensor(x_t), t, class_labels)[:, :C]                # (B, C, H, W)
        return ((predicted - epsilon) ** 2).mean()

    @door(checks.sampling_fits, guidance_scale=optional(between(0)))
    def sample(self, model, shape, class_labels, generator, guidance_scale=None):
        """Draw images of `shape` (B, C, H, W) from `model` (a DiT: model(x_t, timesteps,
        class_labels) -> (B, C or 2 C, H, W), whose first C channels are the predicted noise)
        by ancestral sampling (Algorithm 2): x_T from N(0, I), then `step` at t = T - 1 ... 0,
        each normal draw from the NumPy `generator` (np.random.default_rng(seed)), in the
        model's dtype. With `guidance_scale` s, classifier-free guidance: each step runs the
        batch twice, with the labels and with the null class, and uses
        epsilon_0 + s (epsilon_y - epsilon_0). Returns x_0, a NumPy array."""
        dtype = model.dtype
        B, C = shape[0], shape[1]
        labels = np.asarray(data_of(class_labels))
        if guidance_scale is not None:
            null = np.full(B, model.settings.num_classes)
            labels = np.concatenate([labels, null])                          # (2 B,)
        x = generator.standard_normal(shape).astype(dtype)                   # x_T
        for t in range(self.num_train_timesteps - 1, -1, -1):
            batch = x if guidance_scale is None else np.concatenate([x, x])
            with no_grad():
                output = model(tensor(batch), np.full(len(batch), t), labels).data
            epsilon = output[:, :C]                                          # (B or 2 B, C, H, W)
            if guidance_scale is not None:
                labelled, unlabelled = epsilon[:B], epsilon[B:]
                epsilon = unlabelled + float(guidance_scale) * (labelled - unlabelled)
            noise = generator.standard_normal(shape).astype(dtype) if t > 0 else None
            x = self.step(epsilon, t, x, noise)
        return x


def kind_of(like, array):
    """`array` as a Tensor if `like` is one, else as it is."""
    return Tensor(array) if isinstance(like, Tensor) else array
