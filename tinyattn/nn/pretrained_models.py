"""Chapter 6. `nn.from_pretrained(folder)` for every model of the book: a folder's config.json says
which model it holds — `model_type`, or for a diffusers folder `_class_name` — and the reader beside
that model's page reads it.

    gpt2, llama, mistral, qwen2, qwen3,         chapters 3 and 5: nn/open_checkpoints.py
    gemma3_text, qwen3_moe, deepseek_v3
    vit                                         nn/vit_checkpoints.py
    clip                                        nn/clip_checkpoints.py
    whisper                                     nn/whisper_checkpoints.py
    t5; bart, marian                            nn/t5_checkpoints.py; nn/bart_checkpoints.py
    DiTTransformer2DModel (diffusers)           nn/dit_checkpoints.py (a pipeline folder too)
"""
import os

import numpy as np

from tinyattn import model_folders
from tinyattn.arguments import door, floating_dtype
from tinyattn.nn import (bart_checkpoints, clip_checkpoints, dit_checkpoints, open_checkpoints,
                         t5_checkpoints, vit_checkpoints, whisper_checkpoints)

# config.json's model_type -> the reader of chapter 6's model
READERS = {"vit": vit_checkpoints.from_pretrained, "clip": clip_checkpoints.from_pretrained,
           "whisper": whisper_checkpoints.from_pretrained,
           "t5": t5_checkpoints.from_pretrained, "bart": bart_checkpoints.from_pretrained,
           "marian": bart_checkpoints.from_pretrained}
LANGUAGE_MODELS = ("gpt2",) + open_checkpoints.FAMILIES         # chapter 5's reader's


@door(dtype=floating_dtype)
def from_pretrained(folder, dtype=np.float32):
    """The model of a folder in Hugging Face's layout (or a name `python -m tinyattn download`
    fetched), in eval mode, its parameters of `dtype`, computing what the reference library
    computes with it: the model its config.json names (the table above). A folder that is not
    one, or a model the book does not have, is a FileNotFoundError or ValueError naming the folder
    and what is wrong."""
    try:
        found = model_folders.model_folder(folder)
        if os.path.isfile(os.path.join(found, "model_index.json")):    # a diffusers pipeline
            return dit_checkpoints.from_pretrained(folder, dtype=dtype)
        config = model_folders.read_config(found)
    except (OSError, ValueError) as error:
        raise type(error)(f"from_pretrained: {error}") from None
    if "_class_name" in config:                                     # a diffusers model
        return dit_checkpoints.from_pretrained(folder, dtype=dtype)
    kind = config.get("model_type")
    if kind in READERS:
        return READERS[kind](folder, dtype=dtype)
    if kind in LANGUAGE_MODELS or kind is None:
        return open_checkpoints.from_pretrained(folder, dtype=dtype)
    raise ValueError(f"from_pretrained: the folder {found!r}: config.json's model_type {kind!r} "
                     f"is not one the book has ({', '.join(LANGUAGE_MODELS + tuple(READERS))}, "
                     f"or a diffusers DiTTransformer2DModel)")
