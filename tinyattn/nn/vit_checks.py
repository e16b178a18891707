"""Chapter 6. What makes an argument of the Vision Transformer (nn/vit.py) bad: sizes whose patches
do not tile the image, images other than the model's."""
import numpy as np

from tinyattn.arguments import at_least, shapes
from tinyattn.engine import Tensor


def sizes_fit(image_size=224, patch_size=16, embed_dim=768, num_heads=12, **_):
    """ViT: image_size is a size or (height, width) of sizes, which patch_size divides; num_heads
    divides embed_dim."""
    sides = (image_size,) if np.ndim(image_size) == 0 else tuple(image_size)
    if len(sides) not in (1, 2):
        raise ValueError(f"image_size must be a size or (height, width), got {image_size!r}")
    for side in sides:
        at_least(1)("image_size", side)
    if any(side % patch_size for side in sides):
        raise ValueError(f"patch_size {patch_size} must divide the image's sides, got image_size "
                         f"{image_size!r}")
    if embed_dim % num_heads:
        raise ValueError(f"num_heads {num_heads} must divide embed_dim {embed_dim}")


def images_fit(self, pixel_values):
    """ViT.features: images (B, num_channels, H, W) of the model's size and dtype, as a Tensor or
    an array. Returns them as a Tensor."""
    if not isinstance(pixel_values, Tensor):
        pixel_values = Tensor(np.asarray(pixel_values))
    shapes(dtype=self.ln.weight.dtype, pixel_values=(pixel_values, "(B, C, H, W)"))
    B, C, H, W = pixel_values.shape
    if C != self.num_channels:
        raise ValueError(f"pixel_values has {C} channels (shape {pixel_values.shape}), the model "
                         f"{self.num_channels}")
    if (H, W) != self.image_size:
        raise ValueError(f"pixel_values are images of {H} x {W} pixels (shape "
                         f"{pixel_values.shape}), the model's are {self.image_size[0]} x "
                         f"{self.image_size[1]} (its config's image_size)")
    return {"pixel_values": pixel_values}


def images_fit_head(self, pixel_values):
    """ViT.forward: as features, and the model has a head."""
    if self.head is None:
        raise ValueError("this ViT has no head (num_labels None: a bare ViTModel's weights); "
                         "model.features(pixel_values) gives its last hidden state")
    return images_fit(self, pixel_values)
