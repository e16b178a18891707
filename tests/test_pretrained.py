"""GPT-2's weights both ways (tinyattn/nn/pretrained.py): CausalTransformer.from_pretrained gives
the logits and the greedy tokens transformers computed on the fixture tests/fixtures/gpt2-tiny
(made by make_gpt2_tiny.py); save_pretrained writes what from_pretrained and transformers read;
the tied head; and a folder that is not a GPT-2 folder, named with what is wrong."""
import json
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.nn import pretrained

FOLDER = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"
TOLERANCE = {"float32": 1e-4, "float64": 1e-9}


@pytest.fixture(scope="module")
def reference():
    return ta.load_safetensors(f"{FOLDER}/reference.safetensors")


@pytest.fixture(scope="module")
def models():
    return {dtype: nn.CausalTransformer.from_pretrained(FOLDER, dtype=np.dtype(dtype))
            for dtype in TOLERANCE}


def gpt2_copy(tmp_path, **config_changes):
    """A copy of the fixture's config and weights in tmp_path, the config changed as asked."""
    folder = tmp_path / "gpt2"
    folder.mkdir()
    shutil.copy(f"{FOLDER}/model.safetensors", folder)
    config = json.loads((FOLDER / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, **config_changes}))
    return folder


def logits_of(model, ids):
    with ta.no_grad():
        return model(ids).data


@pytest.mark.parametrize("dtype", TOLERANCE)
def test_the_logits_are_transformers_logits(models, reference, dtype):
    """At the 2,048 stored columns, and at all 50,257 through the stored last hidden state (the
    logits are it times the tied embedding)."""
    model, ids = models[dtype], reference["input_ids"]
    logits = logits_of(model, ids)                                  # (2, 20, 50257)
    assert logits.dtype == np.dtype(dtype) and logits.shape == (2, 20, 50257)
    columns = reference["logit_columns"]
    np.testing.assert_allclose(logits[..., columns], reference[f"logits_{dtype}"], rtol=0,
                               atol=TOLERANCE[dtype])
    every_column = reference[f"last_hidden_{dtype}"] @ model.embed.weight.data.T
    np.testing.assert_allclose(logits, every_column, rtol=0, atol=TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", TOLERANCE)
def test_greedy_generation_gives_transformers_tokens(models, reference, dtype):
    prompt, expected = reference["prompt_ids"], reference["generated_ids"]
    generated = models[dtype].generate(prompt, expected.shape[1] - prompt.shape[1], temperature=0)
    np.testing.assert_array_equal(generated, expected)
    recomputed = models[dtype].generate(prompt, 20, temperature=0, use_cache=False)
    np.testing.assert_array_equal(recomputed, expected)


def test_the_head_is_the_token_embedding(models):
    model = models["float32"]
    assert model.head.weight is model.embed.weight and model.head.bias is None
    assert model.tied_head and model.positional == "learned" and not model.training
    assert "head.weight" not in model.state_dict() and "embed.weight" in model.state_dict()
    assert model.embed.weight.name == "embed.weight"
    assert model.ln.eps == model.blocks[1].ln2.eps == 1e-5


def test_the_tied_embedding_gets_the_gradient_of_both_uses():
    """The head's and the lookup's gradients add up in embed.weight: here the sum of the two,
    each computed by a model whose other use is a frozen copy."""
    ta.manual_seed(0)
    model = nn.CausalTransformer(11, 8, 2, 1, max_len=6, positional="learned", tied_head=True)
    ids, upstream = np.array([[1, 4, 4, 2]]), np.random.default_rng(0).standard_normal((1, 4, 11))
    model(ids).backward(upstream)
    both = model.embed.weight.grad.copy()
    parts = []
    for frozen in ("embed", "head"):
        model.zero_grad()
        weight = model.embed.weight
        copy = nn.Parameter(weight.data.copy(), requires_grad=False)
        setattr(getattr(model, frozen), "weight", copy)
        model(ids).backward(upstream)
        parts.append(weight.grad)
        setattr(getattr(model, frozen), "weight", weight)
    assert all(part is not None and np.abs(part).max() > 1e-3 for part in parts)
    np.testing.assert_allclose(both, parts[0] + parts[1], rtol=1e-12, atol=1e-14)


def test_last_only_is_the_last_row_of_the_logits(models, reference):
    model, ids = models["float64"], reference["input_ids"]
    with ta.no_grad():
        last = model(ids, last_only=True).data
    assert last.shape == (2, 1, 50257)
    # one row through the head is a product of another shape: BLAS may add in another order
    np.testing.assert_allclose(last[:, 0], logits_of(model, ids)[:, -1], rtol=0, atol=1e-13)


def test_names_without_the_prefix_and_gpt2s_mask_buffers_are_read(tmp_path, models, reference):
    """OpenAI's converted checkpoint names weights without `transformer.`, holds each layer's
    causal mask as h.N.attn.bias, and may hold lm_head.weight equal to wte."""
    weights = ta.load_safetensors(f"{FOLDER}/model.safetensors")
    renamed = {name.removeprefix("transformer."): array for name, array in weights.items()}
    renamed.update({f"h.{n}.attn.bias": np.tril(np.ones((1, 1, 128, 128), np.float32))
                    for n in range(2)})
    renamed["lm_head.weight"] = renamed["wte.weight"]
    folder = gpt2_copy(tmp_path)
    ta.save_safetensors(folder / "model.safetensors", renamed)
    model = nn.CausalTransformer.from_pretrained(folder, dtype=np.float64)
    np.testing.assert_array_equal(logits_of(model, reference["input_ids"]),
                                  logits_of(models["float64"], reference["input_ids"]))


def test_save_pretrained_writes_the_files_it_read(tmp_path, models):
    models["float32"].save_pretrained(tmp_path / "saved")
    assert sorted(path.name for path in (tmp_path / "saved").iterdir()) == \
        ["config.json", "model.safetensors"]
    saved = ta.load_safetensors(tmp_path / "saved" / "model.safetensors")
    original = ta.load_safetensors(f"{FOLDER}/model.safetensors")
    assert sorted(saved) == sorted(original)
    for name in original:
        assert saved[name].dtype == np.float32, name
        np.testing.assert_array_equal(saved[name], original[name], err_msg=name)
    config = json.loads((tmp_path / "saved" / "config.json").read_text())
    fixture_config = json.loads((FOLDER / "config.json").read_text())
    for key in pretrained.SIZES + ("n_inner", "layer_norm_epsilon", "activation_function",
                                   "model_type", "tie_word_embeddings", "scale_attn_weights"):
        assert config[key] == fixture_config[key], key


def a_model_trained_here():
    """A GPT-2-shaped model that is not GPT-2's default: an inner width of its own, another
    LayerNorm eps, unscaled attention, float64, after one step of training."""
    ta.manual_seed(3)
    model = nn.CausalTransformer(13, 12, 3, 2, max_len=9, positional="learned", tied_head=True,
                                 hidden_dim=20, layer_norm_eps=1e-3, scale=1.0)
    ids = np.random.default_rng(0).integers(0, 13, (2, 9))
    optimizer = ta.optim.Adam(model.parameters(), lr=0.01)
    logits = model(ids[:, :-1])
    ta.functional.cross_entropy(logits.reshape(-1, 13), ids[:, 1:].reshape(-1)).backward()
    optimizer.step()
    return model.eval(), ids


def test_a_model_trained_here_round_trips_through_tinyattn(tmp_path):
    model, ids = a_model_trained_here()
    model.save_pretrained(tmp_path)
    loaded = nn.CausalTransformer.from_pretrained(tmp_path, dtype=np.float64)
    assert loaded.blocks[0].ff.up.out_features == 20 and loaded.ln.eps == 1e-3
    assert loaded.blocks[0].attn.scale == 1.0
    np.testing.assert_array_equal(logits_of(loaded, ids), logits_of(model, ids))


@pytest.mark.parametrize("dtype", TOLERANCE)
def test_save_pretrained_runs_in_transformers(tmp_path, models, reference, dtype):
    """transformers loads what save_pretrained wrote and computes the same logits (skipped, saying
    so, when transformers is not installed)."""
    torch = pytest.importorskip("torch", reason="torch is not installed: the round trip through "
                                                "transformers is not checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: "
                                       "the round trip through it is not checked")
    model, ids = a_model_trained_here()
    cases = [(model.to(np.dtype(dtype)), ids), (models[dtype], reference["input_ids"])]
    for number, (ours, ids) in enumerate(cases):
        ours.save_pretrained(tmp_path / str(number))
        theirs = transformers.GPT2LMHeadModel.from_pretrained(
            tmp_path / str(number), dtype=getattr(torch, dtype), attn_implementation="eager")
        with torch.no_grad():
            their_logits = theirs.eval()(torch.tensor(ids)).logits.numpy()
        assert their_logits.dtype == np.dtype(dtype)
        np.testing.assert_allclose(their_logits, logits_of(ours, ids), rtol=0,
                                   atol=TOLERANCE[dtype])


@pytest.mark.parametrize("vocab_size, endoftext", [(50257, 50256), (13, None)])
def test_save_pretrained_writes_gpt2s_bos_and_eos_ids_where_they_fit(tmp_path, vocab_size,
                                                                    endoftext):
    """GPT-2 begins and ends a text with <|endoftext|>, id 50256; a smaller vocabulary has no
    such id, and says so with null (transformers would otherwise take 50256 and warn)."""
    nn.CausalTransformer(vocab_size, 8, 2, 1, max_len=6, positional="learned",
                         tied_head=True).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert "bos_token_id" in config and "eos_token_id" in config
    assert config["bos_token_id"] == config["eos_token_id"] == endoftext


def test_transformers_loads_a_small_vocabulary_without_a_warning(tmp_path, capfd):
    """(Skipped, saying so, when transformers is not installed.)"""
    pytest.importorskip("torch", reason="torch is not installed: transformers' warnings are not "
                                        "checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: "
                                       "its warnings are not checked")
    model, _ = a_model_trained_here()
    model.save_pretrained(tmp_path)
    theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path)
    assert theirs.config.bos_token_id is None and theirs.config.eos_token_id is None
    assert "token_id" not in capfd.readouterr().err


def sharded_copy(tmp_path, shards=2):
    """The fixture's weights as Hugging Face saves a model too big for one file: shards
    model-0000K-of-0000N.safetensors, and model.safetensors.index.json mapping each weight's name
    to its shard."""
    folder = gpt2_copy(tmp_path)
    weights = ta.load_safetensors(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    names, weight_map = list(weights), {}
    for number, part in enumerate(np.array_split(np.arange(len(names)), shards), start=1):
        shard = f"model-{number:05d}-of-{shards:05d}.safetensors"
        ta.save_safetensors(folder / shard, {names[i]: weights[names[i]] for i in part},
                            {"format": "pt"})
        weight_map.update({names[i]: shard for i in part})
    total_size = sum(array.nbytes for array in weights.values())
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": total_size}, "weight_map": weight_map}, indent=2))
    return folder


def test_a_sharded_checkpoint_is_read_by_following_its_index(tmp_path, models, reference):
    folder = sharded_copy(tmp_path, shards=3)
    model = nn.CausalTransformer.from_pretrained(folder, dtype=np.float64)
    np.testing.assert_array_equal(logits_of(model, reference["input_ids"]),
                                  logits_of(models["float64"], reference["input_ids"]))


def test_a_checkpoint_transformers_shards_is_read(tmp_path, models, reference):
    """transformers' own sharding of the fixture (skipped, saying so, when it is not installed)."""
    torch = pytest.importorskip("torch", reason="torch is not installed: transformers' shards "
                                                "are not checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: "
                                       "its shards are not checked")
    theirs = transformers.GPT2LMHeadModel.from_pretrained(FOLDER, dtype=torch.float64)
    theirs.save_pretrained(tmp_path, max_shard_size="2MB")
    assert (tmp_path / "model.safetensors.index.json").is_file()
    assert len(list(tmp_path.glob("model-*-of-*.safetensors"))) > 1
    model = nn.CausalTransformer.from_pretrained(tmp_path, dtype=np.float64)
    np.testing.assert_array_equal(logits_of(model, reference["input_ids"]),
                                  logits_of(models["float64"], reference["input_ids"]))


def edit_the_index(edit):
    """A change to a sharded folder: `edit(index)` on the parsed model.safetensors.index.json."""
    def change(folder):
        index = json.loads((folder / "model.safetensors.index.json").read_text())
        edit(index)
        (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    return change


def moved_to_the_other_shard(index, name="transformer.wte.weight"):
    """The index of two shards, saying that `name` is in the shard that does not hold it."""
    shards = sorted(set(index["weight_map"].values()))
    index["weight_map"][name] = shards[1 - shards.index(index["weight_map"][name])]


@pytest.mark.parametrize("change, error, message", [
    (lambda folder: (folder / "model-00002-of-00002.safetensors").unlink(), FileNotFoundError,
     r"the folder '.*gpt2': model.safetensors.index.json lists the shard "
     r"model-00002-of-00002.safetensors, which is not in the folder$"),
    (lambda folder: (folder / "model.safetensors.index.json").write_text("{"), ValueError,
     r"the folder '.*gpt2': model.safetensors.index.json is not valid JSON"),
    (edit_the_index(lambda index: index.pop("weight_map")), ValueError,
     r"the folder '.*gpt2': model.safetensors.index.json must hold a \"weight_map\" of weight "
     r"names to shard file names \(Hugging Face's index of a sharded checkpoint\)$"),
    (edit_the_index(lambda index: index["weight_map"].update({"wte.weight": "../wte.bin"})),
     ValueError, r"the folder '.*gpt2': model.safetensors.index.json names the shard "
                 r"'../wte.bin', which is not a "
                 r"file name in the folder$"),
    (edit_the_index(moved_to_the_other_shard),
     ValueError, r"the folder '.*gpt2': model.safetensors.index.json lists "
                 r"transformer.wte.weight in model-0000\d-of-00002.safetensors, which does not "
                 r"hold it$"),
    (edit_the_index(lambda index: index["weight_map"].pop("transformer.ln_f.bias")), ValueError,
     r"the folder '.*gpt2': the sharded checkpoint \(model.safetensors.index.json\) and "
     r"config.json disagree: for "
     r"a GPT-2 of .*, the sharded checkpoint \(model.safetensors.index.json\) lacks ln_f.bias$"),
])
def test_a_sharded_folder_with_a_shard_missing_or_a_broken_index_is_named(tmp_path, change,
                                                                          error, message):
    folder = sharded_copy(tmp_path)
    change(folder)
    with pytest.raises(error, match=r"^CausalTransformer.from_pretrained: " + message):
        nn.CausalTransformer.from_pretrained(folder)


@pytest.mark.parametrize("change, error, message", [
    (lambda folder: shutil.rmtree(folder), FileNotFoundError, r"there is no folder '.*gpt2'"),
    (lambda folder: (folder / "config.json").unlink(), FileNotFoundError,
     r"the folder '.*gpt2' has no config.json: a GPT-2 folder in Hugging Face's layout holds "
     r"config.json and model.safetensors \(`python -m tinyattn download gpt2`"),
    (lambda folder: (folder / "model.safetensors").unlink(), FileNotFoundError,
     r"the folder '.*gpt2' has config.json but no model.safetensors \(the weights\), nor the "
     r"model.safetensors.index.json of a sharded checkpoint$"),
    (lambda folder: (folder / "config.json").write_text("{'n_layer': 2"), ValueError,
     r"the folder '.*gpt2': config.json is not valid JSON"),
    (lambda folder: (folder / "config.json").write_text('{"n_layer": 2, "n_head": 4}'), ValueError,
     r"the folder '.*gpt2': config.json has no n_embd, n_positions, vocab_size: it is not a "
     r"GPT-2 config"),
    (lambda folder: (folder / "model.safetensors").write_bytes(b"\x05" + bytes(7)), ValueError,
     r"load_safetensors: '.*gpt2/model.safetensors' is not a safetensors file"),
])
def test_a_folder_with_a_file_missing_or_broken_is_named(tmp_path, change, error, message):
    folder = gpt2_copy(tmp_path)
    change(folder)
    with pytest.raises(error, match=r"^CausalTransformer.from_pretrained: " + message):
        nn.CausalTransformer.from_pretrained(folder)


@pytest.mark.parametrize("config_changes, message", [
    (dict(n_layer=3), r"model.safetensors and config.json disagree: for a GPT-2 of n_layer 3, "
                      r"n_head 4, n_embd 32, n_positions 128, vocab_size 50257, model.safetensors "
                      r"lacks h.2.ln_1.weight, h.2.ln_1.bias, h.2.ln_2.weight, h.2.ln_2.bias and "
                      r"8 more$"),
    (dict(n_layer=1), r".*, model.safetensors also holds h.1.attn.c_attn.bias, .* and 8 more$"),
    (dict(n_embd=64, n_head=4), r"model.safetensors and config.json disagree: for a GPT-2 of "
                                r"n_layer 2, n_head 4, n_embd 64, .*, wte.weight would be "
                                r"\(50257, 64\), but model.safetensors holds \(50257, 32\)$"),
    (dict(n_positions=64), r".*, wpe.weight would be \(64, 32\), but model.safetensors holds "
                           r"\(128, 32\)$"),
    (dict(n_inner=64), r".*, h.0.mlp.c_fc.weight would be \(32, 64\), but .* holds \(32, 128\)$"),
    (dict(activation_function="relu", n_head=3), r"config.json asks for what CausalTransformer "
                                                 r"does not do: activation_function 'relu' .*; "
                                                 r"n_embd 32 not divisible by n_head 3$"),
    (dict(model_type="llama"), r".*: model_type 'llama' \(not 'gpt2'\)"),
    (dict(n_layer="2"), r"config.json's n_layer is '2'; sizes must be integers of at least 1"),
])
def test_a_config_that_disagrees_with_the_weights_is_named(tmp_path, config_changes, message):
    folder = gpt2_copy(tmp_path, **config_changes)
    with pytest.raises(ValueError, match=rf"^CausalTransformer.from_pretrained: the folder "
                                         rf"'.*gpt2': {message}"):
        nn.CausalTransformer.from_pretrained(folder)


def test_from_pretrained_checks_its_dtype():
    with pytest.raises(TypeError, match=r"^CausalTransformer.from_pretrained: dtype must be a "
                                        r"floating-point type, got int64"):
        nn.CausalTransformer.from_pretrained(FOLDER, dtype=np.int64)


@pytest.mark.parametrize("settings, message", [
    (dict(positional="sinusoidal", tied_head=True), r"this one has sinusoidal positions \(not "
                                                    r"learned\)$"),
    (dict(positional="learned"), r"this one has an output head with a bias$"),
    (dict(positional="rope", scale=0.5), r"this one has rotary positions \(positional='rope'\) "
                                         r"and an output head with a bias and scale 0.5 \(not "
                                         r"None or 1.0\)$"),
])
def test_save_pretrained_refuses_a_model_gpt2s_layout_cannot_hold(tmp_path, settings, message):
    model = nn.CausalTransformer(11, 8, 2, 1, max_len=6, **settings)
    with pytest.raises(ValueError, match=r"^CausalTransformer.save_pretrained: GPT-2's layout "
                                         r"holds a model with learned positions, GPT-2's layers "
                                         r"and the default scale; " + message):
        model.save_pretrained(tmp_path)
    assert list(tmp_path.iterdir()) == []


def gpt2_shaped_model(seed=3):
    ta.manual_seed(seed)
    return nn.CausalTransformer(13, 12, 3, 2, max_len=9, positional="learned", tied_head=True,
                                dtype=np.float64)


@pytest.mark.parametrize("change, message", [
    (lambda model: nn.add_lora(model, 2), r"layers GPT-2 does not have: blocks.0.attn.q_proj "
                                          r"\(a LoRALinear\), .*merge_lora\(model\) folds LoRA "
                                          r"adapters .* save_lora saves the adapters alone"),
    (lambda model: model.blocks[1].attn.attach("q", lambda q: q), r"functions attached to the "
                                                                  r"hook points of blocks.1.attn "
                                                                  r"\(q\)$"),
    (lambda model: setattr(model.blocks[1].attn, "rope", True), r"rotary positions "
                                                                r"\(positional='rope'\)$"),
    (lambda model: setattr(model.blocks[1].ln2, "eps", 1e-3), r"LayerNorms of different eps"),
    (lambda model: setattr(model.blocks[0].attn, "scale", 1.0), r"blocks of different scales"),
    (lambda model: setattr(model.ln.weight, "data", model.ln.weight.data.astype(np.float32)),
     r"parameters of several dtypes"),
])
def test_save_pretrained_refuses_what_a_change_after_building_made_unholdable(tmp_path, change,
                                                                              message):
    """Nothing lost silently: a model changed after it was built or loaded (adapters left
    unmerged, a function attached, a layer's setting changed alone) is refused, naming it."""
    model = gpt2_shaped_model()
    change(model)
    with pytest.raises(ValueError, match=r"^CausalTransformer.save_pretrained: .*" + message):
        model.save_pretrained(tmp_path)
    assert list(tmp_path.iterdir()) == []


def merged_lora_on_the_tied_head():
    """LoRA on every Linear, the tied head included, trained a step, then merged: the head gets a
    weight of its own (W + B A), no longer the embedding."""
    model = gpt2_shaped_model()
    nn.add_lora(model, 2, targets="*")
    for name, parameter in model.named_parameters():
        if name.endswith("lora_B"):
            parameter.data[...] = np.random.default_rng(1).standard_normal(parameter.shape)
    nn.merge_lora(model)
    assert model.head.weight is not model.embed.weight
    return model.eval()


def test_an_untied_head_is_saved_as_lm_head_and_read_back(tmp_path):
    model, ids = merged_lora_on_the_tied_head(), np.arange(9).reshape(1, 9) % 13
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["tie_word_embeddings"] is False
    assert "lm_head.weight" in ta.load_safetensors(tmp_path / "model.safetensors")
    loaded = nn.CausalTransformer.from_pretrained(tmp_path, dtype=np.float64)
    assert loaded.head.weight is not loaded.embed.weight
    np.testing.assert_array_equal(logits_of(loaded, ids), logits_of(model, ids))
    tied = gpt2_shaped_model()
    assert np.abs(logits_of(tied, ids) - logits_of(model, ids)).max() > 1e-2   # the head counts


def test_an_untied_head_runs_in_transformers(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed: the round trip through "
                                                "transformers is not checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: "
                                       "the round trip through it is not checked")
    model, ids = merged_lora_on_the_tied_head(), np.arange(9).reshape(1, 9) % 13
    model.save_pretrained(tmp_path)
    theirs = transformers.GPT2LMHeadModel.from_pretrained(tmp_path, dtype=torch.float64,
                                                          attn_implementation="eager")
    with torch.no_grad():
        their_logits = theirs.eval()(torch.tensor(ids)).logits.numpy()
    np.testing.assert_allclose(their_logits, logits_of(model, ids), rtol=0, atol=1e-9)


def test_a_config_that_unties_the_head_needs_lm_head(tmp_path):
    folder = gpt2_copy(tmp_path, tie_word_embeddings=False)
    with pytest.raises(ValueError, match=r"config.json unties the head \(tie_word_embeddings "
                                         r"false\), so model.safetensors must hold "
                                         r"lm_head.weight \(\d+, 32\); it holds none"):
        nn.CausalTransformer.from_pretrained(folder)


def test_from_pretrained_finds_a_downloaded_model_by_its_name(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    shutil.copytree(FOLDER, tmp_path / "tinyattn" / "gpt2")
    monkeypatch.chdir(tmp_path)                     # no folder named gpt2 here
    model = nn.CausalTransformer.from_pretrained("gpt2")
    assert model.embed.num_embeddings == 50257
    with pytest.raises(FileNotFoundError, match=r"there is no folder 'gpt3', nor a downloaded "
                                                r"model of that name in '.*tinyattn/gpt3' "
                                                r"\(`python -m tinyattn download NAME`"):
        nn.CausalTransformer.from_pretrained("gpt3")
