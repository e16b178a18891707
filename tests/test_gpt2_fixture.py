"""The small GPT-2 folder in tests/fixtures/gpt2-tiny (made by make_gpt2_tiny.py, not here) is
complete and consistent, read with NumPy and tinyattn's own safetensors reader and tokenizer: a
config and weights of matching shapes, and a reference whose numbers agree with the weights."""
import json
import pathlib

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.tokenizer import GPT2Tokenizer

FOLDER = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"


@pytest.fixture(scope="module")
def config():
    return json.loads((FOLDER / "config.json").read_text())


@pytest.fixture(scope="module")
def weights():
    return ta.load_safetensors(FOLDER / "model.safetensors")


@pytest.fixture(scope="module")
def reference():
    return ta.load_safetensors(FOLDER / "reference.safetensors", with_metadata=True)


def expected_shapes(config):
    """{name: shape} of a GPT-2 checkpoint as transformers saves it (Conv1D weights stored
    (in, out); the output head tied to wte, so not stored)."""
    width, inner = config["n_embd"], config["n_inner"] or 4 * config["n_embd"]
    shapes = {"transformer.wte.weight": (config["vocab_size"], width),
              "transformer.wpe.weight": (config["n_positions"], width),
              "transformer.ln_f.weight": (width,), "transformer.ln_f.bias": (width,)}
    for layer in range(config["n_layer"]):
        block = f"transformer.h.{layer}."
        for norm in ("ln_1", "ln_2"):
            shapes.update({f"{block}{norm}.weight": (width,), f"{block}{norm}.bias": (width,)})
        for name, (fan_in, fan_out) in {"attn.c_attn": (width, 3 * width),
                                        "attn.c_proj": (width, width),
                                        "mlp.c_fc": (width, inner),
                                        "mlp.c_proj": (inner, width)}.items():
            shapes.update({f"{block}{name}.weight": (fan_in, fan_out),
                           f"{block}{name}.bias": (fan_out,)})
    return shapes


def test_the_folder_is_a_complete_gpt2_folder(config, weights):
    for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt", "LICENSE-GPT2"):
        assert (FOLDER / name).is_file(), name
    assert config["model_type"] == "gpt2" and config["tie_word_embeddings"]
    assert config["activation_function"] == "gelu_new" and config["n_embd"] % config["n_head"] == 0
    assert {name: array.shape for name, array in weights.items()} == expected_shapes(config)
    assert all(array.dtype == np.float32 for array in weights.values())
    assert GPT2Tokenizer.from_pretrained(FOLDER).vocab_size == config["vocab_size"] == 50257


def test_every_parameter_is_random_gains_and_biases_included(weights):
    """transformers' own initialisation makes gains 1 and biases 0: a loader that skipped them
    would pass a test on such a model."""
    for name, array in weights.items():
        centre = 1.0 if ".ln_" in name and name.endswith(".weight") else 0.0
        assert 0.15 < np.abs(array - centre).mean() < 0.5, name


def test_the_reference_matches_its_texts_and_the_tokenizer(reference):
    arrays, metadata = reference
    tokenizer = GPT2Tokenizer.from_pretrained(FOLDER)
    texts = json.loads(metadata["texts"])
    assert arrays["input_ids"].shape == (2, 20) and arrays["input_ids"].dtype == np.int64
    assert [tokenizer.encode(text) for text in texts] == arrays["input_ids"].tolist()
    assert tokenizer.encode(metadata["prompt"]) == arrays["prompt_ids"][0].tolist()
    prompt_length = arrays["prompt_ids"].shape[1]
    assert arrays["generated_ids"].shape == (1, prompt_length + 20)
    assert np.array_equal(arrays["generated_ids"][:, :prompt_length], arrays["prompt_ids"])
    assert tokenizer.decode(arrays["generated_ids"][0]) == metadata["generated"]
    assert {"transformers", "torch", "numpy"} <= metadata.keys()


@pytest.mark.parametrize("dtype, tolerance", [("float32", 1e-5), ("float64", 1e-12)])
def test_the_reference_logits_are_the_last_hidden_state_times_the_tied_embedding(
        reference, weights, dtype, tolerance):
    """What the output head of GPT-2 is: logits = ln_f(h) @ wte^T, no bias. The logits are of
    order 1 (not GPT-2's ~0.05 at its own initialisation), so a test to 1e-4 means something."""
    arrays, _ = reference
    columns, logits = arrays["logit_columns"], arrays[f"logits_{dtype}"]
    hidden = arrays[f"last_hidden_{dtype}"]
    assert logits.dtype == hidden.dtype == np.dtype(dtype) and logits.shape == (2, 20, 2048)
    assert len(np.unique(columns)) == 2048 and 50256 in columns
    assert np.isin(arrays["input_ids"], columns).all()
    embedding = weights["transformer.wte.weight"].astype(dtype)[columns]       # (2048, 32)
    np.testing.assert_allclose(hidden @ embedding.T, logits, rtol=0, atol=tolerance)
    assert 1.0 < logits.std() < 5.0
    np.testing.assert_allclose(arrays["logits_float32"], arrays["logits_float64"], atol=1e-4)
