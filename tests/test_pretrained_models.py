"""`nn.from_pretrained` (tinyattn/nn/pretrained_models.py): every fixture folder of the book gives
the model its config.json names, the same model its own reader gives; a model the book lacks, and a
folder that is none, are refused by name."""
import json
import shutil

import numpy as np
import pytest

import tinyattn.nn as nn
from tinyattn.nn import (bart_checkpoints, clip_checkpoints, dit_checkpoints, open_checkpoints,
                         t5_checkpoints, vit_checkpoints, whisper_checkpoints)

FIXTURES = "tests/fixtures"
FOLDERS = [("gpt2-tiny", nn.CausalTransformer, open_checkpoints.from_pretrained),
           ("qwen3-tiny", nn.Module, open_checkpoints.from_pretrained),
           ("deepseek_v3-tiny", nn.Module, open_checkpoints.from_pretrained),
           ("vit-tiny", nn.ViT, vit_checkpoints.from_pretrained),
           ("vit-model-tiny", nn.ViT, vit_checkpoints.from_pretrained),
           ("clip-tiny", nn.CLIP, clip_checkpoints.from_pretrained),
           ("clip-legacy-tiny", nn.CLIP, clip_checkpoints.from_pretrained),
           ("whisper-tiny-random", nn.Whisper, whisper_checkpoints.from_pretrained),
           ("t5-tiny", nn.T5, t5_checkpoints.from_pretrained),
           ("bart-tiny", nn.Bart, bart_checkpoints.from_pretrained),
           ("marian-tiny", nn.Marian, bart_checkpoints.from_pretrained),
           ("dit-tiny", nn.DiT, dit_checkpoints.from_pretrained)]


@pytest.mark.parametrize("name, kind, reader", FOLDERS, ids=[f[0] for f in FOLDERS])
def test_each_folder_gives_the_model_its_own_reader_gives(name, kind, reader):
    model = nn.from_pretrained(f"{FIXTURES}/{name}", dtype=np.float64)
    assert isinstance(model, kind) and not model.training
    own = reader(f"{FIXTURES}/{name}", dtype=np.float64)
    assert type(model) is type(own)
    mine, theirs = model.state_dict(), own.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(np.array_equal(mine[key], theirs[key]) and mine[key].dtype == np.float64
               for key in mine)


def test_a_diffusers_pipeline_folder_is_read_from_its_transformer_folder(tmp_path):
    shutil.copytree(f"{FIXTURES}/dit-tiny", tmp_path / "transformer")
    (tmp_path / "model_index.json").write_text(json.dumps({"_class_name": "DiTPipeline"}))
    assert isinstance(nn.from_pretrained(tmp_path), nn.DiT)


def test_a_model_the_book_lacks_is_refused_by_name(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match=r"^from_pretrained: the folder .*: config.json's "
                                         r"model_type 'bert' is not one the book has \(gpt2, "
                                         r"llama, .*vit, clip, whisper, t5, bart, marian, or a "
                                         r"diffusers DiTTransformer2DModel\)$"):
        nn.from_pretrained(tmp_path)


def test_a_folder_without_config_is_refused_once(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^from_pretrained: the folder .* has no "
                                                r"config.json"):
        nn.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match=r"^from_pretrained: there is no folder"):
        nn.from_pretrained(tmp_path / "no-such")
