"""Demo 21 (attention sinks), in its quick mode: the windows' caches stop growing and the full one
does not, the per-position losses it prints are those it returns, the recomputed window is what
the window cache reads, and the attention shares are chapter 4's weights summed."""
import importlib
import re

import numpy as np
import pytest
from references import run_quick

import tinyattn as ta
import tinyattn.nn as nn

demo = importlib.import_module("21_attention_sinks")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo21")
    return (*run_quick(demo, folder), folder)


def small_model(layers=2):
    ta.manual_seed(0)
    return nn.Llama(nn.DecoderSettings(vocab_size=9, hidden_size=16, intermediate_size=24,
                                       num_layers=layers, num_heads=4, num_kv_heads=2,
                                       head_dim=4))


def test_the_windows_hold_constant_memory_and_the_full_cache_grows(quick_run):
    numbers, printed, _ = quick_run
    per_token = 4 * 2 * 2 * 2 * 32 * 4       # layers, keys and values, streams, K, D, float32
    assert numbers["window_bytes_constant"] is True
    assert numbers["window_bytes_end"] == (demo.WINDOW - 1) * per_token
    assert numbers["sinks_bytes_end"] == (demo.SINKS + demo.WINDOW - 1) * per_token
    assert numbers["full_bytes_end"] == (numbers["length"] - 1) * per_token
    assert numbers["full_bytes_after"] == [(t + 1) * per_token for t in numbers["bytes_after"]]
    assert numbers["bytes_after"] == [32, 64, 78]
    assert re.search(rf"window\s+{numbers['window_bytes_end']:,}\s+{numbers['window_bytes_end']:,}",
                     printed)


def test_it_prints_the_losses_it_returns(quick_run):
    numbers, printed, _ = quick_run
    for i, start in enumerate(range(0, 64, 16)):
        row = "  ".join(f"{numbers[f'{kind}_binned'][i]:.3f}" for kind in demo.CACHES)
        assert re.search(rf"{start}-{start + 15}\s+" + r"\s+".join(row.split()), printed)
    assert ("Past position 64: " + ", ".join(f"{kind} {numbers[f'{kind}_loss_past']:.3f}"
                                            for kind in demo.CACHES)) in printed
    # before the window fills, every cache holds every token: the same losses (the recomputed
    # one runs a window at once, its sums in another order: float32's rounding apart)
    losses = [numbers[f"{kind}_binned"][0] for kind in demo.CACHES]
    assert len(set(losses[:3])) == 1 and abs(losses[3] - losses[0]) < 1e-6


def test_the_recomputed_window_is_what_a_window_cache_reads_on_one_layer():
    """With one layer the keys depend on the token and its position only, so the window cache
    and running the window afresh give the same losses (positions differ by a shift, which
    rotary scores do not see)."""
    model = small_model(layers=1)
    ids = np.random.default_rng(0).integers(0, 9, (2, 3 * demo.WINDOW))
    window, _ = demo.streamed(model, ids, "window", demo.demo_tools.Progress())
    recomputed, _ = demo.streamed(model, ids, "recomputed", demo.demo_tools.Progress())
    np.testing.assert_allclose(window, recomputed, rtol=0, atol=1e-10)
    full, sizes = demo.streamed(model, ids[:, :8], "full", demo.demo_tools.Progress())
    with ta.no_grad():
        logits = model(ids[:, :8]).data[:, :-1]
    expected = [demo.next_character_loss(logits[:, t], ids[:, t + 1]) for t in range(7)]
    np.testing.assert_allclose(full, np.stack(expected, axis=1), rtol=0, atol=1e-10)


def test_the_attention_shares_are_the_weights_summed():
    model = small_model()
    ids = np.random.default_rng(1).integers(0, 9, (3, 24))
    shares, even = demo.attention_to_the_first(model, ids, first=2)
    _, cache = model.run_with_cache(ids)
    weights = cache["blocks.1.attn.weights"]                      # (3, 4, 24, 24)
    np.testing.assert_allclose(shares[1], weights[:, :, 16:, :2].sum(-1).mean(axis=(0, 2)))
    assert shares.shape == (2, 4) and even == pytest.approx(np.mean(2 / np.arange(17, 25)))


def test_the_picture_is_drawn(quick_run):
    pytest.importorskip("matplotlib")
    assert (quick_run[2] / "attention_sinks.png").stat().st_size > 10_000
