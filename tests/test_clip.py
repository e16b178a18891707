"""Chapter 6's CLIP (tinyattn/nn/clip.py) and its checkpoints (nn/clip_checkpoints.py): number for
number against transformers' CLIPModel on the committed fixtures (tests/fixtures/make_clip.py),
the contrastive loss's gradient as its docstring derives it, its activations by name,
save_pretrained read back by tinyattn and by transformers, and what it refuses."""
import json
import math
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn import load_safetensors, save_safetensors
from tinyattn.nn.clip import CLIP_VIT_B_32, quick_gelu
from tinyattn.nn.clip_checkpoints import from_pretrained

FIXTURES = pathlib.Path(__file__).parent / "fixtures"
CURRENT, LEGACY = FIXTURES / "clip-tiny", FIXTURES / "clip-legacy-tiny"
DTYPES = {"float32": np.float32, "float64": np.float64}
# a small CLIP built here: 8 x 8 images of 2 channels, texts out of 11 ids ending with 10
SMALL = dict(vision=dict(image_size=8, patch_size=4, num_channels=2, embed_dim=8, num_heads=2,
                         num_layers=2, hidden_dim=12),
             text=dict(vocab_size=11, max_positions=6, embed_dim=6, num_heads=3, num_layers=2,
                       hidden_dim=10, eos_token_id=10),
             projection_dim=4, logit_scale=1.7)
SMALL_IDS = np.array([[3, 7, 10, 10, 10], [1, 2, 5, 4, 10], [6, 10, 0, 10, 9]])


def reference(folder):
    return load_safetensors(folder / "reference.safetensors")


def assert_matches(got, want, precision):
    """API.md's parity: float32 within 1e-4 * max(1, max |want|), float64 within 1e-9 relative."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if precision == "float32":
        assert np.abs(got - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max()))
    else:
        assert np.abs(got - want).max() <= 1e-9 * float(np.abs(want).max())


def off_their_start(model, seed=1):
    """`model` with its LayerNorms' gains and biases drawn at random, as after training."""
    random = np.random.default_rng(seed)
    for layer in model.modules():
        if isinstance(layer, nn.LayerNorm):
            layer.weight.data[...] = random.normal(1.0, 0.3, layer.weight.shape)
            layer.bias.data[...] = random.normal(0.0, 0.3, layer.bias.shape)
    return model


@pytest.mark.parametrize("precision", DTYPES)
@pytest.mark.parametrize("folder", [CURRENT, LEGACY], ids=["eos_98", "legacy_eos_2"])
def test_features_logits_and_loss_are_transformers(folder, precision):
    model, ref = from_pretrained(folder, dtype=DTYPES[precision]), reference(folder)
    images, ids = ref["pixel_values"].astype(DTYPES[precision]), ref["input_ids"]
    with ta.no_grad():
        assert_matches(model.get_image_features(images).data, ref[f"image_features_{precision}"],
                       precision)
        assert_matches(model.get_text_features(ids).data, ref[f"text_features_{precision}"],
                       precision)
        assert_matches(model(ids, images).data, ref[f"logits_per_image_{precision}"], precision)
        assert_matches(model.contrastive_loss(ids, images).data, ref[f"loss_{precision}"],
                       precision)
        # fewer texts than images: the logits are (B_img, B_txt), each column its text's
        assert_matches(model(ids[:2], images).data,
                       ref[f"logits_per_image_{precision}"][:, :2], precision)


@pytest.mark.parametrize("folder, row, end", [(CURRENT, 0, 3), (CURRENT, 2, 2), (LEGACY, 0, 3),
                                              (LEGACY, 1, 6), (LEGACY, 2, 2)])
def test_each_text_is_read_at_its_end(folder, row, end):
    """The causal mask lets nothing after the end reach it: the text cut there has the same
    features (where it is read is transformers', in the test above). clip-tiny reads the first 98
    (eos_token_id); the legacy config the largest id."""
    model, ids = from_pretrained(folder, dtype=np.float64), reference(folder)["input_ids"]
    assert model.text.eos_token_id == (2 if folder == LEGACY else 98)
    with ta.no_grad():
        whole = model.get_text_features(ids[row:row + 1]).data
        cut = model.get_text_features(ids[row:row + 1, :end + 1]).data
    np.testing.assert_allclose(whole, cut, rtol=0, atol=1e-12)


def test_the_loss_gradients_are_transformers():
    model, ref = from_pretrained(CURRENT, dtype=np.float64), reference(CURRENT)
    loss = model.contrastive_loss(ref["input_ids"], ref["pixel_values"].astype(np.float64))
    loss.backward()
    for ours, theirs in (("logit_scale", "grad_logit_scale_float64"),
                         ("visual_projection.weight", "grad_visual_projection_float64"),
                         ("text_projection.weight", "grad_text_projection_float64")):
        grad, want = dict(model.named_parameters())[ours].grad, ref[theirs]
        assert np.abs(grad - want).max() <= 1e-9 * np.abs(want).max()


def test_the_gradient_on_the_logits_is_softmax_minus_identity_both_ways():
    """d L / d S = (R - I) / (2B) + (C - I) / (2B): R the rows' softmax, C the columns'."""
    B = 5
    logits = ta.tensor(np.random.default_rng(0).standard_normal((B, B)) * 3.0, requires_grad=True)
    pairs = np.arange(B)
    loss = (F.cross_entropy(logits, pairs) + F.cross_entropy(logits.transpose(), pairs)) / 2.0
    loss.backward()
    S = logits.data
    rows = np.exp(S - S.max(axis=1, keepdims=True))
    rows /= rows.sum(axis=1, keepdims=True)
    columns = np.exp(S - S.max(axis=0, keepdims=True))
    columns /= columns.sum(axis=0, keepdims=True)
    want = (rows - np.eye(B)) / (2 * B) + (columns - np.eye(B)) / (2 * B)
    np.testing.assert_allclose(logits.grad, want, rtol=0, atol=1e-15)


def test_the_temperatures_gradient_is_the_logits_gradient_along_the_logits():
    """d L / d t = sum_ij (d L / d S_ij) S_ij, t = logit_scale, S = e^t cos."""
    model, ref = from_pretrained(LEGACY, dtype=np.float64), reference(LEGACY)
    ids, images = ref["input_ids"], ref["pixel_values"].astype(np.float64)
    model.contrastive_loss(ids, images).backward()
    with ta.no_grad():
        S = model(ids, images).data
    B = S.shape[0]
    rows = np.exp(S) / np.exp(S).sum(axis=1, keepdims=True)
    columns = np.exp(S) / np.exp(S).sum(axis=0, keepdims=True)
    grad_S = (rows - np.eye(B) + columns - np.eye(B)) / (2 * B)
    assert abs(float(model.logit_scale.grad) - float((grad_S * S).sum())) <= 1e-14


def test_the_contrastive_loss_passes_gradcheck():
    ta.manual_seed(0)
    model = off_their_start(nn.CLIP(**SMALL))
    random = np.random.default_rng(1)
    images = ta.tensor(random.standard_normal((3, 2, 8, 8)), requires_grad=True)
    assert ta.gradcheck(lambda x, *params: model.contrastive_loss(SMALL_IDS, x),
                        [images, *model.parameters()], directions=4)


def test_both_features_pass_gradcheck_with_a_random_upstream_gradient():
    ta.manual_seed(0)
    model = off_their_start(nn.CLIP(**SMALL))
    random = np.random.default_rng(2)
    images = ta.tensor(random.standard_normal((2, 2, 8, 8)), requires_grad=True)
    upstream = random.standard_normal((2, 4))
    assert ta.gradcheck(lambda x, *params: (model.get_image_features(x) * upstream).sum(),
                        [images, *model.vision.parameters(), *model.visual_projection.parameters()],
                        directions=4)
    upstream = random.standard_normal((3, 4))
    assert ta.gradcheck(lambda *params: (model.get_text_features(SMALL_IDS) * upstream).sum(),
                        [*model.text.parameters(), *model.text_projection.parameters()],
                        directions=4)


def test_quick_gelu_is_x_sigmoid_1702_x_within_0021_of_gelu():
    x = np.linspace(-8.0, 8.0, 16001)
    got = quick_gelu(ta.tensor(x)).data
    np.testing.assert_allclose(got, x / (1.0 + np.exp(-1.702 * x)), rtol=1e-15, atol=1e-15)
    gelu = F.gelu(ta.tensor(x), approximate="none").data
    assert 0.02 < np.abs(got - gelu).max() < 0.021
    leaf = ta.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
    upstream = np.random.default_rng(1).standard_normal((3, 4))
    assert ta.gradcheck(lambda x: (quick_gelu(x) * upstream).sum(), [leaf])


def test_its_activations_are_named_as_chapter_4_names_them():
    model, ref = from_pretrained(CURRENT, dtype=np.float64), reference(CURRENT)
    ids, images = ref["input_ids"], ref["pixel_values"].astype(np.float64)
    logits, cache = model.run_with_cache(ids, images)
    assert cache["vision.embed"].shape == (3, 17, 32) and cache["text.embed"].shape == (3, 7, 32)
    for block in range(2):
        seen = cache[f"vision.blocks.{block}.attn.weights"]
        assert seen.shape == (3, 4, 17, 17)                     # (B, H, 1 + P, 1 + P)
        read = cache[f"text.blocks.{block}.attn.weights"]
        assert read.shape == (3, 4, 7, 7)                       # (B, H, T, T)
        assert np.all(np.triu(read, k=1) == 0.0)                # causal: nothing after a token
        np.testing.assert_allclose(read.sum(axis=-1), 1.0, atol=1e-12)
    np.testing.assert_array_equal(logits.data, model(ids, images).data)


def test_float32_stays_float32_end_to_end():
    model, ref = from_pretrained(CURRENT), reference(CURRENT)       # dtype float32 by default
    loss = model.contrastive_loss(ref["input_ids"], ref["pixel_values"])
    _, cache = model.run_with_cache(ref["input_ids"], ref["pixel_values"])
    assert loss.dtype == np.float32
    assert {array.dtype for array in cache.values()} == {np.dtype(np.float32)}
    loss.backward()
    assert {p.grad.dtype for p in model.parameters()} == {np.dtype(np.float32)}


def test_save_pretrained_writes_what_it_read(tmp_path):
    for folder in (CURRENT, LEGACY):
        model = from_pretrained(folder, dtype=np.float64)
        model.save_pretrained(tmp_path / folder.name)
        stored = load_safetensors(tmp_path / folder.name / "model.safetensors")
        original = load_safetensors(folder / "model.safetensors")
        assert set(stored) == set(original)
        for name, array in stored.items():
            np.testing.assert_array_equal(array, original[name].astype(np.float64))
        again = from_pretrained(tmp_path / folder.name, dtype=np.float64)
        ref = reference(folder)
        ids, images = ref["input_ids"], ref["pixel_values"].astype(np.float64)
        np.testing.assert_array_equal(again(ids, images).data, model(ids, images).data)
        config = json.loads((tmp_path / folder.name / "config.json").read_text())
        assert config["text_config"]["bos_token_id"] == 97


def test_transformers_reads_what_save_pretrained_writes(tmp_path):
    torch = pytest.importorskip("torch", reason="the reference needs torch (pip install torch)")
    transformers = pytest.importorskip(
        "transformers", reason="the reference needs transformers (pip install transformers)")
    ta.manual_seed(3)
    model = off_their_start(nn.CLIP(**SMALL))
    model.save_pretrained(tmp_path / "small")
    theirs = transformers.CLIPModel.from_pretrained(tmp_path / "small", dtype=torch.float64).eval()
    images = np.random.default_rng(0).standard_normal((3, 2, 8, 8))
    with torch.no_grad():
        out = theirs(input_ids=torch.from_numpy(SMALL_IDS), pixel_values=torch.from_numpy(images),
                     return_loss=True)
    with ta.no_grad():
        np.testing.assert_allclose(model(SMALL_IDS, images).data, out.logits_per_image.numpy(),
                                   rtol=0, atol=1e-12)
        np.testing.assert_allclose(model.contrastive_loss(SMALL_IDS, images).data,
                                   out.loss.numpy(), rtol=0, atol=1e-12)


def test_clip_vit_b_32_has_its_size():
    ta.manual_seed(0)
    model = nn.CLIP(**CLIP_VIT_B_32, dtype=np.float32)
    assert sum(p.size for p in model.parameters()) == 151_277_313   # openai/clip-vit-base-patch32
    assert model.vision.positions.shape == (50, 768) and model.text.positions.shape == (77, 512)
    assert abs(float(model.logit_scale.data) - math.log(1 / 0.07)) < 1e-4


@pytest.mark.parametrize("call, error, message", [
    (lambda m, ids, x: m.get_image_features(x[:, :, :16, :16]), ValueError,
     r"^CLIP.get_image_features: pixel_values are images of 16 x 16 pixels \(shape \(3, 3, 16, "
     r"16\)\), the model's are 32 x 32 \(its config's image_size\)$"),
    (lambda m, ids, x: m.get_image_features(x[:, :1]), ValueError,
     r"^CLIP.get_image_features: pixel_values has 1 channels \(shape \(3, 1, 32, 32\)\), the "
     r"model 3$"),
    (lambda m, ids, x: m.get_image_features(x.astype(np.float32)), TypeError,
     r"^CLIP.get_image_features: pixel_values has dtype float32 but the layer's parameters are "
     r"float64"),
    (lambda m, ids, x: m.get_text_features(np.where(ids == 5, 99, ids)), IndexError,
     r"^CLIP.get_text_features: input_ids must lie in \[0, 99\) \(99 tokens\), got 99$"),
    (lambda m, ids, x: m.get_text_features(np.tile(ids, 2)), ValueError,
     r"^CLIP.get_text_features: input_ids holds texts of 14 tokens, the model's positions 12$"),
    (lambda m, ids, x: m.get_text_features(ids[:, :2]), ValueError,
     r"^CLIP.get_text_features: input_ids row 0 has no end-of-text token \(eos_token_id 98\)"),
    (lambda m, ids, x: m.get_text_features(ids[0]), ValueError,
     r"^CLIP.get_text_features: input_ids must have shape \(B, T\)"),
    (lambda m, ids, x: m.get_text_features(ids.astype(np.float64)), TypeError,
     r"^CLIP.get_text_features: input_ids must be integers"),
    (lambda m, ids, x: m(ids, x[:, :, :8]), ValueError, r"^CLIP: pixel_values are images of 8 x"),
    (lambda m, ids, x: m.contrastive_loss(ids[:2], x), ValueError,
     r"^CLIP.contrastive_loss: contrastive_loss pairs text i with image i: got 2 texts"),
])
def test_bad_input_is_refused_in_one_line(call, error, message):
    model, ref = from_pretrained(CURRENT, dtype=np.float64), reference(CURRENT)
    with pytest.raises(error, match=message):
        call(model, ref["input_ids"], ref["pixel_values"].astype(np.float64))


@pytest.mark.parametrize("sizes, message", [
    (dict(vision=dict(image_size=30, patch_size=8)),
     r"^VisionTower: patch_size 8 must divide image_size 30"),
    (dict(vision=dict(embed_dim=30, num_heads=4)), r"^VisionTower: num_heads 4 must divide"),
    (dict(text=dict(embed_dim=30, num_heads=4)), r"^TextTower: num_heads 4 must divide"),
])
def test_sizes_that_do_not_fit_are_refused(sizes, message):
    arguments = {"vision": {**SMALL["vision"], **sizes.get("vision", {})},
                 "text": {**SMALL["text"], **sizes.get("text", {})}}
    with pytest.raises(ValueError, match=message):
        nn.CLIP(**arguments)


@pytest.mark.parametrize("change, message", [
    ({"vision_config": {"hidden_act": "gelu"}},
     r"vision_config.hidden_act 'gelu' \(computed: 'quick_gelu'\)"),
    ({"text_config": {"hidden_act": "gelu_pytorch_tanh"}}, r"text_config.hidden_act 'gelu_"),
    ({"text_config": {"attention_dropout": 0.1}},
     r"text_config.attention_dropout 0.1 \(this CLIP has no dropout\)"),
    ({"vision_config": {"image_size": [32, 24]}},
     r"vision_config.image_size \[32, 24\] \(square: one size\)"),
    ({"text_config": {"eos_token_id": [98, 97]}},
     r"text_config.eos_token_id \[98, 97\] \(one id\)"),
    ({"architectures": ["CLIPVisionModel"]}, r"architectures \['CLIPVisionModel'\]"),
    ({"model_type": "vit"}, r"model_type 'vit' \(this reader's is 'clip'\)"),
    ({"projection_dim": 8}, r"visual_projection.weight as float32 \(16, 32\); this config's "
                            r"model has it \(8, 32\)"),
])
def test_a_config_asking_for_what_clip_does_not_compute_is_refused_by_name(tmp_path, change,
                                                                           message):
    folder = tmp_path / "clip"
    shutil.copytree(CURRENT, folder)
    config = json.loads((folder / "config.json").read_text())
    for key, value in change.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) else value
    (folder / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"^from_pretrained: the folder .*" + message):
        from_pretrained(folder)


def test_weights_that_disagree_with_the_config_are_refused(tmp_path):
    folder = tmp_path / "clip"
    shutil.copytree(CURRENT, folder)
    weights = load_safetensors(folder / "model.safetensors")
    del weights["logit_scale"]
    save_safetensors(folder / "model.safetensors", weights, {"format": "pt"})
    with pytest.raises(ValueError, match=r"model.safetensors lacks logit_scale"):
        from_pretrained(folder)
    with pytest.raises(FileNotFoundError, match=r"^from_pretrained: there is no folder"):
        from_pretrained(tmp_path / "nowhere")
