"""Chapter 5's models (each family's page, on tinyattn/nn/open_decoder.py's base): the cache
gives the logits of recomputing, a sliding layer keeps its window, the cache holds the key/value
heads and `nbytes` is the formula (chapter 2's cache's too), generation with the cache equals
generation without, and chapter 4's tools work on it: run_with_cache, hooks, LoRA, the views.
(The checkpoints of each family: tests/test_open_checkpoints.py.)"""
import dataclasses

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
import tinyattn.viz as viz
from tinyattn.interpretability import ablate_head
from tinyattn_tools.checklist.chapter5 import SWITCHES, off_their_start

V, E, B, T = 13, 16, 2, 11
SIZES = dict(vocab_size=V, hidden_size=E, intermediate_size=24, num_layers=3, num_heads=4,
             num_kv_heads=2, head_dim=6)
MODEL_TYPES = {"Llama 3": "llama", "Qwen3": "qwen3", "Gemma 3": "gemma3_text"}
SETTINGS = {family: nn.DecoderSettings(**{**SIZES, **switches, "model_type": MODEL_TYPES[family],
                                          "num_layers": 2 if "layer_types" in switches else 3})
            for family, switches in ((name.split("'")[0], switches)
                                     for name, switches in SWITCHES.items())}
MISTRAL = nn.DecoderSettings(**SIZES, sliding_window=4, layer_types=("sliding",) * 3,
                             model_type="mistral")


def model_of(settings, dtype=np.float64, seed=0):
    ta.manual_seed(seed)
    model_class = nn.open_checkpoints.MODELS[settings.model_type]       # Llama, Qwen3, ...
    return off_their_start(model_class(settings, dtype=dtype)).eval()


def some_ids(length=T, seed=0):
    return np.random.default_rng(seed).integers(0, V, (B, length))


def logits_of(model, ids, **options):
    with ta.no_grad():
        return model(ids, **options).data


ALL = {**SETTINGS, "Mistral": MISTRAL}


# ------------------------------------------------------------------------------------------------
# The model and its cache

@pytest.mark.parametrize("name", ALL)
def test_cached_steps_give_the_logits_of_the_whole_sequence(name):
    """Prompt of 5, then 1, 2 and 3 tokens: past every window (2 and 4)."""
    model, ids = model_of(ALL[name]), some_ids()
    whole = logits_of(model, ids)
    cache = model.empty_cache()
    pieces = [logits_of(model, ids[:, a:b], cache=cache) for a, b in
              ((0, 5), (5, 6), (6, 8), (8, 11))]
    np.testing.assert_allclose(np.concatenate(pieces, axis=1), whole, rtol=0, atol=1e-12)
    assert len(cache) == T


@pytest.mark.parametrize("name", ALL)
def test_the_cache_holds_the_key_value_heads_and_a_sliding_layer_its_window(name):
    settings = ALL[name]
    model = model_of(settings, dtype=np.float32)
    cache = model.empty_cache()
    logits_of(model, some_ids(), cache=cache)
    kept = []
    for layer, kind in zip(cache.layers, settings.kinds()):
        tokens = settings.sliding_window if kind == "sliding" else T
        assert layer.keys.shape == layer.values.shape == (B, settings.num_kv_heads, tokens,
                                                          settings.head_dim)
        kept.append(tokens)
    # cache.nbytes: 2 * layers * B * kv_heads * T * head_dim * itemsize, T the tokens each layer
    # keeps
    assert cache.nbytes == sum(2 * B * settings.num_kv_heads * tokens * settings.head_dim * 4
                               for tokens in kept)


def test_chapter_2s_cache_counts_its_bytes_by_the_formula():
    ta.manual_seed(0)
    model = nn.CausalTransformer(V, 8, 2, num_layers=3, positional="rope", dtype=np.float32)
    cache = model.empty_cache()
    assert cache.nbytes == 0
    with ta.no_grad():
        model(some_ids(7), cache=cache)
        model(some_ids(2, seed=1), cache=cache)
    assert cache.nbytes == 2 * 3 * B * 2 * 9 * 4 * 4        # layers, B, H, T, D = 8 / 2, float32


def test_a_sliding_layers_memory_stops_growing():
    model = model_of(MISTRAL)
    cache = model.empty_cache()
    sizes = []
    for token in some_ids(9).T:
        logits_of(model, token[:, None], cache=cache)
        sizes.append(cache.nbytes)
    assert sizes[3:] == [sizes[3]] * 6 and sizes[0] < sizes[3]


@pytest.mark.parametrize("name", ALL)
def test_generation_with_the_cache_equals_recomputing(name):
    model, prompt = model_of(ALL[name]), some_ids(3)
    greedy = model.generate(prompt, 8)
    assert greedy.shape == (B, 11) and greedy.dtype == np.int64
    np.testing.assert_array_equal(greedy[:, :3], prompt)
    np.testing.assert_array_equal(model.generate(prompt, 8, use_cache=False), greedy)
    ta.manual_seed(5)
    sampled = model.generate(prompt, 8, temperature=1.5, top_k=4)
    ta.manual_seed(5)
    np.testing.assert_array_equal(model.generate(prompt, 8, temperature=1.5, top_k=4,
                                                 use_cache=False), sampled)


def test_float32_runs_in_float32():
    model = model_of(SETTINGS["Gemma 3"], dtype=np.float32)
    logits = model(some_ids())
    assert logits.dtype == np.float32
    logits.backward(np.ones(logits.shape, np.float32))
    assert all(p.grad.dtype == np.float32 for p in model.parameters())


def test_gemmas_embedding_is_scaled_its_head_tied_and_its_logits_capped():
    model = model_of(SETTINGS["Gemma 3"])
    ids = some_ids()
    _, cache = model.run_with_cache(ids)
    np.testing.assert_allclose(cache["embed"], model.embed.weight.data[ids] * np.sqrt(E),
                               rtol=1e-15)
    assert model.head.weight is model.embed.weight and "head.weight" not in model.state_dict()
    cap = model.settings.final_logit_softcapping
    uncapped = cache["final"] @ model.embed.weight.data.T
    np.testing.assert_allclose(logits_of(model, ids), cap * np.tanh(uncapped / cap), rtol=1e-13)


def test_llamas_head_is_its_own():
    model = model_of(SETTINGS["Llama 3"])
    assert model.head.weight is not model.embed.weight and "head.weight" in model.state_dict()


# ------------------------------------------------------------------------------------------------
# Chapter 4's tools on the decoder

def test_run_with_cache_names_the_activations_as_chapter_4_does():
    model, ids = model_of(SETTINGS["Qwen3"]), some_ids()
    logits, cache = model.run_with_cache(ids)
    per_block = ["resid_pre", "attn.q", "attn.k", "attn.v", "attn.weights", "attn.heads",
                 "attn.out", "resid_mid", "mlp_out", "resid_post"]
    assert list(cache) == ["embed", *(f"blocks.{i}.{name}" for i in range(2)
                                      for name in per_block), "final"]
    np.testing.assert_array_equal(logits.data, logits_of(model, ids))
    _, weights = model(ids, return_weights=True)
    for i in range(2):
        np.testing.assert_array_equal(cache[f"blocks.{i}.attn.weights"], weights[i].data)
        assert weights[i].shape == (B, 4, T, T)
    assert cache["blocks.0.attn.k"].shape == (B, 2, T, 6)          # the key/value heads
    np.testing.assert_array_equal(cache["blocks.1.resid_pre"], cache["blocks.0.resid_post"])


def test_a_hook_replaces_an_activation_and_gradients_flow_through_it():
    model, ids = model_of(SETTINGS["Llama 3"]), some_ids()
    plain = logits_of(model, ids)
    with model.hooks({"blocks.1.attn.heads": ablate_head(2)}):
        ablated = model(ids)
        ablated.backward(np.ones(ablated.shape))
    assert np.abs(ablated.data - plain).max() > 1e-3
    assert all(layer.hooked is None for layer in model.modules())
    np.testing.assert_array_equal(logits_of(model, ids), plain)
    assert model.blocks[1].attn.q_proj.weight.grad is not None


def test_lora_adapts_trains_and_merges_into_the_decoder():
    model, ids = model_of(SETTINGS["Gemma 3"]), some_ids()
    before = logits_of(model, ids)
    summary = nn.add_lora(model, rank=2, alpha=4.0, targets=["*q_proj", "*v_proj", "*mlp.up"])
    assert len(summary.layers) == 6
    np.testing.assert_array_equal(logits_of(model, ids), before)
    optimizer = ta.optim.Adam(model.trainable_parameters(), lr=0.05)
    frozen = model.embed.weight.data.copy()
    for _ in range(3):
        optimizer.zero_grad()
        logits = model(ids[:, :-1])
        ta.functional.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1)).backward()
        optimizer.step()
    adapted = logits_of(model, ids)
    assert np.abs(adapted - before).max() > 1e-3
    np.testing.assert_array_equal(model.embed.weight.data, frozen)
    nn.merge_lora(model)
    assert not any("lora" in name for name in model.state_dict())
    np.testing.assert_allclose(logits_of(model, ids), adapted, rtol=0, atol=1e-12)


def test_the_attention_view_shows_every_layer_and_head():
    model, ids = model_of(SETTINGS["Gemma 3"]), some_ids()
    _, weights = model(ids, return_weights=True)
    view = viz.attention_view([f"t{i}" for i in ids[0]], weights)
    html = view._repr_html_()
    assert "2 x 4 (layers x heads)" in html and "t" + str(ids[0, 0]) in html


# ------------------------------------------------------------------------------------------------
# Bad settings and arguments, named

@pytest.mark.parametrize("changes, message", [
    (dict(num_kv_heads=3), r"num_kv_heads 3 must divide num_heads 4"),
    (dict(head_dim=5), r"the rotary positions turn pairs of features, so head_dim must be even"),
    (dict(activation="relu"), r"settings.activation must be one of 'silu', 'gelu_tanh', got "
                              r"'relu'"),
    (dict(layer_types=("full",)), r"settings.layer_types must give 'full' or 'sliding' for each "
                                  r"of the 3 layers, got \('full',\)"),
    (dict(layer_types=("full", "local", "full")), r"settings.layer_types must give"),
    (dict(layer_types=("sliding",) * 3), r"sliding layers need settings.sliding_window, a "
                                         r"positive integer; got None"),
    (dict(vocab_size=0), r"settings.vocab_size must be an integer of at least 1, got 0"),
    (dict(rope_scaling={"rope_type": "dynamic", "factor": 2.0}), r"scaling must be None or a "
                                                                 r"dict with a rope_type"),
    (dict(final_logit_softcapping=-1.0), r"settings.final_logit_softcapping must be a positive "
                                         r"number, got -1.0"),
])
def test_settings_the_decoder_cannot_run_are_named(changes, message):
    with pytest.raises(ValueError, match=r"^Llama: " + message):
        nn.Llama(dataclasses.replace(nn.DecoderSettings(**SIZES), **changes))


def test_a_cache_of_another_model_or_batch_is_named():
    model, other = model_of(MISTRAL), model_of(MISTRAL, seed=1)
    with pytest.raises(TypeError, match=r"^Mistral: cache must be a DecoderCache of this "
                                        r"model \(from model.empty_cache\(\)\), got "
                                        r"DecoderCache"):
        model(some_ids(), cache=other.empty_cache())
    cache = model.empty_cache()
    model(some_ids(), cache=cache)
    with pytest.raises(ValueError, match=r"^Mistral: the cache holds the keys of 2 "
                                         r"sequences, but ids is a batch of 1"):
        model(some_ids()[:1], cache=cache)


@pytest.mark.parametrize("call, error, message", [
    (lambda model: model.generate(some_ids(), -1), ValueError,
     r"^Mistral.generate: max_new_tokens must be at least 0, got -1"),
    (lambda model: model.generate(np.array([[0, V]]), 2), IndexError,
     r"^Mistral.generate: ids must lie in \[0, 13\) \(13 tokens\), got 13"),
    (lambda model: model(np.ones((2, 3))), TypeError,
     r"^Mistral: ids must be integers, got dtype float64"),
    (lambda model: nn.Mistral(dict(SIZES)), TypeError,
     r"^Mistral: settings must be a DecoderSettings, got dict"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call(model_of(MISTRAL))


def test_logits_that_cannot_be_sampled_are_named_by_the_decoders_generate():
    model = model_of(MISTRAL)
    model.norm.weight.data[...] = np.nan
    with pytest.raises(ValueError, match=r"^Mistral.generate: step 0, row 0: the logits "
                                         r"hold NaN"):
        model.generate(some_ids(), 2)
