"""Chapter 6's Vision Transformer (tinyattn/nn/vit.py) and its checkpoints (nn/vit_checkpoints.py):
number for number against transformers on the committed fixtures (tests/fixtures/make_vit.py),
its activations by name, save_pretrained read back by tinyattn and by transformers, and what it
refuses."""
import json
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import load_safetensors, save_safetensors
from tinyattn.nn.vit import VIT_B_16
from tinyattn.nn.vit_checkpoints import from_pretrained

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
CLASSIFIER, BARE = FIXTURES / "vit-tiny", FIXTURES / "vit-model-tiny"
DTYPES = {"float32": np.float32, "float64": np.float64}


def reference(folder):
    return load_safetensors(folder / "reference.safetensors")


def assert_matches(got, want, precision):
    """API.md's parity: float32 within 1e-4 * max(1, max |want|), float64 within 1e-9 relative."""
    assert got.dtype == want.dtype
    if precision == "float32":
        assert np.abs(got - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max()))
    else:
        assert np.abs(got - want).max() <= 1e-9 * float(np.abs(want).max())


@pytest.mark.parametrize("precision", DTYPES)
def test_the_classifier_computes_transformers_logits_and_features(precision):
    model, ref = from_pretrained(CLASSIFIER, dtype=DTYPES[precision]), reference(CLASSIFIER)
    images = ref["pixel_values"].astype(DTYPES[precision])
    with ta.no_grad():
        assert_matches(model(images).data, ref[f"logits_{precision}"], precision)
        assert_matches(model.features(images).data, ref[f"features_{precision}"], precision)
    assert model.head.out_features == 5 and model.config["id2label"]["2"] == "ship"


@pytest.mark.parametrize("precision", DTYPES)
def test_a_bare_vit_model_computes_transformers_last_hidden_state(precision):
    model, ref = from_pretrained(BARE, dtype=DTYPES[precision]), reference(BARE)
    images = ref["pixel_values"].astype(DTYPES[precision])
    assert model.head is None and model.blocks[0].attn.q_proj.bias is None   # qkv_bias false
    assert model.image_size == (32, 24) and model.ln.eps == 1e-6
    with ta.no_grad():
        assert_matches(model.features(images).data, ref[f"features_{precision}"], precision)
    with pytest.raises(ValueError, match=r"^ViT: this ViT has no head .*model.features"):
        model(images)


def test_its_activations_are_named_as_chapter_4_names_them():
    model = from_pretrained(CLASSIFIER, dtype=np.float64)
    images = reference(CLASSIFIER)["pixel_values"].astype(np.float64)
    logits, cache = model.run_with_cache(images)
    assert cache["embed"].shape == (2, 17, 32) and cache["final"].shape == (2, 17, 32)
    for block in range(2):
        weights = cache[f"blocks.{block}.attn.weights"]
        assert weights.shape == (2, 4, 17, 17)                  # (B, H, 1 + P, 1 + P)
        np.testing.assert_allclose(weights.sum(axis=-1), 1.0, atol=1e-12)
        assert cache[f"blocks.{block}.resid_post"].shape == (2, 17, 32)
    np.testing.assert_array_equal(cache["final"], model.features(images).data)
    np.testing.assert_array_equal(logits.data, model(images).data)


def test_float32_stays_float32_end_to_end():
    model = from_pretrained(CLASSIFIER)                          # dtype float32 by default
    images = reference(CLASSIFIER)["pixel_values"]
    logits, cache = model.run_with_cache(images)
    assert logits.dtype == np.float32
    assert {array.dtype for array in cache.values()} == {np.dtype(np.float32)}
    logits.sum().backward()
    assert {p.grad.dtype for p in model.parameters()} == {np.dtype(np.float32)}


def test_save_pretrained_writes_what_it_read(tmp_path):
    for folder in (CLASSIFIER, BARE):
        model = from_pretrained(folder, dtype=np.float64)
        model.save_pretrained(tmp_path / folder.name)
        stored = load_safetensors(tmp_path / folder.name / "model.safetensors")
        original = load_safetensors(folder / "model.safetensors")
        # everything transformers wrote, but a ViTModel's pooler, which no classifier reads
        assert set(stored) == {name for name in original if not name.startswith("pooler.")}
        for name, array in stored.items():
            np.testing.assert_array_equal(array, original[name].astype(np.float64))
        again = from_pretrained(tmp_path / folder.name, dtype=np.float64)
        images = reference(folder)["pixel_values"].astype(np.float64)
        np.testing.assert_array_equal(again.features(images).data, model.features(images).data)
    config = json.loads((tmp_path / "vit-tiny" / "config.json").read_text())
    assert config["id2label"]["4"] == "frog" and config["label2id"]["frog"] == 4


def test_transformers_reads_what_save_pretrained_writes(tmp_path):
    torch = pytest.importorskip("torch", reason="the reference needs torch (pip install torch)")
    transformers = pytest.importorskip(
        "transformers", reason="the reference needs transformers (pip install transformers)")
    ta.manual_seed(3)
    for name, kind, model in (
            ("classifier", transformers.ViTForImageClassification,
             nn.ViT(image_size=16, patch_size=4, num_channels=3, embed_dim=12, num_heads=3,
                    num_layers=2, hidden_dim=20, num_labels=4, qkv_bias=False)),
            ("bare", transformers.ViTModel,
             nn.ViT(image_size=(8, 12), patch_size=4, num_channels=1, embed_dim=8, num_heads=2,
                    num_layers=1, hidden_dim=16, num_labels=None, activation="gelu_tanh"))):
        model.save_pretrained(tmp_path / name)
        theirs = kind.from_pretrained(tmp_path / name, dtype=torch.float64).eval()
        H, W = model.image_size
        images = np.random.default_rng(0).standard_normal((2, model.num_channels, H, W))
        with torch.no_grad():
            out = theirs(torch.from_numpy(images))
        with ta.no_grad():
            if model.head is None:
                np.testing.assert_allclose(model.features(images).data,
                                           out.last_hidden_state.numpy(), rtol=0, atol=1e-6)
            else:
                np.testing.assert_allclose(model(images).data, out.logits.numpy(), rtol=0,
                                           atol=1e-6)


def test_the_whole_model_passes_gradcheck():
    ta.manual_seed(0)
    model = nn.ViT(image_size=(8, 4), patch_size=4, num_channels=2, embed_dim=8, num_heads=2,
                   num_layers=2, hidden_dim=12, num_labels=3)
    random = np.random.default_rng(1)
    for layer in model.modules():
        if isinstance(layer, nn.LayerNorm):            # off their start: gains 1, biases 0
            layer.weight.data[...] = random.normal(1.0, 0.3, layer.weight.shape)
            layer.bias.data[...] = random.normal(0.0, 0.3, layer.bias.shape)
    images = ta.tensor(random.standard_normal((2, 2, 8, 4)), requires_grad=True)
    upstream = random.standard_normal((2, 3))
    assert ta.gradcheck(lambda x, *params: (model(x) * upstream).sum(),
                        [images, *model.parameters()], directions=4)


def test_vit_b_16_has_its_papers_size():
    ta.manual_seed(0)
    model = nn.ViT(**VIT_B_16, dtype=np.float32)
    assert sum(p.size for p in model.parameters()) == 86_567_656      # ViT-B/16, 1000 labels
    assert model.positions.shape == (1, 197, 768)


@pytest.mark.parametrize("images, error, message", [
    (np.zeros((2, 3, 16, 16)), ValueError,
     r"^ViT: pixel_values are images of 16 x 16 pixels \(shape \(2, 3, 16, 16\)\), the model's "
     r"are 32 x 32 \(its config's image_size\)$"),
    (np.zeros((2, 1, 32, 32)), ValueError,
     r"^ViT: pixel_values has 1 channels \(shape \(2, 1, 32, 32\)\), the model 3$"),
    (np.zeros((3, 32, 32)), ValueError, r"^ViT: pixel_values must have shape \(B, C, H, W\)"),
    (np.zeros((2, 3, 32, 32), dtype=np.float32), TypeError,
     r"^ViT: pixel_values has dtype float32 but the layer's parameters are float64"),
])
def test_bad_images_are_refused_in_one_line(images, error, message):
    model = from_pretrained(CLASSIFIER, dtype=np.float64)
    with pytest.raises(error, match=message):
        model(images)


def test_features_name_themselves_in_errors():
    model = from_pretrained(BARE, dtype=np.float64)
    with pytest.raises(ValueError, match=r"^ViT.features: pixel_values are images of 32 x 32"):
        model.features(np.zeros((1, 2, 32, 32)))


@pytest.mark.parametrize("sizes, message", [
    (dict(image_size=30, patch_size=8), r"patch_size 8 must divide the image's sides"),
    (dict(embed_dim=30, num_heads=4), r"num_heads 4 must divide embed_dim 30"),
    (dict(activation="relu"), r"activation must be one of"),
])
def test_sizes_that_do_not_fit_are_refused(sizes, message):
    with pytest.raises(ValueError, match="^ViT: " + message):
        nn.ViT(**{**dict(image_size=32, patch_size=8, embed_dim=32, num_heads=4), **sizes})


@pytest.mark.parametrize("change, message", [
    ({"hidden_act": "relu"}, r"hidden_act 'relu' \(computed: 'gelu', 'gelu_new', "),
    ({"hidden_dropout_prob": 0.1}, r"hidden_dropout_prob 0.1 \(this ViT has no dropout\)"),
    ({"patch_size": [8, 4]}, r"patch_size \[8, 4\] \(square patches: one size\)"),
    ({"architectures": ["ViTForMaskedImageModeling"]},
     r"architectures \['ViTForMaskedImageModeling'\]"),
    ({"model_type": "clip"}, r"model_type 'clip' \(this reader's is 'vit'\)"),
    ({"hidden_size": 24}, r"vit.embeddings.cls_token as float32 \(1, 1, 32\); this config's "
                          r"model has it \(1, 1, 24\)"),
])
def test_a_config_asking_for_what_vit_does_not_compute_is_refused_by_name(tmp_path, change,
                                                                          message):
    folder = tmp_path / "vit"
    shutil.copytree(CLASSIFIER, folder)
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **change}))
    with pytest.raises(ValueError, match=r"^from_pretrained: the folder .*" + message):
        from_pretrained(folder)


def test_weights_that_disagree_with_the_config_are_refused(tmp_path):
    folder = tmp_path / "vit"
    shutil.copytree(CLASSIFIER, folder)
    weights = load_safetensors(folder / "model.safetensors")
    del weights["vit.layernorm.bias"]
    save_safetensors(folder / "model.safetensors", weights, {"format": "pt"})
    with pytest.raises(ValueError, match=r"model.safetensors lacks vit.layernorm.bias"):
        from_pretrained(folder)
    with pytest.raises(FileNotFoundError, match=r"^from_pretrained: there is no folder"):
        from_pretrained(tmp_path / "nowhere")


def test_chapter_1s_feed_forward_takes_either_gelu():
    ta.manual_seed(0)
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)))
    for activation, approximate in (("gelu", "none"), ("gelu_tanh", "tanh")):
        ff = nn.FeedForward(4, 6, activation=activation)
        want = ff.down(ta.functional.gelu(ff.up(x), approximate=approximate))
        np.testing.assert_array_equal(ff(x).data, want.data)
    with pytest.raises(ValueError, match=r"^FeedForward: activation must be one of"):
        nn.FeedForward(4, activation="relu")
