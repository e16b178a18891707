"""Classifying images with ViT-B/16's shape: the time of chapter 6's ViT forward pass (nn/vit.py)
against Hugging Face transformers' ViTForImageClassification, when transformers and PyTorch are
installed.

The model is built from VIT_B_16 (google/vit-base-patch16-224's config: 224 x 224 images in 196
patches of 16 x 16, width 768, 12 blocks of 12 heads, feed-forward 3072, exact GELU, 1000 labels:
86,567,656 parameters) with random float32 weights: no download, and speed does not depend on what
the weights are. `save_pretrained` writes them and transformers reads them back, so both run the
same model: before anything is timed, their logits for the batch must agree within API.md's
float32 tolerance. A batch of 8 random images, forward only, without a graph (`ta.no_grad()`,
`torch.no_grad()`), transformers with its default attention (PyTorch's
scaled_dot_product_attention). Timed in processor seconds, interleaved: a round runs each once;
the ratio is the median of per-round ratios.
"""
import statistics
import tempfile
import time

import numpy as np

import tinyattn as ta
from tinyattn.nn.vit import VIT_B_16, ViT
from tinyattn_tools.bench.gpt2_generation import transformers_found
from tinyattn_tools.bench.open_generation import said
from tinyattn_tools.bench.timing import interleaved, median_ratio

BATCH = 8
VIT_ROUNDS = 5                  # at most: a round is two forward passes of 8 images through 86M


def vit_model(seed=0, **sizes):
    """A ViT of VIT_B_16's sizes (or with `sizes` changed), random float32 weights, eval mode."""
    ta.manual_seed(seed)
    return ViT(**{**VIT_B_16, **sizes}, dtype=np.float32).eval()


def transformers_model(model, folder):
    """The same model in transformers: written by save_pretrained into `folder`, read back."""
    import torch
    import transformers
    transformers.utils.logging.disable_progress_bar()
    model.save_pretrained(folder)
    return transformers.ViTForImageClassification.from_pretrained(
        folder, dtype=torch.float32).eval()


def tinyattn_forward(model):
    def run(images):
        with ta.no_grad():
            return model(images).data                               # (B, num_labels)
    return run


def transformers_forward(torch, theirs):
    def run(images):
        with torch.no_grad():
            return theirs(torch.from_numpy(images)).logits.numpy()  # (B, num_labels)
    return run


def check_same_logits(ours, theirs, images):
    """The two forwards' logits within 1e-4 * max(1, max |logit|), or an AssertionError."""
    mine, reference = ours(images), theirs(images)
    tolerance = 1e-4 * max(1.0, float(np.abs(reference).max()))
    if mine.dtype != np.float32 or not np.allclose(mine, reference, rtol=0, atol=tolerance):
        raise AssertionError(f"bench: transformers computes other logits than tinyattn (by up "
                             f"to {np.abs(mine - reference).max():.2g}, {mine.dtype})")


def bench_vit(rounds, torch=None, batch=BATCH, **sizes):
    """Part 11, with at most VIT_ROUNDS rounds: prints the time of a forward pass of each and
    the ratio; returns {"tinyattn": seconds, "transformers": seconds, "ratio": tinyattn's speed
    / transformers'} (without transformers' entries when it was not measured)."""
    rounds = min(rounds, VIT_ROUNDS)
    config = {**VIT_B_16, **sizes}
    model = vit_model(**sizes)
    height = width = config["image_size"]
    said(f"A ViT forward pass on ViT-B/16's shape ({height} x {width} images in patches of "
         f"{config['patch_size']}, width {config['embed_dim']}, {config['num_layers']} blocks of "
         f"{config['num_heads']} heads, feed-forward {config['hidden_dim']}, "
         f"{config['num_labels']} labels: {sum(p.size for p in model.parameters()):,} "
         f"parameters), random float32 weights, a batch of {batch} images, no graph; {rounds} "
         f"interleaved rounds (at most {VIT_ROUNDS}), processor time", indent="")
    images = np.random.default_rng(0).standard_normal(
        (batch, config["num_channels"], height, width)).astype(np.float32)
    forwards = {"tinyattn": tinyattn_forward(model)}
    missing = [name for name, found in (("torch", torch), ("transformers", transformers_found()))
               if not found]
    with tempfile.TemporaryDirectory() as folder:
        if missing:
            print(f"   ({' and '.join(missing)} not installed: tinyattn is measured alone)")
        else:
            forwards["transformers"] = transformers_forward(torch, transformers_model(model,
                                                                                      folder))
            check_same_logits(forwards["tinyattn"], forwards["transformers"], images)
            said("the same logits as transformers (within 1e-4 x max |logit|), checked first")
        times = interleaved(forwards, (images,), rounds, clock=time.process_time)
    figures = {name: statistics.median(seconds) for name, seconds in times.items()}
    for name, seconds in figures.items():
        print(f"   {name:<13} {seconds:7.3f} s a forward pass, {batch / seconds:7.2f} images/s")
    if "transformers" in figures:
        figures["ratio"] = median_ratio(times, "transformers", "tinyattn")
        said(f"tinyattn classifies {figures['ratio']:.2f}x as many images per second as "
             f"transformers (median over rounds of the per-round ratio)")
    return figures
