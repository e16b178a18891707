"""Every family's checkpoint both ways (tinyattn/nn/open_checkpoints.py): `nn.from_pretrained`
gives the logits and the greedy tokens transformers computed on the fixtures
tests/fixtures/*-tiny (made by make_open_models.py), from either layout of config.json and from
shards; switches mean what transformers makes them mean; what the decoder does not compute is
refused by name; save_pretrained writes what from_pretrained and transformers read, and refuses
what a family's files cannot hold. Offline: transformers is needed only by the tests that say
so, which skip without it."""
import copy
import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.viz as viz

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text", "qwen3_moe", "deepseek_v3")
# each family's fixture, and DeepSeek-V3's without q_lora_rank
CHECKPOINTS = FAMILIES + ("deepseek_v3-no-q-lora",)
MIXTURES = ("qwen3_moe", "deepseek_v3", "deepseek_v3-no-q-lora")


def folder_of(checkpoint):
    return FIXTURES / f"{checkpoint}-tiny"


def family_of(checkpoint):
    return checkpoint.split("-")[0]


@pytest.fixture(scope="module")
def references():
    return {name: ta.load_safetensors(folder_of(name) / "reference.safetensors")
            for name in CHECKPOINTS}


def tolerance(reference, dtype):
    """Chapter 5's parity: float32 within 1e-4 * max(1, max |logit|); float64 within 1e-9
    relative."""
    return (1e-4 if dtype == "float32" else 1e-9) * max(1.0, np.abs(reference).max())


def logits_of(model, ids):
    with ta.no_grad():
        return model(ids).data


def copy_of(family, tmp_path, edit=None):
    """The fixture's folder copied into tmp_path, `edit(config)` applied to its config.json."""
    folder = tmp_path / family
    shutil.copytree(folder_of(family), folder)
    if edit is not None:
        config = json.loads((folder / "config.json").read_text())
        edit(config)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


def hub_layout(config):
    """config.json as the hub's checkpoints write it (transformers 4): rope_theta and
    rope_scaling, and Gemma 3's rope_local_base_freq, instead of rope_parameters; Qwen3-MoE's
    num_experts instead of num_local_experts."""
    if "num_local_experts" in config:
        config["num_experts"] = config.pop("num_local_experts")
    parameters = config.pop("rope_parameters")
    if config["model_type"] == "gemma3_text":
        config["rope_local_base_freq"] = parameters["sliding_attention"]["rope_theta"]
        parameters = parameters["full_attention"]
    config["rope_theta"] = parameters.pop("rope_theta")
    config["rope_scaling"] = None if parameters["rope_type"] == "default" else parameters


def transformers_or_skip():
    torch = pytest.importorskip("torch", reason="torch is not installed: transformers' side of "
                                                "this is not checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: "
                                       "its side of this is not checked")
    return torch, transformers


def their_logits(folder, ids, dtype="float32"):
    """transformers' logits, eager attention and experts (its grouped experts take no float64)."""
    torch, transformers = transformers_or_skip()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder, dtype=getattr(torch, dtype), attn_implementation="eager",
        experts_implementation="eager").eval()
    with torch.no_grad():
        return model(torch.tensor(ids)).logits.numpy()


# ------------------------------------------------------------------------------------------------
# The fixtures

@pytest.mark.parametrize("family", CHECKPOINTS)
def test_each_fixture_is_a_small_complete_folder_of_its_family(family, references):
    folder = folder_of(family)
    for name in ("config.json", "model.safetensors", "reference.safetensors", "README.md"):
        assert (folder / name).is_file(), name
    config = json.loads((folder / "config.json").read_text())
    assert config["model_type"] == family_of(family) and "rope_parameters" in config
    limit = 120_000 if family in MIXTURES else 80_000          # 8 experts in 2 layers: 110 kB
    assert (folder / "model.safetensors").stat().st_size < limit
    _, metadata = ta.load_safetensors(folder / "reference.safetensors", with_metadata=True)
    assert metadata["transformers"] and float(metadata["lifting_changes_logits_by"]) > 1e-7
    reference = references[family]
    assert reference["generated_ids"].shape == (1, 17) and reference["input_ids"].shape[1] > 4


# ------------------------------------------------------------------------------------------------
# Reading: the logits and tokens of transformers

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("family", CHECKPOINTS)
def test_the_logits_are_transformers_logits(family, dtype, references):
    reference = references[family]
    model = nn.from_pretrained(folder_of(family), dtype=np.dtype(dtype))
    assert isinstance(model, nn.OpenDecoder) and model.settings.model_type == family_of(family)
    assert not model.training
    logits = logits_of(model, reference["input_ids"])
    assert logits.dtype == np.dtype(dtype) and logits.shape == (2, 12, 64)
    expected = reference[f"logits_{dtype}"]
    np.testing.assert_allclose(logits, expected, rtol=0, atol=tolerance(expected, dtype))


@pytest.mark.parametrize("family", CHECKPOINTS)
def test_greedy_generation_gives_transformers_tokens(family, references):
    prompt, expected = references[family]["prompt_ids"], references[family]["generated_ids"]
    model = nn.from_pretrained(folder_of(family))
    new = expected.shape[1] - prompt.shape[1]
    np.testing.assert_array_equal(model.generate(prompt, new), expected)
    np.testing.assert_array_equal(model.generate(prompt, new, use_cache=False), expected)


@pytest.mark.parametrize("family", CHECKPOINTS)
def test_the_hubs_config_layout_gives_the_same_model(family, tmp_path, references):
    ids = references[family]["input_ids"]
    folder = copy_of(family, tmp_path, hub_layout)
    assert "rope_parameters" not in (folder / "config.json").read_text()
    np.testing.assert_array_equal(logits_of(nn.from_pretrained(folder, np.float64), ids),
                                  logits_of(nn.from_pretrained(folder_of(family), np.float64),
                                            ids))


@pytest.mark.parametrize("family", ["llama", "gemma3_text", "qwen3_moe"])
def test_transformers_reads_the_hubs_layout_as_this_reader_does(family, tmp_path, references):
    """hub_layout above is a config transformers takes for the same model (skipped, saying so,
    without transformers)."""
    ids = references[family]["input_ids"]
    np.testing.assert_array_equal(their_logits(copy_of(family, tmp_path, hub_layout), ids),
                                  their_logits(folder_of(family), ids))


def test_each_family_turns_on_its_switches():
    settings = {family: nn.from_pretrained(folder_of(family)).settings for family in FAMILIES}
    llama, mistral, qwen2, qwen3, gemma = (settings[family] for family in FAMILIES[:5])
    assert llama.rope_scaling == {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0,
                                  "original_max_position_embeddings": 128}
    assert llama.qkv_bias and llama.out_bias and llama.mlp_bias and not llama.tied_head
    assert llama.norm_eps == 1e-5 and llama.head_dim == 6 and llama.num_kv_heads == 2
    assert mistral.kinds() == ("sliding", "sliding") and mistral.sliding_window == 4
    assert mistral.head_dim == 8 and not mistral.qkv_bias
    assert qwen2.kinds() == ("full", "sliding") and qwen2.qkv_bias and not qwen2.out_bias
    assert qwen2.tied_head and qwen2.rope_theta == 1000.0
    assert qwen3.qk_norm and qwen3.out_bias and qwen3.kinds() == ("full", "sliding")
    assert gemma.kinds() == ("sliding", "full") and gemma.num_kv_heads == 1
    assert (gemma.rope_theta, gemma.local_rope_theta) == (1000.0, 100.0)
    assert gemma.rope_scaling == {"rope_type": "linear", "factor": 4.0}
    assert gemma.norm_unit_offset and gemma.embed_scale and gemma.sandwich_norms
    assert gemma.query_pre_attn_scalar == 10 and gemma.final_logit_softcapping == 3.0
    assert gemma.activation == "gelu_tanh" and all(s.activation == "silu" for s in
                                                   (llama, mistral, qwen2, qwen3))
    assert not any(s.qk_norm for s in (llama, mistral, qwen2))
    assert not any(s.latent or s.experts for s in (llama, mistral, qwen2, qwen3, gemma))


def test_the_mixtures_turn_on_their_switches():
    qwen, deepseek, no_q_lora = (nn.from_pretrained(folder_of(name)).settings
                                 for name in MIXTURES)
    assert qwen.experts == nn.ExpertSettings(num_experts=8, top_k=2, hidden_dim=8,
                                             norm_topk_prob=True, dense_layers=(1,))
    assert qwen.feed_forwards() == ("experts", "dense", "experts") and qwen.latent is None
    assert qwen.kinds() == ("sliding",) * 3 and qwen.sliding_window == 4
    assert qwen.qk_norm and qwen.qkv_bias and qwen.out_bias and qwen.head_dim == 8
    assert deepseek.latent == nn.LatentSettings(kv_lora_rank=8, qk_rope_head_dim=4,
                                                qk_nope_head_dim=6, v_head_dim=5,
                                                q_lora_rank=12, rope_interleave=True)
    assert deepseek.experts == nn.ExpertSettings(
        num_experts=8, top_k=3, hidden_dim=8, scoring="sigmoid", norm_topk_prob=True,
        routed_scaling_factor=2.5, num_groups=4, top_groups=2, choice_bias=True,
        shared_hidden_dim=16, dense_layers=(0,))
    assert deepseek.feed_forwards() == ("dense", "experts", "experts")
    assert (deepseek.head_dim, deepseek.num_kv_heads, deepseek.norm_eps) == (10, 4, 1e-5)
    assert deepseek.qkv_bias and deepseek.out_bias and not deepseek.qk_norm
    assert not deepseek.tied_head and deepseek.kinds() == ("full",) * 3
    assert no_q_lora.latent == dataclasses.replace(deepseek.latent, q_lora_rank=None,
                                                   rope_interleave=False)
    assert no_q_lora.tied_head and not no_q_lora.qkv_bias


@pytest.mark.parametrize("family, change", [
    # the bias chooses: without it other experts are chosen (and the logits change)
    ("deepseek_v3", lambda model: [layer.choice_bias.data.fill(0.0) for layer in model.modules()
                                   if isinstance(layer, nn.RoutedExperts)]),
    # the groups limit the choice
    ("deepseek_v3", lambda model: [setattr(layer, "top_groups", layer.num_groups)
                                   for layer in model.modules()
                                   if isinstance(layer, nn.RoutedExperts)]),
    # the interleaved rotary pairs of DeepSeek's checkpoints
    ("deepseek_v3", lambda model: [setattr(block.attn, "rope_interleave", False)
                                   for block in model.blocks]),
    # the latent's norms have eps 1e-6 whatever rms_norm_eps says (1e-5 in the fixtures)
    ("deepseek_v3-no-q-lora", lambda model: [setattr(block.attn.kv_norm, "eps", 1e-5)
                                             for block in model.blocks]),
    ("deepseek_v3", lambda model: [setattr(block.attn.q_norm, "eps", 1e-5)
                                   for block in model.blocks]),
    ("qwen3_moe", lambda model: [setattr(layer, "norm_topk_prob", False)
                                 for layer in model.modules()
                                 if isinstance(layer, nn.RoutedExperts)]),
])
def test_each_switch_of_the_mixtures_shows_in_the_logits(family, change, references):
    """Every switch the fixtures turn on moves the float64 logits a thousand times farther from
    transformers' than the tolerance the unchanged model meets: the fixtures test it. The norms'
    eps moves them least (1e-5 to 1e-4: the latents' mean squares are near 1, and eps 1e-6
    against 1e-5 changes their norm by about 5e-6)."""
    model = nn.from_pretrained(folder_of(family), np.float64)
    change(model)
    reference = references[family]["logits_float64"]
    moved = np.abs(logits_of(model, references[family]["input_ids"]) - reference).max()
    assert moved > 1000 * tolerance(reference, "float64")


def test_a_key_left_out_means_transformers_default(tmp_path, references):
    """Llama's head_dim defaults to hidden_size / heads (6 here: the same model); Gemma's
    tie_word_embeddings to true (the same); Qwen3's head_dim to 128, whose q_proj the fixture's
    weights cannot be."""
    ids = references["llama"]["input_ids"]
    for family in ("llama", "gemma3_text"):
        key = "head_dim" if family == "llama" else "tie_word_embeddings"
        folder = copy_of(family, tmp_path, lambda config, key=key: config.pop(key))
        np.testing.assert_array_equal(
            logits_of(nn.from_pretrained(folder, np.float64), ids),
            logits_of(nn.from_pretrained(folder_of(family), np.float64), ids))
    folder = copy_of("qwen3", tmp_path, lambda config: config.pop("head_dim"))
    with pytest.raises(ValueError, match=r"holds model.layers.0.self_attn.q_proj.weight as "
                                         r"float32 \(32, 24\); this config's model has it "
                                         r"\(512, 24\)"):
        nn.from_pretrained(folder)


@pytest.mark.parametrize("family, edit, kinds", [
    # Qwen's sliding_window counts only with use_sliding_window (and then from max_window_layers)
    ("qwen2", lambda c: c.update(use_sliding_window=False, layer_types=None), None),
    ("qwen3", lambda c: c.update(max_window_layers=0, layer_types=None), ("sliding",) * 2),
    # Mistral's applies to every layer, or to none
    ("mistral", lambda c: c.update(sliding_window=None), None),
    # Gemma's pattern: five sliding layers of six, the sixth full, without layer_types
    ("gemma3_text", lambda c: c.update(layer_types=None, sliding_window_pattern=2),
     ("sliding", "full")),
    ("gemma3_text", lambda c: c.pop("layer_types"), ("sliding", "sliding")),
    # Qwen3-MoE's window is on every layer, with use_sliding_window (max_window_layers unread)
    ("qwen3_moe", lambda c: c.update(use_sliding_window=False), None),
    ("qwen3_moe", lambda c: c.update(max_window_layers=1), ("sliding",) * 3),
])
def test_switches_mean_what_transformers_makes_them_mean(family, edit, kinds, tmp_path,
                                                         references):
    folder = copy_of(family, tmp_path, edit)
    model = nn.from_pretrained(folder, np.float64)
    assert model.settings.layer_types == kinds
    ids = references[family]["input_ids"]
    if kinds != nn.from_pretrained(folder_of(family)).settings.kinds():
        assert np.abs(logits_of(model, ids) - references[family]["logits_float64"]).max() > 1e-3


@pytest.mark.parametrize("family", ["qwen2", "gemma3_text", "qwen3_moe"])
def test_transformers_agrees_on_what_the_switches_mean(family, tmp_path, references):
    """Three of the edits above, in transformers too (skipped without it)."""
    edit = {"qwen2": lambda c: c.update(use_sliding_window=False, layer_types=None),
            "gemma3_text": lambda c: c.pop("layer_types"),
            "qwen3_moe": lambda c: c.update(use_sliding_window=False)}[family]
    folder, ids = copy_of(family, tmp_path, edit), references[family]["input_ids"]
    ours = logits_of(nn.from_pretrained(folder), ids)
    theirs = their_logits(folder, ids)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=tolerance(theirs, "float32"))


@pytest.mark.parametrize("family, edit, dense", [
    ("qwen3_moe", dict(decoder_sparse_step=2, mlp_only_layers=[]), (0, 2, 4)),
    ("qwen3_moe", dict(decoder_sparse_step=2, mlp_only_layers=[3]), (0, 2, 3, 4)),
    ("qwen3_moe", dict(decoder_sparse_step=1, mlp_only_layers=None), ()),
    ("qwen3_moe", dict(decoder_sparse_step=3, mlp_only_layers=[0, 1]), (0, 1, 3, 4)),
    ("deepseek_v3", dict(first_k_dense_replace=0), ()),
    ("deepseek_v3", dict(first_k_dense_replace=2), (0, 1)),
    ("deepseek_v3", dict(first_k_dense_replace=7), (0, 1, 2, 3, 4)),
])
def test_the_layers_with_experts_are_transformers(family, edit, dense):
    """Which of 5 layers keep a dense feed-forward, as read here and, when it is installed, as
    transformers builds the model of the same config."""
    config = {**json.loads((folder_of(family) / "config.json").read_text()),
              "num_hidden_layers": 5, **edit}
    settings = nn.open_checkpoints.settings_from_config(config, "edited")
    assert settings.experts.dense_layers == dense
    _, transformers = transformers_or_skip()
    config.pop("model_type")
    theirs = transformers.AutoModelForCausalLM.from_config(
        transformers.AutoConfig.for_model(family, **config))
    assert tuple(i for i, layer in enumerate(theirs.model.layers)
                 if not hasattr(layer.mlp, "experts")) == dense


def a_balance_loss_by_hand(model, ids):
    """Qwen3-MoE's load-balancing loss from each expert layer's router logits, written out as
    transformers' load_balancing_loss_func computes it (NumPy, float64)."""
    experts = [i for i, block in enumerate(model.blocks) if isinstance(block.mlp, nn.RoutedExperts)]
    with ta.no_grad():
        _, cache = model.run_with_cache(ids, names=[f"blocks.{i}.resid_mid" for i in experts])
        normed = [model.blocks[i].mlp_norm(ta.tensor(cache[f"blocks.{i}.resid_mid"])).data
                  for i in experts]
    logits = [x.reshape(-1, x.shape[-1]) @ model.blocks[i].mlp.router.weight.data.T
              for i, x in zip(experts, normed)]
    n, k = model.settings.experts.num_experts, model.settings.experts.top_k
    counts, probabilities = np.zeros(n), np.zeros(n)
    for layer_logits in logits:
        p = np.exp(layer_logits - layer_logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        counts += np.bincount(np.argsort(-p, axis=-1)[:, :k].ravel(), minlength=n)
        probabilities += p.sum(0)
    rows = sum(len(layer_logits) for layer_logits in logits)
    return n * np.sum(counts / rows * probabilities / rows), len(logits)


def test_qwen3_moes_balance_loss_is_transformers(references):
    """model.load_balancing_loss() after a forward: the same number as the loss written out by
    hand, and (where installed) as transformers' aux_loss (output_router_logits=True), its
    gradient on each router too; pooled over the two expert layers of the fixture's three."""
    model = nn.from_pretrained(folder_of("qwen3_moe"), dtype=np.float64)
    ids = np.random.default_rng(0).integers(0, 64, (2, 7))
    by_hand, layers = a_balance_loss_by_hand(model, ids)
    model(ids)
    loss = model.load_balancing_loss()
    assert loss.shape == () and layers == 2
    np.testing.assert_allclose(loss.data, by_hand, rtol=1e-12)
    loss.backward()
    ours = [block.mlp.router.weight.grad for block in model.blocks
            if isinstance(block.mlp, nn.RoutedExperts)]
    torch, transformers = transformers_or_skip()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        folder_of("qwen3_moe"), dtype=torch.float32, attn_implementation="eager",
        experts_implementation="eager")
    output = theirs(torch.tensor(ids), output_router_logits=True)
    output.aux_loss.backward()
    np.testing.assert_allclose(loss.data, output.aux_loss.item(), rtol=1e-5)
    their_grads = [layer.mlp.gate.weight.grad.numpy() for layer in theirs.model.layers
                   if hasattr(layer.mlp, "gate")]
    for mine, their in zip(ours, their_grads, strict=True):
        np.testing.assert_allclose(mine, their, rtol=1e-4, atol=1e-6 * np.abs(their).max())


def test_the_models_bias_update_moves_every_expert_layers_bias():
    """model.update_choice_bias(speed) is each expert layer's own update (the first layer of the
    fixture's DeepSeek-V3 is dense)."""
    model = nn.from_pretrained(folder_of("deepseek_v3"), dtype=np.float64)
    model(np.random.default_rng(0).integers(0, 64, (2, 9)))
    layers = model.expert_layers()
    assert len(layers) == len(model.blocks) - 1 >= 1
    expected = []
    for layer in layers:
        loads = np.bincount(layer.selected_experts.ravel(), minlength=layer.num_experts)
        mean_load = layer.selected_experts.size / layer.num_experts
        expected.append(layer.choice_bias.data + 0.01 * np.sign(mean_load - loads))
    model.update_choice_bias(speed=0.01)
    for layer, bias in zip(layers, expected, strict=True):
        np.testing.assert_array_equal(layer.choice_bias.data, bias)


def test_a_balance_loss_the_model_cannot_give_is_named():
    qwen = nn.from_pretrained(folder_of("qwen3_moe"))
    with pytest.raises(ValueError, match=r"^load_balancing_loss: no forward has routed tokens "
                                         r"yet"):
        qwen.load_balancing_loss()
    deepseek = nn.from_pretrained(folder_of("deepseek_v3"))
    deepseek(np.array([[1, 2, 3]]))
    with pytest.raises(ValueError, match=r"^load_balancing_loss: the loss is Qwen3-MoE's, over "
                                         r"softmax scores; these experts score with 'sigmoid'"):
        deepseek.load_balancing_loss()
    llama = nn.from_pretrained(folder_of("llama"))
    with pytest.raises(ValueError, match=r"^load_balancing_loss: there are no expert layers"):
        llama.load_balancing_loss()


@pytest.mark.parametrize("family, theirs, ours", [("qwen3_moe", "num_local_experts",
                                                   "num_experts"),
                                                  ("deepseek_v3", "n_routed_experts",
                                                   "num_local_experts")])
def test_the_experts_count_is_read_under_either_name(family, theirs, ours):
    config = json.loads((folder_of(family) / "config.json").read_text())
    renamed = {**config, ours: config[theirs]}
    renamed.pop(theirs)
    assert nn.open_checkpoints.settings_from_config(renamed, "renamed") == \
        nn.open_checkpoints.settings_from_config(config, "as written")


def sharded_copy(family, tmp_path, shards=3):
    """The fixture's weights as transformers saves a model too big for one file: shards and
    model.safetensors.index.json."""
    folder = copy_of(family, tmp_path)
    weights = ta.load_safetensors(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    names, weight_map = list(weights), {}
    for number, part in enumerate(np.array_split(np.arange(len(names)), shards), start=1):
        shard = f"model-{number:05d}-of-{shards:05d}.safetensors"
        ta.save_safetensors(folder / shard, {names[i]: weights[names[i]] for i in part},
                            {"format": "pt"})
        weight_map.update({names[i]: shard for i in part})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    return folder


def test_a_sharded_checkpoint_is_read_through_its_index(tmp_path, references):
    ids = references["qwen3"]["input_ids"]
    np.testing.assert_array_equal(
        logits_of(nn.from_pretrained(sharded_copy("qwen3", tmp_path), np.float64), ids),
        logits_of(nn.from_pretrained(folder_of("qwen3"), np.float64), ids))


@pytest.mark.parametrize("family", CHECKPOINTS)
def test_chapter_4s_tools_and_the_cache_work_on_every_family(family, references):
    """run_with_cache (chapter 4's names), hooks, add_lora and merge_lora, the attention view;
    the cache holds the key/value heads, a sliding layer its window, a latent layer its latents,
    nbytes the formula."""
    model, ids = nn.from_pretrained(folder_of(family)), references[family]["input_ids"]
    logits, cache = model.run_with_cache(ids)
    np.testing.assert_array_equal(logits.data, logits_of(model, ids))
    assert {"embed", "blocks.0.resid_pre", "blocks.1.attn.weights", "blocks.1.resid_post",
            "final"} <= set(cache)
    assert cache["blocks.1.attn.weights"].shape == (2, 4, 12, 12)
    with model.hooks({"blocks.0.attn.heads": lambda heads: heads * 0.0}):
        assert np.abs(logits_of(model, ids) - logits.data).max() > 1e-3
    nn.add_lora(model, rank=2)
    for layer in model.modules():
        if isinstance(layer, nn.LoRALinear):
            layer.lora_B.data[...] = 0.1
    adapted = logits_of(model, ids)
    assert np.abs(adapted - logits.data).max() > 1e-3
    np.testing.assert_allclose(logits_of(nn.merge_lora(model), ids), adapted, rtol=0, atol=1e-5)
    _, weights = model(ids, return_weights=True)
    layers = model.settings.num_layers
    assert f"{layers} x 4 (layers x heads)" in viz.attention_view([str(i) for i in ids[0]],
                                                                  weights)._repr_html_()
    kv_cache = model.empty_cache()
    with ta.no_grad():
        model(ids, cache=kv_cache)
    settings = model.settings
    if settings.latent is not None:           # cache.nbytes: layers * B * T * (r + d_R) * itemsize
        width = settings.latent.kv_lora_rank + settings.latent.qk_rope_head_dim
        assert [layer.latents.shape for layer in kv_cache.layers] == [(2, 12, width)] * 3
        assert kv_cache.nbytes == 3 * 2 * 12 * width * 4
        return
    kept = [settings.sliding_window if kind == "sliding" else 12 for kind in settings.kinds()]
    assert [layer.keys.shape for layer in kv_cache.layers] == \
        [(2, settings.num_kv_heads, tokens, settings.head_dim) for tokens in kept]
    assert kv_cache.nbytes == sum(2 * 2 * settings.num_kv_heads * tokens * settings.head_dim * 4
                                  for tokens in kept)


def test_a_gpt2_folder_gives_chapter_3s_model():
    gpt2 = FIXTURES / "gpt2-tiny"
    model = nn.from_pretrained(gpt2, dtype=np.float64)
    assert isinstance(model, nn.CausalTransformer) and model.dtype == np.float64
    ids = np.array([[464, 2068, 7586, 21831]])
    np.testing.assert_array_equal(
        logits_of(model, ids),
        logits_of(nn.CausalTransformer.from_pretrained(gpt2, dtype=np.float64), ids))


# ------------------------------------------------------------------------------------------------
# Reading: refusals, by name

def set_rope(config, **values):
    config["rope_parameters"].update(values)


@pytest.mark.parametrize("family, edit, message", [
    ("llama", lambda c: set_rope(c, rope_type="yarn"),
     r"rope_scaling of rope_type 'yarn' \(implemented: 'default', 'linear', 'llama3'\)$"),
    ("qwen3", lambda c: set_rope(c, partial_rotary_factor=0.5),
     r"partial_rotary_factor 0.5 \(every feature of a head turns here\)$"),
    ("llama", lambda c: c.update(partial_rotary_factor=0.25),
     r"partial_rotary_factor 0.25 \(every feature of a head turns here\)$"),
    ("llama", lambda c: set_rope(c, mscale=0.7), r"rope_scaling of rope_type 'llama3' with "
                                                 r"mscale \(known: factor, low_freq_factor, "
                                                 r"high_freq_factor, "
                                                 r"original_max_position_embeddings\)$"),
    ("mistral", lambda c: c.update(hidden_act="gelu"),
     r"activation 'gelu' \(the gate's is SiLU, 'silu', or tanh-GELU, 'gelu_pytorch_tanh'\)$"),
    ("gemma3_text", lambda c: c.update(attn_logit_softcapping=50.0),
     r"attn_logit_softcapping 50.0 \(Gemma 2's capping of the scores\)$"),
    ("gemma3_text", lambda c: c.update(use_bidirectional_attention=True),
     r"use_bidirectional_attention true \(the decoder is causal\)$"),
    ("gemma3_text", lambda c: c["rope_parameters"]["sliding_attention"].update(
        rope_type="linear", factor=2.0),
     r"rotary scaling on the sliding layers \(Gemma 3 scales its global ones\)$"),
    ("qwen2", lambda c: c.update(attention_dropout=0.1), r"attention_dropout 0.1 \(no dropout "
                                                         r"here\)$"),
    ("qwen3", lambda c: c.update(quantization_config={"quant_method": "fp8"}),
     r"quantization_config \(fp8: the weights are quantized\)$"),
    ("qwen3", lambda c: c.update(layer_types=["full_attention", "chunked_attention"]),
     r"layer_types \['full_attention', 'chunked_attention'\] \(one of full_attention, "
     r"sliding_attention per layer\)$"),
    ("qwen2", lambda c: c.update(use_sliding_window=False),
     r"sliding layers without a sliding_window \(use_sliding_window false\)$"),
    ("mistral", lambda c: c.update(num_key_value_heads=3),
     r"num_key_value_heads 3 not dividing num_attention_heads 4$"),
    # DeepSeek-V3's own config: YaRN positions and FP8 weights
    ("deepseek_v3", lambda c: c.update(
        rope_parameters=None, quantization_config={"quant_method": "fp8"},
        rope_scaling={"beta_fast": 32, "beta_slow": 1, "factor": 40, "mscale": 1.0,
                      "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096,
                      "type": "yarn"}),
     r"quantization_config \(fp8: the weights are quantized\); rope_scaling of rope_type "
     r"'yarn' \(implemented: 'default', 'linear', 'llama3'\)$"),
    ("deepseek_v3", lambda c: c.update(num_key_value_heads=2),
     r"num_key_value_heads 2 other than num_attention_heads 4 \(latent attention rebuilds "
     r"every head's own keys\)$"),
])
def test_what_the_decoder_does_not_compute_is_refused_by_name(family, edit, message, tmp_path):
    folder = copy_of(family, tmp_path, edit)
    with pytest.raises(ValueError, match=r"^from_pretrained: the folder '.*': config.json asks "
                                         r"for what the decoder does not compute: " + message):
        nn.from_pretrained(folder)


def test_every_refusal_of_a_config_is_named_at_once(tmp_path):
    folder = copy_of("gemma3_text", tmp_path, lambda c: c.update(
        attn_logit_softcapping=50.0, hidden_activation="relu", attention_dropout=0.5))
    with pytest.raises(ValueError, match=r"attention_dropout 0.5 .*; attn_logit_softcapping "
                                         r"50.0 .*; activation 'relu'"):
        nn.from_pretrained(folder)


def drop_weight(name):
    def change(folder):
        weights = ta.load_safetensors(folder / "model.safetensors")
        weights.pop(name)
        ta.save_safetensors(folder / "model.safetensors", weights, {"format": "pt"})
    return change


@pytest.mark.parametrize("family, change, error, message", [
    ("llama", lambda folder: (folder / "config.json").write_text(json.dumps(
        {**json.loads((folder / "config.json").read_text()), "model_type": "phi3"})), ValueError,
     r"config.json's model_type 'phi3' is not one the book has \(gpt2, llama, mistral, "
     r"qwen2, qwen3, gemma3_text, qwen3_moe, deepseek_v3, vit, clip, whisper, t5, bart, marian, or a "
     r"diffusers DiTTransformer2DModel\)$"),
    ("llama", drop_weight("model.layers.1.self_attn.o_proj.bias"), ValueError,
     r"model.safetensors and config.json disagree: for this llama config, model.safetensors "
     r"lacks model.layers.1.self_attn.o_proj.bias$"),
    ("llama", lambda folder: (folder / "config.json").write_text(json.dumps(
        {**json.loads((folder / "config.json").read_text()), "mlp_bias": False})), ValueError,
     r"model.safetensors and config.json disagree: for this llama config, model.safetensors "
     r"also holds model.layers.0.mlp.down_proj.bias, model.layers.0.mlp.gate_proj.bias, .* and "
     r"2 more$"),
    ("qwen3", lambda folder: (folder / "model.safetensors").unlink(), FileNotFoundError,
     r"has config.json but no model.safetensors \(the weights\), nor the "
     r"model.safetensors.index.json of a sharded checkpoint$"),
    ("qwen3", lambda folder: (folder / "config.json").unlink(), FileNotFoundError,
     r"has no config.json: a model folder in Hugging Face's layout holds config.json and "
     r"model.safetensors$"),
    ("qwen3", lambda folder: (folder / "config.json").write_text("{"), ValueError,
     r"config.json is not valid JSON"),
    ("qwen3", lambda folder: (folder / "config.json").write_text('{"hidden_size": 8}'),
     ValueError, r"config.json names no model_type"),
    ("mistral", lambda folder: (folder / "config.json").write_text(json.dumps(
        {**json.loads((folder / "config.json").read_text()), "head_dim": "8"})), ValueError,
     r"config.json gives settings the decoder cannot run: settings.head_dim must be an integer "
     r"of at least 1, got '8'$"),
    ("qwen3", lambda folder: (folder / "config.json").write_text('{"model_type": "qwen3"}'),
     ValueError, r"config.json's vocab_size, hidden_size, intermediate_size, num_hidden_layers, "
                 r"num_attention_heads must be integers"),
])
def test_a_folder_that_disagrees_with_itself_is_named(family, change, error, message, tmp_path):
    folder = copy_of(family, tmp_path)
    change(folder)
    with pytest.raises(error, match=r"^from_pretrained: the folder '[^']*'(: | )" + message):
        nn.from_pretrained(folder)


def test_a_missing_folder_and_a_bad_dtype_are_named(tmp_path):
    missing = str(tmp_path / "nothing")
    with pytest.raises(FileNotFoundError, match=r"^from_pretrained: there is no folder") as raised:
        nn.from_pretrained(missing)
    assert str(raised.value).count(missing) == 1            # a path is named once
    with pytest.raises(TypeError, match=r"^from_pretrained: dtype must be a floating-point "
                                        r"type, got int64"):
        nn.from_pretrained(folder_of("llama"), dtype=np.int64)


# ------------------------------------------------------------------------------------------------
# Writing

@pytest.mark.parametrize("family", CHECKPOINTS)
def test_save_pretrained_writes_the_weights_it_read(family, tmp_path, references):
    model = nn.from_pretrained(folder_of(family))
    model.save_pretrained(tmp_path)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["config.json",
                                                                 "model.safetensors"]
    saved = ta.load_safetensors(tmp_path / "model.safetensors")
    original = ta.load_safetensors(folder_of(family) / "model.safetensors")
    assert sorted(saved) == sorted(original)
    for name in original:
        np.testing.assert_array_equal(saved[name], original[name], err_msg=name)
    ids = references[family]["input_ids"]
    np.testing.assert_array_equal(logits_of(nn.from_pretrained(tmp_path, np.float64), ids),
                                  logits_of(nn.from_pretrained(folder_of(family), np.float64),
                                            ids))
    config = json.loads((tmp_path / "config.json").read_text())
    fixture = json.loads((folder_of(family) / "config.json").read_text())
    for key in ("model_type", "bos_token_id", "eos_token_id", "max_position_embeddings",
                "num_key_value_heads", "tie_word_embeddings"):
        assert config[key] == fixture[key], key


@pytest.mark.parametrize("family", CHECKPOINTS)
def test_transformers_reads_what_save_pretrained_wrote(family, tmp_path, references):
    """The same logits as transformers computes from the fixture itself, float32 and float64
    (skipped, saying so, without transformers)."""
    nn.from_pretrained(folder_of(family)).save_pretrained(tmp_path)
    ids = references[family]["input_ids"]
    for dtype in ("float32", "float64"):
        np.testing.assert_array_equal(their_logits(tmp_path, ids, dtype),
                                      their_logits(folder_of(family), ids, dtype))


def a_model_trained_here(settings):
    """A decoder built from `settings`, float32, after one step of training (DeepSeek's choice
    bias, frozen, stays)."""
    ta.manual_seed(3)
    model = nn.open_checkpoints.MODELS[settings.model_type](settings, dtype=np.float32)
    ids = np.random.default_rng(0).integers(0, settings.vocab_size, (2, 9))
    optimizer = ta.optim.Adam(model.trainable_parameters(), lr=0.01)
    logits = model(ids[:, :-1])
    ta.functional.cross_entropy(logits.reshape(-1, settings.vocab_size),
                                ids[:, 1:].reshape(-1)).backward()
    optimizer.step()
    return model.eval(), ids


@pytest.mark.parametrize("family", CHECKPOINTS)
def test_a_model_trained_here_runs_in_transformers(family, tmp_path):
    """Settings of the family's fixture with other sizes, trained one step here, saved, run by
    transformers (skipped without it): the same logits."""
    layer_types = {"llama": None, "deepseek_v3": None, "mistral": ("sliding",) * 3,
                   "qwen3_moe": ("sliding",) * 3}.get(family_of(family),
                                                      ("sliding", "full", "sliding"))
    settings = dataclasses.replace(nn.from_pretrained(folder_of(family)).settings,
                                   vocab_size=11, num_layers=3, intermediate_size=20,
                                   layer_types=layer_types)
    model, ids = a_model_trained_here(settings)
    model.save_pretrained(tmp_path)
    ours, theirs = logits_of(model, ids), their_logits(tmp_path, ids)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=tolerance(theirs, "float32"))


@pytest.mark.parametrize("family, changes, message", [
    ("llama", dict(qk_norm=True), r"qk_norm=True \(llama has False\)$"),
    ("llama", dict(sliding_window=4, layer_types=("sliding", "full")),
     r"sliding layers \(llama has none\)$"),
    ("mistral", dict(layer_types=("sliding", "full")),
     r"layer_types \('sliding', 'full'\) \(mistral slides on every layer, or none\)$"),
    ("qwen2", dict(qkv_bias=False), r"qkv_bias=False \(qwen2 has True\)$"),
    ("qwen3", dict(out_bias=False), r"qkv_bias=True with out_bias=False \(one attention_bias "
                                    r"for all four\)$"),
    ("gemma3_text", dict(embed_scale=False, sandwich_norms=False),
     r"embed_scale=False \(gemma3_text has True\); sandwich_norms=False \(gemma3_text has "
     r"True\)$"),
    ("qwen3", lambda s: dict(experts=nn.ExpertSettings(4, 2, 6)),
     r"experts=ExpertSettings\(num_experts=4, .*\) \(qwen3 has None\)$"),
    ("qwen3_moe", lambda s: dict(experts=dataclasses.replace(s.experts, scoring="sigmoid",
                                                             num_groups=2)),
     r"experts.scoring='sigmoid' \(qwen3_moe has 'softmax'\); experts.num_groups=2 \(qwen3_moe "
     r"has 1\)$"),
    ("qwen3_moe", dict(experts=None), r"no experts \(qwen3_moe's files describe routed "
                                      r"experts\)$"),
    ("deepseek_v3", lambda s: dict(experts=dataclasses.replace(s.experts, dense_layers=(1,),
                                                               shared_hidden_dim=12)),
     r"dense layers \(1,\) \(deepseek_v3's are the first first_k_dense_replace layers\); a "
     r"shared expert of width 12 \(n_shared_experts experts of width 8\)$"),
    ("deepseek_v3", dict(latent=None), r"no latent attention \(deepseek_v3 has it on every "
                                       r"layer\)$"),
])
def test_save_pretrained_refuses_what_the_familys_files_cannot_hold(family, changes, message,
                                                                    tmp_path):
    model = nn.from_pretrained(folder_of(family))
    changes = changes(model.settings) if callable(changes) else changes
    model.settings = dataclasses.replace(model.settings, **changes)
    with pytest.raises(ValueError, match=rf"^{type(model).__name__}.save_pretrained: a {family} "
                                         rf"checkpoint "
                                         rf"cannot hold this model's " + message):
        model.save_pretrained(tmp_path / "saved")
    assert not (tmp_path / "saved").exists()


def test_save_pretrained_refuses_unmerged_adapters_hooks_and_mixed_dtypes(tmp_path):
    model = nn.from_pretrained(folder_of("qwen3"))
    nn.add_lora(model, rank=2, targets="*.attn.q_proj")
    with pytest.raises(ValueError, match=r"cannot hold this model's layers the decoder does not "
                                         r"have: blocks.0.attn.q_proj \(a LoRALinear\), "
                                         r"blocks.1.attn.q_proj \(a LoRALinear\) \(merge_lora"):
        model.save_pretrained(tmp_path)
    nn.merge_lora(model)
    with model.hooks({"blocks.1.attn.heads": lambda x: None}):
        with pytest.raises(ValueError, match=r"cannot hold this model's functions attached to "
                                             r"the hook points of blocks.1.attn \(heads\)$"):
            model.save_pretrained(tmp_path)
    model.norm.to(np.float64)
    with pytest.raises(ValueError, match=r"cannot hold this model's parameters of several "
                                         r"dtypes$"):
        model.save_pretrained(tmp_path)
    assert list(tmp_path.iterdir()) == []
    model.norm.to(np.float32)
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()


def test_a_model_built_from_settings_saves_without_a_config_it_was_read_from(tmp_path):
    settings = copy.deepcopy(nn.from_pretrained(folder_of("llama")).settings)
    model, ids = a_model_trained_here(settings)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["bos_token_id"] is None and config["eos_token_id"] is None
    assert config["rope_scaling"]["rope_type"] == "llama3" and config["rope_theta"] == 1000.0
    np.testing.assert_array_equal(logits_of(nn.from_pretrained(tmp_path), ids),
                                  logits_of(model, ids))
