"""The checklist's rows for chapter 6's Vision Transformer (tinyattn/nn/vit.py): chapter 1's block
with exact GELU, and the whole model, images to logits, against every input and parameter
(the images, the patch embedding, the class token, the positions, every block, the head).

LayerNorms start with gains of one and biases of zero, where a backward that forgot either could
pass: every row here draws them at random first (`off_their_start`).
"""
import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn_tools.checklist.cases import LayerCase, leaves

# a small ViT: 8 x 4 images of 2 channels in patches of 4 (2 patches), width 8, 2 heads
SMALL = dict(image_size=(8, 4), patch_size=4, num_channels=2, embed_dim=8, num_heads=2,
             num_layers=2, hidden_dim=12, num_labels=3)


def off_their_start(module):
    """`module` with every LayerNorm's weight and bias drawn at random (seeded), as after
    training."""
    random = np.random.default_rng(2)
    for layer in module.modules():
        if isinstance(layer, nn.LayerNorm):
            layer.weight.data[...] = random.normal(1.0, 0.3, layer.weight.shape)
            layer.bias.data[...] = random.normal(0.0, 0.3, layer.bias.shape)
    return module


def built(make, *input_shapes, output=lambda module, *inputs: module(*inputs)):
    """A build function: a module made after seeding, its norms off their start, `output` of it
    on standard normal inputs, checked against every input and parameter."""
    def build():
        ta.manual_seed(0)
        module = off_their_start(make())
        inputs = leaves(*input_shapes)
        return (lambda *args: output(module, *args[:len(inputs)]),
                [*inputs, *module.parameters()])
    return build


LAYER_CASES = [
    LayerCase("TransformerBlock, exact GELU (ViT's)",
              built(lambda: nn.TransformerBlock(8, 2, hidden_dim=12, activation="gelu",
                                                layer_norm_eps=1e-12), (2, 3, 8))),
    LayerCase("ViT, images to logits (random directions)",
              built(lambda: nn.ViT(**SMALL), (2, 2, 8, 4)), directions=4),
    LayerCase("ViT without q, k, v biases, features (random directions)",
              built(lambda: nn.ViT(**SMALL, qkv_bias=False), (2, 2, 8, 4),
                    output=lambda module, images: module.features(images)), directions=4),
]
