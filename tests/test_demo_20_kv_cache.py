"""Demo 20 (the four kinds of attention trained at equal parameter counts, and their caches), in
its quick mode: the parameter counts match, the cache's bytes are its formula, what it prints is
what it returns, and the scoring window by window is the demo 11's loss."""
import importlib
import re

import numpy as np
import pytest
from references import run_quick

import tinyattn as ta

demo = importlib.import_module("20_kv_cache")
tiny_gpt = importlib.import_module("11_tiny_gpt")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo20")
    return (*run_quick(demo, folder), folder)


def test_every_kind_has_multi_heads_parameters_within_one_hidden_unit(quick_run):
    numbers, printed, _ = quick_run
    counts = [numbers[f"{kind.replace('-', '_')}_parameters"] for kind in demo.KINDS]
    per_unit = 3 * 128 * 4                              # a hidden unit: gate, up, down, 4 layers
    assert all(abs(count - counts[0]) <= per_unit // 2 for count in counts)
    assert max(counts) - min(counts) == numbers["parameter_spread"]
    assert [numbers[f"{kind.replace('-', '_')}_intermediate_size"] for kind in demo.KINDS] == \
        [344, 387, 408, 338]
    # the count itself follows the vocabulary: the characters of the CPython docs this Python has
    assert re.search(rf"multi-head\s+{counts[0]:,}\s+344\s+2 H D = 256", printed)


def test_the_cache_per_token_is_nbytes_and_its_formula(quick_run):
    numbers, printed, _ = quick_run
    expected = {"multi_head": 256, "grouped_query": 128, "multi_query": 64, "latent": 80}
    for key, per_layer in expected.items():
        assert numbers[f"{key}_numbers"] == per_layer
        assert numbers[f"{key}_bytes_per_token"] == numbers[f"{key}_formula_bytes"] == \
            4 * per_layer * 4                                   # 4 layers, float32
        assert numbers[f"{key}_ms_per_step"] > 0
    assert numbers["multi_head_vs_multi_head"] == 1.0
    assert re.search(r"latent\s+r \+ d_R = 80\s+1,280", printed)


def test_it_prints_the_losses_it_returns(quick_run):
    numbers, printed, _ = quick_run
    for kind in demo.KINDS:
        key = kind.replace("-", "_")
        assert re.search(rf"{kind}\s+{numbers[f'{key}_loss']:.4f}\s+"
                         rf"{re.escape(format(numbers[f'{key}_gap'], '+.4f'))} ± "
                         rf"{numbers[f'{key}_gap_error']:.4f}\s+"
                         rf"{numbers[f'{key}_bytes_per_token']:,.0f}", printed), kind
    assert numbers["multi_head_gap"] == 0.0
    assert f"Multi-head again from seed 1: {numbers['multi_head_second_seed_loss']:.4f}" in printed
    assert f"Against it: {numbers['verdict']}." in printed
    assert numbers["windows"] == 15                             # 1,000 characters, windows of 64
    assert numbers["steps"] == 6 and len(numbers["multi_head_val_losses"]) == 3
    assert numbers["latent_val_losses"][-1] < numbers["latent_val_losses"][0]


def test_the_verdict_counts_seed_gaps():
    numbers = {"seed_gap": -0.01, "grouped_query_gap": 0.004, "multi_query_gap": -0.02,
               "latent_gap": 0.035}
    assert demo.verdict(numbers) == ("grouped-query within the seed gap of multi-head; "
                                     "multi-query 2.0 seed gaps ahead; latent 3.5 seed gaps behind")


def test_the_window_losses_average_to_demo_11s_loss():
    settings = demo.matched_settings("latent", 7)
    model = demo.build(settings, 0)
    data = np.random.default_rng(0).integers(0, 7, 400)
    batches = tiny_gpt.consecutive_batches(data, count=2)
    losses = demo.window_losses(model, batches)
    assert losses.shape == (6,)
    with ta.no_grad():
        expected = tiny_gpt.held_out_loss(model, batches)
    assert losses.mean() == pytest.approx(expected, rel=1e-5)


def test_the_picture_is_drawn(quick_run):
    pytest.importorskip("matplotlib")
    assert (quick_run[2] / "kv_cache.png").stat().st_size > 10_000
