"""LoRA (tinyattn/nn/lora.py): a new adapter changes nothing; only the adapters train, and the
frozen weights get no gradient and are not moved by the optimizer; merging gives the same outputs;
adapters saved alone load back onto the model, and a file that does not fit changes nothing; the
same on GPT-2 from the fixture; and every bad argument named. The gradient checks of the update,
of a LoRALinear and of an adapted TransformerBlock are rows of the checklist (test_checklist.py,
test_ops.py)."""
import pathlib

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn import rng
from tinyattn.nn.lora import ATTENTION, LowRankUpdate, linear_layers

FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"


def small_model(seed=0, **sizes):
    ta.manual_seed(seed)
    return nn.CausalTransformer(**{**dict(vocab_size=11, embed_dim=8, num_heads=2, num_layers=2,
                                          max_len=8), **sizes})


def given_random_b(model, seed=1):
    """Every lora_B given random numbers, as after training (B = 0 would hide a wrong B A)."""
    random = np.random.default_rng(seed)
    for module in model.modules():
        if isinstance(module, nn.LoRALinear):
            module.lora_B.data[...] = random.standard_normal(module.lora_B.shape).astype(
                module.lora_B.dtype)
    return model


def logits(model, ids):
    with ta.no_grad():
        return model(ids).data


IDS = np.array([[1, 4, 2, 7, 0, 3], [5, 5, 9, 1, 2, 10]])


# ------------------------------------------------------------------------------------------------
# One layer

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_new_lora_linear_computes_what_its_linear_did(dtype):
    ta.manual_seed(0)
    linear = nn.Linear(6, 4, dtype=dtype)
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 6)).astype(dtype))
    before = linear(x).data
    layer = nn.LoRALinear(linear, rank=2, alpha=8)
    out = layer(x)
    np.testing.assert_array_equal(out.data, before)
    assert out.dtype == layer.lora_A.dtype == layer.lora_B.dtype == dtype
    assert not layer.lora_B.data.any() and np.abs(layer.lora_A.data).max() > 0
    assert np.abs(layer.lora_A.data).max() <= 1 / np.sqrt(6)        # a Linear(6, 2)'s bound


def test_it_computes_the_papers_formula():
    ta.manual_seed(0)
    layer = given_random_b(nn.LoRALinear(nn.Linear(6, 4), rank=3, alpha=12))
    x = np.random.default_rng(2).standard_normal((5, 6))
    W, b, A, B = (p.data for p in (layer.weight, layer.bias, layer.lora_A, layer.lora_B))
    assert layer.scale == 4.0
    np.testing.assert_allclose(layer(ta.tensor(x)).data, x @ W.T + b + 4.0 * x @ A.T @ B.T,
                               rtol=1e-13, atol=1e-13)


def test_alpha_defaults_to_the_rank():
    layer = nn.LoRALinear(nn.Linear(6, 4), rank=3)
    assert layer.alpha == 3.0 and layer.scale == 1.0
    assert repr(layer) == "LoRALinear(6, 4, bias=True, rank=3, alpha=3)"


def test_only_a_and_b_require_grad_and_the_weights_are_the_linears_own():
    linear = nn.Linear(6, 4)
    layer = nn.LoRALinear(linear, rank=2)
    assert layer.weight is linear.weight and layer.bias is linear.bias
    assert [name for name, p in layer.named_parameters() if p.requires_grad] == \
        ["lora_A", "lora_B"]
    assert layer.trainable_parameters() == [layer.lora_A, layer.lora_B]
    assert isinstance(layer, nn.Linear)


def test_at_the_first_step_only_b_gets_a_gradient():
    """B = 0, so dL/dA = scale (grad B)^T x = 0: the first step moves B alone (why both factors
    cannot start at zero)."""
    layer = nn.LoRALinear(nn.Linear(6, 4), rank=2)
    x = ta.tensor(np.random.default_rng(0).standard_normal((3, 6)), requires_grad=True)
    layer(x).backward(np.random.default_rng(1).standard_normal((3, 4)))
    assert not layer.lora_A.grad.any() and layer.lora_B.grad.any()
    assert layer.weight.grad is None and layer.bias.grad is None
    np.testing.assert_allclose(x.grad, np.random.default_rng(1).standard_normal((3, 4))
                               @ layer.weight.data, rtol=1e-13)


def test_the_updates_backward_sends_no_gradient_to_a_constant_input():
    x = ta.tensor(np.ones((2, 5)))
    A, B = (ta.tensor(np.ones(shape), requires_grad=True) for shape in ((3, 5), (4, 3)))
    LowRankUpdate.apply(x, A, B, scale=0.5).backward(np.ones((2, 4)))
    np.testing.assert_allclose(A.grad, np.full((3, 5), 0.5 * 4 * 2))
    np.testing.assert_allclose(B.grad, np.full((4, 3), 0.5 * 5 * 2))


def test_merge_gives_a_plain_linear_with_the_same_output_and_draws_nothing():
    ta.manual_seed(0)
    layer = given_random_b(nn.LoRALinear(nn.Linear(6, 4), rank=2, alpha=5))
    x = ta.tensor(np.random.default_rng(3).standard_normal((2, 3, 6)))
    state = rng.generator.bit_generator.state
    merged = layer.merge()
    assert rng.generator.bit_generator.state == state
    assert type(merged) is nn.Linear and merged.weight is not layer.weight
    np.testing.assert_allclose(merged(x).data, layer(x).data, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(merged.bias.data, layer.bias.data)
    assert not merged.weight.requires_grad                 # frozen, as the weight it came from
    assert not np.array_equal(merged.weight.data, layer.weight.data)


def test_a_linear_without_bias():
    layer = given_random_b(nn.LoRALinear(nn.Linear(6, 4, bias=False), rank=2))
    x = ta.tensor(np.random.default_rng(3).standard_normal((3, 6)))
    assert layer.bias is None and layer.merge().bias is None
    np.testing.assert_allclose(layer.merge()(x).data, layer(x).data, rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# A model

def test_add_lora_wraps_the_attention_projections_and_freezes_the_rest():
    model = small_model()
    total = sum(p.size for p in model.parameters())
    summary = nn.add_lora(model, rank=2)
    wrapped = [name for name, layer in linear_layers(model).items()
               if isinstance(layer, nn.LoRALinear)]
    assert wrapped == summary.layers == [f"blocks.{b}.attn.{p}" for b in range(2)
                                         for p in ("q_proj", "k_proj", "v_proj", "out_proj")]
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable == [f"{layer}.lora_{part}" for layer in wrapped for part in "AB"]
    assert summary.trainable == 8 * 2 * (8 + 8)
    assert summary.total == total + summary.trainable
    assert repr(summary) == ("LoRA adapters on 8 Linear layers (blocks.0.attn.q_proj, "
                             "blocks.0.attn.k_proj, blocks.0.attn.v_proj, blocks.0.attn.out_proj "
                             "and 4 more): 256 trainable parameters of 2,203 (11.62%)")
    assert "blocks.0.attn.q_proj.weight" in model.state_dict()          # the names stay
    np.testing.assert_array_equal(logits(model, IDS), logits(small_model(), IDS))


def test_targets_choose_the_layers_by_name():
    model = small_model()
    summary = nn.add_lora(model, rank=1, targets=["blocks.1.*", "head"])
    assert summary.layers == ["blocks.1.attn.q_proj", "blocks.1.attn.k_proj",
                              "blocks.1.attn.v_proj", "blocks.1.attn.out_proj",
                              "blocks.1.ff.up", "blocks.1.ff.down", "head"]
    assert ATTENTION == ("*q_proj", "*k_proj", "*v_proj", "*out_proj")


def test_a_linear_in_a_list_is_wrapped_in_its_place():
    ta.manual_seed(0)
    experts = nn.MixtureOfExperts(8, num_experts=3, top_k=2)
    summary = nn.add_lora(experts, rank=2, targets="experts.*.up")
    assert summary.layers == ["experts.0.up", "experts.1.up", "experts.2.up"]
    assert all(isinstance(expert.up, nn.LoRALinear) for expert in experts.experts)


def test_frozen_weights_get_no_gradient_and_the_optimizer_moves_only_the_adapters():
    model = small_model()
    nn.add_lora(model, rank=2)
    before = model.state_dict()
    optimizer = ta.optim.AdamW(model.trainable_parameters(), lr=1e-2, weight_decay=0.1)
    for step in range(3):
        out = model(IDS[:, :-1])
        loss = F.cross_entropy(out.reshape(-1, 11), IDS[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    after = model.state_dict()
    for name, parameter in model.named_parameters():
        if "lora_" in name:
            assert parameter.grad is not None and not np.array_equal(after[name], before[name])
        else:
            assert parameter.grad is None, name
            np.testing.assert_array_equal(after[name], before[name], err_msg=name)
    with pytest.raises(TypeError, match=r"^AdamW: every parameter must be a Tensor that requires "
                                        r"grad; parameter 0 \(embed.weight\), of shape "
                                        r"\(\d+, \d+\), does not: it is frozen.*"
                                        r"model.trainable_parameters\(\)"):
        ta.optim.AdamW(model.parameters())


def test_the_adapted_blocks_gradient_check_sees_only_the_adapters():
    """The checklist's row of an adapted TransformerBlock checks the input and the 8 adapters,
    all that requires grad."""
    from tinyattn_tools.checklist import lora
    _, inputs = lora.adapted_block()
    assert len(inputs) == 1 + 8
    assert all(p.requires_grad for p in inputs)
    assert all(p.name.split(".")[-1] in ("lora_A", "lora_B") for p in inputs[1:])


def test_merge_lora_gives_back_a_plain_model_with_the_same_logits():
    model = small_model()
    nn.add_lora(model, rank=2, alpha=3)
    given_random_b(model)
    adapted = logits(model, IDS)
    assert not np.allclose(adapted, logits(small_model(), IDS))
    merged = nn.merge_lora(model)
    assert merged is model
    assert not any(isinstance(layer, nn.LoRALinear) for layer in linear_layers(model).values())
    assert set(model.state_dict()) == set(small_model().state_dict())
    np.testing.assert_allclose(logits(model, IDS), adapted, rtol=1e-12, atol=1e-12)


def test_an_adapted_model_writes_with_its_key_value_cache():
    model = small_model(positional="learned")
    nn.add_lora(model, rank=2)
    given_random_b(model)
    prompt = IDS[:, :3]
    ta.manual_seed(0)
    cached = model.generate(prompt, 4, temperature=0)
    ta.manual_seed(0)
    np.testing.assert_array_equal(cached, model.generate(prompt, 4, temperature=0,
                                                         use_cache=False))


# ------------------------------------------------------------------------------------------------
# Saving the adapters alone

def adapted(**settings):
    model = small_model()
    nn.add_lora(model, **settings)
    return model


def trained_adapters(dtype=None):
    model = small_model(dtype=dtype)
    nn.add_lora(model, rank=2, alpha=6, targets=[*ATTENTION, "*ff.up"])
    return given_random_b(model)


def test_adapters_saved_alone_load_back_onto_the_base_model(tmp_path):
    model = trained_adapters()
    nn.save_lora(model, tmp_path / "adapters.safetensors")
    arrays, metadata = ta.load_safetensors(tmp_path / "adapters.safetensors", with_metadata=True)
    assert sorted(arrays) == sorted(name for name, p in model.named_parameters()
                                    if p.requires_grad)
    assert '"blocks.0.ff.up": {"rank": 2, "alpha": 6.0}' in metadata["lora"]
    model.save(tmp_path / "model.safetensors")
    assert (tmp_path / "adapters.safetensors").stat().st_size < \
        (tmp_path / "model.safetensors").stat().st_size / 3

    fresh = small_model()                      # the base, as it was before add_lora
    summary = nn.load_lora(fresh, tmp_path / "adapters.safetensors")
    assert summary.layers == [name for name in linear_layers(model)
                              if name.endswith(("_proj", "ff.up"))]
    np.testing.assert_array_equal(logits(fresh, IDS), logits(model, IDS))
    assert fresh.trainable_parameters() and all(
        "lora_" in name for name, p in fresh.named_parameters() if p.requires_grad)

    adapted = small_model()                    # or adapted alike already: A and B replaced
    nn.add_lora(adapted, rank=2, alpha=6, targets=[*ATTENTION, "*ff.up"])
    nn.load_lora(adapted, tmp_path / "adapters.safetensors")
    np.testing.assert_array_equal(logits(adapted, IDS), logits(model, IDS))


def test_float32_adapters_round_trip_in_float32(tmp_path):
    model = trained_adapters(np.float32)
    nn.save_lora(model, tmp_path / "a.safetensors")
    fresh = small_model(dtype=np.float32)
    nn.load_lora(fresh, tmp_path / "a.safetensors")
    assert all(p.dtype == np.float32 for p in fresh.parameters())
    np.testing.assert_array_equal(logits(fresh, IDS), logits(model, IDS))


@pytest.mark.parametrize("other, message", [
    (lambda: small_model(embed_dim=12), r"blocks\.0\.attn\.q_proj\.lora_A has shape \(2, 8\), "
                                        r"the layer's is \(2, 12\)"),
    (lambda: small_model(num_layers=1), r"adapts blocks\.1\.attn\.q_proj, which is no Linear "
                                        r"layer of this model"),
    (lambda: adapted(rank=1),
     r"has adapters of rank 2 for blocks\.0\.attn\.q_proj, which has one of rank 1 already"),
])
def test_adapters_that_do_not_fit_the_model_change_nothing(tmp_path, other, message):
    nn.save_lora(trained_adapters(), tmp_path / "a.safetensors")
    model = other()
    before = {name: (p.data.copy(), p.requires_grad) for name, p in model.named_parameters()}
    with pytest.raises(ValueError, match=r"^load_lora: the file '.*a\.safetensors'.*" + message):
        nn.load_lora(model, tmp_path / "a.safetensors")
    after = {name: (p.data, p.requires_grad) for name, p in model.named_parameters()}
    assert before.keys() == after.keys()
    for name in before:
        np.testing.assert_array_equal(after[name][0], before[name][0])
        assert after[name][1] == before[name][1], name


def test_a_file_that_holds_no_adapters_is_named(tmp_path):
    ta.save_safetensors(tmp_path / "w.safetensors", {"x": np.zeros(3)})
    with pytest.raises(ValueError, match=r"load_lora: '.*w\.safetensors' is a safetensors file "
                                         r"but holds no LoRA adapters"):
        nn.load_lora(small_model(), tmp_path / "w.safetensors")
    (tmp_path / "junk").write_bytes(b"not a file of tensors")
    with pytest.raises(ValueError, match=r"load_lora: '.*junk' is not a safetensors file"):
        nn.load_lora(small_model(), tmp_path / "junk")
    with pytest.raises(FileNotFoundError, match="load_lora"):
        nn.load_lora(small_model(), tmp_path / "missing.safetensors")


# ------------------------------------------------------------------------------------------------
# GPT-2, from the fixture

def test_gpt2_from_pretrained_fine_tunes_merges_and_saves_as_gpt2(tmp_path):
    model = nn.CausalTransformer.from_pretrained(FIXTURE).train()
    summary = nn.add_lora(model, rank=4)
    assert summary.trainable == 2 * 4 * 4 * (32 + 32)          # 2 layers, q k v out, E = 32
    text = np.random.default_rng(0).integers(0, model.embed.num_embeddings, (1, 17))
    ids, targets = np.repeat(text[:, :-1], 2, axis=0), np.repeat(text[:, 1:], 2, axis=0)
    optimizer = ta.optim.AdamW(model.trainable_parameters(), lr=1e-2)
    losses = []
    for _ in range(5):
        out = model(ids)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.1
    assert model.dtype == np.float32 and all(p.dtype == np.float32 for p in model.parameters())
    model.eval()
    nn.save_lora(model, tmp_path / "adapters.safetensors")
    reloaded = nn.CausalTransformer.from_pretrained(FIXTURE)
    nn.load_lora(reloaded, tmp_path / "adapters.safetensors")
    np.testing.assert_array_equal(logits(reloaded, ids), logits(model, ids))
    adapted_logits = logits(model, ids)
    nn.merge_lora(model).save_pretrained(tmp_path / "merged")
    merged = nn.CausalTransformer.from_pretrained(tmp_path / "merged")
    np.testing.assert_allclose(logits(merged, ids), adapted_logits, rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------------------------------------
# Bad arguments, named

@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.LoRALinear(nn.MultiHeadAttention(8, 2), 2), TypeError,
     "LoRALinear: linear must be an nn.Linear, got MultiHeadAttention"),
    (lambda: nn.LoRALinear(nn.Linear(6, 4), 5), ValueError,
     r"LoRALinear: rank 5 is more than min\(in_features, out_features\) = min\(6, 4\)"),
    (lambda: nn.LoRALinear(nn.Linear(6, 4), 0), ValueError,
     "LoRALinear: rank must be at least 1, got 0"),
    (lambda: nn.LoRALinear(nn.Linear(6, 4), 2.0), TypeError,
     r"LoRALinear: rank must be an int, got 2\.0"),
    (lambda: nn.LoRALinear(nn.Linear(6, 4), 2, alpha=-1), ValueError,
     "LoRALinear: alpha must be >= 0, got -1"),
    (lambda: nn.LoRALinear(nn.LoRALinear(nn.Linear(6, 4), 2), 2), ValueError,
     r"LoRALinear: linear already has an adapter \(it is a LoRALinear\)"),
    (lambda: nn.LoRALinear(nn.Linear(6, 4), 2)(ta.tensor(np.ones((2, 4)))), ValueError,
     r"LoRALinear: x must have shape \(\.\.\., 6\), got \(2, 4\)"),
    (lambda: nn.LoRALinear(nn.Linear(6, 4), 2)(ta.tensor(np.ones((2, 6), np.float32))),
     TypeError, "LoRALinear: x has dtype float32 but the layer's parameters are float64"),
    (lambda: nn.add_lora(small_model(), 2, targets="*attention*"), ValueError,
     r"add_lora: no Linear layer of the model matches targets '\*attention\*'; its Linear "
     r"layers are blocks\.0\.attn\.q_proj, blocks\.0\.attn\.k_proj, .* and 7 more"),
    (lambda: nn.add_lora(small_model(), 2, targets=[1]), TypeError,
     "add_lora: targets must be a pattern of layer names such as '.q_proj', or a list of them, "
     r"got \[1\]"),
    (lambda: nn.add_lora(small_model(), 9), ValueError,
     r"add_lora: rank 9 is more than min\(in_features, out_features\) = min\(8, 8\) of "
     r"blocks\.0\.attn\.q_proj"),
    (lambda: nn.add_lora(np.zeros(3), 2), TypeError,
     "add_lora: model must be an nn.Module, got ndarray"),
    (lambda: nn.save_lora(small_model(), "x.safetensors"), ValueError,
     "save_lora: the model has no LoRA adapters to save"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_adapting_an_adapted_layer_again_is_refused_and_changes_nothing():
    model = adapted(rank=1)
    trainable = model.trainable_parameters()
    with pytest.raises(ValueError, match=r"add_lora: blocks\.0\.attn\.q_proj already has an "
                                         r"adapter; merge_lora\(model\) first"):
        nn.add_lora(model, rank=2)
    assert model.trainable_parameters() == trainable


def test_a_second_add_lora_keeps_the_first_adapters_training():
    model = small_model()
    first = nn.add_lora(model, 2, targets="*q_proj")
    second = nn.add_lora(model, 2, targets="*v_proj")
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    assert trainable == [name for name, _ in model.named_parameters()
                         if name.endswith(("q_proj.lora_A", "q_proj.lora_B", "v_proj.lora_A",
                                           "v_proj.lora_B"))]
    assert second.trainable == 2 * first.trainable
