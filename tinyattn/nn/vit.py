"""Chapter 6. The Vision Transformer (ViT; Dosovitskiy et al. 2020, "An Image is Worth 16x16 Words:
Transformers for Image Recognition at Scale").

The idea: an image is a sentence whose words are patches. Cut the image (C, H, W) into P square
patches of p x p pixels, flatten each into a vector of C p p numbers and project it to the
model's width E: these are the tokens. Put one learned token in front, the class token, add a
learned position to every token, and run chapter 1's pre-LN transformer blocks over the 1 + P
tokens, with no mask: every patch sees every patch. The class token holds no pixel of its own; it
gathers from all patches what the classifier needs, and the head reads it alone:

    patches    F.patchify(images, p)                       (B, C, H, W) -> (B, P, C p p)
    embed      a Linear, C p p -> E                        (B, P, E)
    class      the class token in front                    (B, 1 + P, E)
    positions  + a learned (1 + P, E) table                (B, 1 + P, E)
    blocks     num_layers pre-LN TransformerBlocks         (B, 1 + P, E)
    final      LayerNorm                                   (B, 1 + P, E)   model.features
    head       Linear(E, num_labels) on the class token    (B, num_labels) model(images)

The patch embedding is a Linear on F.patchify's tokens; transformers (and the paper's code) write
it as a Conv2d(C, E, kernel_size=p, stride=p). They are the same map: with stride p the kernel's
windows are exactly the patches, and at each the convolution takes the dot product of the flattened
window with the flattened kernel (tinyattn/functional/patches.py derives it). So the Conv2d's
weight (E, C, p, p), reshaped to (E, C p p), is the Linear's.

The block is chapter 1's TransformerBlock with ViT's two choices: GELU as defined with erf (not its
tanh form), and LayerNorms with eps 1e-12. ViT-B/16, the paper's base model at 224 x 224 pixels
(google/vit-base-patch16-224's config), is VIT_B_16 below: 196 patches of 16 x 16, 197 tokens of
768 numbers, 12 blocks of 12 heads, 86M parameters.

The activations it names (`Module.hook`, chapter 4): the tokens with their positions, "embed"
(B, 1 + P, E), and the final LayerNorm's output, "final" (B, 1 + P, E); its blocks name theirs,
"blocks.N.attn.weights" (B, H, 1 + P, 1 + P) among them. nn/vit_checkpoints.py reads and writes
the checkpoints of transformers' ViTForImageClassification and ViTModel.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn import rng
from tinyattn.arguments import at_least, between, door, floating_dtype, one_of, optional
from tinyattn.nn import vit_checks as checks
from tinyattn.nn.layers import LayerNorm, Linear
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.transformer import TransformerBlock
from tinyattn.ops import concatenate

# ViT-B/16 (google/vit-base-patch16-224): the keyword arguments of ViT that make it
VIT_B_16 = dict(image_size=224, patch_size=16, num_channels=3, embed_dim=768, num_heads=12,
                num_layers=12, hidden_dim=3072, num_labels=1000, layer_norm_eps=1e-12)


class ViT(Module):
    """A Vision Transformer: images (B, C, H, W) -> logits (B, num_labels); see the top of the file.

    `image_size` is (H, W), or one number for a square; `patch_size` p divides both. The positions
    are a table of 1 + P rows, so the model takes images of its own size only (transformers can
    interpolate the table for other sizes; this model does not). `qkv_bias=False` leaves the
    queries', keys' and values' projections without bias (the output projection keeps its own),
    as ViT configs with qkv_bias false do. `activation` is the feed-forward's GELU: "gelu", with
    erf, ViT's (transformers' hidden_act "gelu"), or "gelu_tanh", its tanh form.
    `num_labels=None` makes a model without a head, whose `features` are all it computes (a bare
    ViTModel checkpoint).

    The class token and the positions are drawn from a normal distribution of standard deviation
    0.02 (transformers' initialisation, which also cuts it off at 2 standard deviations), the
    Linears as chapter 1's.
    """

    activations = ("embed", "final")

    @door(checks.sizes_fit, patch_size=at_least(1), num_channels=at_least(1),
          embed_dim=at_least(1), num_heads=at_least(1), num_layers=at_least(1),
          hidden_dim=at_least(1), num_labels=optional(at_least(1)), qkv_bias=bool,
          layer_norm_eps=between(0), activation=one_of("gelu", "gelu_tanh"), dtype=floating_dtype)
    def __init__(self, image_size=224, patch_size=16, num_channels=3, embed_dim=768, num_heads=12,
                 num_layers=12, hidden_dim=3072, num_labels=1000, qkv_bias=True,
                 layer_norm_eps=1e-12, activation="gelu", dtype=None):
        height, width = (image_size, image_size) if np.ndim(image_size) == 0 else image_size
        self.image_size, self.patch_size = (height, width), patch_size
        self.num_channels = num_channels
        P = (height // patch_size) * (width // patch_size)                  # patches per image
        self.patch_embed = Linear(num_channels * patch_size ** 2, embed_dim, dtype=dtype)
        self.cls_token = Parameter(
            (0.02 * rng.generator.standard_normal((1, 1, embed_dim))).astype(dtype))
        self.positions = Parameter(
            (0.02 * rng.generator.standard_normal((1, 1 + P, embed_dim))).astype(dtype))
        self.blocks = [TransformerBlock(embed_dim, num_heads, hidden_dim, dtype=dtype,
                                        layer_norm_eps=layer_norm_eps, activation=activation)
                       for _ in range(num_layers)]
        if not qkv_bias:            # a Linear whose bias is None computes x @ weight^T alone
            for block in self.blocks:
                block.attn.q_proj.bias = block.attn.k_proj.bias = block.attn.v_proj.bias = None
        self.ln = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.head = None if num_labels is None else Linear(embed_dim, num_labels, dtype=dtype)

    @door(checks.images_fit)
    def features(self, pixel_values):
        """The last hidden state (B, 1 + P, E): every token after the final LayerNorm, the class
        token first (transformers' ViTModel(...).last_hidden_state)."""
        B = pixel_values.shape[0]
        patches = F.patchify(pixel_values, self.patch_size)                 # (B, P, C p p)
        tokens = self.patch_embed(patches)                                  # (B, P, E)
        cls = self.cls_token[np.zeros(B, dtype=np.intp)]                    # (B, 1, E)
        x = concatenate([cls, tokens], axis=1) + self.positions             # (B, 1 + P, E)
        x = self.hook("embed", x)                                           # (B, 1 + P, E)
        for block in self.blocks:       # no mask: every token sees every token
            x = block(x)                                                    # (B, 1 + P, E)
        return self.hook("final", self.ln(x))                               # (B, 1 + P, E)

    @door(checks.images_fit_head)
    def forward(self, pixel_values):
        """The logits (B, num_labels) of images (B, C, H, W): the head on the class token."""
        x = self.features(pixel_values)                                     # (B, 1 + P, E)
        return self.head(x[:, 0])                                           # (B, num_labels)

    def extra_repr(self):
        H, W = self.image_size
        return f"image_size={H}x{W}, patch_size={self.patch_size}"

