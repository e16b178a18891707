"""Chapter 6. DiT, a diffusion transformer (Peebles & Xie 2023, "Scalable Diffusion Models with
Transformers"): a vision transformer that looks at a noisy image and says what noise is in it.

A diffusion model (tinyattn/diffusion.py) makes an image by starting from pure noise and removing
a little of it at each of many steps. The network it needs answers one question: given x_t, an
image with noise of level t added, which noise epsilon was added? DiT answers it with a
transformer over the image's patches, told the noise level t and the class y of the image to draw
(ImageNet's 1000, plus one "null class" meaning "any image", which classifier-free guidance
uses). It works on the latents of an autoencoder (4 x 32 x 32 for a 256 x 256 image), not on
pixels; that changes nothing here.

    1. patches     latents (B, C, H, W) -> patchify -> Linear -> (B, P, E), P = (H / p) (W / p),
                   plus the 2-d sin-cos position of each patch (a fixed table, computed)
    2. condition   c = t_emb + y_emb  (B, E): the timestep's sinusoids through a small MLP, plus
                   a row of the class table; each block has its own pair of embedders
    3. blocks      adaLN-Zero transformer blocks (below), each conditioned on its own c
    4. out         a LayerNorm shifted and scaled by block 0's c, a Linear to p p out_channels
                   numbers per patch
    5. unpatchify  (B, P, p p out_channels) -> (B, out_channels, H, W): the predicted noise (and,
                   with a learned sigma, as many channels more: the variance's interpolation
                   weights, which a fixed-variance sampler ignores)

adaLN-Zero. The condition reaches the image through the norms: instead of LayerNorm's learned
gain and bias, each block regresses six vectors from c,

    shift1, scale1, gate1, shift2, scale2, gate2 = Linear(SiLU(c))           each (B, E)
    x = x + gate1 * attn(norm(x) * (1 + scale1) + shift1)
    x = x + gate2 * mlp(norm(x) * (1 + scale2) + shift2)

with norm a LayerNorm without parameters. The gates are the "Zero": that Linear starts at zero
(DiT zero-initialises it, and the output layer's Linears), so at first every gate is 0, and a
residual branch times a zero gate adds nothing: x + 0 * attn(...) = x. A new block is the
identity map, and so is a deep stack of them: training starts from a network that passes its
input through, and each block learns how much to add (as zero-initialised residual branches
help ResNets, Goyal et al. 2017). It still learns: dL/dgate = the sum over patches of
branch(...) * dL/dx, not zero once a gradient reaches x (in DiT from the second step: the
output Linear, zero too, learns first), and the branch's own weights learn as soon as their
gate is not zero. (The paper found adaLN-Zero better than cross-attention to c, in-context
tokens or plain adaLN, at the least cost.)

The sizes of DiT-XL/2, the paper's largest (DIT_XL_2 below): 28 layers, 1152 wide (16 heads of
72), patches of 2 on 32 x 32 x 4 latents (256 tokens), 1000 classes, a learned sigma (8 output
channels).

Where diffusers differs from the paper's code (facebookresearch/DiT), whose checkpoints it
converts, and which we follow, number for number: each block holds its own copy of the
timestep and label embedders (the paper has one pair; a converted checkpoint repeats it), and
the output layer uses block 0's; its timestep frequencies are exp(-ln(10000) k / (128 - 1)),
where the paper's code divides by 128. nn/dit_checkpoints.py reads and writes diffusers' files.
"""
import dataclasses
import math

import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import door, floating_dtype
from tinyattn.arrays import data_of
from tinyattn.engine import Tensor
from tinyattn.nn import dit_checks as checks
from tinyattn.nn.layers import Embedding, FeedForward, Linear
from tinyattn.nn.module import Module
from tinyattn.nn.multi_head_attention import MultiHeadAttention

FREQUENCY_CHANNELS = 256        # the timestep's sinusoids, before the MLP (DiT's and diffusers')
ADALN_EPS = 1e-6                # the eps of the modulated norms (fixed in DiT and in diffusers)


@dataclasses.dataclass(frozen=True)
class DiTSettings:
    """The sizes of a DiT: latents of in_channels x sample_size x sample_size, cut into patches
    of patch_size; num_layers blocks of num_heads heads of head_dim (E = num_heads head_dim);
    num_classes classes, and one more, the null class; out_channels (2 in_channels for a
    learned sigma); norm_eps, the eps of the unmodulated norm before each feed-forward."""

    sample_size: int
    patch_size: int
    in_channels: int
    out_channels: int
    num_layers: int
    num_heads: int
    head_dim: int
    num_classes: int
    norm_eps: float = 1e-5

    @property
    def hidden_size(self):
        return self.num_heads * self.head_dim


DIT_XL_2 = DiTSettings(sample_size=32, patch_size=2, in_channels=4, out_channels=8,
                       num_layers=28, num_heads=16, head_dim=72, num_classes=1000)


def timestep_sinusoids(timesteps, dtype):
    """(B, 256) of the timesteps (B,): [cos(t w_k), sin(t w_k)] for w_k = exp(-ln(10000) k / 127),
    k = 0 .. 127 (diffusers' Timesteps(256, flip_sin_to_cos=True, downscale_freq_shift=1)),
    computed in `dtype`, as diffusers computes it in float32."""
    half = FREQUENCY_CHANNELS // 2
    frequencies = np.exp(-math.log(10000.0) * np.arange(half, dtype=dtype) / (half - 1))
    angles = np.asarray(timesteps).astype(dtype)[:, None] * frequencies       # (B, 128)
    return np.concatenate([np.cos(angles), np.sin(angles)], axis=1)           # (B, 256)


def patch_positions(embed_dim, rows, columns, dtype):
    """The 2-d sin-cos positions (rows columns, E) of a grid of patches, row by row (MAE's and
    DiT's): the first half of each vector is the 1-d sin-cos table of the patch's column, the
    second half of its row,

        table(pos)[k] = sin(pos w_k),  table(pos)[E/4 + k] = cos(pos w_k),  w_k = 10000^(-4k/E)

    for k = 0 .. E/4 - 1. Computed in float64 and rounded to `dtype`, as diffusers does."""
    quarter = embed_dim // 4
    frequencies = 1.0 / 10000.0 ** (np.arange(quarter) / quarter)             # (E/4,)
    row, column = np.divmod(np.arange(rows * columns), columns)                # (P,), (P,)

    def table(position):                                                       # (P,) -> (P, E/2)
        angles = position[:, None] * frequencies
        return np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
    return np.concatenate([table(column), table(row)], axis=1).astype(dtype)   # (P, E)


def zero_linear(in_features, out_features, dtype):
    """A Linear whose weight and bias start at zero: DiT's adaLN and output Linears."""
    layer = Linear(in_features, out_features, dtype=dtype)
    layer.weight.data[...] = 0.0
    layer.bias.data[...] = 0.0
    return layer


class ConditionEmbedding(Module):
    """c = t_emb + y_emb (B, E): the timesteps' sinusoids through Linear, SiLU, Linear, plus the
    row of each class label in a table of num_classes + 1 rows (the last, the null class, is
    what classifier-free guidance trains with a label dropped, and samples with as "no class")
    (diffusers' CombinedTimestepLabelEmbeddings, in eval mode: dropping labels in training is
    the training loop's, which passes the null class)."""

    def __init__(self, hidden_size, num_classes, dtype=None):
        self.time_in = Linear(FREQUENCY_CHANNELS, hidden_size, dtype=dtype)
        self.time_out = Linear(hidden_size, hidden_size, dtype=dtype)
        self.classes = Embedding(num_classes + 1, hidden_size, dtype=dtype)

    def forward(self, sinusoids, class_labels):
        t_emb = self.time_out(F.silu(self.time_in(sinusoids)))                # (B, E)
        return t_emb + self.classes(class_labels)                             # (B, E)


class DiTBlock(Module):
    """One adaLN-Zero block (the top of this file): self-attention and a tanh-GELU feed-forward
    (4 E), each on a norm of x shifted and scaled by the block's condition, each added back
    through a gate. The activations it names: "resid_pre", "resid_mid", "resid_post" (B, P, E).
    """

    activations = ("resid_pre", "resid_mid", "resid_post")

    def __init__(self, settings, dtype=None):
        E = settings.hidden_size
        self.norm_eps = settings.norm_eps
        self.condition = ConditionEmbedding(E, settings.num_classes, dtype=dtype)
        self.modulation = zero_linear(E, 6 * E, dtype)                 # adaLN-Zero: gates 0
        self.attn = MultiHeadAttention(E, settings.num_heads, dtype=dtype)
        self.mlp = FeedForward(E, 4 * E, dtype=dtype)

    def forward(self, x, sinusoids, class_labels):
        B, P, E = x.shape
        x = self.hook("resid_pre", x)                                   # (B, P, E)
        c = self.condition(sinusoids, class_labels)                     # (B, E)
        modulation = self.modulation(F.silu(c)).reshape(B, 6, 1, E)     # (B, 6, 1, E)
        shift1, scale1, gate1, shift2, scale2, gate2 = (modulation[:, i] for i in range(6))
        # x + gate * branch(norm(x) * (1 + scale) + shift), for attention and then the MLP
        h = F.layer_norm(x, eps=ADALN_EPS) * (1.0 + scale1) + shift1    # (B, P, E)
        x = self.hook("resid_mid", x + gate1 * self.attn(h)[0])         # (B, P, E)
        h = F.layer_norm(x, eps=self.norm_eps) * (1.0 + scale2) + shift2    # (B, P, E)
        return self.hook("resid_post", x + gate2 * self.mlp(h))         # (B, P, E)


class DiT(Module):
    """DiT (the top of this file): model(latents, timesteps, class_labels) -> the predicted noise
    (B, out_channels, H, W), for latents (B, in_channels, H, W) with H = W = sample_size,
    timesteps (B,) integers and class_labels (B,) integers in [0, num_classes], num_classes
    being the null class. Its numbers are diffusers' DiTTransformer2DModel's (`.sample`).
    `dtype` is the parameters' (default float64)."""

    @door(checks.settings_fit, dtype=floating_dtype)
    def __init__(self, settings, dtype=None):
        s = self.settings = settings
        E, p = s.hidden_size, s.patch_size
        self.patch_embed = Linear(s.in_channels * p * p, E, dtype=dtype)   # diffusers' Conv2d
        self.blocks = [DiTBlock(s, dtype=dtype) for _ in range(s.num_layers)]
        self.out_modulation = zero_linear(E, 2 * E, dtype)
        self.out = zero_linear(E, p * p * s.out_channels, dtype)           # DiT starts at 0
        self.config = None          # the config.json it was read from, if any

    @door(checks.inputs_fit, latents="(B, C, H, W)")
    def forward(self, latents, timesteps, class_labels):
        s = self.settings
        B, C, H, W = latents.shape
        p, E = s.patch_size, s.hidden_size
        # 1. patches, and where each is
        x = self.patch_embed(F.patchify(latents, p))                          # (B, P, E)
        x = x + patch_positions(E, H // p, W // p, x.dtype)                   # (B, P, E)
        # 2.-3. the blocks, each with its own condition from the same sinusoids
        sinusoids = Tensor(timestep_sinusoids(data_of(timesteps), x.dtype))   # (B, 256)
        for block in self.blocks:
            x = block(x, sinusoids, class_labels)                             # (B, P, E)
        # 4. out: norm modulated by block 0's condition, then a Linear per patch
        c = self.blocks[0].condition(sinusoids, class_labels)                 # (B, E)
        modulation = self.out_modulation(F.silu(c)).reshape(B, 2, 1, E)       # (B, 2, 1, E)
        shift, scale = modulation[:, 0], modulation[:, 1]                     # (B, 1, E) each
        x = F.layer_norm(x, eps=ADALN_EPS) * (1.0 + scale) + shift            # (B, P, E)
        x = self.out(x)                                                       # (B, P, p p out)
        # 5. back to an image
        return F.unpatchify(x, p, s.out_channels, H, W)                       # (B, out, H, W)
