"""BART and Marian (tinyattn/nn/bart.py) and their checkpoints (tinyattn/nn/bart_checkpoints.py):
the logits and generated tokens of transformers' BartForConditionalGeneration and MarianMTModel
on tests/fixtures/bart-tiny and marian-tiny (made by make_bart.py); Marian's sinusoids; the
cache; float32 end to end; save_pretrained both ways; refusals. Offline: transformers is needed
only by the tests that say so, which skip without it. (Whole-model gradient checks are the
checklist's rows, tinyattn_tools/checklist/t5.py.)"""
import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn.bart import MARIAN_EN_DE, Bart, BartSettings, Marian, marian_positions
from tinyattn.nn.bart_checkpoints import from_pretrained

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
CHECKPOINTS = {"bart-tiny": (Bart, 1), "marian-tiny": (Marian, 47)}      # class, pad id
GENERATED = [f"beams{beams}_penalty{penalty:g}" for beams in (1, 2, 4)
             for penalty in ((1.0, 0.0, 2.0, -1.0) if beams > 1 else (1.0,))]
TINY = BartSettings(vocab_size=12, d_model=8, encoder_layers=1, decoder_layers=2,
                    encoder_attention_heads=2, decoder_attention_heads=4, encoder_ffn_dim=6,
                    decoder_ffn_dim=5, max_position_embeddings=10, scale_embedding=True)
TINY_MARIAN = dataclasses.replace(TINY, model_type="marian", activation_function="swish",
                                  pad_token_id=11, eos_token_id=0, decoder_start_token_id=11)


@pytest.fixture(scope="module")
def references():
    return {name: ta.load_safetensors(FIXTURES / name / "reference.safetensors")
            for name in CHECKPOINTS}


def tolerance(reference, dtype):
    return (1e-4 if dtype == "float32" else 1e-9) * max(1.0, np.abs(reference).max())


def padded(name, reference):
    mask = reference["attention_mask"]
    return np.where(mask == 1, reference["input_ids"], CHECKPOINTS[name][1]), mask


def logits_of(model, *args, **kwargs):
    with ta.no_grad():
        return model(*args, **kwargs).data


def transformers_or_skip():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch "
                                                "transformers): transformers' side is not checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                       "(pip install transformers): its side is not checked")
    return torch, transformers


def copy_of(name, tmp_path, edit=None):
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    if edit is not None:
        config = json.loads((folder / "config.json").read_text())
        edit(config)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_the_logits_are_transformers_logits(name, dtype, references):
    reference = references[name]
    model = from_pretrained(FIXTURES / name, dtype=np.dtype(dtype))
    assert type(model) is CHECKPOINTS[name][0] and not model.training
    logits = logits_of(model, reference["input_ids"], reference["decoder_input_ids"])
    assert logits.dtype == np.dtype(dtype) and logits.shape == (3, 6, 48)
    expected = reference[f"logits_{dtype}"]
    np.testing.assert_allclose(logits, expected, rtol=0, atol=tolerance(expected, dtype))
    ids, mask = padded(name, reference)
    logits = logits_of(model, ids, reference["decoder_input_ids"], attention_mask=mask)
    expected = reference[f"logits_padded_{dtype}"]
    np.testing.assert_allclose(logits, expected, rtol=0, atol=tolerance(expected, dtype))


@pytest.mark.parametrize("case", GENERATED + ["padded_beams1", "padded_beams2", "padded_beams4"])
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_generate_gives_transformers_tokens(name, case, references):
    reference, model = references[name], from_pretrained(FIXTURES / name)
    beams = int(case.split("beams")[1][0])
    if case.startswith("padded"):
        ids, mask = padded(name, reference)
        generated = model.generate(ids, 12, num_beams=beams, attention_mask=mask)
    else:
        generated = model.generate(reference["input_ids"], 12, num_beams=beams,
                                   length_penalty=float(case.split("penalty")[1]))
    np.testing.assert_array_equal(generated, reference[case])


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_the_fixtures_cases_decide_something(name, references):
    reference = references[name]
    assert len({reference[key].shape[1] for key in GENERATED}) >= 2 or \
        len({reference[key].tobytes() for key in GENERATED}) >= 3


def test_marians_sinusoids_are_transformers_table():
    torch, transformers = transformers_or_skip()
    from transformers.models.marian.modeling_marian import MarianSinusoidalPositionalEmbedding
    for positions, dim in ((32, 16), (20, 7), (512, 512)):
        theirs = MarianSinusoidalPositionalEmbedding(positions, dim).create_weight().numpy()
        ours = marian_positions(positions, dim)
        np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-7)     # theirs is float32
        np.testing.assert_array_equal(ours.astype(np.float32), theirs)


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_decoding_token_by_token_with_the_cache_gives_the_whole_sequences_logits(name,
                                                                                  references):
    reference = references[name]
    model = from_pretrained(FIXTURES / name, dtype=np.float64)
    ids, mask = padded(name, reference)
    decoder_ids = reference["decoder_input_ids"]
    whole = logits_of(model, ids, decoder_ids, attention_mask=mask)
    with ta.no_grad():
        cache = model.start(ids, mask)
        steps = [model.decode(decoder_ids[:, t:t + 1], cache).data for t in range(6)]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), whole, rtol=0, atol=1e-12)


@pytest.mark.parametrize("settings", [TINY, TINY_MARIAN], ids=["bart", "marian"])
def test_float32_end_to_end(settings):
    ta.manual_seed(0)
    model = (Bart if settings.model_type == "bart" else Marian)(settings, dtype=np.float32)
    logits = model(np.array([[3, 4, 5]]), np.array([[2, 1]]))
    assert logits.dtype == np.float32 and logits.shape == (1, 2, 12)
    logits.backward(np.ones(logits.shape, dtype=np.float32))
    assert all(p.grad.dtype == np.float32 for p in model.parameters() if p.requires_grad)
    assert model.final_logits_bias.grad is None                 # kept, never trained


def test_the_real_models_sizes_are_named():
    """bart-large's and opus-mt-en-de's config.json on the hub."""
    assert (BartSettings().d_model, BartSettings().encoder_layers, BartSettings().vocab_size) \
        == (1024, 12, 50265)
    assert (MARIAN_EN_DE.d_model, MARIAN_EN_DE.encoder_layers, MARIAN_EN_DE.vocab_size,
            MARIAN_EN_DE.pad_token_id, MARIAN_EN_DE.activation_function) \
        == (512, 6, 58101, 58100, "swish")


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_save_pretrained_writes_what_it_read_and_transformers_reads_it(name, tmp_path,
                                                                      references):
    model = from_pretrained(FIXTURES / name)
    model.save_pretrained(tmp_path / "saved")
    again = from_pretrained(tmp_path / "saved")
    assert again.settings == model.settings
    for (ours, array), (theirs, other) in zip(model.state_dict().items(),
                                              again.state_dict().items()):
        assert ours == theirs
        np.testing.assert_array_equal(array, other)
    torch, transformers = transformers_or_skip()
    kind = (transformers.BartForConditionalGeneration if name == "bart-tiny"
            else transformers.MarianMTModel)
    theirs = kind.from_pretrained(tmp_path / "saved", attn_implementation="eager").eval()
    reference = references[name]
    ids, mask = padded(name, reference)
    with torch.no_grad():
        logits = theirs(input_ids=torch.tensor(ids), attention_mask=torch.tensor(mask),
                        decoder_input_ids=torch.tensor(reference["decoder_input_ids"])).logits
    expected = reference["logits_padded_float32"]
    np.testing.assert_allclose(logits.numpy(), expected, rtol=0, atol=1e-6)


def test_the_hubs_copies_of_the_embedding_are_skipped(tmp_path, references):
    folder = copy_of("marian-tiny", tmp_path)
    weights = ta.load_safetensors(folder / "model.safetensors")
    for stack in ("encoder", "decoder"):
        weights[f"model.{stack}.embed_tokens.weight"] = weights["model.shared.weight"]
        weights[f"model.{stack}.embed_positions.weight"] = np.zeros((32, 16), np.float32)
    ta.save_safetensors(folder / "model.safetensors", weights, {"format": "pt"})
    reference = references["marian-tiny"]
    expected = reference["logits_float32"]
    np.testing.assert_allclose(logits_of(from_pretrained(folder), reference["input_ids"],
                                         reference["decoder_input_ids"]),
                               expected, rtol=0, atol=tolerance(expected, "float32"))


@pytest.mark.parametrize("name, edit, message", [
    ("bart-tiny", lambda c: c.update(activation_function="relu"), "activation_function 'relu'"),
    ("marian-tiny", lambda c: c.update(share_encoder_decoder_embeddings=False),
     "share_encoder_decoder_embeddings false"),
    ("bart-tiny", lambda c: c.update(eos_token_id=[2, 3]), r"eos_token_id \[2, 3\]"),
    ("bart-tiny", lambda c: c.update(model_type="mbart"), "model_type 'mbart' is not"),
    ("bart-tiny", lambda c: c.update(decoder_attention_heads=3),
     "d_model 16 must be divisible by settings.decoder_attention_heads 3"),
    ("bart-tiny", lambda c: c.update(decoder_layers=3), "lacks model.decoder.layers.2"),
    ("marian-tiny", lambda c: c.update(d_model=8), "holds final_logits_bias|holds model.shared"),
])
def test_what_the_models_do_not_compute_is_refused_by_name(name, edit, message, tmp_path):
    with pytest.raises(ValueError, match=f"from_pretrained: the folder .*({message})"):
        from_pretrained(copy_of(name, tmp_path, edit))


@pytest.mark.parametrize("call, message", [
    (lambda m: m(np.arange(11)[None] % 12, np.array([[2]])),
     r"Bart: input_ids has 11 positions, more than the model's 10"),
    (lambda m: m.generate(np.array([[3, 4]]), 10),
     r"Bart.generate: the output has 11 positions, more than the model's 10"),
    (lambda m: m(np.array([[3, 4]]), np.array([[2], [2]])),
     r"Bart: input_ids \(1, 2\) and decoder_input_ids \(2, 1\) must have one batch size"),
])
def test_bad_input_is_refused_in_one_line(call, message):
    with pytest.raises(ValueError, match=message):
        call(Bart(TINY))


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="Bart: settings.activation_function must be one of"):
        Bart(dataclasses.replace(TINY, activation_function="relu"))
