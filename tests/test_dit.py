"""DiT (tinyattn/nn/dit.py) and its diffusers checkpoints (nn/dit_checkpoints.py): the sample
diffusers computed on the fixture tests/fixtures/dit-tiny (made by make_dit.py), float32 and
float64; adaLN-Zero's start as the identity; whole-model gradients; save_pretrained both ways;
what the model does not compute refused by name, bad inputs refused at the door. Offline:
diffusers is needed only by the tests that say so, which skip without it."""
import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn import dit_checkpoints
from tinyattn.nn.dit import DIT_XL_2, DiT, DiTBlock, DiTSettings, patch_positions
from tests.references import arrays

FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "dit-tiny"
TINY = DiTSettings(sample_size=4, patch_size=2, in_channels=1, out_channels=2, num_layers=2,
                   num_heads=2, head_dim=2, num_classes=3)


@pytest.fixture(scope="module")
def reference():
    return ta.load_safetensors(FIXTURE / "reference.safetensors")


def tolerance(expected, dtype):
    """API.md: float32 within 1e-4 * max(1, max |value|); float64 within 1e-9 relative."""
    return (1e-4 if dtype == "float32" else 1e-9) * max(1.0, np.abs(expected).max())


def sample_of(model, reference, dtype):
    with ta.no_grad():
        return model(ta.tensor(reference["latents"].astype(dtype)), reference["timesteps"],
                     reference["class_labels"]).data


def copy_of(tmp_path, edit=None):
    """The fixture copied into tmp_path, `edit(config)` applied to its config.json."""
    folder = tmp_path / "dit"
    shutil.copytree(FIXTURE, folder)
    if edit is not None:
        config = json.loads((folder / "config.json").read_text())
        edit(config)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def unzeroed(settings, dtype=np.float64, seed=0):
    """A DiT of `settings` with every parameter drawn at random (DiT starts its adaLN and
    output Linears at zero, where a wrong gradient of the gates would pass unseen)."""
    model = DiT(settings, dtype=dtype)
    random = np.random.default_rng(seed)
    for parameter in model.parameters():
        parameter.data[...] = 0.5 * random.standard_normal(parameter.shape)
    return model


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_the_sample_is_diffusers(reference, dtype):
    model = dit_checkpoints.from_pretrained(FIXTURE, dtype=dtype)
    out = sample_of(model, reference, dtype)
    expected = reference[f"sample_{dtype}"]
    assert out.dtype == dtype and out.shape == (3, 8, 8, 8)
    assert np.abs(out - expected).max() <= tolerance(expected, dtype)


def halved(array):
    array *= 0.5


@pytest.mark.parametrize("what, edit", [
    ("block 1's own class table", lambda m: halved(m.blocks[1].condition.classes.weight.data)),
    ("block 0's attention gate", lambda m: halved(m.blocks[0].modulation.bias.data[32:48])),
    ("the output layer's shift", lambda m: halved(m.out_modulation.bias.data[:16])),
])
def test_every_piece_moves_the_sample(reference, what, edit):
    """The fixture's random weights catch a loader that dropped or swapped a piece: a change
    of each moves the float64 sample a thousand times farther than the tolerance."""
    expected = reference["sample_float64"]
    model = dit_checkpoints.from_pretrained(FIXTURE, dtype=np.float64)
    edit(model)
    moved = np.abs(sample_of(model, reference, "float64") - expected).max()
    assert moved > 1000 * tolerance(expected, "float64"), what


def test_positions_tell_the_patches_apart():
    """Without positions, attention and every per-patch layer commute with moving the patches
    around, so a latent shifted by one patch would give the output shifted by one patch."""
    model = unzeroed(TINY)
    latents = arrays((1, 1, 4, 4))[0]
    shifted = np.roll(latents, 2, axis=-1)

    def out(x):
        with ta.no_grad():
            return model(ta.tensor(x), np.array([3]), np.array([1])).data
    assert np.abs(out(shifted) - np.roll(out(latents), 2, axis=-1)).max() > 1e-2


def test_positions_are_the_2d_sin_cos_table():
    """First half: the column's 1-d table, second half: the row's, each [sin, cos]."""
    table = patch_positions(8, 2, 3, np.float64)                        # (6, 8)
    frequencies = 1.0 / 10000.0 ** (np.arange(2) / 2)
    row, column = 1, 2                                                  # patch 5
    expected = np.concatenate([np.sin(column * frequencies), np.cos(column * frequencies),
                               np.sin(row * frequencies), np.cos(row * frequencies)])
    np.testing.assert_allclose(table[5], expected, rtol=0, atol=1e-15)


def test_a_new_block_is_the_identity_and_its_gates_learn():
    """adaLN-Zero: the modulation Linear starts at zero, so x + 0 * branch = x exactly; the
    gradient still reaches the gates' rows of that Linear (and only the gates': shift and scale
    act inside a branch multiplied by zero), while the branches' own weights get none."""
    ta.manual_seed(0)
    block = DiTBlock(TINY)
    E = TINY.hidden_size
    x = ta.tensor(arrays((2, 4, E))[0], requires_grad=True)
    sinusoids = ta.tensor(np.random.default_rng(1).standard_normal((2, 256)))
    out = block(x, sinusoids, np.array([0, 3]))
    np.testing.assert_array_equal(out.data, x.data)
    out.backward(arrays((2, 4, E), seed=2)[0])
    rows = np.abs(block.modulation.weight.grad).sum(axis=1).reshape(6, E).sum(axis=1)
    assert rows[2] > 1e-3 and rows[5] > 1e-3                      # gate1, gate2
    assert rows[[0, 1, 3, 4]].max() == 0.0                        # shifts and scales
    assert np.abs(block.attn.q_proj.weight.grad).max() == 0.0
    np.testing.assert_array_equal(x.grad, arrays((2, 4, E), seed=2)[0])


def test_each_blocks_attention_can_be_read_by_name():
    model = dit_checkpoints.from_pretrained(FIXTURE)
    with ta.no_grad():
        _, cache = model.run_with_cache(ta.tensor(np.zeros((2, 4, 8, 8), np.float32)),
                                        np.array([3, 4]), np.array([1, 10]),
                                        names=["blocks.1.attn.weights", "blocks.0.resid_post"])
    assert cache["blocks.1.attn.weights"].shape == (2, 2, 16, 16)       # (B, H, P, P)
    assert cache["blocks.0.resid_post"].shape == (2, 16, 16)            # (B, P, E)


def test_a_new_model_predicts_zero():
    ta.manual_seed(0)
    model = DiT(TINY)
    out = model(ta.tensor(arrays((2, 1, 4, 4))[0]), np.array([5, 0]), np.array([3, 1]))
    assert out.shape == (2, 2, 4, 4) and np.abs(out.data).max() == 0.0


def test_gradients_of_the_whole_model():
    """Whole-model gradcheck, float64, random upstream gradient: the latents and a parameter of
    each kind (patches, the time MLP, the class table, adaLN, attention, the output layer)."""
    model = unzeroed(TINY)
    latents = ta.tensor(arrays((2, 1, 4, 4))[0], requires_grad=True)
    block = model.blocks[1]
    checked = [latents, model.patch_embed.weight, block.condition.time_out.weight,
               block.condition.classes.weight, block.modulation.weight, block.attn.k_proj.weight,
               block.mlp.up.bias, model.blocks[0].condition.time_in.bias,
               model.out_modulation.weight, model.out.weight]

    def predicted_noise(*leaves):
        return model(latents, np.array([7, 900]), np.array([2, 3]))
    assert ta.gradcheck(predicted_noise, checked, atol=1e-7, rtol=1e-5)


def test_float32_end_to_end():
    model = unzeroed(TINY, dtype=np.float32)
    latents = ta.tensor(arrays((2, 1, 4, 4))[0].astype(np.float32), requires_grad=True)
    out = model(latents, np.array([7, 900]), np.array([2, 3]))
    out.backward(np.ones(out.shape, dtype=np.float32))
    assert out.dtype == np.float32 and latents.grad.dtype == np.float32
    assert all(p.grad.dtype == np.float32 for p in model.parameters())


@pytest.mark.parametrize("latents, timesteps, labels, error, message", [
    ((2, 2, 4, 4), [1, 2], [0, 1], ValueError, r"DiT: latents have 2 channels, the model takes 1"),
    ((2, 1, 6, 6), [1, 2], [0, 1], ValueError, r"DiT: latents must be 4 x 4 .*got 6 x 6"),
    ((2, 1, 4, 4), [1, 2], [0, 4], IndexError, r"DiT: class_labels must lie in \[0, 4\)"),
    ((2, 1, 4, 4), [1, 2], [-1, 0], IndexError, r"DiT: class_labels must lie in \[0, 4\)"),
    ((2, 1, 4, 4), [1, 2, 3], [0, 1], ValueError, r"DiT: timesteps must be 2 integers"),
    ((2, 1, 4, 4), [1.5, 2.0], [0, 1], ValueError, r"DiT: timesteps must be 2 integers"),
    ((2, 1, 4, 4), [-1, 2], [0, 1], ValueError, r"DiT: timesteps must be >= 0"),
    ((2, 1, 4), [1, 2], [0, 1], ValueError, r"DiT: latents must have shape \(B, C, H, W\)"),
])
def test_bad_inputs_are_refused(latents, timesteps, labels, error, message):
    model = DiT(TINY)
    with pytest.raises(error, match=message):
        model(ta.tensor(arrays(latents)[0]), np.array(timesteps), np.array(labels))


def test_latents_of_another_dtype_are_refused():
    with pytest.raises(TypeError, match="DiT: latents has dtype float32 but the layer's"):
        DiT(TINY)(ta.tensor(np.zeros((1, 1, 4, 4), np.float32)), np.array([1]), np.array([0]))


@pytest.mark.parametrize("change, message", [
    (dict(patch_size=3), "settings.patch_size 3 must divide settings.sample_size 4"),
    (dict(head_dim=3), "the width num_heads x head_dim = 6 must be a multiple of 4"),
    (dict(num_layers=0), "settings.num_layers must be an integer of at least 1"),
])
def test_bad_settings_are_refused(change, message):
    with pytest.raises(ValueError, match=f"DiT: {message}"):
        DiT(dataclasses.replace(TINY, **change))


# ------------------------------------------------------------------------------------------------
# Checkpoints

def test_a_missing_key_means_diffusers_default():
    """DiT-XL/2's sizes; out_channels null (the default) means in_channels."""
    read = dit_checkpoints.settings_from_config
    assert read({"_class_name": "DiTTransformer2DModel", "out_channels": 8}, "f") == DIT_XL_2
    assert read({"_class_name": "DiTTransformer2DModel"}, "f").out_channels == 4


@pytest.mark.parametrize("key, value, message", [
    ("norm_type", "ada_norm", "norm_type 'ada_norm' \\(implemented: 'ada_norm_zero'\\)"),
    ("norm_elementwise_affine", True, "norm_elementwise_affine True"),
    ("activation_fn", "geglu", "activation_fn 'geglu'"),
    ("attention_bias", False, "attention_bias False"),
    ("dropout", 0.1, "dropout 0.1"),
    ("num_embeds_ada_norm", None, "num_embeds_ada_norm null"),
    ("_class_name", "UNet2DModel", "_class_name is 'UNet2DModel'"),
    ("patch_size", 3, "config.json gives sizes DiT cannot run: settings.patch_size 3"),
])
def test_what_dit_does_not_compute_is_refused_by_name(tmp_path, key, value, message):
    folder = copy_of(tmp_path, lambda config: config.update({key: value}))
    with pytest.raises(ValueError, match=f"from_pretrained: the folder .*{message}"):
        dit_checkpoints.from_pretrained(folder)


def test_dits_first_class_name_is_read_as_diffusers_reads_it(tmp_path, reference):
    """facebook/DiT-XL-2-256's config.json says Transformer2DModel, which diffusers remaps to
    DiTTransformer2DModel when norm_type is ada_norm_zero (and refuses to read as DiT else)."""
    folder = copy_of(tmp_path, lambda config: config.update(_class_name="Transformer2DModel"))
    model = dit_checkpoints.from_pretrained(folder, dtype=np.float64)
    assert np.abs(sample_of(model, reference, "float64") - reference["sample_float64"]).max() \
        <= tolerance(reference["sample_float64"], "float64")
    config = json.loads((folder / "config.json").read_text())
    del config["norm_type"]
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="_class_name is 'Transformer2DModel', not "):
        dit_checkpoints.from_pretrained(folder)


def test_weights_that_disagree_with_the_config_are_refused(tmp_path):
    folder = copy_of(tmp_path, lambda config: config.update(num_layers=3))
    with pytest.raises(ValueError, match="lacks transformer_blocks.2.norm1.emb.timestep_embedder"):
        dit_checkpoints.from_pretrained(folder)
    folder = copy_of(tmp_path / "other", lambda config: config.update(in_channels=3,
                                                                       out_channels=8))
    with pytest.raises(ValueError, match=r"holds pos_embed.proj.weight as float32 \(16, 16\)"):
        dit_checkpoints.from_pretrained(folder)


def test_a_folder_without_the_files_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no config.json: a diffusers model folder"):
        dit_checkpoints.from_pretrained(tmp_path)
    folder = copy_of(tmp_path)
    (folder / dit_checkpoints.WEIGHTS).unlink()
    with pytest.raises(FileNotFoundError, match="no diffusion_pytorch_model.safetensors"):
        dit_checkpoints.from_pretrained(folder)


def test_a_pipeline_folder_is_read_from_its_transformer_folder(tmp_path, reference):
    shutil.copytree(FIXTURE, tmp_path / "transformer")
    (tmp_path / "model_index.json").write_text('{"_class_name": "DiTPipeline"}')
    model = dit_checkpoints.from_pretrained(tmp_path, dtype=np.float64)
    np.testing.assert_array_equal(
        sample_of(model, reference, "float64"),
        sample_of(dit_checkpoints.from_pretrained(FIXTURE, np.float64), reference, "float64"))


def test_save_pretrained_writes_diffusers_files(tmp_path, reference):
    """The fixture read and written again: the same config.json values and weights, byte for
    byte in the arrays, and the same sample on reading it back."""
    model = dit_checkpoints.from_pretrained(FIXTURE, dtype=np.float32)
    model.save_pretrained(tmp_path)
    written = json.loads((tmp_path / "config.json").read_text())
    original = json.loads((FIXTURE / "config.json").read_text())
    assert {key: written[key] for key in original} == original
    ours = ta.load_safetensors(tmp_path / dit_checkpoints.WEIGHTS)
    theirs = ta.load_safetensors(FIXTURE / dit_checkpoints.WEIGHTS)
    assert sorted(ours) == sorted(theirs)
    assert all(np.array_equal(ours[name], theirs[name]) for name in theirs)
    np.testing.assert_array_equal(
        sample_of(dit_checkpoints.from_pretrained(tmp_path), reference, "float32"),
        sample_of(model, reference, "float32"))


def test_diffusers_reads_what_save_pretrained_writes(tmp_path, reference):
    torch = pytest.importorskip("torch", reason="diffusers' reference needs torch (the "
                                "reference extra installs it)")
    diffusers = pytest.importorskip("diffusers", reason="the DiT reference (the reference "
                                    "extra installs diffusers)")
    model = unzeroed(dit_checkpoints.settings_from_config(
        json.loads((FIXTURE / "config.json").read_text()), "fixture"), np.float32, seed=3)
    model.save_pretrained(tmp_path)
    theirs = diffusers.DiTTransformer2DModel.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        expected = theirs(torch.tensor(reference["latents"], dtype=torch.float32),
                          timestep=torch.tensor(reference["timesteps"]),
                          class_labels=torch.tensor(reference["class_labels"])).sample.numpy()
    out = sample_of(model, reference, "float32")
    assert np.abs(out - expected).max() <= tolerance(expected, "float32")
