"""The DDPM schedule (tinyattn/diffusion.py): alphas_cumprod, add_noise and step equal to
diffusers' DDPMScheduler (the numbers stored in tests/fixtures/dit-tiny by make_dit.py, float32
and float64; and live, when diffusers is installed); sampling with a model that knows the noise
gives back the image; classifier-free guidance with scale 1 is no guidance; bad arguments
refused at the door."""
import pathlib

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.diffusion import DDPMSchedule
from tinyattn.nn.dit import DiT, DiTSettings
from tests.references import arrays

FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "dit-tiny"


@pytest.fixture(scope="module")
def reference():
    return ta.load_safetensors(FIXTURE / "reference.safetensors")


def tolerance(expected, dtype):
    """API.md: float32 within 1e-4 * max(1, max |value|); float64 within 1e-9 relative."""
    return (1e-4 if dtype == "float32" else 1e-9) * max(1.0, np.abs(expected).max())


def close(out, expected, dtype):
    return out.dtype == dtype and np.abs(out - expected).max() <= tolerance(expected, dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_alphas_cumprod_and_add_noise_are_diffusers(reference, dtype):
    schedule = DDPMSchedule()
    expected = reference[f"alphas_cumprod_{dtype}"]
    assert schedule.alphas_cumprod.shape == (1000,)
    assert schedule.alphas_cumprod[0] == 1 - 1e-4 and 4.0e-5 < schedule.alphas_cumprod[-1] < 4.1e-5
    assert np.abs(schedule.alphas_cumprod - expected).max() <= tolerance(expected, dtype)
    noisy = schedule.add_noise(reference["latents"].astype(dtype),
                               reference["noise"].astype(dtype), reference["timesteps"])
    assert close(noisy, reference[f"noisy_{dtype}"], dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_step_is_diffusers(reference, dtype):
    """At t = 999, 17 and 0 (no noise), with the noise diffusers' step drew from its
    generator."""
    schedule = DDPMSchedule()
    model_output = reference["latents"].astype(dtype)
    sample = reference[f"noisy_{dtype}"]
    for i, t in enumerate(reference["step_t"]):
        noise = reference[f"step_noise_{dtype}"][i]
        assert close(schedule.step(model_output, int(t), sample, noise),
                     reference[f"prev_{dtype}"][i], dtype), t


def test_step_is_diffusers_live_at_every_kind_of_step():
    torch = pytest.importorskip("torch", reason="diffusers' reference needs torch (the "
                                "reference extra installs it)")
    diffusers = pytest.importorskip("diffusers", reason="the DDPM reference (the reference "
                                    "extra installs diffusers)")
    settings = dict(num_train_timesteps=50, beta_start=1e-3, beta_end=0.05)
    theirs = diffusers.DDPMScheduler(**settings, variance_type="fixed_small", clip_sample=False)
    ours = DDPMSchedule(**settings)
    model_output, sample = (a.astype(np.float32) for a in arrays((2, 3, 4, 4), (2, 3, 4, 4)))
    for t in (49, 30, 1, 0):
        generator = torch.Generator().manual_seed(t)
        noise = torch.randn(model_output.shape, generator=generator, dtype=torch.float32)
        expected = theirs.step(torch.tensor(model_output), t, torch.tensor(sample),
                               generator=torch.Generator().manual_seed(t)).prev_sample.numpy()
        assert close(ours.step(model_output, t, sample, noise.numpy()), expected, "float32"), t


def test_no_noise_at_t_0_and_tensors_give_tensors():
    schedule = DDPMSchedule()
    model_output, sample = (ta.tensor(a.astype(np.float32)) for a in arrays((2, 4), (2, 4)))
    plain = schedule.step(model_output, 0, sample, None)
    noisy = schedule.step(model_output, 0, sample, ta.tensor(np.ones((2, 4), np.float32)))
    assert isinstance(plain, ta.Tensor) and plain.dtype == np.float32
    np.testing.assert_array_equal(plain.data, noisy.data)
    x_t = schedule.add_noise(sample, model_output, np.array([3, 999]))
    assert isinstance(x_t, ta.Tensor) and x_t.dtype == np.float32


class Oracle:
    """A 'model' that knows the data is one image: its noise is exactly what separates x_t
    from sqrt(abar_t) image, epsilon = (x_t - sqrt(abar_t) image) / sqrt(1 - abar_t)."""

    dtype = np.float64

    def __init__(self, schedule, image):
        self.schedule, self.image = schedule, image

    def __call__(self, x_t, timesteps, class_labels):
        abar = self.schedule.alphas_cumprod[timesteps][:, None, None, None]
        return ta.tensor((x_t.data - np.sqrt(abar) * self.image) / np.sqrt(1.0 - abar))


def test_sampling_with_the_true_noise_gives_back_the_image():
    """With the noise known, eq. 15's x0_hat is the image at every step, and the last step
    (t = 0, 1 - abar_0 = beta_0) returns it."""
    schedule = DDPMSchedule(num_train_timesteps=20, beta_start=1e-3, beta_end=0.2)
    image = arrays((1, 2, 3, 3), seed=4)[0]
    drawn = schedule.sample(Oracle(schedule, image), (3, 2, 3, 3), np.zeros(3, dtype=int),
                            np.random.default_rng(0))
    np.testing.assert_allclose(drawn, np.broadcast_to(image, (3, 2, 3, 3)), rtol=0, atol=1e-12)


def test_guidance_of_scale_1_is_no_guidance_and_a_seed_draws_the_same():
    """epsilon_0 + 1 (epsilon_y - epsilon_0) = epsilon_y; DiT's learned-sigma channels are left
    out of the noise."""
    settings = DiTSettings(sample_size=4, patch_size=2, in_channels=1, out_channels=2,
                           num_layers=1, num_heads=2, head_dim=2, num_classes=3)
    model = DiT(settings)
    for parameter in model.parameters():
        parameter.data[...] = 0.3 * np.random.default_rng(1).standard_normal(parameter.shape)
    schedule = DDPMSchedule(num_train_timesteps=6)
    labels = np.array([0, 2])

    def drawn(scale):
        return schedule.sample(model, (2, 1, 4, 4), labels, np.random.default_rng(5), scale)
    plain = drawn(None)
    assert plain.shape == (2, 1, 4, 4) and plain.dtype == np.float64
    np.testing.assert_array_equal(plain, drawn(None))
    np.testing.assert_allclose(drawn(1.0), plain, rtol=0, atol=1e-12)
    assert np.abs(drawn(4.0) - plain).max() > 1e-3


def test_the_training_loss_is_eq_14():
    """The MSE between the noise drawn and the model's first C channels at x_t, with t and the
    noise drawn from the generator in that order; gradients reach the model."""
    settings = DiTSettings(sample_size=4, patch_size=2, in_channels=1, out_channels=2,
                           num_layers=1, num_heads=2, head_dim=2, num_classes=3)
    model = DiT(settings, dtype=np.float32)
    for parameter in model.parameters():
        parameter.data[...] = 0.3 * np.random.default_rng(1).standard_normal(parameter.shape)
    schedule = DDPMSchedule()
    x0 = arrays((3, 1, 4, 4))[0].astype(np.float32)
    labels = np.array([0, 3, 1])
    loss = schedule.training_loss(model, x0, labels, np.random.default_rng(7))
    loss.backward()
    generator = np.random.default_rng(7)
    t = generator.integers(0, 1000, 3)
    noise = generator.standard_normal(x0.shape).astype(np.float32)
    with ta.no_grad():
        out = model(ta.tensor(schedule.add_noise(x0, noise, t)), t, labels).data[:, :1]
    assert loss.dtype == np.float32 and loss.shape == ()
    np.testing.assert_allclose(loss.item(), ((out - noise) ** 2).mean(), rtol=1e-6)
    assert np.abs(model.blocks[0].modulation.weight.grad).max() > 0


@pytest.mark.parametrize("call, error, message", [
    (lambda s, a: s.step(a, 1000, a, a), ValueError, r"t must lie in \[0, 1000\)"),
    (lambda s, a: s.step(a, -1, a, a), ValueError, r"t must lie in \[0, 1000\)"),
    (lambda s, a: s.step(a, 1.0, a, a), TypeError, "t must be an int"),
    (lambda s, a: s.step(a, 5, a, None), ValueError, "noise is needed at t = 5"),
    (lambda s, a: s.step(a, 5, a[:1], a), ValueError,
     r"model_output and sample must have one shape and dtype.*\(2, 3\) and .*\(1, 3\)"),
    (lambda s, a: s.step(a, 5, a, a.astype(np.float32)), ValueError,
     "model_output and noise must have one shape and dtype, got float64"),
    (lambda s, a: s.step(a.tolist(), 5, a, a), TypeError,
     "model_output must be a NumPy array or a Tensor, got list"),
    (lambda s, a: s.add_noise(a, a, np.array([0, 1000])), ValueError,
     r"timesteps must lie in \[0, 1000\)"),
    (lambda s, a: s.add_noise(a, a, np.array([0])), ValueError,
     r"timesteps must be one per row of x0 \(2, 3\)"),
    (lambda s, a: s.add_noise(a, a, np.array([0.0, 1.0])), TypeError,
     "timesteps must be integers"),
    (lambda s, a: s.training_loss(None, a, np.array([0, 1]), np.random.default_rng(0)),
     ValueError, r"x0 must have shape \(B, C, H, W\), got \(2, 3\)"),
])
def test_bad_arguments_are_refused(call, error, message):
    with pytest.raises(error, match=f"DDPMSchedule.(step|add_noise|training_loss): {message}"):
        call(DDPMSchedule(), np.zeros((2, 3)))


@pytest.mark.parametrize("kwargs, message", [
    (dict(beta_start=0.0), "beta_start must lie strictly between 0 and 1"),
    (dict(beta_end=1.0), "beta_end must lie strictly between 0 and 1"),
    (dict(num_train_timesteps=0), "num_train_timesteps must be at least 1"),
])
def test_bad_schedules_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=f"DDPMSchedule: {message}"):
        DDPMSchedule(**kwargs)


@pytest.mark.parametrize("shape, labels, generator, message", [
    ((2, 1, 4), [0, 1], np.random.default_rng(0), "shape must be a tuple of four"),
    ((2, 1, 4, 4), [0], np.random.default_rng(0), "class_labels must be 2 integers"),
    ((2, 1, 4, 4), [0, 1], 0, "generator must be a NumPy Generator"),
])
def test_bad_sampling_arguments_are_refused(shape, labels, generator, message):
    with pytest.raises((TypeError, ValueError), match=f"DDPMSchedule.sample: {message}"):
        DDPMSchedule(num_train_timesteps=2).sample(None, shape, np.array(labels), generator)
