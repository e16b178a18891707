"""tinyattn/nn/sink_cache.py: StreamingLLM's cache keeps the first tokens and a window; its tokens
sit at their positions within the cache (a one-layer model gives what it gives run afresh on the
sinks and the window); without sinks it is the sliding window of chapter 5's sliding layers; its
bytes stop growing; what it cannot hold is named."""
import dataclasses

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn

SETTINGS = nn.DecoderSettings(vocab_size=11, hidden_size=16, intermediate_size=20, num_layers=2,
                              num_heads=4, num_kv_heads=2, head_dim=4, qk_norm=True,
                              rope_theta=100.0, model_type="qwen3")
IDS = np.random.default_rng(0).integers(0, 11, (2, 20))


def decoder(**changes):
    ta.manual_seed(0)
    settings = dataclasses.replace(SETTINGS, **changes)
    return nn.open_checkpoints.MODELS[settings.model_type](settings)


def one_at_a_time(model, cache, ids=IDS):
    return np.concatenate([model(ids[:, t:t + 1], cache=cache).data
                           for t in range(ids.shape[1])], axis=1)


@pytest.mark.parametrize("window, sinks", [(5, 2), (5, 0), (1, 3), (6, 4)])
def test_the_sinks_sit_just_before_the_window(window, sinks):
    """One layer: its keys depend on the token and its position only, so reading through the
    cache gives, at every position, what the model gives run afresh on the sinks followed by
    the window (positions 0, 1, ...: their positions within the cache)."""
    model = decoder(num_layers=1)
    got = one_at_a_time(model, nn.SinkCache(model, window, sinks))
    for t in range(IDS.shape[1]):
        kept = IDS[:, :t + 1] if t < sinks + window else \
            np.concatenate([IDS[:, :sinks], IDS[:, t + 1 - window:t + 1]], axis=1)
        np.testing.assert_allclose(got[:, t], model(kept).data[:, -1], rtol=0, atol=1e-12)


def test_a_prompt_read_at_once_moves_the_sinks_past_all_it_evicted():
    """A prompt of 10 tokens read in one call (each sees all of it, causal), window 5 and 2
    sinks: 4 tokens are evicted at once, and every token after it sees the sinks just before
    its window, as one at a time."""
    model = decoder(num_layers=1)
    cache = nn.SinkCache(model, 5, sinks=2)
    prompt = model(IDS[:, :10], cache=cache).data
    np.testing.assert_allclose(prompt, model(IDS[:, :10]).data, rtol=0, atol=1e-12)
    for t in range(10, IDS.shape[1]):
        kept = np.concatenate([IDS[:, :2], IDS[:, t - 4:t + 1]], axis=1)
        np.testing.assert_allclose(model(IDS[:, t:t + 1], cache=cache).data[:, 0],
                                   model(kept).data[:, -1], rtol=0, atol=1e-12)


def test_without_sinks_it_is_the_sliding_window_of_a_sliding_layer():
    """Every layer sees the window newest keys: a model whose layers all slide (window 5), run
    on the whole sequence, gives what the same weights give through SinkCache(window 5, no
    sinks), a token at a time."""
    full, sliding = decoder(), decoder(sliding_window=5, layer_types=("sliding", "sliding"))
    np.testing.assert_allclose(one_at_a_time(full, nn.SinkCache(full, 5, sinks=0)),
                               sliding(IDS).data, rtol=0, atol=1e-12)


def test_a_window_that_holds_everything_is_the_full_cache():
    model = decoder()
    np.testing.assert_allclose(one_at_a_time(model, nn.SinkCache(model, 100)), model(IDS).data,
                               rtol=0, atol=1e-12)


def test_its_bytes_stop_growing_at_the_sinks_and_the_window():
    model = decoder()
    cache, sizes = nn.SinkCache(model, 6, sinks=3), []
    for t in range(IDS.shape[1]):
        model(IDS[:, t:t + 1], cache=cache)
        sizes.append(cache.nbytes)
    per_token = 2 * 2 * SETTINGS.num_kv_heads * SETTINGS.head_dim * 8 * SETTINGS.num_layers
    assert sizes == [per_token * min(t + 1, 3 + 5) for t in range(20)]     # 3 sinks, 5 newest
    assert len(cache) == 20 and [layer.keys.shape[2] for layer in cache.layers] == [8, 8]


def test_generation_runs_on_it():
    model = decoder()
    cache, ids = nn.SinkCache(model, 4, sinks=2), IDS[:1, :3]
    for _ in range(12):
        logits = model(ids[:, -1:] if len(cache) else ids, cache=cache, last_only=True)
        ids = np.concatenate([ids, logits.data.argmax(axis=-1)], axis=1)
    assert ids.shape == (1, 15) and cache.nbytes == 5 * 2 * 2 * 4 * 8 * 2


@pytest.mark.parametrize("changes, error, message", [
    (dict(latent=nn.LatentSettings(4, 2, 2, 4), head_dim=4, num_kv_heads=4, qk_norm=False,
          model_type="deepseek_v3"), ValueError,
     r"this model has latent attention$"),
    (dict(sliding_window=3, layer_types=("full", "sliding")), ValueError,
     r"this model has sliding layers$"),
])
def test_what_it_cannot_hold_is_named(changes, error, message):
    with pytest.raises(error, match=r"^SinkCache: the sink cache keeps the keys and values of "
                                    r"full grouped-query attention layers; " + message):
        nn.SinkCache(decoder(**changes), 4)


def test_bad_arguments_are_named():
    with pytest.raises(TypeError, match=r"^SinkCache: model must be an OpenDecoder, got "
                                        r"CausalTransformer$"):
        nn.SinkCache(nn.CausalTransformer(11, 8, 2, 1), 4)
    with pytest.raises(ValueError, match=r"^SinkCache: window must be at least 1, got 0$"):
        nn.SinkCache(decoder(), 0)
