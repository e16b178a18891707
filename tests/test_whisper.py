"""Whisper (tinyattn/nn/whisper.py, chapter 6) and its checkpoints (nn/whisper_checkpoints.py):
logits equal transformers' WhisperForConditionalGeneration's on tests/fixtures/whisper-tiny-random
(float32 and float64), greedy generation with the cache equal to a loop of argmax over the whole
sequence (transformers' model, and ours without a cache), the cross-attention's keys computed
once, save_pretrained read back by transformers, the stem's convolutions equal to PyTorch's, a
whole-model gradcheck in float64, and refusals of bad input and configs."""
import dataclasses
import json
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn.whisper import (WHISPER_TINY, FrameConvolution, Whisper, WhisperSettings,
                                 sinusoids)
from tinyattn.nn.whisper_checkpoints import from_pretrained
from tinyattn.safetensors import load_safetensors

FIXTURE = pathlib.Path(__file__).parent / "fixtures" / "whisper-tiny-random"
REASON = "the [reference] extra installs torch and transformers"
TINY = WhisperSettings(vocab_size=11, num_mel_bins=4, d_model=8, encoder_layers=1,
                       encoder_heads=2, encoder_ffn_dim=12, decoder_layers=1, decoder_heads=2,
                       decoder_ffn_dim=12, max_source_positions=4, max_target_positions=8,
                       eos_token_id=10, pad_token_id=9, decoder_start_token_id=8)


@pytest.fixture(scope="module")
def reference():
    return load_safetensors(FIXTURE / "reference.safetensors")


def tolerance(expected):
    return 1e-4 * max(1.0, float(np.abs(expected).max()))


def test_logits_float32(reference):
    model = from_pretrained(FIXTURE)
    logits = model(reference["input_features"], reference["decoder_input_ids"])
    assert logits.dtype == np.float32 and logits.shape == (2, 6, 96)
    expected = reference["logits_float32"]
    assert np.abs(logits.data - expected).max() <= tolerance(expected)


def test_logits_float64(reference):
    model = from_pretrained(FIXTURE, dtype=np.float64)
    logits = model(reference["input_features"].astype(np.float64),
                   reference["decoder_input_ids"]).data
    expected = reference["logits_float64"]
    assert np.abs(logits - expected).max() <= 1e-9 * np.abs(expected).max()


def test_generate_equals_transformers_greedy_loop(reference):
    """The fixture's tokens: transformers' model, 12 times the argmax over the whole sequence."""
    model = from_pretrained(FIXTURE)
    generated = model.generate(reference["input_features"], reference["prompt_ids"], 12)
    assert generated.dtype == np.int64
    assert np.array_equal(generated, reference["generated_ids"])


def greedy_without_cache(model, features, ids, new_tokens, eos, pad):
    """API.md's rule written plainly: argmax of the logits of the whole sequence so far, a row
    after its eos continues with pad, and it stops once every row has."""
    finished = np.zeros(len(ids), dtype=bool)
    for _ in range(new_tokens):
        chosen = model(features, ids).data[:, -1].argmax(-1)
        chosen = np.where(finished, pad, chosen)
        finished |= chosen == eos
        ids = np.concatenate([ids, chosen[:, None]], axis=1)
        if finished.all():
            break
    return ids


def with_eos(model, eos, pad):
    model.settings = dataclasses.replace(model.settings, eos_token_id=eos, pad_token_id=pad)
    return model


def test_a_row_that_ends_continues_with_pad(reference):
    """eos is the third token row 0 generates, which row 1 does not generate then: row 0 goes on
    with pad, row 1 runs to the end."""
    features, prompt = reference["input_features"], reference["prompt_ids"]
    eos = int(reference["generated_ids"][0, 5])           # 62, row 0's third new token
    assert eos not in reference["generated_ids"][1, 3:]
    model = with_eos(from_pretrained(FIXTURE), eos, pad=0)
    generated = model.generate(features, prompt, 12)
    assert np.array_equal(generated, greedy_without_cache(model, features, prompt, 12, eos, 0))
    assert generated.shape == (2, 15) and list(generated[0, 6:]) == [0] * 9


def test_generation_stops_when_every_row_has_ended(reference):
    features, prompt = reference["input_features"][:1], reference["prompt_ids"][:1]
    eos = int(reference["generated_ids"][0, 5])
    generated = with_eos(from_pretrained(FIXTURE), eos, pad=0).generate(features, prompt, 12)
    assert np.array_equal(generated, reference["generated_ids"][:1, :6])


def test_generate_with_eos_equals_transformers_model_in_a_loop(reference):
    torch = pytest.importorskip("torch", reason=REASON)
    transformers = pytest.importorskip("transformers", reason=REASON)
    theirs = transformers.WhisperForConditionalGeneration.from_pretrained(FIXTURE).eval()
    features, prompt = reference["input_features"], reference["prompt_ids"]
    eos, pad = int(reference["generated_ids"][1, 7]), 5    # 33: row 1's fifth new token
    ids, finished = torch.tensor(prompt), torch.zeros(2, dtype=torch.bool)
    with torch.no_grad():
        for _ in range(15):
            logits = theirs(input_features=torch.tensor(features), decoder_input_ids=ids).logits
            chosen = torch.where(finished, pad, logits[:, -1].argmax(-1))
            finished |= chosen == eos
            ids = torch.cat([ids, chosen[:, None]], dim=1)
            if finished.all():
                break
    ours = with_eos(from_pretrained(FIXTURE), eos, pad).generate(features, prompt, 15)
    assert np.array_equal(ours, ids.numpy())


def test_the_cache_keeps_the_audio_keys_from_the_first_step(reference):
    """A step's logits with the cache equal those of the whole sequence; the self-attention's
    keys grow by one token a step, the cross-attention's are the same tensor throughout."""
    model = from_pretrained(FIXTURE, dtype=np.float64)
    features = ta.tensor(reference["input_features"].astype(np.float64))
    ids = reference["generated_ids"]                                    # (2, 15)
    audio = model.encoder(features)
    cache = model.empty_cache()
    model.decoder(ids[:, :3], audio, cache)
    cross_keys = [layer.keys for layer in cache.cross_attention]
    whole = model(features, ids).data
    for t in range(3, ids.shape[1]):
        step = model.decoder(ids[:, t:t + 1], audio, cache).data        # (2, 1, 96)
        assert np.abs(step[:, 0] - whole[:, t]).max() <= 1e-12 * np.abs(whole).max()
        assert all(layer.keys is keys for layer, keys in zip(cache.cross_attention, cross_keys))
        assert all(layer.keys.shape == (2, 4, t + 1, 8) for layer in cache.self_attention)
    assert len(cache) == 15
    assert cache.nbytes == 2 * 2 * 2 * 4 * (15 + 16) * 8 * 8   # 2 (k, v) x layers x B x H x ...


def test_sinusoids_are_the_stored_table(reference):
    """The fixture's encoder positions are transformers' sinusoids, computed in float32: ours,
    in float64, differ by float32's rounding of the angles (~1e-4 at whisper-tiny's 1500
    positions, which is why from_pretrained reads the stored table)."""
    stored = load_safetensors(FIXTURE / "model.safetensors")["model.encoder.embed_positions.weight"]
    np.testing.assert_allclose(sinusoids(16, 32), stored, rtol=0, atol=1e-6)


def test_sinusoids_equal_transformers():
    torch = pytest.importorskip("torch", reason=REASON)
    whisper = pytest.importorskip("transformers.models.whisper.modeling_whisper", reason=REASON)
    with torch.no_grad():
        theirs = whisper.sinusoids(20, 12).double().numpy()
    np.testing.assert_allclose(sinusoids(20, 12), theirs, rtol=0, atol=1e-6)


@pytest.mark.parametrize("stride, frames", [(1, 7), (2, 7), (2, 8)])
def test_frame_convolution_is_conv1d(stride, frames):
    torch = pytest.importorskip("torch", reason=REASON)
    ta.manual_seed(0)
    convolution = FrameConvolution(3, 5, stride=stride)
    x = np.random.default_rng(0).standard_normal((2, frames, 3))
    ours = convolution(ta.tensor(x)).data                               # (B, T', 5)
    theirs = torch.nn.functional.conv1d(
        torch.tensor(x).transpose(1, 2), torch.tensor(convolution.weight.data),
        torch.tensor(convolution.bias.data), stride=stride, padding=1).transpose(1, 2).numpy()
    assert ours.shape == theirs.shape == (2, (frames - 1) // stride + 1, 5)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-13)


def tiny_model(**changes):
    ta.manual_seed(0)
    return Whisper(dataclasses.replace(TINY, **changes)).eval()


def test_gradcheck_the_whole_model():
    """float64, through the features and a weight of every kind of layer (the stem, encoder and
    decoder attention, cross-attention, feed-forward, norms, the tied embedding)."""
    model = tiny_model()
    random = np.random.default_rng(0)
    features = ta.tensor(random.standard_normal((2, 4, 8)), requires_grad=True)
    ids = random.integers(0, 11, (2, 5))
    d = model.decoder.blocks[0]
    weights = [model.encoder.conv1.weight, model.encoder.conv2.bias,
               model.encoder.blocks[0].attn.k_proj.weight, model.encoder.norm.weight,
               d.attn.q_proj.weight, d.cross_attn.v_proj.weight, d.cross_attn.k_proj.weight,
               d.fc1.bias, d.mlp_norm.bias, model.decoder.embed.weight,
               model.decoder.positions.weight]
    assert ta.gradcheck(lambda f, *_: model(f, ids), [features, *weights], directions=4)


def test_untied_head_and_save_pretrained_round_trip(tmp_path):
    model = tiny_model(tied_head=False)
    assert model.decoder.head.weight is not model.decoder.embed.weight
    model.save_pretrained(tmp_path)
    features = np.random.default_rng(1).standard_normal((2, 4, 8))
    ids = np.array([[8, 1, 2], [8, 3, 4]])
    again = from_pretrained(tmp_path, dtype=np.float64)
    assert np.array_equal(again(features, ids).data, model(features, ids).data)
    assert json.loads((tmp_path / "config.json").read_text())["tie_word_embeddings"] is False


@pytest.mark.parametrize("tied", [True, False])
def test_transformers_reads_what_save_pretrained_writes(tmp_path, tied):
    torch = pytest.importorskip("torch", reason=REASON)
    transformers = pytest.importorskip("transformers", reason=REASON)
    model = tiny_model(tied_head=tied)
    model.save_pretrained(tmp_path)
    theirs = transformers.WhisperForConditionalGeneration.from_pretrained(
        tmp_path, dtype=torch.float64).eval()
    features = np.random.default_rng(1).standard_normal((2, 4, 8))
    ids = np.array([[8, 1, 2], [8, 3, 4]])
    with torch.no_grad():
        expected = theirs(input_features=torch.tensor(features),
                          decoder_input_ids=torch.tensor(ids)).logits.numpy()
    ours = model(features, ids).data
    assert np.abs(ours - expected).max() <= 1e-9 * np.abs(expected).max()


def test_the_fixture_saved_again_is_the_same(tmp_path, reference):
    model = from_pretrained(FIXTURE)
    model.save_pretrained(tmp_path)
    ours, theirs = (load_safetensors(folder / "model.safetensors")
                    for folder in (tmp_path, FIXTURE))
    assert ours.keys() == theirs.keys()
    assert all(np.array_equal(ours[name], theirs[name]) for name in ours)
    again = from_pretrained(tmp_path)
    logits = again(reference["input_features"], reference["decoder_input_ids"]).data
    assert np.array_equal(logits, model(reference["input_features"],
                                        reference["decoder_input_ids"]).data)


def test_float32_end_to_end(reference):
    model = from_pretrained(FIXTURE)
    assert all(p.dtype == np.float32 for p in model.parameters())
    generated = model.generate(reference["input_features"], reference["prompt_ids"], 2)
    assert generated.shape == (2, 5)
    audio = model.encoder(ta.tensor(reference["input_features"]))
    assert audio.dtype == np.float32 and audio.shape == (2, 16, 32)


def filled(model):
    """`model` with a WhisperCache holding 3 tokens of 2 sequences (model.cache)."""
    model.cache = model.empty_cache()
    model.decoder(np.array([[8, 1, 2], [8, 3, 4]]), ta.tensor(np.zeros((2, 4, 8))), model.cache)
    return model


FEATURES = np.zeros((2, 4, 8))
IDS = np.array([[8, 1], [8, 2]])


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m(np.zeros((2, 5, 8)), IDS), ValueError,
     r"input_features must be \(B, num_mel_bins, frames\) = \(B, 4, 8\).*\(2, 5, 8\)"),
    (lambda m: m(np.zeros((2, 4, 10)), IDS), ValueError, r"8 frames, got shape \(2, 4, 10\)"),
    (lambda m: m(np.zeros((4, 8)), IDS), ValueError, r"got shape \(4, 8\)"),
    (lambda m: m(FEATURES.astype(np.float32), IDS), TypeError, "float32 but the model's"),
    (lambda m: m([[0.0]], IDS), TypeError, "an array or a Tensor, got list"),
    (lambda m: m(FEATURES, np.array([[8, 11]])), IndexError, r"in \[0, 11\)"),
    (lambda m: m(FEATURES, np.array([[8, 1]])), ValueError, "a batch of 1 .* input_features of 2"),
    (lambda m: m(FEATURES, np.zeros((2, 9), dtype=int)), ValueError, "8 positions"),
    (lambda m: m(FEATURES, np.array([8, 1])), ValueError, r"\(B, T\)"),
    (lambda m: m.generate(FEATURES, IDS, 7), ValueError, "2 tokens and 7 new ones .* 8 positions"),
    (lambda m: m.generate(FEATURES, IDS, -1), ValueError, "max_new_tokens must be at least 0"),
    (lambda m: m.encoder(np.zeros((1, 4, 6))), ValueError, r"^AudioEncoder: .*\(B, 4, 8\)"),
    (lambda m: m.decoder(IDS, ta.tensor(np.zeros((2, 4, 7)))), ValueError,
     r"^TextDecoder: audio must have shape \(B, 4, 8\), got \(2, 4, 7\)"),
    (lambda m: m.decoder(IDS, ta.tensor(np.zeros((3, 4, 8)))), ValueError,
     "a batch of 2 .* input_features of 3"),
    (lambda m: m.decoder(IDS, ta.tensor(np.zeros((2, 4, 8))), cache=object()), TypeError,
     "cache must be a WhisperCache of this model"),
    (lambda m: m.decoder(IDS, ta.tensor(np.zeros((2, 4, 8))), cache=tiny_model().empty_cache()),
     TypeError, "cache must be a WhisperCache of this model"),
    (lambda m: filled(m).decoder(np.zeros((2, 6), dtype=int), ta.tensor(np.zeros((2, 4, 8))),
                                 cache=m.cache), ValueError,
     "3 cached tokens and 6 tokens are more than the decoder's 8 positions"),
    (lambda m: filled(m).decoder(IDS[:1], ta.tensor(np.zeros((1, 4, 8))), cache=m.cache),
     ValueError, "cache holds the keys of 2 sequences, but the input is a batch of 1"),
    (lambda m: m.decoder.blocks[0].cross_attn(ta.tensor(np.zeros((2, 3, 8))),
                                             ta.tensor(np.zeros((2, 4, 8))), causal=True),
     ValueError, "^WhisperAttention: causal applies to self-attention"),
    (lambda m: m.decoder.blocks[0].attn(ta.tensor(np.zeros((2, 3, 8))), cache=[]), TypeError,
     "cache must be a LayerCache"),
    (lambda m: m.encoder.conv1(ta.tensor(np.zeros((2, 8, 5)))), ValueError,
     r"^FrameConvolution: x must have shape \(B, T, 4\)"),
    (lambda m: m.encoder.blocks[0](ta.tensor(np.zeros((2, 4, 8), dtype=np.float32))), TypeError,
     "float32 but the layer's parameters are float64"),
])
def test_refusals(call, error, message):
    with pytest.raises(error, match=message):
        call(tiny_model())


@pytest.mark.parametrize("changes, message", [
    (dict(decoder_heads=3), r"decoder_heads \(3\) must divide d_model \(8\)"),
    (dict(eos_token_id=11), r"eos_token_id must lie in \[0, 11\)"),
    (dict(vocab_size=0), "vocab_size must be at least 1"),
])
def test_settings_refused(changes, message):
    with pytest.raises((ValueError, IndexError), match="^Whisper: " + message):
        Whisper(dataclasses.replace(TINY, **changes))


def rewritten(tmp_path, **changes):
    folder = tmp_path / "whisper"
    shutil.copytree(FIXTURE, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("changes, message", [
    (dict(activation_function="relu"), "activation_function 'relu'"),
    (dict(dropout=0.1), "dropout 0.1"),
    (dict(decoder_layerdrop=0.2), "decoder_layerdrop 0.2"),
    (dict(apply_spec_augment=True), "apply_spec_augment"),
    (dict(model_type="bart"), "model_type is 'bart', not 'whisper'"),
    (dict(d_model=30), "encoder_attention_heads|encoder_heads"),
    (dict(num_mel_bins=80), r"model.encoder.conv1.weight as float32 \(32, 8, 3\); this "
                            r"config's model has it \(32, 80, 3\)"),
    (dict(decoder_layers=3), "lacks model.decoder.layers.2"),
    (dict(encoder_layers=1), "also holds model.encoder.layers.1"),
])
def test_configs_refused_by_name(tmp_path, changes, message):
    with pytest.raises(ValueError, match="^from_pretrained: .*" + message):
        from_pretrained(rewritten(tmp_path, **changes))


def test_missing_keys_mean_whisper_config_defaults(tmp_path):
    """A config.json without scale_embedding or the dropouts reads as WhisperConfig's defaults;
    scale_embedding true is ignored, as transformers 5 ignores it."""
    folder = rewritten(tmp_path, scale_embedding=True)
    config = json.loads((folder / "config.json").read_text())
    for key in ("dropout", "attention_dropout", "activation_function", "apply_spec_augment"):
        del config[key]
    (folder / "config.json").write_text(json.dumps(config))
    model = from_pretrained(folder)
    assert model.settings == from_pretrained(FIXTURE).settings


def test_whisper_tiny_sizes():
    """WHISPER_TINY builds whisper-tiny's shape: 37,760,640 parameters, as transformers counts
    WhisperConfig()'s (its defaults are whisper-tiny's), the encoder's positions included."""
    model = Whisper(WhisperSettings(**WHISPER_TINY), dtype=np.float32)
    assert sum(p.data.size for p in model.parameters()) == 37_760_640
    assert model.encoder.positions.shape == (1500, 384) and len(model.decoder.blocks) == 4


def test_run_with_cache_names_the_attention_weights_as_transformers_returns_them(reference):
    """blocks.N.attn.weights of the encoder and decoder and blocks.N.cross_attn.weights equal
    transformers' encoder_attentions, decoder_attentions and cross_attentions."""
    torch = pytest.importorskip("torch", reason=REASON)
    transformers = pytest.importorskip("transformers", reason=REASON)
    theirs = transformers.WhisperForConditionalGeneration.from_pretrained(
        FIXTURE, dtype=torch.float64, attn_implementation="eager").eval()
    features, ids = reference["input_features"].astype(np.float64), reference["decoder_input_ids"]
    with torch.no_grad():
        output = theirs(input_features=torch.tensor(features), decoder_input_ids=torch.tensor(ids),
                        output_attentions=True)
    _, cache = from_pretrained(FIXTURE, dtype=np.float64).run_with_cache(features, ids)
    for i in range(2):
        for ours, their in ((f"encoder.blocks.{i}.attn.weights", output.encoder_attentions[i]),
                            (f"decoder.blocks.{i}.attn.weights", output.decoder_attentions[i]),
                            (f"decoder.blocks.{i}.cross_attn.weights",
                             output.cross_attentions[i])):
            np.testing.assert_allclose(cache[ours], their.numpy(), rtol=0, atol=1e-12)


def test_save_pretrained_refuses_lora_adapters_not_merged(tmp_path):
    model = tiny_model()
    ta.nn.add_lora(model, rank=2, targets="*q_proj")
    with pytest.raises(ValueError, match="^Whisper.save_pretrained: transformers' Whisper has no "
                                         "place for .*lora_A.*merge_lora"):
        model.save_pretrained(tmp_path)
    assert not (tmp_path / "model.safetensors").exists()
    ta.nn.merge_lora(model)
    model.save_pretrained(tmp_path)
    features, ids = np.ones((1, 4, 8)), np.array([[8, 1]])
    assert np.array_equal(from_pretrained(tmp_path, np.float64)(features, ids).data,
                          model(features, ids).data)
