"""Chapter 6 of the exercises, in the README's reading order: images as tokens (ViT's patches and
back), DiT's adaLN-Zero block, one step of DDPM's sampling, Whisper's log-mel spectrogram, and T5's
relative position buckets; and beam search. Read chapter1.py first: the entries are written the
same way.

What the learner writes: patchify and unpatchify (tinyattn/functional/patches.py); DiTBlock.forward
(tinyattn/nn/dit.py), where the condition reaches the image through shifted, scaled and gated
norms; DDPMSchedule.step (tinyattn/diffusion.py), x_{t-1} from x_t and the predicted noise;
log_mel_spectrogram (tinyattn/audio.py), a waveform's frames, powers, mel bands and log;
relative_position_bucket (tinyattn/nn/t5.py); and beam_search (tinyattn/beam_search.py), whose
loop is the step: score, choose 2K, finish, continue, stop. Each is checked against tinyattn's
own code and against a reference written here another way: loops over the pixels, the adaLN-Zero
formula with NumPy norms, the paper's eq. 11 in place of eqs. 15 and 7, a frame's Fourier
transform as a sum, T5's bucket rule one position at a time, and every output of a small
vocabulary enumerated.
"""
import itertools
import math

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import audio, beam_search
from tinyattn.diffusion import DDPMSchedule
from tinyattn.nn import t5
from tinyattn.nn.dit import ADALN_EPS, DiTBlock
from tinyattn_tools.checklist.diffusion_transformer import LABELS, TINY, off_zero
from tinyattn_tools.checklist.t5 import SETTINGS as T5_SETTINGS
from tinyattn_tools.exercises.checks import float32, gradient_rows, leaves, same
from tinyattn_tools.exercises.exercise import Exercise, WrongVersion as Wrong


def upstream(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


# ------------------------------------------------------------------------------------------------
# Images as tokens

IMAGES = ((2, 3, 4, 6, 2), (1, 1, 6, 6, 3), (2, 2, 3, 3, 1), (1, 4, 8, 4, 4))   # B, C, H, W, p


def patches_by_loops(images, p):
    """patchify written pixel by pixel: token n = (row a, column b) of the patch grid, number
    (c, i, j) = images[:, c, a p + i, b p + j]."""
    B, C, H, W = images.shape
    tokens = np.zeros((B, (H // p) * (W // p), C * p * p))
    for a in range(H // p):
        for b in range(W // p):
            for c in range(C):
                for i in range(p):
                    for j in range(p):
                        tokens[:, a * (W // p) + b, (c * p + i) * p + j] = \
                            images[:, c, a * p + i, b * p + j]
    return tokens


def image_by_loops(tokens, p, C, H, W):
    """unpatchify written pixel by pixel: tokens' numbers in the (i, j, c) order."""
    image = np.zeros((tokens.shape[0], C, H, W))
    for a in range(H // p):
        for b in range(W // p):
            for i in range(p):
                for j in range(p):
                    for c in range(C):
                        image[:, c, a * p + i, b * p + j] = \
                            tokens[:, a * (W // p) + b, (i * p + j) * C + c]
    return image


def patches_of(images, p):
    return F.patchify(ta.tensor(images), p).data


def image_of(tokens, p, C, H, W):
    return F.unpatchify(ta.tensor(tokens), p, C, H, W).data


def images_and_tokens():
    """patchify and unpatchify against the loops above: each difference, 0 for tinyattn's."""
    random, found = np.random.default_rng(0), {}
    for B, C, H, W, p in IMAGES:
        images = random.standard_normal((B, C, H, W))
        tokens = random.standard_normal((B, (H // p) * (W // p), p * p * C))
        found[f"patchify {images.shape}, p {p}, minus the loops"] = (
            patches_of(images, p) - patches_by_loops(images, p))
        found[f"unpatchify {tokens.shape} to {(B, C, H, W)}, minus the loops"] = (
            image_of(tokens, p, C, H, W) - image_by_loops(tokens, p, C, H, W))
    return found


def round_trips():
    """unpatchify undoes patchify once each token is put in the (i, j, c) order (a move of its
    numbers); and a Linear on patchify's tokens is the Conv2d of stride p, written as a sum over
    each window."""
    random, found = np.random.default_rng(1), {}
    for B, C, H, W, p in IMAGES:
        images = random.standard_normal((B, C, H, W))
        tokens = patches_of(images, p)                                  # (B, P, C p p)
        reordered = tokens.reshape(B, -1, C, p, p).transpose(0, 1, 3, 4, 2).reshape(
            B, -1, p * p * C)                                           # (B, P, p p C)
        found[f"{images.shape}, p {p}: back to the image, minus it"] = (
            image_of(reordered, p, C, H, W) - images)
        kernel = random.standard_normal((5, C, p, p))
        windows = np.stack([np.stack([np.einsum("bcij,ecij->be", images[:, :, a:a + p, b:b + p],
                                                kernel) for b in range(0, W, p)], axis=1)
                            for a in range(0, H, p)], axis=1)           # (B, h, w, 5)
        found[f"{images.shape}, p {p}: a Linear on the tokens minus the Conv2d"] = (
            tokens @ kernel.reshape(5, -1).T - windows.reshape(B, -1, 5))
    return found


def patch_gradients():
    """Tensors through both: their outputs and the gradients of a random upstream gradient."""
    images, tokens = leaves((2, 3, 4, 6), (2, 6, 12), seed=2)
    patched, image = F.patchify(images, 2), F.unpatchify(tokens, 2, 3, 4, 6)
    patched.backward(upstream(patched.shape))
    image.backward(upstream(image.shape, 3))
    return {"patchify": patched, "unpatchify": image, "dL/dimages": images.grad,
            "dL/dtokens": tokens.grad}


PATCHIFY = Exercise(
    "patchify", 6, "ViT's patches: an image cut into tokens, and the tokens put back",
    "tinyattn.functional.patches", ("patchify", "unpatchify"),
    read_first="the top of tinyattn/functional/patches.py (the two orders of a token's numbers, "
               "and why a Linear on the tokens is the patch embedding's Conv2d), "
               "Tensor.reshape and Tensor.transpose in tinyattn/ops/shape.py, and section 3.1 "
               "of Dosovitskiy et al. 2020, \"An Image is Worth 16x16 Words\"",
    checks=(
        same("patchify and unpatchify vs loops over the pixels: 4 images, p 1 to 4, non-square",
             images_and_tokens, 0.0),
        same("unpatchify undoes patchify (tokens put in (i, j, c) order); a Linear on the tokens "
             "is the Conv2d of stride p", round_trips, 1e-12),
        same("on tensors: outputs, and the gradients of a random upstream gradient",
             patch_gradients, 0.0),
        gradient_rows("ViT, images to logits (random directions)").named(
            "ViT's gradients vs tinyattn's, on your patches: a row of the checklist"),
        float32(lambda images: F.unpatchify(F.patchify(images, 2), 2, 3, 4, 6), (2, 3, 4, 6)),
    ),
    hints=(
        "Re-read the top of patches.py: patchify's token for the patch at (row a, column b) of "
        "the grid holds images[:, c, a p + i, b p + j] in the order (c, i, j); unpatchify's "
        "tokens hold theirs in the order (i, j, c).",
        "Two moves each, no loop: reshape splits H into (h, p) and W into (w, p), so "
        "(B, C, h, p, w, p); a transpose brings the grid axes (h, w) first and the token's axes "
        "after, in the token's order; a reshape flattens each.",
        "patchify's transpose is (0, 2, 4, 1, 3, 5): B, h, w, then C, i, j. unpatchify starts "
        "from (B, h, w, p, p, C) and must bring C second and each p beside its h or w: "
        "(B, C, h, p, w, p).",
    ),
    wrong_versions=(
        Wrong("patchify's tokens flattened in (i, j, c) order, as unpatchify reads them",
              (("grid = grid.transpose(0, 2, 4, 1, 3, 5)                     # (B, h, w, C, p, p)",
                "grid = grid.transpose(0, 2, 4, 3, 5, 1)"),)),
        Wrong("the patch grid read column by column (w before h)",
              (("grid = grid.transpose(0, 2, 4, 1, 3, 5)                     # (B, h, w, C, p, p)",
                "grid = grid.transpose(0, 4, 2, 1, 3, 5)"),)),
        Wrong("a reshape without the transpose: rows of pixels, not patches",
              (("grid = grid.transpose(0, 2, 4, 1, 3, 5)                     # (B, h, w, C, p, p)",
                "grid = grid.transpose(0, 1, 2, 3, 4, 5)"),)),
        Wrong("unpatchify reading its tokens in patchify's (c, i, j) order",
              (("grid = tokens.reshape(B, h, w, p, p, C)                     # (B, h, w, p, p, C)",
                "grid = tokens.reshape(B, h, w, C, p, p)"),
               ("grid = grid.transpose(0, 5, 1, 3, 2, 4)                     # (B, C, h, p, w, p)",
                "grid = grid.transpose(0, 3, 1, 4, 2, 5)"))),
        Wrong("unpatchify with a patch's row and column swapped",
              (("grid = grid.transpose(0, 5, 1, 3, 2, 4)                     # (B, C, h, p, w, p)",
                "grid = grid.transpose(0, 5, 1, 4, 2, 3)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# adaLN-Zero

def a_block(seed=0, dtype=np.float64):
    ta.manual_seed(seed)
    return DiTBlock(TINY, dtype=dtype)


def block_inputs(seed=0, dtype=np.float64):
    random = np.random.default_rng(seed)
    return (ta.tensor(random.standard_normal((2, 4, TINY.hidden_size)).astype(dtype)),
            ta.tensor(random.standard_normal((2, 256)).astype(dtype)))


def norm(x, eps):
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt((centred * centred).mean(axis=-1, keepdims=True) + eps)


def by_the_formula(block, x, sinusoids):
    """The block written from the paper's formula: the modulation a Linear of SiLU(c), the norms
    in NumPy; the attention and the MLP are the block's own (they are not the exercise)."""
    c = block.condition(sinusoids, LABELS).data                         # (B, E)
    silu = c / (1.0 + np.exp(-c))
    modulation = silu @ block.modulation.weight.data.T + block.modulation.bias.data   # (B, 6E)
    shift1, scale1, gate1, shift2, scale2, gate2 = np.split(modulation[:, None, :], 6, axis=-1)
    h = norm(x, ADALN_EPS) * (1.0 + scale1) + shift1
    x = x + gate1 * block.attn(ta.tensor(h))[0].data
    h = norm(x, block.norm_eps) * (1.0 + scale2) + shift2
    return x + gate2 * block.mlp(ta.tensor(h)).data


def modulated_blocks():
    """Blocks drawn off zero (every parameter random): the output against the formula, each
    difference 0 up to rounding."""
    found = {}
    for seed in range(3):
        block = off_zero(a_block(seed))
        x, sinusoids = block_inputs(seed)
        found[f"block {seed}: yours minus the formula"] = (
            block(x, sinusoids, LABELS).data - by_the_formula(block, x.data, sinusoids))
    return found


def the_zero_start():
    """A new block (its modulation Linear at zero, so every gate 0) is the identity map, and
    still learns: after one backward, dL/dx is the upstream gradient itself, and the gates'
    rows of the modulation's weight have a gradient (the shifts' and scales' none yet)."""
    block = a_block(4)
    x, sinusoids = block_inputs(4)
    x.requires_grad = True
    out = block(x, sinusoids, LABELS)
    grad = upstream(out.shape)
    out.backward(grad)
    E = TINY.hidden_size
    weight_grad = block.modulation.weight.grad.reshape(6, E, -1)
    return {"output minus x": out.data - x.data, "dL/dx minus the upstream gradient":
            x.grad - grad, "the six parts' gradient norms (shift1, scale1, gate1, shift2, "
            "scale2, gate2)": np.sqrt((weight_grad ** 2).sum(axis=(1, 2)))}


def modulated_gradients():
    """Off zero: the output and the gradients of x and of the modulation's weight and bias."""
    block = off_zero(a_block(5))
    x, sinusoids = block_inputs(5)
    x.requires_grad = True
    out = block(x, sinusoids, LABELS)
    out.backward(upstream(out.shape))
    return {"output": out, "dL/dx": x.grad, "dL/dmodulation.weight": block.modulation.weight.grad,
            "dL/dmodulation.bias": block.modulation.bias.grad}


def block_in_dtype(x, sinusoids):
    """A block off zero in x's dtype."""
    return off_zero(a_block(6, x.dtype))(x, sinusoids, LABELS)


ADALN_ZERO = Exercise(
    "adaln_zero", 6, "DiT's adaLN-Zero block: the norms shifted and scaled by the condition, the "
    "branches gated", "tinyattn.nn.dit", ("DiTBlock.forward",),
    read_first="the top of tinyattn/nn/dit.py (adaLN-Zero: the six vectors, and why a zero gate "
               "makes a new block the identity yet lets it learn), ConditionEmbedding and "
               "zero_linear above the block, F.layer_norm, and section 3.2 of Peebles & Xie "
               "2023, \"Scalable Diffusion Models with Transformers\"",
    checks=(
        same("3 blocks off zero vs the adaLN-Zero formula written with NumPy norms",
             modulated_blocks, 1e-12),
        same("a new block is the identity (every gate 0), dL/dx passes through unchanged, and "
             "only the gates' rows of the modulation learn at first", the_zero_start, 1e-12),
        same("off zero: output and gradients of x and of the modulation's weight and bias vs "
             "tinyattn's", modulated_gradients),
        gradient_rows("DiTBlock, adaLN-Zero off zero (random directions)",
                      "DiT, 2 blocks, learned sigma (random directions)").named(
            "gradients vs finite differences: a block and a whole DiT (2 rows of the checklist)"),
        float32(block_in_dtype, (2, 4, TINY.hidden_size), (2, 256)),
    ),
    hints=(
        "Re-read the top of dit.py: shift1, scale1, gate1, shift2, scale2, gate2 = "
        "Linear(SiLU(c)), then x = x + gate1 * attn(norm(x) * (1 + scale1) + shift1) and the same "
        "with the MLP.",
        "c is self.condition(sinusoids, class_labels) (B, E); the modulation is (B, 6E): reshape "
        "it to (B, 6, 1, E) and take the six in that order, each (B, 1, E), so that it "
        "broadcasts over the patches.",
        "The norm has no weight or bias of its own (F.layer_norm without them): the condition "
        "is its gain and bias. The scale multiplies (1 + scale), so a zero modulation leaves the "
        "norm as it is; the gate multiplies the branch, not the sum x + branch. The attention "
        "returns (output, weights): take [0].",
    ),
    wrong_versions=(
        Wrong("shift and scale swapped",
              (("shift1, scale1, gate1, shift2, scale2, gate2 = (modulation",
                "scale1, shift1, gate1, scale2, shift2, gate2 = (modulation"),)),
        Wrong("`1 + scale` forgotten: the norm times scale",
              (("* (1.0 + scale1) + shift1", "* scale1 + shift1"),
               ("* (1.0 + scale2) + shift2", "* scale2 + shift2"))),
        Wrong("the gate on the residual sum, not on the branch: a zero gate erases x",
              (('x = self.hook("resid_mid", x + gate1 * self.attn(h)[0])',
                'x = self.hook("resid_mid", gate1 * (x + self.attn(h)[0]))'),
               ('return self.hook("resid_post", x + gate2 * self.mlp(h))',
                'return self.hook("resid_post", gate2 * (x + self.mlp(h)))'))),
        Wrong("no gates: plain adaLN, a new block is not the identity",
              (("x + gate1 * self.attn(h)[0]", "x + self.attn(h)[0]"),
               ("x + gate2 * self.mlp(h)", "x + self.mlp(h)"))),
        Wrong("the six vectors in the wrong order: gates first",
              (("shift1, scale1, gate1, shift2, scale2, gate2 = (modulation",
                "gate1, shift1, scale1, gate2, shift2, scale2 = (modulation"),)),
        Wrong("the modulation taken from c without the SiLU",
              (("self.modulation(F.silu(c))", "self.modulation(c)"),)),
        Wrong("the MLP's norm on the block's input, not on x after attention",
              (("h = F.layer_norm(x, eps=self.norm_eps)",
                "h = F.layer_norm(self.hook(\"resid_pre\", x) - gate1 * self.attn(F.layer_norm("
                "x, eps=ADALN_EPS) * (1.0 + scale1) + shift1)[0], eps=self.norm_eps)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# DDPM's step

def by_eq_11(schedule, epsilon, t, x_t, noise):
    """Ho et al.'s Algorithm 2, line 4 (eq. 11): x_{t-1} = 1/sqrt(alpha_t) (x_t - beta_t /
    sqrt(1 - abar_t) epsilon) + sigma_t z, sigma_t^2 the posterior's variance (z = 0 at t = 0)."""
    beta, abar = schedule.betas[t], schedule.alphas_cumprod[t]
    abar_prev = schedule.alphas_cumprod[t - 1] if t > 0 else 1.0
    sigma = math.sqrt(beta * (1.0 - abar_prev) / (1.0 - abar)) if t > 0 else 0.0
    mean = (x_t - beta / math.sqrt(1.0 - abar) * epsilon) / math.sqrt(1.0 - beta)
    return mean + sigma * (noise if t > 0 else 0.0)


STEPS = ((1000, 999), (1000, 500), (1000, 1), (1000, 0), (50, 49), (50, 0), (10, 3))


def steps_vs_eq_11():
    random, found = np.random.default_rng(0), {}
    for T, t in STEPS:
        schedule = DDPMSchedule(T)
        epsilon, x_t, noise = random.standard_normal((3, 2, 3, 4, 4))
        found[f"T {T}, t {t}: yours minus eq. 11"] = (
            schedule.step(epsilon, t, x_t, noise if t > 0 else None)
            - by_eq_11(schedule, epsilon, t, x_t, noise))
    return found


def step_kinds():
    """The result is of sample's kind: a Tensor for a Tensor sample (at t = 0 too, and with the
    model's output and the noise given as arrays); float32 in, float32 out (no upcast); the
    noise not read at t = 0."""
    random = np.random.default_rng(1)
    schedule = DDPMSchedule(100, beta_start=1e-3, beta_end=0.05)
    epsilon, x_t, noise = random.standard_normal((3, 2, 4))
    single = [array.astype(np.float32) for array in (epsilon, x_t, noise)]
    steps = {"Tensors": schedule.step(ta.tensor(epsilon), 7, ta.tensor(x_t), ta.tensor(noise)),
             "a Tensor sample, arrays else": schedule.step(epsilon, 7, ta.tensor(x_t), noise),
             "a Tensor sample at t = 0": schedule.step(ta.tensor(epsilon), 0, ta.tensor(x_t),
                                                       None)}
    found = {f"{case}: its kind": type(step).__name__ for case, step in steps.items()}
    found.update({f"{case}: the step": step for case, step in steps.items()})
    in_float32 = schedule.step(single[0], 40, single[1], single[2])
    return {**found, "float32's dtype": in_float32.dtype, "float32's step": in_float32,
            "t = 0, with noise given and without": [schedule.step(epsilon, 0, x_t, noise),
                                                    schedule.step(epsilon, 0, x_t, None)]}


def a_sampling_loop():
    """Ten steps of ancestral sampling from noise, with a fixed "model" (eps = 0.3 x): each x_t."""
    random = np.random.default_rng(2)
    schedule = DDPMSchedule(10, beta_start=0.01, beta_end=0.3)
    x, found = random.standard_normal((2, 5)), {}
    for t in reversed(range(10)):
        x = schedule.step(0.3 * x, t, x, random.standard_normal(x.shape) if t > 0 else None)
        found[f"x_{t}"] = x
    return found


DDPM_STEP = Exercise(
    "ddpm_step", 6, "one step of DDPM's ancestral sampling: x_{t-1} from x_t and the predicted "
    "noise", "tinyattn.diffusion", ("DDPMSchedule.step",),
    read_first="the top of tinyattn/diffusion.py (the forward process, the posterior q(x_{t-1} | "
               "x_t, x_0), and why sampling removes the predicted noise), DDPMSchedule.__init__ "
               "and add_noise, and eqs. 4, 6, 7 and 15 of Ho et al. 2020, \"Denoising Diffusion "
               "Probabilistic Models\"",
    checks=(
        same("the step vs eq. 11 (Algorithm 2): t at T - 1, the middle, 1 and 0, three schedules",
             steps_vs_eq_11, 1e-12),
        same("a Tensor sample gives a Tensor (at t = 0 too); float32 stays float32; at t = 0 no "
             "noise is added",
             step_kinds, 1e-6),
        same("ten steps of sampling from noise vs tinyattn's", a_sampling_loop, 1e-12),
    ),
    hints=(
        "Re-read the step's docstring and the top of diffusion.py: x0_hat = (x_t - sqrt(1 - "
        "abar_t) eps) / sqrt(abar_t) (eq. 15), then the posterior's mean (eq. 7), then add "
        "sigma_t times the noise.",
        "alpha_t = abar_t / abar_{t-1} and beta_t = 1 - alpha_t, with abar_{-1} = 1 (at t = 0 "
        "nothing came before). Take them as Python floats, so float32 arrays stay float32.",
        "The mean: sqrt(abar_{t-1}) beta_t / (1 - abar_t) x0_hat + sqrt(alpha_t) (1 - "
        "abar_{t-1}) / (1 - abar_t) x_t. The variance is the posterior's, beta_t (1 - "
        "abar_{t-1}) / (1 - abar_t), and the noise is multiplied by its square root; at t = 0 "
        "return the mean alone, of sample's kind (kind_of).",
    ),
    wrong_versions=(
        Wrong("the noise scaled by the variance, not by its square root",
              (("mean + math.sqrt(variance) * data_of(noise)", "mean + variance * data_of(noise)"),
               )),
        Wrong("sigma_t^2 = beta_t, not the posterior's variance",
              (("variance = beta_t * (1.0 - abar_prev) / (1.0 - abar_t)", "variance = beta_t"),)),
        Wrong("alpha_t not square-rooted in the mean's x_t term",
              (("+ math.sqrt(alpha_t) * (1.0 - abar_prev)", "+ alpha_t * (1.0 - abar_prev)"),)),
        Wrong("x0_hat with sqrt(1 - abar_t) divided, not multiplied",
              (("(x_t - math.sqrt(1.0 - abar_t) * epsilon)",
                "(x_t - epsilon / math.sqrt(1.0 - abar_t))"),)),
        Wrong("abar_{t-1} at t = 0 taken from the table's end (index -1)",
              (("float(self.alphas_cumprod[t - 1]) if t > 0 else 1.0",
                "float(self.alphas_cumprod[t - 1])"),)),
        Wrong("the result always an array: a Tensor's kind lost",
              (("return kind_of(sample, mean + math.sqrt(variance) * data_of(noise))",
                "return mean + math.sqrt(variance) * data_of(noise)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# The log-mel spectrogram

def a_waveform(seconds, seed=0):
    """`seconds` of a tone at 440 Hz rising in loudness, a chirp and a little noise, 16 kHz."""
    time = np.arange(int(seconds * audio.SAMPLING_RATE)) / audio.SAMPLING_RATE
    random = np.random.default_rng(seed)
    return (np.linspace(0.1, 0.8, time.size) * np.sin(2 * math.pi * 440 * time)
            + 0.3 * np.sin(2 * math.pi * (200 + 1500 * time) * time)
            + 0.01 * random.standard_normal(time.size))


def spectrogram_by_sums(waveform, n_mels, chunk_length):
    """The steps written another way: each frame's power as |sum_n x_n w_n e^{-2 pi i f n / N}|^2
    (a matrix of the Fourier sums), frames taken one by one."""
    samples = chunk_length * audio.SAMPLING_RATE
    signal = np.zeros(samples)
    signal[:min(samples, len(waveform))] = waveform[:samples]
    padded = np.pad(signal, audio.N_FFT // 2, mode="reflect")
    n = np.arange(audio.N_FFT)
    hann = np.sin(math.pi * n / audio.N_FFT) ** 2                   # 0.5 - 0.5 cos, the same
    fourier = np.exp(-2j * math.pi * np.outer(np.arange(audio.N_FFT // 2 + 1), n) / audio.N_FFT)
    power = np.stack([np.abs(fourier @ (padded[start:start + audio.N_FFT] * hann)) ** 2
                      for start in range(0, samples, audio.HOP_LENGTH)])   # (frames, 201)
    mel = np.log10(np.maximum(power @ audio.mel_filters(n_mels), 1e-10)).T
    return (np.maximum(mel, mel.max() - 8.0) + 4.0) / 4.0


SPECTROGRAMS = (     # (seconds of waveform, n_mels, chunk_length): padded, cut, 128 bands
    (0.7, 80, 1), (2.5, 80, 2), (1.3, 128, 2), (0.02, 16, 1))


def spectrograms_vs_sums():
    found = {}
    for seconds, n_mels, chunk in SPECTROGRAMS:
        waveform = a_waveform(seconds)
        found[f"{seconds} s, {n_mels} bands, chunks of {chunk} s: yours minus the sums"] = (
            audio.log_mel_spectrogram(waveform, n_mels, chunk)
            - spectrogram_by_sums(waveform, n_mels, chunk))
    return found


def spectrograms():
    """Whisper's own sizes (80 bands, 30 s: 3000 frames) and the others: float32, the numbers;
    silence (all at the floor); a loud click (the 80 dB floor binds); a float32 waveform."""
    click = np.zeros(8000)
    click[4000] = 1e3
    found = {"30 s, 80 bands": audio.log_mel_spectrogram(a_waveform(3.0, 1)),
             "silence": audio.log_mel_spectrogram(np.zeros(100), 8, 1),
             "a click": audio.log_mel_spectrogram(click, 40, 1),
             "a float32 waveform": audio.log_mel_spectrogram(
                 a_waveform(0.5, 2).astype(np.float32), 80, 1)}
    found["dtypes and shapes"] = [f"{value.dtype} {value.shape}" for value in found.values()]
    return found


LOG_MEL = Exercise(
    "log_mel", 6, "Whisper's log-mel spectrogram: frames, their power spectrum, mel bands, log",
    "tinyattn.audio", ("log_mel_spectrogram",),
    read_first="the top of tinyattn/audio.py (the four steps, and the sizes Whisper fixes), "
               "mel_filters below the function, np.fft.rfft and "
               "np.lib.stride_tricks.sliding_window_view, and section 2.2 of Radford et al. "
               "2022, \"Robust Speech Recognition via Large-Scale Weak Supervision\"",
    checks=(
        same("vs the Fourier sums frame by frame: padded, cut, 16 to 128 bands",
             spectrograms_vs_sums, 1e-6),
        same("Whisper's 30 s of 80 bands, silence, a click (the 80 dB floor), a float32 "
             "waveform: numbers, dtype float32 and shape vs tinyattn's", spectrograms, 1e-6),
    ),
    hints=(
        "Re-read the top of audio.py: pad or cut to chunk_length * 16000 samples; frames of 400 "
        "every 160 (centred, the ends mirrored); the power |rfft(frame * hann)|^2; the mel "
        "filters; log10, floored 8 below the maximum, then (x + 4) / 4.",
        "np.pad(audio, 200, mode=\"reflect\") centres the frames; "
        "sliding_window_view(padded, 400)[::160] cuts them, one more than Whisper keeps: drop "
        "the last frame's spectrum. The Hann window is periodic: cos(2 pi n / 400), n < 400.",
        "The power is the magnitude squared, not the magnitude. Clamp the band powers at 1e-10 "
        "before log10 (silence has none), and the floor is the largest value of the whole "
        "spectrogram minus 8. Compute in float64; return float32, (n_mels, frames).",
    ),
    equivalent_mutants=(
        ('log_mel_spectrogram: spectrum = np.fft.rfft(frames * hann, axis=-1)             '
         '     # (1 + N / hop, n_fft/2 + 1) :: -1 -> 1',
         'the frames are 2-d (frames, n_fft), so their axis 1 is their last axis, -1'),
    ),
    wrong_versions=(
        Wrong("the magnitude spectrum, not the power",
              (("power = np.abs(spectrum[:-1]) ** 2", "power = np.abs(spectrum[:-1])"),)),
        Wrong("the natural log, not log10",
              (("np.log10(np.maximum(mel, 1e-10))", "np.log(np.maximum(mel, 1e-10))"),)),
        Wrong("no clamp before the log: silence is -inf",
              (("np.log10(np.maximum(mel, 1e-10))", "np.log10(mel)"),)),
        Wrong("no 80 dB floor below the loudest band",
              (("log_mel = np.maximum(log_mel, log_mel.max() - 8.0)", "log_mel = log_mel"),)),
        Wrong("the frames not centred: no reflect padding",
              (('padded = np.pad(audio, N_FFT // 2, mode="reflect")',
                'padded = np.pad(audio, (0, N_FFT), mode="reflect")'),)),
        Wrong("a symmetric Hann window (divided by n_fft - 1), not a periodic one",
              (("np.arange(N_FFT) / N_FFT)", "np.arange(N_FFT) / (N_FFT - 1))"),)),
        Wrong("the waveform not cut to the chunk: a longer one is padded into it wrong",
              (("kept = np.asarray(waveform, dtype=np.float64)[:samples]",
                "kept = np.asarray(waveform, dtype=np.float64)[-samples:]"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# T5's relative position buckets

def bucket_by_rule(relative_position, bidirectional, num_buckets, max_distance):
    """One position's bucket, as the Mesh TensorFlow rule reads, in Python numbers (float32's
    logarithm, as the rule takes it)."""
    bucket = 0
    if bidirectional:
        num_buckets //= 2
        bucket = num_buckets if relative_position > 0 else 0
        distance = abs(relative_position)
    else:
        distance = max(-relative_position, 0)
    exact = num_buckets // 2
    if distance < exact:
        return bucket + distance
    log = np.float32(np.log(np.float32(distance) / np.float32(exact))) / np.float32(
        math.log(max_distance / exact))
    return bucket + min(exact + int(log * np.float32(num_buckets - exact)), num_buckets - 1)


BUCKETINGS = ((True, 32, 128), (False, 32, 128), (True, 8, 20), (False, 6, 9), (True, 64, 256),
              (False, 2, 4))


def buckets_vs_rule():
    """Every relative position in [-300, 300], each rule's settings: yours minus the rule's."""
    positions = np.arange(-300, 301)
    return {f"bidirectional {b}, {n} buckets, max distance {d}: yours minus the rule's":
            t5.relative_position_bucket(positions, b, n, d)
            - np.array([bucket_by_rule(int(r), b, n, d) for r in positions])
            for b, n, d in BUCKETINGS}


def bucket_tables():
    """A (T, S) table as RelativePositionBias builds it (key - query), its dtype; the range and
    order properties: within [0, n), never decreasing with the distance on each side."""
    queries, keys = np.arange(5)[:, None], np.arange(7)[None, :]
    found = {"a (5, 7) table, bidirectional": t5.relative_position_bucket(keys - queries, True,
                                                                           32, 128),
             "a (5, 7) table, one-sided": t5.relative_position_bucket(keys - queries, False,
                                                                       32, 128)}
    found["dtypes"] = [str(table.dtype) for table in found.values()]
    for b, n, d in BUCKETINGS:
        before = t5.relative_position_bucket(-np.arange(400), b, n, d)
        after = t5.relative_position_bucket(np.arange(400), b, n, d)
        found[f"{b}, {n}, {d}: in range, non-decreasing before and after"] = [
            bool((before >= 0).all() and (after < n).all()),
            bool((np.diff(before) >= 0).all() and (np.diff(after) >= 0).all())]
    return found


def t5_bias():
    """RelativePositionBias's table for a cached decoder step (start 3) and the encoder's."""
    ta.manual_seed(0)
    decoder = t5.RelativePositionBias(8, 12, 2, bidirectional=False)
    encoder = t5.RelativePositionBias(8, 12, 2, bidirectional=True)
    return {"decoder, 2 queries from 3, 5 keys": decoder(2, 5, start=3),
            "encoder, 6 by 6": encoder(6, 6)}


RELATIVE_POSITION_BUCKET = Exercise(
    "relative_position_bucket", 6, "T5's relative position buckets: exact near, logarithmic far",
    "tinyattn.nn.t5", ("relative_position_bucket",),
    read_first="the top of tinyattn/nn/t5.py (why a bias per bucket instead of position "
               "embeddings), RelativePositionBias below the function, and section 2.1 of Raffel "
               "et al. 2020, \"Exploring the Limits of Transfer Learning with a Unified "
               "Text-to-Text Transformer\"",
    checks=(
        same("every relative position in [-300, 300] vs the rule one position at a time, six "
             "settings (both kinds, 2 to 64 buckets)", buckets_vs_rule, 0),
        same("tables of key - query, int64; in [0, n) and never decreasing with the distance",
             bucket_tables, 0),
        same("RelativePositionBias for the encoder and a cached decoder step", t5_bias, 0.0),
        gradient_rows("T5Attention, relative bias, causal",
                      "T5, ReLU, tied and scaled head, padding").named(
            "T5's gradients on your buckets vs tinyattn's (2 rows of the checklist)"),
    ),
    hints=(
        "Re-read the docstring: in a half of n buckets, distances below n/2 get their own "
        "bucket; a farther distance d gets n/2 + floor(log(d / (n/2)) / log(max_distance / "
        "(n/2)) * (n - n/2)), capped at n - 1.",
        "Bidirectional: halve num_buckets first; keys after the query (relative_position > 0) "
        "add the half to their bucket, and the distance is |relative_position|. One-sided: the "
        "distance is -relative_position, and a key after the query counts as 0.",
        "Compute both cases over the whole array and choose with np.where(distance < exact, "
        "distance, far); take the logarithm of max(distance, exact) / exact so that it is never "
        "log(0), in float32, and cast to int64 (truncation is the floor: the log is >= 0).",
    ),
    equivalent_mutants=(
        ('relative_position_bucket: buckets += (relative_position > 0) * num_buckets      '
         '  # keys after the query: upper half :: buckets += (relative_position > 0) * '
         'num_buckets -> buckets = (relative_position > 0) * num_buckets',
         'buckets is all zeros just before: adding to it and setting it are the same'),
        ('relative_position_bucket: return buckets + np.where(distance < exact, distance, '
         'far) :: distance < exact -> distance <= exact',
         'at distance n/2 the logarithmic rule gives n/2 + floor(log(1) ...) = n/2, the '
         'exact bucket: both sides of the comparison choose the same number'),
    ),
    wrong_versions=(
        Wrong("off by one: the cap at n, not n - 1",
              (("far = np.minimum(far, num_buckets - 1)", "far = np.minimum(far, num_buckets)"),)),
        Wrong("the bidirectional halves swapped: keys before the query in the upper half",
              (("(relative_position > 0) * num_buckets", "(relative_position < 0) * num_buckets"),
               )),
        Wrong("one-sided with the sign turned: keys after the query counted",
              (("distance = np.maximum(-relative_position, 0)",
                "distance = np.maximum(relative_position, 0)"),)),
        Wrong("no cap: far distances past the last bucket",
              (("far = np.minimum(far, num_buckets - 1)", "far = far"),)),
        Wrong("num_buckets not halved for the two directions",
              (("        num_buckets //= 2\n", ""),
               ("(relative_position > 0) * num_buckets", "(relative_position > 0) * (num_buckets "
                                                          "// 2)"))),
        Wrong("the logarithmic buckets over all n, not the n - n/2 left",
              (("* np.float32(num_buckets - exact)", "* np.float32(num_buckets)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# Beam search

START, EOS = 0, 1


class HistoryCache:
    """A toy decoder's cache: which input each row decodes, and how often each token came in
    that row so far (as a self-attention cache holds its keys): the next token's logits depend
    on it, so a beam whose cache rows were not reordered gets another beam's logits."""

    def __init__(self, inputs, vocab):
        self.inputs = np.asarray(inputs)
        self.counts = np.zeros((len(inputs), vocab))
        self.reorders = []

    @property
    def batch_size(self):
        return len(self.inputs)

    def repeated(self, n):
        self.inputs = np.repeat(self.inputs, n)
        self.counts = np.repeat(self.counts, n, axis=0)

    def reorder(self, rows):
        self.reorders.append(np.array(rows))
        self.counts = self.counts[rows]


class ToyDecoder:
    """logits(input, last token, counts of the tokens so far) = table[input, last] + counts @
    mixing, float32: a random Markov chain per input, bent by each row's history; eos_bias
    makes ending likelier."""

    def __init__(self, inputs, vocab, seed, eos_bias=0.0):
        random = np.random.default_rng(seed)
        self.table = 2.0 * random.standard_normal((inputs, vocab, vocab))
        self.table[:, :, EOS] += eos_bias
        self.mixing = 0.7 * random.standard_normal((vocab, vocab))

    def logits(self, which, last, counts):                              # (rows, V)
        return (self.table[which, last] + counts @ self.mixing).astype(np.float32)

    def __call__(self, ids, cache):
        cache.counts[np.arange(len(ids)), ids[:, 0]] += 1
        return ta.tensor(self.logits(cache.inputs, ids[:, 0], cache.counts)[:, None, :])


SEARCHES = (     # inputs, vocab, K, new tokens, alpha, seed, eos_bias
    (2, 6, 2, 5, 1.0, 0, 0.0), (3, 5, 3, 4, 0.0, 1, 0.0), (2, 7, 4, 6, 2.0, 2, 0.0),
    (1, 4, 2, 3, -1.0, 3, 0.0), (3, 6, 3, 5, 0.5, 4, 0.0), (2, 5, 2, 5, 0.0, 0, 0.0),
    (2, 5, 2, 5, 1.0, 2, 0.0), (2, 5, 3, 5, 1.0, 0, 1.5), (2, 5, 2, 7, 2.0, 0, 1.5),
    (2, 5, 2, 4, 0.0, 1, 0.0), (2, 5, 2, 4, 0.0, 0, 1.5))


class EvenDecoder(ToyDecoder):
    """After any token, eos and token 2 equally likely (the others almost never): a beam and a
    hypothesis tie exactly, and the stop must not go on at a tie (transformers' `>`)."""

    def logits(self, which, last, counts):
        logits = np.full((len(last), self.mixing.shape[0]), -20.0, dtype=np.float32)
        logits[:, [EOS, 2]] = 0.0
        return logits


def searches():
    """Beam search on toy decoders whose cache matters: the tokens, and the cache's reorders."""
    found = {}
    for inputs, vocab, K, new, alpha, seed, eos_bias in SEARCHES:
        cache = HistoryCache(np.arange(inputs), vocab)
        case = (f"{inputs} inputs, vocab {vocab}, {K} beams, {new} tokens, alpha {alpha:g}, "
                f"seed {seed}, eos bias {eos_bias:g}")
        found[f"{case}: tokens"] = beam_search.beam_search(
            ToyDecoder(inputs, vocab, seed, eos_bias), cache, new, K, alpha, START, EOS, 5)
        found[f"{case}: cache rows kept"] = np.array(cache.reorders)
    for alpha in (0.0, 2.0):
        found[f"eos and a token equally likely, 1 beam, alpha {alpha:g}"] = (
            beam_search.beam_search(EvenDecoder(1, 4, 0), HistoryCache([0], 4), 4, 1, alpha,
                                    START, EOS, 5))
    return found


def best_by_enumeration(decoder, which, vocab, new, alpha):
    """The output of the best score / length^alpha among every output of at most `new` tokens
    (ending at eos or at the limit), each token's log-probability from the decoder."""
    best_score, best_tokens = -math.inf, None
    for tokens in itertools.product(range(vocab), repeat=new):
        length = next((i + 1 for i, token in enumerate(tokens) if token == EOS), new)
        counts, last, score = np.zeros(vocab), START, 0.0
        for token in tokens[:length]:
            counts[last] += 1
            logits = decoder.logits(which, last, counts[None])[0].astype(np.float64)
            score += logits[token] - math.log(np.exp(logits - logits.max()).sum()) - logits.max()
            last = token
        if score / length ** alpha > best_score + 1e-9:
            best_score, best_tokens = score / length ** alpha, (START, *tokens[:length])
    return best_tokens


def enough_beams():
    """With as many beams as outputs (vocab 3, 3 tokens: 27), beam search keeps every output
    and must find the best one: its tokens (up to their first eos) against the enumeration's,
    for each input and length penalty."""
    found = {}
    for alpha in (0.0, 1.0, 2.0):
        decoder = ToyDecoder(2, 3, 0)
        tokens = beam_search.beam_search(decoder, HistoryCache([0, 1], 3), 3, 27, alpha, START,
                                         EOS, 2)
        for which in (0, 1):
            row = tokens[which].tolist()
            ended = row[:row.index(EOS) + 1] if EOS in row[1:] else row
            found[f"alpha {alpha:g}, input {which}: yours, the enumeration's"] = [
                ended, list(best_by_enumeration(decoder, which, 3, 3, alpha))]
    return found


def t5_beams():
    """A small random T5's generate with 3 beams, and 2 with a length penalty of 2."""
    ta.manual_seed(0)
    model = t5.T5(T5_SETTINGS)
    ids = np.array([[3, 7, 2, 9, 1], [4, 4, 8, 1, 0]])
    return {"3 beams": model.generate(ids, 6, num_beams=3),
            "2 beams, alpha 2": model.generate(ids, 5, num_beams=2, length_penalty=2.0)}


BEAM_SEARCH_STEP = Exercise(
    "beam_search_step", 6, "beam search's step: score every continuation, choose 2K, finish "
    "hypotheses by score / length^alpha, reorder the cache, stop",
    "tinyattn.beam_search", ("beam_search",),
    read_first="the top of tinyattn/beam_search.py (the five steps, and the decisions it takes "
               "as transformers' generate takes them: the length, the stop, -1e9, the "
               "padding), greedy_search, log_softmax and best above the function, and T5Cache's "
               "repeated and reorder in tinyattn/nn/t5.py",
    checks=(
        same("with as many beams as outputs, the best output of an enumeration of all 27, "
             "alpha 0, 1 and 2", enough_beams, 0),
        same("toy decoders whose logits depend on the cache: tokens and cache reorders vs "
             "tinyattn's, 1 to 3 inputs, 1 to 4 beams, alpha -1 to 2, 13 searches, a tie",
             searches, 0),
        same("a small T5's generate with 3 beams, and with 2 and a length penalty",
             t5_beams, 0),
    ),
    hints=(
        "Re-read the top of beam_search.py: each step scores K x V continuations, keeps the 2K "
        "best, lets those among the first K that end compete with the kept hypotheses by "
        "score / t^alpha, and continues with the K best that did not end.",
        "Keep per input: beams (B, K, length) of tokens, their scores (B, K) float32 (all but "
        "the first at NEVER, so the first step expands one beam), and the K kept hypotheses "
        "with their penalised scores, lengths and whether each is real. `best` and "
        "np.take_along_axis do every choice; a candidate's index in K V is parent * V + token.",
        "After choosing the K running beams, reorder the cache with their parents' rows "
        "(input * K + parent). An input is done when its best beam's score / t^alpha is not "
        "above its worst real hypothesis; stop when all are, or every candidate ended. Return "
        "the best hypothesis of each input, cut to the longest's length.",
    ),
    equivalent_mutants=(
        ('beam_search: kept_lengths = np.zeros((B, K), dtype=np.int64)                    '
         ' # tokens generated :: np.zeros -> np.ones',
         'the K slots of hypotheses all fill with real ones by the last step (every '
         "candidate ends at the limit), and only the best slot's length is read"),
        ('beam_search: kept_filled = np.zeros((B, K), dtype=bool)                         '
         ' # a real hypothesis? :: np.zeros -> np.ones',
         "an empty slot's score is NEVER, so the minimum over the slots is NEVER whether "
         'or not the empty ones count as filled: `worst` is the same'),
        ('beam_search: if not undecided.any() or ends.all(): :: not undecided.any() or '
         'ends.all() -> not undecided.any() and ends.all()',
         'an input that is done takes no hypothesis more (its candidates get NEVER), so '
         'running on to the limit changes no kept hypothesis, only the time taken'),
        ('beam_search: log_p = log_softmax(logits.astype(np.float32)).reshape(B, K, -1)   '
         '        # (B, K, V) :: 1 -> 2',
         "NumPy's reshape takes any negative size, -2 as well as -1, for 'the rest'"),
        ('beam_search: [kept_filled, ends & first_half], axis=1), order, axis=1)   # (B, '
         'K) :: ends & first_half -> ends | first_half',
         'a candidate that does not end is given NEVER, so it fills a slot only when no '
         'real hypothesis is there, where the minimum is NEVER either way (see '
         'kept_filled)'),
        ('beam_search: cache.reorder(rows.reshape(-1))                                 # '
         '(B K,) :: 1 -> 2',
         "NumPy's reshape takes any negative size, -2 as well as -1, for 'the rest'"),
        ('beam_search: [kept_lengths, np.full((B, 2 * K), t)], axis=1), order, axis=1)    '
         '     # (B, K) :: 2 -> 3',
         'the K extra columns sit after the 3K that `order` (indices below 3K) picks '
         'from: never chosen'),
    ),
    wrong_versions=(
        Wrong("the length penalty on the length with the start token (t + 1)",
              (("penalised = top_scores / float(t) ** length_penalty",
                "penalised = top_scores / float(t + 1) ** length_penalty"),)),
        Wrong("beams not reordered: the cache keeps the old beams' rows",
              (("        cache.reorder(rows.reshape(-1))                                 "
                "# (B K,)\n",
                ""),)),
        Wrong("every beam live at the first step: K copies of the same beam",
              (("    scores[:, 1:] = NEVER", "    scores[:, 1:] = 0.0"),)),
        Wrong("the beams' scores not carried: each step's log-probabilities alone",
              (("candidates = (log_p + scores[:, :, None]).reshape(B, K * V)",
                "candidates = log_p.reshape(B, K * V)"),)),
        Wrong("K candidates, not 2K: fewer than K beams remain when some end",
              (("top = best(candidates, 2 * K)", "top = best(candidates, K)"),
               ("first_half = np.arange(2 * K) < K", "first_half = np.arange(K) < K"),
               ("np.full((B, 2 * K), t)", "np.full((B, K), t)"))),
        Wrong("ending candidates outside the K best finish too",
              (("~(ends & first_half)", "~ends"), ("[kept_filled, ends & first_half]",
                                                   "[kept_filled, ends]"))),
        Wrong("the stop compares the best beam with the best hypothesis, not the worst",
              (("kept_scores.min(axis=1, keepdims=True)", "kept_scores.max(axis=1, keepdims=True)"),
               )),
    ),
)


EXERCISES = (PATCHIFY, ADALN_ZERO, DDPM_STEP, LOG_MEL, RELATIVE_POSITION_BUCKET, BEAM_SEARCH_STEP)
