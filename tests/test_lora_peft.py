"""LoRA adapters in peft's format (tinyattn/nn/lora_peft.py): the folder save_lora writes has
peft's layout, q, k and v stacked into c_attn exactly; it loads back as it was saved; a folder
written here by hand, in the layout peft writes, loads onto the model as its numbers say (checked
against the weights merged by hand); what the format cannot hold, and folders that ask for what
LoRALinear does not do, are refused by name; and, where peft is installed, the logits agree with
peft + transformers both ways (within 1e-5, float32)."""
import json
import pathlib

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.nn.lora import adapters

FIXTURE = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"
IDS = np.array([[464, 2068, 7586, 21831, 18045, 625], [11, 12, 13, 14, 15, 16]])
E, HIDDEN, LAYERS = 32, 128, 2                # the fixture's sizes
PREFIX = "base_model.model.transformer."
# peft 0.21 calls a transformers 5.25 method that warns of its own deprecation
PEFT_WARNING = "ignore:`is_gradient_checkpointing` is deprecated:FutureWarning"


def gpt2(dtype=np.float32):
    return nn.CausalTransformer.from_pretrained(FIXTURE, dtype=dtype)


def adapted(dtype=np.float32, seed=1):
    """The fixture with adapters of rank 4 (alpha 8) on q, k, v, out, of rank 2 on the
    feed-forward's up and down, and on the second block's q and v alone of rank 3; every B
    random, as after training (B = 0 would hide a wrong layout)."""
    model = gpt2(dtype)
    nn.add_lora(model, 4, alpha=8, targets=["blocks.0.attn.*", "blocks.1.attn.out_proj"])
    nn.add_lora(model, 3, alpha=6, targets=["blocks.1.attn.q_proj", "blocks.1.attn.v_proj"])
    nn.add_lora(model, 2, targets=["*ff.up", "*ff.down"])
    random = np.random.default_rng(seed)
    for layer in adapters(model).values():
        layer.lora_B.data[...] = 0.1 * random.standard_normal(layer.lora_B.shape)
    return model


def logits(model, ids=IDS):
    with ta.no_grad():
        return model(ids).data


def read_folder(folder):
    config = json.loads((folder / "adapter_config.json").read_text())
    return config, ta.load_safetensors(folder / "adapter_model.safetensors")


# ------------------------------------------------------------------------------------------------
# The folder save_lora writes

def test_the_folder_has_peft_s_layout(tmp_path):
    model = adapted()
    nn.save_lora(model, tmp_path, format="peft", base_model_name_or_path="gpt2-tiny")
    config, arrays = read_folder(tmp_path)
    modules = [f"h.{n}.{module}" for n in range(LAYERS)
               for module in ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")]
    assert sorted(config["target_modules"]) == sorted(modules)
    assert config["peft_type"] == "LORA" and config["fan_in_fan_out"] is True
    assert config["base_model_name_or_path"] == "gpt2-tiny" and config["bias"] == "none"
    ranks = {module: config["rank_pattern"].get(module, config["r"]) for module in modules}
    alphas = {module: config["alpha_pattern"].get(module, config["lora_alpha"])
              for module in modules}
    assert ranks == {"h.0.attn.c_attn": 12, "h.0.attn.c_proj": 4, "h.0.mlp.c_fc": 2,
                     "h.0.mlp.c_proj": 2, "h.1.attn.c_attn": 6, "h.1.attn.c_proj": 4,
                     "h.1.mlp.c_fc": 2, "h.1.mlp.c_proj": 2}
    assert alphas["h.0.attn.c_attn"] == 24 and alphas["h.1.attn.c_attn"] == 12      # alpha / r kept
    shapes = {"attn.c_attn": (3 * E, E), "attn.c_proj": (E, E), "mlp.c_fc": (HIDDEN, E),
              "mlp.c_proj": (E, HIDDEN)}
    assert set(arrays) == {f"{PREFIX}{module}.lora_{part}.weight" for module in modules
                           for part in "AB"}
    for module in modules:
        out, into = shapes[module.split(".", 2)[2]]
        assert arrays[f"{PREFIX}{module}.lora_A.weight"].shape == (ranks[module], into)
        assert arrays[f"{PREFIX}{module}.lora_B.weight"].shape == (out, ranks[module])
        assert arrays[f"{PREFIX}{module}.lora_A.weight"].dtype == np.float32


def test_q_k_and_v_are_one_update_of_c_attn(tmp_path):
    """A stacked, B block-diagonal: (alpha' / R) B A is the three updates (alpha / r) B_t A_t
    stacked, and a third without an adapter (block 1's k) gets none."""
    model = adapted(np.float64)
    nn.save_lora(model, tmp_path, format="peft")
    config, arrays = read_folder(tmp_path)
    for n, rank in ((0, 12), (1, 6)):
        module = f"h.{n}.attn.c_attn"
        A, B = (arrays[f"{PREFIX}{module}.lora_{part}.weight"] for part in "AB")
        alpha = config["alpha_pattern"].get(module, config["lora_alpha"])
        update = (alpha / rank) * B @ A                                       # (3E, E)
        layers = adapters(model)
        for third, name in enumerate(("q_proj", "k_proj", "v_proj")):
            layer = layers.get(f"blocks.{n}.attn.{name}")
            expected = (np.zeros((E, E)) if layer is None
                        else layer.scale * layer.lora_B.data @ layer.lora_A.data)
            np.testing.assert_allclose(update[third * E:(third + 1) * E], expected, rtol=1e-12,
                                       atol=1e-15)


def test_a_saved_folder_loads_back_as_it_was(tmp_path):
    model = adapted()
    nn.save_lora(model, tmp_path, format="peft")
    loaded = gpt2()
    summary = nn.load_lora(loaded, tmp_path)
    assert summary.layers == list(adapters(model))
    for name, layer in adapters(model).items():
        back = adapters(loaded)[name]
        assert (back.rank, back.alpha) == (layer.rank, layer.alpha)
        np.testing.assert_array_equal(back.lora_A.data, layer.lora_A.data)
        np.testing.assert_array_equal(back.lora_B.data, layer.lora_B.data)
    np.testing.assert_array_equal(logits(loaded), logits(model))


# ------------------------------------------------------------------------------------------------
# Folders written by hand, in the layout peft writes

def write_peft_folder(folder, arrays, **config):
    """adapter_config.json as peft writes it (its defaults, then `config`), and the arrays under
    peft's names, without save_lora's record of how q, k and v were stacked."""
    folder.mkdir(exist_ok=True)
    settings = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4, "lora_alpha": 16,
                "target_modules": ["c_attn", "c_proj", "c_fc"], "fan_in_fan_out": True,
                "bias": "none", "lora_dropout": 0.05, "use_dora": False, "use_rslora": False,
                "rank_pattern": {}, "alpha_pattern": {}, "modules_to_save": None,
                "layers_to_transform": None, "layers_pattern": None, **config}
    (folder / "adapter_config.json").write_text(json.dumps(settings))
    ta.save_safetensors(folder / "adapter_model.safetensors",
                        {PREFIX + key: value for key, value in arrays.items()}, {"format": "pt"})


def dense_adapters(rank=4, seed=2):
    """{module.lora_A.weight / lora_B.weight: array} of every attn.c_attn, attn.c_proj and
    mlp.c_fc, random A and B (float32, as peft saves them)."""
    random = np.random.default_rng(seed)
    shapes = {"attn.c_attn": (3 * E, E), "attn.c_proj": (E, E), "mlp.c_fc": (HIDDEN, E)}
    arrays = {}
    for n in range(LAYERS):
        for module, (out, into) in shapes.items():
            arrays[f"h.{n}.{module}.lora_A.weight"] = random.standard_normal(
                (rank, into)).astype(np.float32) / np.sqrt(into)
            arrays[f"h.{n}.{module}.lora_B.weight"] = 0.1 * random.standard_normal(
                (out, rank)).astype(np.float32)
    return arrays


def merged_by_hand(arrays, scale):
    """The fixture (float64) with each module's update scale * B A added to its weights, c_attn's
    split into thirds by rows: what peft computes, written without tinyattn's LoRA."""
    model = gpt2(np.float64)
    names = {"attn.c_attn": ("attn.q_proj", "attn.k_proj", "attn.v_proj"),
             "attn.c_proj": ("attn.out_proj",), "mlp.c_fc": ("ff.up",)}
    for n in range(LAYERS):
        for module, layers in names.items():
            A = arrays[f"h.{n}.{module}.lora_A.weight"].astype(np.float64)
            B = arrays[f"h.{n}.{module}.lora_B.weight"].astype(np.float64)
            update = scale * B @ A                                       # (out, in), Linear's
            rows = update.shape[0] // len(layers)
            for third, layer in enumerate(layers):
                model.get_submodule(f"blocks.{n}.{layer}").weight.data += \
                    update[third * rows:(third + 1) * rows]
    return model


def test_a_dense_peft_adapter_on_c_attn_loads_exactly_as_rank_r_on_each_of_q_k_v(tmp_path):
    """A dense B does not split into three adapters of rank r / 3: each of q, k, v gets rank r,
    with all of A and its third of B, at the same scale; the logits are those of the weights
    merged by hand (float64: 1e-12)."""
    arrays = dense_adapters()
    write_peft_folder(tmp_path, arrays)
    model = gpt2(np.float64)
    summary = nn.load_lora(model, tmp_path)
    assert len(summary.layers) == LAYERS * 5
    q, k = adapters(model)["blocks.0.attn.q_proj"], adapters(model)["blocks.0.attn.k_proj"]
    assert (q.rank, q.alpha, k.rank, k.alpha) == (4, 16.0, 4, 16.0)
    assert q.lora_A is not k.lora_A and (q.lora_A.data == k.lora_A.data).all()
    np.testing.assert_allclose(logits(model), logits(merged_by_hand(arrays, 16 / 4)), rtol=0,
                               atol=1e-12)


def test_a_block_diagonal_adapter_splits_when_the_folder_says_how_it_was_stacked(tmp_path):
    """Saved here, the record in the metadata splits c_attn's adapter back; the same arrays
    without the record, or with a B that is not zero outside its blocks, load as rank R on each
    third: the same logits all three ways."""
    model = adapted()
    nn.save_lora(model, tmp_path / "saved", format="peft")
    config, arrays = read_folder(tmp_path / "saved")
    plain = {key.removeprefix(PREFIX): value for key, value in arrays.items()}
    write_peft_folder(tmp_path / "unrecorded", plain, **config)
    expected = logits(model)
    for folder, rank in (("saved", 4), ("unrecorded", 12)):
        loaded = gpt2()
        nn.load_lora(loaded, tmp_path / folder)
        assert adapters(loaded)["blocks.0.attn.q_proj"].rank == rank
        np.testing.assert_allclose(logits(loaded), expected, rtol=0, atol=1e-5)
    key = PREFIX + "h.0.attn.c_attn.lora_B.weight"
    arrays[key][E + 1, 0] = 0.5                         # k's rows, q's column: not block-diagonal
    ta.save_safetensors(tmp_path / "saved" / "adapter_model.safetensors", arrays,
                        {"format": "pt", "lora": json.dumps({"blocks.0.attn.q_proj": {"rank": 4}})})
    loaded = gpt2()
    nn.load_lora(loaded, tmp_path / "saved")
    assert adapters(loaded)["blocks.0.attn.q_proj"].rank == 12


def test_a_keyed_pattern_sets_one_modules_rank_and_alpha(tmp_path):
    arrays = dense_adapters()
    arrays["h.1.attn.c_proj.lora_A.weight"] = arrays["h.1.attn.c_proj.lora_A.weight"][:2]
    arrays["h.1.attn.c_proj.lora_B.weight"] = arrays["h.1.attn.c_proj.lora_B.weight"][:, :2]
    write_peft_folder(tmp_path, arrays, rank_pattern={"h.1.attn.c_proj": 2},
                      alpha_pattern={"h.1.attn.c_proj": 3})
    model = gpt2()
    nn.load_lora(model, tmp_path)
    out = adapters(model)["blocks.1.attn.out_proj"]
    assert (out.rank, out.alpha) == (2, 3.0)
    assert adapters(model)["blocks.0.attn.out_proj"].alpha == 16.0


# ------------------------------------------------------------------------------------------------
# Refused by name

@pytest.mark.parametrize("change, message", [
    (lambda model: nn.add_lora(model, 2, targets="head"),
     r"peft's format holds adapters on GPT-2's modules .*; head has no place there"),
    (lambda model: model.blocks[0].attn.v_proj.__setattr__("alpha", 3.0)
     or model.blocks[0].attn.v_proj.__setattr__("scale", 0.75),
     r"q, k and v are one module in GPT-2 \(h\.0\.attn\.c_attn\), with one scale alpha / rank, "
     r"but their adapters' scales differ: blocks\.0\.attn\.q_proj 2, blocks\.0\.attn\.k_proj 2, "
     r"blocks\.0\.attn\.v_proj 0\.75"),
])
def test_what_peft_s_gpt2_cannot_hold_is_refused(tmp_path, change, message):
    model = adapted()
    change(model)
    with pytest.raises(ValueError, match=r"^save_lora: " + message):
        nn.save_lora(model, tmp_path / "out", format="peft")
    assert not (tmp_path / "out").exists()


def test_a_model_other_than_gpt2_is_refused(tmp_path):
    ta.manual_seed(0)
    model = nn.CausalTransformer(11, 8, 2, 2, max_len=8)
    nn.add_lora(model, 2)
    with pytest.raises(ValueError, match=r"^save_lora: peft's format is for the GPT-2 of a "
                                         r"transformers checkpoint.*sinusoidal positions"):
        nn.save_lora(model, tmp_path / "out", format="peft")


@pytest.mark.parametrize("config, arrays, message", [
    (dict(peft_type="IA3"), None, r"holds a 'IA3' adapter, not LoRA"),
    (dict(use_dora=True), None, r"asks for what LoRALinear does not do: use_dora True"),
    (dict(use_rslora=True, bias="all"), None, r"use_rslora True, bias 'all'"),
    (dict(target_modules=["c_attn", "c_fc"]), None,
     r"holds adapters for h\.0\.attn\.c_proj, which its target_modules \['c_attn', 'c_fc'\] do "
     r"not name"),
    (dict(r=8), None, r"h\.0\.attn\.c_attn has adapters of rank 4, but its config says rank 8"),
    ({}, {"lm_head.lora_A.weight": np.zeros((4, E), np.float32)},
     r"holds base_model\.model\.transformer\.lm_head\.lora_A\.weight: an adapter on a module "
     r"tinyattn's GPT-2 has no LoRA place for"),
    ({}, {"h.0.attn.c_attn.lora_B.weight": np.zeros((3 * E, 5), np.float32)},
     r"h\.0\.attn\.c_attn's lora_A and lora_B are \{'A': \(4, 32\), 'B': \(96, 5\)\}"),
])
def test_a_folder_that_does_not_fit_is_named_and_changes_nothing(tmp_path, config, arrays,
                                                                  message):
    write_peft_folder(tmp_path, {**dense_adapters(), **(arrays or {})}, **config)
    model = gpt2()
    with pytest.raises(ValueError, match=r"^load_lora: the peft folder '[^']*'.* " + message):
        nn.load_lora(model, tmp_path)
    assert not adapters(model) and all(p.requires_grad for p in model.parameters())


def test_a_folder_for_another_gpt2_is_named_and_changes_nothing(tmp_path):
    write_peft_folder(tmp_path, dense_adapters())
    ta.manual_seed(0)
    other = nn.CausalTransformer(50, 16, 2, 2, max_len=8, positional="learned", tied_head=True)
    with pytest.raises(ValueError, match=r"^load_lora: the folder '.*': blocks\.0\.attn\.q_proj"
                                         r"\.lora_A has shape \(4, 32\), the layer's is \(4, 16\)"):
        nn.load_lora(other, tmp_path)
    assert not adapters(other)


def test_a_folder_without_peft_s_files_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"^load_lora: there is no peft adapter file "
                                                r"'.*adapter_model\.safetensors'"):
        (tmp_path / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA"}))
        nn.load_lora(gpt2(), tmp_path)
    with pytest.raises(ValueError, match=r"^save_lora: format must be one of 'tinyattn', 'peft'"):
        nn.save_lora(adapted(), tmp_path, format="hf")


# ------------------------------------------------------------------------------------------------
# peft and transformers, where installed

@pytest.fixture(scope="module")
def peft_libraries():
    torch = pytest.importorskip("torch", reason="torch is not installed: the round trips through "
                                                "peft are not checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed: "
                                       "the round trips through peft are not checked")
    peft = pytest.importorskip("peft", reason="peft is not installed: the round trips through "
                                              "it are not checked")
    return torch, transformers, peft


def transformers_gpt2(transformers):
    return transformers.GPT2LMHeadModel.from_pretrained(FIXTURE, attn_implementation="eager")


@pytest.mark.filterwarnings(PEFT_WARNING)
def test_an_adapter_saved_here_gives_the_same_logits_in_peft(tmp_path, peft_libraries):
    torch, transformers, peft = peft_libraries
    model = adapted()
    nn.save_lora(model, tmp_path, format="peft", base_model_name_or_path=str(FIXTURE))
    theirs = peft.PeftModel.from_pretrained(transformers_gpt2(transformers), tmp_path).eval()
    with torch.no_grad():
        their_logits = theirs(torch.tensor(IDS)).logits.numpy()
    assert their_logits.dtype == np.float32
    np.testing.assert_allclose(logits(model), their_logits, rtol=0, atol=1e-5)
    without = logits(gpt2())
    assert np.abs(their_logits - without).max() > 0.1                  # the adapters did something


@pytest.mark.filterwarnings(PEFT_WARNING)
def test_an_adapter_made_by_peft_loads_here_to_peft_s_logits(tmp_path, peft_libraries):
    torch, transformers, peft = peft_libraries
    config = peft.LoraConfig(r=4, lora_alpha=16, target_modules=["c_attn", "c_proj", "c_fc"],
                             fan_in_fan_out=True, rank_pattern={"h.1.mlp.c_fc": 2})
    theirs = peft.get_peft_model(transformers_gpt2(transformers), config)
    torch.manual_seed(0)
    with torch.no_grad():
        for name, parameter in theirs.named_parameters():
            if "lora_B" in name:
                parameter.normal_(std=0.1)
    theirs.save_pretrained(tmp_path)
    with torch.no_grad():
        their_logits = theirs.eval()(torch.tensor(IDS)).logits.numpy()
    model = gpt2()
    summary = nn.load_lora(model, tmp_path)
    assert len(summary.layers) == LAYERS * 6                       # q k v out, mlp up and down
    assert adapters(model)["blocks.1.ff.up"].rank == 2             # rank_pattern's
    assert adapters(model)["blocks.1.ff.down"].rank == 4           # mlp.c_proj: a c_proj
    np.testing.assert_allclose(logits(model), their_logits, rtol=0, atol=1e-5)
