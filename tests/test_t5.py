"""T5 (tinyattn/nn/t5.py) and its checkpoints (tinyattn/nn/t5_checkpoints.py): the logits and the
generated tokens of transformers' T5ForConditionalGeneration on the fixtures tests/fixtures/
t5-tiny (T5) and t5-v1_1-tiny (T5 v1.1), made by make_t5.py; the relative position buckets; the
cache; gradients; save_pretrained both ways; refusals. Offline: transformers is needed only by
the tests that say so, which skip without it."""
import json
import pathlib
import shutil

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.nn.t5 import T5, T5Settings, relative_position_bucket
from tinyattn.nn.t5_checkpoints import from_pretrained

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"
CHECKPOINTS = ("t5-tiny", "t5-v1_1-tiny")
GENERATED = [f"beams{beams}_penalty{penalty:g}" for beams in (1, 2, 4)
             for penalty in ((1.0, 0.0, 2.0, -1.0) if beams > 1 else (1.0,))]
TINY = T5Settings(vocab_size=11, d_model=4, d_kv=3, d_ff=6, num_layers=1, num_decoder_layers=2,
                  num_heads=2, relative_attention_num_buckets=4,
                  relative_attention_max_distance=6)


@pytest.fixture(scope="module")
def references():
    return {name: ta.load_safetensors(FIXTURES / name / "reference.safetensors")
            for name in CHECKPOINTS}


def tolerance(reference, dtype):
    """API.md: float32 within 1e-4 * max(1, max |logit|); float64 within 1e-9 relative."""
    return (1e-4 if dtype == "float32" else 1e-9) * max(1.0, np.abs(reference).max())


def padded(reference):
    """The fixture's inputs with their padding: (input_ids with 0 where masked, the mask)."""
    mask = reference["attention_mask"]
    return np.where(mask == 1, reference["input_ids"], 0), mask


def logits_of(model, *args, **kwargs):
    with ta.no_grad():
        return model(*args, **kwargs).data


def transformers_or_skip():
    torch = pytest.importorskip("torch", reason="torch is not installed (pip install torch "
                                                "transformers): transformers' side is not checked")
    transformers = pytest.importorskip("transformers", reason="transformers is not installed "
                                       "(pip install transformers): its side is not checked")
    return torch, transformers


def their_logits(folder, ids, decoder_ids, mask=None):
    torch, transformers = transformers_or_skip()
    model = transformers.T5ForConditionalGeneration.from_pretrained(
        folder, attn_implementation="eager").eval()
    mask = np.ones_like(ids) if mask is None else mask
    with torch.no_grad():
        return model(input_ids=torch.tensor(ids), decoder_input_ids=torch.tensor(decoder_ids),
                     attention_mask=torch.tensor(mask)).logits.numpy()


def copy_of(name, tmp_path, edit=None):
    folder = tmp_path / name
    shutil.copytree(FIXTURES / name, folder)
    if edit is not None:
        config = json.loads((folder / "config.json").read_text())
        edit(config)
        (folder / "config.json").write_text(json.dumps(config))
    return folder


# ------------------------------------------------------------------------------------------------
# The fixtures, and transformers' logits and tokens

@pytest.mark.parametrize("name", CHECKPOINTS)
def test_each_fixture_is_a_small_complete_t5_folder(name, references):
    folder = FIXTURES / name
    for file in ("config.json", "model.safetensors", "reference.safetensors", "README.md"):
        assert (folder / file).is_file(), file
    assert json.loads((folder / "config.json").read_text())["model_type"] == "t5"
    assert (folder / "model.safetensors").stat().st_size < 60_000
    assert set(GENERATED) < set(references[name])
    # the cases decide something: hypotheses end at several lengths, and penalties differ
    lengths = {references[name][key].shape[1] for key in GENERATED}
    assert len(lengths) >= 2


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_the_logits_are_transformers_logits(name, dtype, references):
    reference = references[name]
    model = from_pretrained(FIXTURES / name, dtype=np.dtype(dtype))
    assert isinstance(model, T5) and not model.training
    logits = logits_of(model, reference["input_ids"], reference["decoder_input_ids"])
    assert logits.dtype == np.dtype(dtype) and logits.shape == (3, 6, 48)
    expected = reference[f"logits_{dtype}"]
    np.testing.assert_allclose(logits, expected, rtol=0, atol=tolerance(expected, dtype))
    ids, mask = padded(reference)
    logits = logits_of(model, ids, reference["decoder_input_ids"], attention_mask=mask)
    expected = reference[f"logits_padded_{dtype}"]
    np.testing.assert_allclose(logits, expected, rtol=0, atol=tolerance(expected, dtype))


@pytest.mark.parametrize("case", GENERATED + ["padded_beams1", "padded_beams2", "padded_beams4"])
@pytest.mark.parametrize("name", CHECKPOINTS)
def test_generate_gives_transformers_tokens(name, case, references):
    reference, model = references[name], from_pretrained(FIXTURES / name)
    beams = int(case.split("beams")[1][0])
    if case.startswith("padded"):
        ids, mask = padded(reference)
        generated = model.generate(ids, 12, num_beams=beams, attention_mask=mask)
    else:
        penalty = float(case.split("penalty")[1])
        generated = model.generate(reference["input_ids"], 12, num_beams=beams,
                                   length_penalty=penalty)
    assert generated.dtype == np.int64
    np.testing.assert_array_equal(generated, reference[case])


def test_after_eos_greedy_pads_with_0_and_beam_search_with_eos(references):
    """T5's pad_token_id is 0: greedy search writes it after eos, beam search writes eos
    (transformers' `pad_token_id or eos_token_id`)."""
    reference = references["t5-tiny"]
    greedy, beams = reference["beams1_penalty1"], reference["beams2_penalty1"]
    assert greedy[0].tolist() == [0, 1, 0] and beams[0].tolist() == [0, 1, 1, 1]


# ------------------------------------------------------------------------------------------------
# The pieces

def test_the_buckets_are_exact_near_logarithmic_far_and_capped():
    distances = np.arange(-40, 41)
    both = relative_position_bucket(distances, True, 32, 128)
    before = relative_position_bucket(distances, False, 32, 128)
    # bidirectional: keys before the query in buckets 0-15, after it in 16-31; 0-7 exact
    np.testing.assert_array_equal(both[40::-1][:8], np.arange(8))      # distances 0, -1, ..., -7
    np.testing.assert_array_equal(both[41:48], 16 + np.arange(1, 8))    # distances 1 ... 7
    assert both[:40].max() <= 15 and both[41:].min() >= 16
    # one-sided: all 32 buckets for keys before, 0-15 exact; keys after count as distance 0
    np.testing.assert_array_equal(before[40::-1][:16], np.arange(16))
    assert (before[41:] == 0).all()
    # farther: never decreasing, wider and wider, the last bucket from max_distance on
    far = relative_position_bucket(-np.arange(16, 400), False, 32, 128)
    assert (np.diff(far) >= 0).all() and far[128 - 16] == 31 and far[-1] == 31
    widths = np.bincount(far)[16:31]
    assert widths[-1] > 4 * widths.min()


def test_the_buckets_are_transformers_buckets():
    torch, transformers = transformers_or_skip()
    from transformers.models.t5.modeling_t5 import T5Attention
    positions = torch.arange(-300, 301)[None, :] - torch.arange(0, 50)[:, None]
    for buckets, distance in ((32, 128), (8, 12), (16, 40), (64, 256)):
        for bidirectional in (True, False):
            theirs = T5Attention._relative_position_bucket(positions, bidirectional, buckets,
                                                           distance).numpy()
            ours = relative_position_bucket(positions.numpy(), bidirectional, buckets, distance)
            np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_decoding_token_by_token_with_the_cache_gives_the_whole_sequences_logits(name,
                                                                                  references):
    reference = references[name]
    model = from_pretrained(FIXTURES / name, dtype=np.float64)
    ids, mask = padded(reference)
    decoder_ids = reference["decoder_input_ids"]
    whole = logits_of(model, ids, decoder_ids, attention_mask=mask)
    with ta.no_grad():
        cache = model.start(ids, mask)
        first = model.decode(decoder_ids[:, :2], cache).data            # two at once, then one
        steps = [model.decode(decoder_ids[:, t:t + 1], cache).data for t in range(2, 6)]
    assert cache.length == 6 and cache.layers[0].keys.shape == (3, 3, 6, 6)
    np.testing.assert_allclose(np.concatenate([first] + steps, axis=1), whole, rtol=0,
                               atol=1e-12)


def test_run_with_cache_names_every_attentions_weights(references):
    """Chapter 4's tools on T5: each attention's weights by name, (B, H, T, S); the
    cross-attention gives no weight to the input's padding."""
    model = from_pretrained(FIXTURES / "t5-tiny")
    ids, mask = padded(references["t5-tiny"])
    decoder_ids = references["t5-tiny"]["decoder_input_ids"]
    _, cache = model.run_with_cache(ids, decoder_ids, attention_mask=mask)
    assert sorted(cache) == sorted([f"encoder.{i}.attn.weights" for i in range(2)]
                                   + [f"decoder.{i}.{kind}.weights" for i in range(2)
                                      for kind in ("attn", "cross_attn")])
    assert cache["encoder.0.attn.weights"].shape == (3, 3, 10, 10)
    cross = cache["decoder.1.cross_attn.weights"]
    assert cross.shape == (3, 3, 6, 10)
    np.testing.assert_allclose(cross.sum(axis=-1), 1.0, rtol=0, atol=1e-6)
    assert (cross[2, :, :, 4:] == 0).all() and (cross[1, :, :, 7:] == 0).all()
    causal = cache["decoder.0.attn.weights"]
    assert (np.triu(causal[0, 0], k=1) == 0).all()


def test_float32_end_to_end_and_the_scale_in_the_initialisation():
    ta.manual_seed(0)
    model = T5(TINY, dtype=np.float32)
    assert all(p.dtype == np.float32 for p in model.parameters())
    logits = model(np.array([[3, 4, 5]]), np.array([[0, 1]]))
    assert logits.dtype == np.float32 and logits.shape == (1, 2, 11)
    logits.backward(np.ones(logits.shape, dtype=np.float32))
    assert all(p.grad.dtype == np.float32 for p in model.parameters())
    # the query's weights start D^-1/2 smaller than the key's (T5's unscaled scores)
    attention = model.encoder[0].attn
    bound = 1 / np.sqrt(4)
    assert np.abs(attention.k.weight.data).max() <= bound
    assert np.abs(attention.q.weight.data).max() <= bound / np.sqrt(3)


def test_t5_smalls_sizes_are_the_defaults():
    """t5-small's config.json on the hub (google-t5/t5-small), its sizes and ids."""
    hub = dict(vocab_size=32128, d_model=512, d_kv=64, d_ff=2048, num_layers=6, num_heads=8,
               relative_attention_num_buckets=32, layer_norm_epsilon=1e-6,
               feed_forward_proj="relu", decoder_start_token_id=0, pad_token_id=0,
               eos_token_id=1)
    settings = T5Settings()
    assert {key: getattr(settings, key) for key in hub} == hub
    assert settings.num_decoder_layers == 6 and settings.relative_attention_max_distance == 128


# ------------------------------------------------------------------------------------------------
# Reading the hub's layouts; writing

def test_the_hubs_older_files_give_the_same_model(tmp_path, references):
    """t5-v1_1 on the hub: config.json says tie_word_embeddings false and has no
    scale_decoder_outputs; the weights also hold encoder.embed_tokens and decoder.embed_tokens
    (copies of shared) and a relative table on the decoder's first cross-attention, unused."""
    def hub(config):
        del config["scale_decoder_outputs"], config["dense_act_fn"], config["is_gated_act"]
        config["tie_word_embeddings"] = False

    folder = copy_of("t5-v1_1-tiny", tmp_path, hub)
    weights = ta.load_safetensors(folder / "model.safetensors")
    weights["encoder.embed_tokens.weight"] = weights["decoder.embed_tokens.weight"] = \
        weights["shared.weight"]
    weights["decoder.block.0.layer.1.EncDecAttention.relative_attention_bias.weight"] = \
        np.ones((8, 3), dtype=np.float32)
    ta.save_safetensors(folder / "model.safetensors", weights, {"format": "pt"})
    model = from_pretrained(folder)
    assert not model.settings.scale_decoder_outputs and not model.settings.tied_head
    reference = references["t5-v1_1-tiny"]
    expected = reference["logits_float32"]
    np.testing.assert_allclose(logits_of(model, reference["input_ids"],
                                         reference["decoder_input_ids"]),
                               expected, rtol=0, atol=tolerance(expected, "float32"))


def test_a_tied_lm_head_in_the_file_is_the_embedding(tmp_path):
    folder = copy_of("t5-tiny", tmp_path)
    weights = ta.load_safetensors(folder / "model.safetensors")
    weights["lm_head.weight"] = weights["shared.weight"]
    ta.save_safetensors(folder / "model.safetensors", weights, {"format": "pt"})
    model = from_pretrained(folder)
    assert model.settings.tied_head and model.head.weight is model.shared.weight


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_save_pretrained_writes_the_weights_it_read(name, tmp_path):
    model = from_pretrained(FIXTURES / name)
    model.save_pretrained(tmp_path / "saved")
    again = from_pretrained(tmp_path / "saved")
    assert again.settings == model.settings
    for (ours, array), (theirs, other) in zip(model.state_dict().items(),
                                              again.state_dict().items()):
        assert ours == theirs
        np.testing.assert_array_equal(array, other)
    stored = ta.load_safetensors(FIXTURES / name / "model.safetensors")
    written = ta.load_safetensors(tmp_path / "saved" / "model.safetensors")
    assert sorted(written) == sorted(stored)


@pytest.mark.parametrize("changes", [{}, {"feed_forward_proj": "gated-gelu", "tied_head": False,
                                          "scale_decoder_outputs": False},
                                     {"scale_decoder_outputs": False},
                                     {"tied_head": False}])
def test_transformers_reads_what_save_pretrained_wrote(changes, tmp_path):
    ta.manual_seed(1)
    model = T5(T5Settings(**{**vars(TINY), **changes}), dtype=np.float32)
    model.save_pretrained(tmp_path)
    ids, decoder_ids = np.array([[3, 4, 5, 6], [7, 8, 2, 9]]), np.array([[0, 5, 6], [0, 10, 2]])
    theirs = their_logits(tmp_path, ids, decoder_ids)
    ours = logits_of(model, ids, decoder_ids)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=tolerance(theirs, "float32"))
    assert from_pretrained(tmp_path).settings == model.settings


@pytest.mark.parametrize("name", CHECKPOINTS)
def test_transformers_reads_the_fixtures_as_this_reader_does(name, references):
    reference = references[name]
    ids, mask = padded(reference)
    theirs = their_logits(FIXTURES / name, ids, reference["decoder_input_ids"], mask)
    np.testing.assert_allclose(theirs, reference["logits_padded_float32"], rtol=0, atol=1e-6)


# ------------------------------------------------------------------------------------------------
# Refusals

@pytest.mark.parametrize("edit, message", [
    (lambda c: c.update(feed_forward_proj="gated-silu"), "feed_forward_proj 'gated-silu'"),
    (lambda c: c.update(feed_forward_proj="gelu"), "feed_forward_proj 'gelu'"),
    (lambda c: c.update(eos_token_id=[1, 2]), r"eos_token_id \[1, 2\] \(one eos id\)"),
    (lambda c: c.update(is_encoder_decoder=False), "is_encoder_decoder false"),
    (lambda c: c.update(model_type="bart"), "model_type 'bart'"),
    (lambda c: c.update(num_layers=3), "lacks encoder.block.2.layer.0"),
    (lambda c: c.update(d_kv=4), "holds encoder.block.0.layer.0.SelfAttention.q.weight as"),
])
def test_what_t5_does_not_compute_or_a_folder_that_disagrees_is_named(edit, message, tmp_path):
    folder = copy_of("t5-tiny", tmp_path, edit)
    with pytest.raises(ValueError, match=f"from_pretrained: the folder .*{message}"):
        from_pretrained(folder)


def test_a_missing_folder_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="from_pretrained: there is no folder"):
        from_pretrained(tmp_path / "nothing")


@pytest.mark.parametrize("call, error, message", [
    (lambda m: m(np.array([[3, 11]]), np.array([[0]])), IndexError,
     r"T5: input_ids must lie in \[0, 11\)"),
    (lambda m: m(np.array([[3, 4]]), np.array([[0], [0]])), ValueError,
     r"T5: input_ids \(1, 2\) and decoder_input_ids \(2, 1\) must have one batch size"),
    (lambda m: m(np.array([3, 4]), np.array([[0]])), ValueError,
     r"T5: input_ids must be \(B, T\)"),
    (lambda m: m(np.array([[3, 4]]), np.array([[0]]), attention_mask=np.array([[1]])),
     ValueError, r"T5: attention_mask must have input_ids' shape \(1, 2\), got \(1, 1\)"),
    (lambda m: m(np.array([[3, 4]]), np.array([[0]]), attention_mask=np.array([[0, 0]])),
     ValueError, "T5: attention_mask has a row with no token"),
    (lambda m: m(np.array([[3, 4]]), np.array([[0]]), attention_mask=np.array([[1, 2]])),
     ValueError, "T5: attention_mask must hold 1 for a token and 0 for padding"),
    (lambda m: m.generate(np.array([[3, 4]]), 3, num_beams=6), ValueError,
     r"T5.generate: num_beams 6 is more than half the vocabulary \(11 tokens\)"),
    (lambda m: m.generate(np.array([[3, 4]]), 0), ValueError,
     "T5.generate: max_new_tokens must be at least 1"),
])
def test_bad_input_is_refused_in_one_line(call, error, message):
    model = T5(TINY)
    with pytest.raises(error, match=message) as raised:
        call(model)
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("changes, message", [
    ({"feed_forward_proj": "gated-silu"}, "settings.feed_forward_proj must be one of"),
    ({"d_kv": 0}, "settings.d_kv must be an integer of at least 1"),
    ({"eos_token_id": 11}, r"settings.eos_token_id must be a token id in \[0, 11\)"),
    ({"relative_attention_num_buckets": 2},
     "settings.relative_attention_num_buckets must be at least 4"),
    ({"relative_attention_max_distance": 2},
     "settings.relative_attention_num_buckets .*_max_distance more than half .*, got 4 and 2"),
])
def test_bad_settings_are_refused(changes, message):
    with pytest.raises(ValueError, match=f"T5: {message}"):
        T5(T5Settings(**{**vars(TINY), **changes}))
