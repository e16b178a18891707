"""Demo 23: a diffusion transformer draws digits.

What it shows: chapter 6's `nn.DiT` trained with DDPM (`tinyattn.diffusion.DDPMSchedule`, Ho et
al. 2020) on demo 22's digits (scikit-learn's 8 x 8), told the class of the digit to draw, then
sampled: a grid of samples per class, and how good they are, measured two ways:

- recognised: demo 22's ViT, trained here again on the real digits, names the intended class of
  what share of the samples (with and without classifier-free guidance, Ho & Salimans 2022);
- not memorised: each sample's distance to its nearest training image, next to the same distance
  for the held-out real images. A model that copied its training images would draw samples much
  nearer to them than new digits of the same hand are.

Then the other way models condition on a prompt. DiT's blocks take the timestep and the class
through adaLN-Zero: the condition scales, shifts and gates every block's normalized input. A
text-to-image model attends to its text instead: cross-attention from the image's patches
(queries) to a sequence of condition tokens (keys and values), as Stable Diffusion's U-Net and
PixArt-alpha's DiT attend to a text encoder's tokens. Here the condition tokens are two, the
timestep's embedding and the class's, and the block, written below, is pre-LN self-attention,
then cross-attention to the two tokens, then the feed-forward, each added back. Its feed-forward
is widened until it has DiT's parameters, as nearly as the width allows (both counts printed).
The two train side by side, the same steps on the same batches, the same timesteps and noise,
stepping in turn so that their step times are measured under the same load: which learns faster
(held-out loss, the same noise each time), which samples better (the same two measures), what each
costs per step. (The DiT paper, section 3.1, found adaLN-Zero better than cross-attention to the
timestep and class tokens at a lower cost; this run is one small model on one small data set.)

The recipe (from the trial that chose it): DiT of 3 blocks of 4 heads of 16 (E = 64) over
patches of 2 x 2 pixels, 1 channel; pixels scaled to [-1, 1]; 200 noise steps, betas from 1e-4
to 0.1; AdamW, lr 2e-3, batches of 64; 10% of the labels replaced by the null class, which
guidance needs; guidance scale 3.0. Float32, one seed.

    python demos/23_dit_digits.py [output folder] [--quick]

The pictures are `dit_digits_samples.png` (a row of samples per class, from each model, with
guidance) and `dit_digits_training.png` (the two models' held-out loss) in the output folder
(when matplotlib is installed). `--quick` trains each model 5 steps on a schedule of 20 noise
steps and draws one sample per class (what the tests run; its numbers mean nothing). The full
run's time, as `dev/regenerate.py` measured it, ends the demo's entry on docs/demos.md.

The data is scikit-learn's, shipped inside the package: `pip install scikit-learn` (or this
repository's `demos` extra). Without it the demo says so and stops.
"""
import importlib
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.diffusion import DDPMSchedule
from tinyattn.nn.dit import patch_positions, timestep_sinusoids, zero_linear

vit_digits = importlib.import_module("22_vit_digits")

# %% [markdown]
# The settings: the DiT, the schedule, training and sampling in the full and the quick run, and
# the entry on docs/demos.md, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
CLASSES = 10
SETTINGS = nn.DiTSettings(sample_size=8, patch_size=2, in_channels=1, out_channels=1,
                          num_layers=3, num_heads=4, head_dim=16, num_classes=CLASSES)
NOISE_STEPS, BETA_END = 200, 0.1
BATCH, LEARNING_RATE = 64, 2e-3
NULL_SHARE = 0.1                    # labels replaced by the null class (CLASSES) in training
GUIDANCE = 3.0
SEED = 0                            # models, batches, timesteps and noise
HELD_OUT_SEED = 1000                # the held-out loss's timesteps and noise, the same each time
SAMPLE_SEED = 2000
FULL = dict(steps=700, eval_every=100, per_class=6, noise_steps=NOISE_STEPS,
            classifier=dict(steps=600, eval_every=100, print_every=100))
QUICK = dict(steps=5, eval_every=5, per_class=1, noise_steps=20,
             classifier=dict(steps=20, eval_every=20, print_every=20))

PAGE_ENTRY = """\
23. [`23_dit_digits.py`](../demos/23_dit_digits.py) — **a DiT draws digits.** Chapter 6's DiT
    (3 blocks, E = 64, {parameters_adaln:,} parameters) trained {steps} steps with DDPM on demo 22's
    digits, class-conditioned, then sampled, {per_class} per class: demo 22's ViT (held-out
    accuracy {classifier_accuracy:.1%} on real digits) names the intended class of
    {recognised_adaln_guided:.0%} of the samples with guidance {guidance}, {recognised_adaln:.0%}
    without. Median distance to the nearest training image: {distance_adaln_guided:.2f} for the
    samples, {distance_held_out:.2f} for held-out real digits (pixels in [-1, 1]; the nearest
    sample {closest_adaln_guided:.2f}). Against cross-attention from the patches to [timestep,
    class] tokens at equal parameters ({parameters_cross:,}): held-out loss {loss_adaln:.3f}
    (adaLN-Zero) and {loss_cross:.3f} (cross-attention) after {steps} steps, {loss_adaln_early:.3f}
    and {loss_cross_early:.3f} after {early_step}; recognised {recognised_adaln_guided:.0%} and
    {recognised_cross_guided:.0%} with guidance; a step of cross-attention costs
    {step_ratio_cross:.2f}x adaLN-Zero's.

    ![samples, a row per class, from each model](pictures/dit_digits_samples.png)
    ![held-out loss of the two models](pictures/dit_digits_training.png)"""

PAGE_ENTRY_WITHOUT_RESULTS = """\
23. [`23_dit_digits.py`](../demos/23_dit_digits.py) — **a DiT draws digits.** Chapter 6's DiT
    trained with DDPM on scikit-learn's 8 x 8 digits, class-conditioned, then sampled; the
    samples recognised by demo 22's ViT and their distance to the training images; adaLN-Zero
    against cross-attention to condition tokens at equal parameters. It needs scikit-learn
    (`pip install scikit-learn`), which the machine that wrote this list did not have."""

can_run_in_full = vit_digits.can_run_in_full


# %% [markdown]
# The other way to condition: cross-attention. A block attends to its patches, then from its
# patches to the condition tokens, then applies its feed-forward; the model around it is DiT's
# (patches, fixed 2-d positions, the timestep's sinusoids through a small MLP, a class table with
# the null class), but the condition becomes two tokens instead of six vectors per block.

# %%
class CrossAttentionBlock(nn.Module):
    """x + attn(ln(x)), then x + cross(ln(x), condition), then x + mlp(ln(x)): pre-LN, the
    condition tokens the keys and values of the cross-attention."""

    def __init__(self, embed_dim, num_heads, hidden_dim, dtype=None):
        self.ln1 = nn.LayerNorm(embed_dim, dtype=dtype)
        self.attn = nn.MultiHeadAttention(embed_dim, num_heads, dtype=dtype)
        self.ln2 = nn.LayerNorm(embed_dim, dtype=dtype)
        self.cross = nn.MultiHeadAttention(embed_dim, num_heads, dtype=dtype)
        self.ln3 = nn.LayerNorm(embed_dim, dtype=dtype)
        self.mlp = nn.FeedForward(embed_dim, hidden_dim, dtype=dtype)

    def forward(self, x, condition):
        x = x + self.attn(self.ln1(x))[0]                                   # (B, P, E)
        # queries from the P patches, keys and values from the 2 condition tokens
        x = x + self.cross(self.ln2(x), condition)[0]                       # (B, P, E)
        return x + self.mlp(self.ln3(x))                                    # (B, P, E)


class CrossAttentionDiT(nn.Module):
    """model(x_t, timesteps, class_labels) -> the predicted noise, as `nn.DiT`, its blocks
    conditioned by cross-attention to [timestep token, class token] (B, 2, E). The output Linear
    starts at zero, as DiT's."""

    def __init__(self, settings, hidden_dim, dtype=None):
        self.settings = s = settings
        E, p = s.hidden_size, s.patch_size
        self.patch_embed = nn.Linear(s.in_channels * p * p, E, dtype=dtype)
        self.time_in = nn.Linear(256, E, dtype=dtype)
        self.time_out = nn.Linear(E, E, dtype=dtype)
        self.classes = nn.Embedding(s.num_classes + 1, E, dtype=dtype)
        self.blocks = [CrossAttentionBlock(E, s.num_heads, hidden_dim, dtype=dtype)
                       for _ in range(s.num_layers)]
        self.ln = nn.LayerNorm(E, dtype=dtype)
        self.out = zero_linear(E, p * p * s.out_channels, dtype)

    def forward(self, latents, timesteps, class_labels):
        s = self.settings
        B, C, H, W = latents.shape
        p, E = s.patch_size, s.hidden_size
        x = self.patch_embed(F.patchify(latents, p))                          # (B, P, E)
        x = x + patch_positions(E, H // p, W // p, x.dtype)                   # (B, P, E)
        sinusoids = ta.tensor(timestep_sinusoids(timesteps, x.dtype))         # (B, 256)
        time_token = self.time_out(F.silu(self.time_in(sinusoids)))           # (B, E)
        condition = ta.stack([time_token, self.classes(class_labels)], axis=1)    # (B, 2, E)
        for block in self.blocks:
            x = block(x, condition)                                           # (B, P, E)
        x = self.out(self.ln(x))                                              # (B, P, p p C)
        return F.unpatchify(x, p, s.out_channels, H, W)                       # (B, C, H, W)


def parameter_count(model):
    return sum(p.data.size for p in model.parameters())


def matched_hidden_dim(target):
    """The feed-forward width at which the cross-attention model's parameters come nearest
    `target`: they grow by (2 E + 1) L with each unit of width."""
    s = SETTINGS
    one_wide = parameter_count(CrossAttentionDiT(s, 1, dtype=np.float32))
    return 1 + round((target - one_wide) / ((2 * s.hidden_size + 1) * s.num_layers))


# %% [markdown]
# Training side by side: the two models step in turn (the order alternating), on the same batch,
# with the same timesteps and noise (a generator of the same seed each), and each step timed.

# %%
def noised_labels(labels, random):
    """The labels with NULL_SHARE of them, drawn at random, replaced by the null class."""
    return np.where(random.random(len(labels)) < NULL_SHARE, CLASSES, labels)


def held_out_loss(model, schedule, images, labels):
    """The denoising loss on the held-out digits, with the same timesteps and noise each time."""
    with ta.no_grad():
        return schedule.training_loss(model, images, labels,
                                      np.random.default_rng(HELD_OUT_SEED)).item()


def train_side_by_side(models, schedule, data, settings):
    """Train every model of {name: model} on the same batches; {name: curves}: the held-out loss
    at each checkpoint and the processor seconds of each step."""
    train_images, train_labels, held_images, held_labels = data
    optimizers = {name: ta.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
                  for name, model in models.items()}
    noise = {name: np.random.default_rng(SEED) for name in models}
    random = np.random.default_rng(SEED)
    curves = {name: {"checkpoints": [], "held_out_loss": [], "step_seconds": []}
              for name in models}
    start, progress = time.perf_counter(), demo_tools.Progress()
    for step in range(settings["steps"] + 1):
        if step % settings["eval_every"] == 0:
            for name, model in models.items():
                curves[name]["checkpoints"].append(step)
                curves[name]["held_out_loss"].append(
                    held_out_loss(model, schedule, held_images, held_labels))
            print(f"  step {step:>5}/{settings['steps']}   held-out loss "
                  + "   ".join(f"{name} {curves[name]['held_out_loss'][-1]:.4f}"
                                 for name in models)
                  + f"   {time.perf_counter() - start:5.1f} s", flush=True)
        if step == settings["steps"]:
            break
        rows = random.integers(0, len(train_images), BATCH)
        images, labels = train_images[rows], noised_labels(train_labels[rows], random)
        order = list(models) if step % 2 == 0 else list(models)[::-1]
        for name in order:
            began = time.process_time()
            loss = schedule.training_loss(models[name], images, labels, noise[name])
            optimizers[name].zero_grad()
            loss.backward()
            optimizers[name].step()
            curves[name]["step_seconds"].append(time.process_time() - began)
        progress(f"  step {step + 1:>5}/{settings['steps']}")
    return curves


# %% [markdown]
# Sampling and the two measures: the ViT's verdict on each sample, and each sample's distance to
# its nearest training image.

# %%
def samples_of(model, schedule, per_class, guidance_scale):
    """per_class samples of every class, class by class: (images (N, 1, 8, 8), labels (N,))."""
    labels = np.repeat(np.arange(CLASSES), per_class)
    images = schedule.sample(model, (len(labels), 1, 8, 8), labels,
                             np.random.default_rng(SAMPLE_SEED), guidance_scale=guidance_scale)
    return images, labels


def recognised(classifier, images, labels):
    """The share of images the classifier names as their label."""
    with ta.no_grad():
        logits = classifier(ta.tensor(images.astype(np.float32))).data
    return float((logits.argmax(axis=-1) == labels).mean())


def nearest_distances(images, references):
    """(N,): each image's Euclidean distance to its nearest reference image."""
    a = images.reshape(len(images), -1).astype(np.float64)
    b = references.reshape(len(references), -1).astype(np.float64)
    squared = (a ** 2).sum(axis=1)[:, None] - 2 * a @ b.T + (b ** 2).sum(axis=1)
    return np.sqrt(np.maximum(squared, 0.0).min(axis=1))


# %% [markdown]
# The pictures: a row of samples per class from each model, and the held-out loss as they train.

# %%
def mosaic(images, per_class):
    """One row of per_class samples per class, each 8 x 8 image framed by a pixel of background
    (-1) so that neighbours do not touch: (CLASSES 10, per_class 10)."""
    framed = np.pad(np.clip(images[:, 0], -1, 1), ((0, 0), (1, 1), (1, 1)), constant_values=-1)
    cells = framed.reshape(CLASSES, per_class, 10, 10)
    return cells.transpose(0, 2, 1, 3).reshape(CLASSES * 10, per_class * 10)


def plot_samples(grids, per_class, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(1, len(grids), figsize=(4.2 * len(grids), 4.4))
    for ax, (name, images) in zip(np.atleast_1d(axes), grids.items()):
        ax.imshow(mosaic(images, per_class), cmap="gray_r", vmin=-1, vmax=1)
        ax.set_yticks(np.arange(CLASSES) * 10 + 4.5, [str(c) for c in range(CLASSES)])
        ax.set_xticks([])
        ax.set_title(f"{name}, guidance {GUIDANCE}", fontsize=10)
    figure.tight_layout()
    return demo_tools.save_figure(figure, path, dpi=120)


def plot_training(curves, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(6, 4))
    for name, curve in curves.items():
        axes.plot(curve["checkpoints"], curve["held_out_loss"], marker="o", markersize=3,
                  label=name)
    axes.set(yscale="log", xlabel="training step", ylabel="held-out denoising loss (MSE)",
             title="adaLN-Zero against cross-attention, equal parameters")
    return demo_tools.save_chart(figure, path, axes)


# %% [markdown]
# `main` trains the classifier and the two diffusion models, samples, measures, draws and
# returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    data = vit_digits.digits()
    if data is None:
        print(vit_digits.missing_data_note())
        return {}
    settings = QUICK if args.quick else FULL
    train_images, _, held_images, _ = data
    print("Demo 22's ViT, the judge of the samples:")
    classifier, classifier_curves = vit_digits.trained_vit(data, settings["classifier"])

    schedule = DDPMSchedule(settings["noise_steps"], beta_end=BETA_END)
    ta.manual_seed(SEED)
    adaln = nn.DiT(SETTINGS, dtype=np.float32)
    hidden_dim = matched_hidden_dim(parameter_count(adaln))
    ta.manual_seed(SEED)
    cross = CrossAttentionDiT(SETTINGS, hidden_dim, dtype=np.float32)
    models = {"adaLN-Zero": adaln, "cross-attention": cross}
    counts = {name: parameter_count(model) for name, model in models.items()}
    print(f"\nParameters: adaLN-Zero (nn.DiT) {counts['adaLN-Zero']:,}; cross-attention "
          f"{counts['cross-attention']:,} (its feed-forward {hidden_dim} wide, DiT's "
          f"{4 * SETTINGS.hidden_size}).\nTraining both {settings['steps']} steps of {BATCH}, "
          f"AdamW (lr {LEARNING_RATE}), {NULL_SHARE:.0%} null labels, "
          f"{settings['noise_steps']} noise steps:")
    curves = train_side_by_side(models, schedule, data, settings)

    held_distance = nearest_distances(held_images, train_images)
    results, grids = {}, {}
    for name, model in models.items():
        for guidance in (None, GUIDANCE):
            began = time.perf_counter()
            images, labels = samples_of(model, schedule, settings["per_class"], guidance)
            distance = nearest_distances(images, train_images)
            results[name, guidance] = (recognised(classifier, images, labels),
                                       float(np.median(distance)), float(distance.min()))
            print(f"  sampled {len(images)} from {name}, guidance {guidance}: "
                  f"{time.perf_counter() - began:.1f} s", flush=True)
            if guidance is not None:
                grids[name] = images
    step_seconds = {name: float(np.median(curve["step_seconds"]))
                    for name, curve in curves.items()}
    demo_tools.print_table(
        ["model", "held-out loss", "guidance", "recognised", "median nearest", "nearest",
         "step (ms)"],
        [[name, f"{curves[name]['held_out_loss'][-1]:.4f}", str(guidance),
          f"{results[name, guidance][0]:.1%}", f"{results[name, guidance][1]:.3f}",
          f"{results[name, guidance][2]:.3f}", f"{1000 * step_seconds[name]:.1f}"]
         for name in models for guidance in (None, GUIDANCE)],
        title=f"{settings['per_class']} samples per class; recognised by the ViT "
              f"({classifier_curves['held_out_accuracy'][-1]:.1%} on held-out real digits); "
              "distance to the nearest training image:")
    print(f"Held-out real digits' distance to their nearest training image: median "
          f"{np.median(held_distance):.3f}, smallest {held_distance.min():.3f}.")
    step_ratio = step_seconds["cross-attention"] / step_seconds["adaLN-Zero"]
    print(f"A step of cross-attention costs {step_ratio:.2f}x one of adaLN-Zero (median "
          "processor time per step).")
    demo_tools.print_pictures(
        plot_samples(grids, settings["per_class"], args.output / "dit_digits_samples.png"),
        plot_training(curves, args.output / "dit_digits_training.png"))

    early = len(curves["adaLN-Zero"]["checkpoints"]) // 3
    numbers = {"steps": settings["steps"], "per_class": settings["per_class"],
               "guidance": GUIDANCE, "cross_hidden_dim": hidden_dim,
               "classifier_accuracy": classifier_curves["held_out_accuracy"][-1],
               "distance_held_out": float(np.median(held_distance)),
               "closest_held_out": float(held_distance.min()),
               "early_step": curves["adaLN-Zero"]["checkpoints"][early],
               "step_ratio_cross": step_ratio}
    for key, name in (("adaln", "adaLN-Zero"), ("cross", "cross-attention")):
        numbers[f"parameters_{key}"] = counts[name]
        numbers[f"loss_{key}"] = curves[name]["held_out_loss"][-1]
        numbers[f"loss_{key}_early"] = curves[name]["held_out_loss"][early]
        numbers[f"losses_{key}"] = curves[name]["held_out_loss"]
        numbers[f"step_ms_{key}"] = 1000 * step_seconds[name]
        for suffix, guidance in (("", None), ("_guided", GUIDANCE)):
            share, median, closest = results[name, guidance]
            numbers[f"recognised_{key}{suffix}"] = share
            numbers[f"distance_{key}{suffix}"] = median
            numbers[f"closest_{key}{suffix}"] = closest
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
