"""Chapter 6. What makes an argument of CLIP (nn/clip.py) bad: patches that do not tile the image,
images other than the model's, token ids outside the vocabulary or longer than the positions,
texts without their end, pairs that do not pair."""
import numpy as np

from tinyattn import arguments
from tinyattn.arguments import at_least, shapes
from tinyattn.arrays import data_of
from tinyattn.engine import Tensor


def vision_sizes_fit(image_size=224, patch_size=32, embed_dim=768, num_heads=12, **_):
    """VisionTower: square images of image_size pixels, which patch_size divides; num_heads
    divides embed_dim."""
    at_least(1)("image_size", image_size)
    if image_size % patch_size:
        raise ValueError(f"patch_size {patch_size} must divide image_size {image_size}")
    if embed_dim % num_heads:
        raise ValueError(f"num_heads {num_heads} must divide embed_dim {embed_dim}")


def text_sizes_fit(embed_dim=512, num_heads=8, **_):
    """TextTower: num_heads divides embed_dim."""
    if embed_dim % num_heads:
        raise ValueError(f"num_heads {num_heads} must divide embed_dim {embed_dim}")


def images_fit(self, pixel_values):
    """CLIP.get_image_features: images (B, num_channels, H, W) of the vision tower's size and the
    model's dtype, as a Tensor or an array. Returns them as a Tensor."""
    if not isinstance(pixel_values, Tensor):
        pixel_values = Tensor(np.asarray(pixel_values))
    shapes(dtype=self.dtype, pixel_values=(pixel_values, "(B, C, H, W)"))
    B, C, H, W = pixel_values.shape
    vision = self.vision
    if C != vision.num_channels:
        raise ValueError(f"pixel_values has {C} channels (shape {pixel_values.shape}), the model "
                         f"{vision.num_channels}")
    if (H, W) != (vision.image_size, vision.image_size):
        raise ValueError(f"pixel_values are images of {H} x {W} pixels (shape "
                         f"{pixel_values.shape}), the model's are {vision.image_size} x "
                         f"{vision.image_size} (its config's image_size)")
    return {"pixel_values": pixel_values}


def ids_fit(self, input_ids):
    """CLIP.get_text_features: token ids (B, T), integers of the vocabulary, T no more than the
    positions, each row holding its end-of-text token (but for a legacy config, eos_token_id 2).
    Returns them as an integer array."""
    text = self.text
    arguments.ids("input_ids", input_ids, text.token_embed.num_embeddings, "tokens")
    input_ids = np.asarray(data_of(input_ids))
    if input_ids.ndim != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must have shape (B, T), T at least 1, got {input_ids.shape}")
    if input_ids.shape[1] > text.max_positions:
        raise ValueError(f"input_ids holds texts of {input_ids.shape[1]} tokens, the model's "
                         f"positions {text.max_positions}")
    if text.eos_token_id != 2:
        endless = np.flatnonzero(~(input_ids == text.eos_token_id).any(axis=-1))
        if endless.size:
            raise ValueError(f"input_ids row {endless[0]} has no end-of-text token (eos_token_id "
                             f"{text.eos_token_id}), where the text tower reads it")
    return {"input_ids": input_ids}


def ids_and_images_fit(self, input_ids, pixel_values):
    """CLIP.forward: texts as get_text_features takes them, images as get_image_features."""
    return {**ids_fit(self, input_ids), **images_fit(self, pixel_values)}


def pairs_fit(self, input_ids, pixel_values):
    """CLIP.contrastive_loss: as forward, and as many texts as images (text i captions image i)."""
    read = ids_and_images_fit(self, input_ids, pixel_values)
    texts, images = read["input_ids"].shape[0], read["pixel_values"].shape[0]
    if texts != images:
        raise ValueError(f"contrastive_loss pairs text i with image i: got {texts} texts "
                         f"(input_ids {read['input_ids'].shape}) and {images} images "
                         f"(pixel_values {read['pixel_values'].shape})")
    return read
