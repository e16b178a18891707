"""CausalTransformer.generate: with its key/value cache it writes exactly the tokens of recomputing
the whole (cropped) prefix at every step, for every positional option, greedy and sampled; the
sampling rule (temperature, top-k, seeds); and its bad input."""
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import engine
from tinyattn.nn.causal_transformer import POSITIONAL
from tinyattn.nn.generation import next_tokens, samplable

VOCAB, MAX_LEN = 11, 8


@ta.no_grad()
def generate_without_cache(model, ids, max_new_tokens, temperature=1.0, top_k=None):
    """What `model.generate` computes, written the plain way as the test's reference: at every
    step the model runs on the whole prefix (its last max_len tokens, for absolute positions) and
    the next token is drawn from the last position's logits, with the same draws."""
    ids = np.asarray(ids, dtype=np.int64)
    window = model.max_len if model.positional in ("sinusoidal", "learned") else None
    for _ in range(max_new_tokens):
        context = ids if window is None else ids[:, -window:]
        logits = model(context).data[:, -1]                                # (B, vocab)
        ids = np.concatenate([ids, next_tokens(logits, temperature, top_k)[:, None]], axis=1)
    return ids


def small_model(positional, dtype=None):
    ta.manual_seed(0)
    return nn.CausalTransformer(vocab_size=VOCAB, embed_dim=16, num_heads=2, num_layers=2,
                                max_len=MAX_LEN, positional=positional, dtype=dtype)


def both_ways(model, ids, max_new_tokens, **sampling):
    """(generate's tokens, recomputing's tokens), each drawn from the same seed."""
    ta.manual_seed(5)
    cached = model.generate(ids, max_new_tokens, **sampling)
    ta.manual_seed(5)
    return cached, generate_without_cache(model, ids, max_new_tokens, **sampling)


@pytest.mark.parametrize("sampling", [dict(temperature=0), dict(temperature=1.0),
                                      dict(temperature=0.7, top_k=3)],
                         ids=["greedy", "sampled", "top-k"])
@pytest.mark.parametrize("positional", POSITIONAL)
def test_generate_gives_the_tokens_of_recomputing_the_prefix(positional, sampling):
    """5-token prompts and 9 new tokens: 14 > max_len 8, so absolute positions crop the context
    (and rebuild the cache) from the 4th step on, and the others run past max_len."""
    model = small_model(positional)
    ids = np.random.default_rng(0).integers(0, VOCAB, (3, 5))
    cached, recomputed = both_ways(model, ids, 9, **sampling)
    assert cached.shape == (3, 14) and cached.dtype == np.int64
    np.testing.assert_array_equal(cached[:, :5], ids)
    np.testing.assert_array_equal(cached, recomputed)
    ta.manual_seed(5)
    without_cache = model.generate(ids, 9, **sampling, use_cache=False)
    np.testing.assert_array_equal(without_cache, recomputed)


@pytest.mark.parametrize("positional", ["learned", "rope"])
def test_a_prompt_longer_than_max_len(positional):
    model = small_model(positional)
    ids = np.random.default_rng(1).integers(0, VOCAB, (2, 12))
    cached, recomputed = both_ways(model, ids, 4)
    np.testing.assert_array_equal(cached, recomputed)


def test_float32_generation_gives_the_tokens_of_recomputing():
    model = small_model("rope", dtype=np.float32)
    ids = np.random.default_rng(2).integers(0, VOCAB, (2, 3))
    cached, recomputed = both_ways(model, ids, 10, temperature=0)
    np.testing.assert_array_equal(cached, recomputed)


def test_generation_is_reproducible_under_a_seed():
    model = small_model("alibi")
    ids = np.zeros((4, 1), dtype=int)
    runs = []
    for seed in (3, 3, 4):
        ta.manual_seed(seed)
        runs.append(model.generate(ids, 12))
    np.testing.assert_array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], runs[2])


def recording(model):
    """Make `model` keep the inputs and logits of every forward call in a list it returns."""
    calls = []

    def forward(ids, *args, **kwargs):
        calls.append((ids, nn.CausalTransformer.forward(model, ids, *args, **kwargs)))
        return calls[-1][1]
    model.forward = forward
    return calls


def test_generate_records_no_graph_and_accepts_a_tensor():
    model = small_model("learned")
    calls = recording(model)
    out = model.generate(ta.tensor([[1, 2, 3]]), 3)
    assert isinstance(out, np.ndarray) and out.shape == (1, 6)
    assert len(calls) == 3 and not any(logits.requires_grad for _, logits in calls)
    assert engine.switches.grad_enabled
    np.testing.assert_array_equal(model.generate(np.array([[1, 2]]), 0), [[1, 2]])


@pytest.mark.parametrize("positional, lengths", [("rope", [5, 1, 1, 1, 1, 1]),
                                                 ("learned", [5, 1, 1, 1, 8, 8])])
def test_after_the_prompt_each_step_runs_one_token_until_a_window_slides(positional, lengths):
    model = small_model(positional)
    calls = recording(model)
    model.generate(np.zeros((2, 5), dtype=int), 6)
    assert [ids.shape[1] for ids, _ in calls] == lengths


def test_temperature_zero_and_top_k_one_pick_the_largest_logit():
    logits = np.random.default_rng(0).standard_normal((50, 7))
    np.testing.assert_array_equal(next_tokens(logits, 0), logits.argmax(-1))
    np.testing.assert_array_equal(next_tokens(logits, 2.5, top_k=1), logits.argmax(-1))


@pytest.mark.parametrize("temperature", [1e-310, 5e-324])
def test_a_tiny_temperature_gives_the_argmax_without_overflow(temperature):
    """logits / temperature overflows to +-inf here; (logits - max) / temperature does not reach
    +inf, so the largest logit keeps weight 1 and the others get 0 (and no warning: the test
    configuration turns warnings into errors)."""
    logits = np.random.default_rng(0).standard_normal((50, 7)) * 10
    np.testing.assert_array_equal(next_tokens(logits, temperature), logits.argmax(-1))
    np.testing.assert_array_equal(next_tokens(logits, temperature, top_k=3), logits.argmax(-1))
    model, ids = small_model("none").eval(), np.array([[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(model.generate(ids, 3, temperature=temperature),
                                  model.generate(ids, 3, temperature=0))


def test_samples_follow_the_softmax_restricted_to_the_top_k():
    logits = np.log(np.array([[0.1, 0.4, 0.05, 0.25, 0.2]]))
    ta.manual_seed(0)
    draws = np.array([next_tokens(logits, 1.0, top_k=3)[0] for _ in range(4000)])
    assert set(draws) == {1, 3, 4}                               # the three largest only
    counts = np.bincount(draws, minlength=5) / len(draws)
    np.testing.assert_allclose(counts[[1, 3, 4]], np.array([0.4, 0.25, 0.2]) / 0.85, atol=0.03)
    # temperature 2 flattens: p ** (1/2), renormalised
    draws = np.array([next_tokens(logits, 2.0)[0] for _ in range(4000)])
    flattened = np.sqrt([0.1, 0.4, 0.05, 0.25, 0.2])
    np.testing.assert_allclose(np.bincount(draws, minlength=5) / 4000,
                               flattened / flattened.sum(), atol=0.03)


def test_an_infinite_temperature_draws_uniformly_from_the_top_k():
    """Every weight is exp(0) = 1, and those outside the top k are 0 (no inf / inf = NaN)."""
    logits = np.log(np.array([[0.1, 0.4, 0.05, 0.25, 0.2]]))
    ta.manual_seed(0)
    draws = np.array([next_tokens(logits, np.inf, top_k=3)[0] for _ in range(3000)])
    assert set(draws) == {1, 3, 4}
    np.testing.assert_allclose(np.bincount(draws, minlength=5)[[1, 3, 4]] / 3000, 1 / 3,
                               atol=0.03)


def test_top_k_above_the_vocabulary_means_all_of_it():
    model = small_model("none")
    ids = np.zeros((2, 2), dtype=int)
    ta.manual_seed(9)
    everything = model.generate(ids, 6, top_k=None)
    ta.manual_seed(9)
    np.testing.assert_array_equal(model.generate(ids, 6, top_k=VOCAB + 5), everything)


@pytest.mark.parametrize("arguments, error, message", [
    (([[1, 11]], 3), IndexError, r"generate: ids must lie in \[0, 11\) \(11 tokens\), got 11"),
    (([[1, -1]], 3), ValueError, r"generate: ids must lie in \[0, 11\) .* got -1"),
    (([[1.0, 2.0]], 3), TypeError, r"generate: ids must be integers, got dtype float64"),
    (([1, 2], 3), ValueError, r"generate: ids must be \(B, T\) with T >= 1, got shape \(2,\)"),
    ((np.zeros((2, 0), int), 3), ValueError, r"generate: .* got shape \(2, 0\)"),
    (([[1, 2]], -1), ValueError, r"generate: max_new_tokens must be at least 0, got -1"),
    (([[1, 2]], 2.0), TypeError, r"generate: max_new_tokens must be an int, got 2.0"),
    (([[1, 2]], 3, -0.5), ValueError, r"generate: temperature must be >= 0, got -0.5"),
    (([[1, 2]], 3, "hot"), TypeError, r"generate: temperature must be a number, got 'hot'"),
    (([[1, 2]], 3, 1.0, 0), ValueError, r"generate: top_k must be at least 1, got 0"),
    (([[1, 2]], 3, 1.0, 2.5), TypeError, r"generate: top_k must be an int, got 2.5"),
    (([[1, 2], [3]], 3), ValueError, r"^CausalTransformer.generate: ids: the rows have different "
     r"lengths, but a batch \(B, T\) holds sequences of one length T: pad them"),
    (("hello", 3), TypeError, r"generate: ids: expected numbers, got an array of dtype <U5"),
])
def test_bad_input_is_named_before_anything_is_drawn(arguments, error, message):
    model = small_model("rope")
    ta.manual_seed(0)
    with pytest.raises(error, match=message):
        model.generate(*arguments)
    assert ta.rng.generator.random() == np.random.default_rng(0).random()   # nothing drawn


def test_a_cache_of_another_model_or_batch_is_named():
    """A KVCache belongs to the model that made it and holds the keys of one batch; given to
    another model or batch, the error names the model's forward and the cache (not
    concatenate, nor attention), and nothing is appended."""
    model, other = small_model("rope"), small_model("rope")
    cache = model.empty_cache()
    model(np.array([[1, 2, 3]]), cache=cache)
    with pytest.raises(TypeError, match=r"^CausalTransformer: cache must be a KVCache of this "
                                        r"model \(from model.empty_cache\(\)\), got KVCache"):
        other(np.array([[4]]), cache=cache)
    with pytest.raises(ValueError, match=r"^CausalTransformer: the cache holds the keys of 1 "
                                         r"sequences, but ids is a batch of 2"):
        model(np.array([[4], [5]]), cache=cache)
    with pytest.raises(TypeError, match=r"^CausalTransformer: cache must be a KVCache of this "
                                        r"model \(from model.empty_cache\(\)\), got list"):
        model(np.array([[4]]), cache=[])
    assert len(cache) == 3                                       # nothing appended


@pytest.mark.parametrize("bad, said", [(np.nan, "NaN"), (np.inf, r"\+inf"), (-np.inf, "only -inf")])
def test_logits_that_cannot_be_sampled_are_named_by_step_and_row(bad, said):
    logits = np.random.default_rng(0).standard_normal((3, 5))
    logits[1, 2] = bad
    if bad == -np.inf:
        logits[1] = bad
    with pytest.raises(ValueError, match=rf"CausalTransformer.generate: step 7, row 1: the "
                                         rf"logits hold {said}, so there is no distribution"):
        samplable(logits, 7)


def test_a_logit_of_minus_inf_rules_its_token_out():
    logits = np.random.default_rng(0).standard_normal((200, 5))
    logits[:, 2] = -np.inf
    samplable(logits, 0)
    assert 2 not in next_tokens(logits, 1.0) and 2 not in next_tokens(logits, 0)


@pytest.mark.parametrize("temperature", [0, 1.0])
def test_generate_refuses_nan_logits_at_the_step_and_row_they_appear(temperature):
    """Token 4 has a NaN embedding, and a logit 1e3 above the others, so both rows write it at
    step 0 and get NaN logits at step 1; a prompt holding it gets them at step 0."""
    model = small_model("none").eval()
    model.head.bias.data[4] = 1e3
    model.embed.weight.data[4] = np.nan
    with pytest.raises(ValueError, match=r"generate: step 1, row 0: the logits hold NaN"):
        model.generate(np.array([[1, 2, 3], [5, 6, 7]]), 3, temperature=temperature)
    with pytest.raises(ValueError, match=r"generate: step 0, row 1: the logits hold NaN"):
        model.generate(np.array([[1, 2, 3], [5, 4, 7]]), 3, temperature=temperature)
