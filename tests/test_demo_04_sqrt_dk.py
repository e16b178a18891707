"""Demo 4 (why attention divides by sqrt(d_k)), in its quick mode: its numbers show what it
claims."""
import importlib
import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

demo = importlib.import_module("04_sqrt_dk")
KEY_DIMS = demo.KEY_DIMS_QUICK


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo04")
    return demo.main([str(folder), "--quick"]), folder


def column(numbers, name):
    return [numbers[f"{name}_{key_dim}"] for key_dim in KEY_DIMS]


def test_the_quick_sweep_reaches_1024():
    assert 1024 in KEY_DIMS and len(KEY_DIMS) >= 3


def test_the_scaled_ratio_stays_flat(run):
    numbers, _ = run
    scaled = column(numbers, "median_ratio_scaled")
    assert max(scaled) / min(scaled) < 1.5
    assert (numbers["scaled_ratio_min"], numbers["scaled_ratio_max"]) == (min(scaled), max(scaled))


def test_the_unscaled_ratio_falls_with_d_k(run):
    numbers, _ = run
    for name in ("median_ratio_unscaled", "median_ratio_unscaled_over_scaled"):
        ratios = column(numbers, name)
        assert all(wider < narrower for narrower, wider in zip(ratios, ratios[1:]))
    assert numbers["onset_key_dim"] == 256                # 64 passes 0.76, 256 passes 0.081


def test_unscaled_collapses_at_1024(run):
    numbers, _ = run
    assert numbers["median_ratio_unscaled_over_scaled_1024"] < 0.01
    assert numbers["saturated_fraction_unscaled_1024"] > 0.5
    assert numbers["saturated_fraction_scaled_1024"] == 0.0
    assert numbers["mean_max_weight_unscaled_1024"] > 0.9 > 0.2 > numbers[
        "mean_max_weight_scaled_1024"]


def test_score_std_grows_like_sqrt_d_k_only_unscaled(run):
    numbers, _ = run
    for key_dim in KEY_DIMS:
        assert numbers[f"score_std_unscaled_{key_dim}"] == pytest.approx(math.sqrt(key_dim),
                                                                         rel=0.1)
        assert numbers[f"score_std_scaled_{key_dim}"] == pytest.approx(1.0, rel=0.1)


def test_what_does_not_vanish(run):
    # The value gradient and the queries' total gradient do not vanish unscaled, while the typical
    # query row's gradient does.
    numbers, _ = run
    assert numbers["value_grad_total_unscaled_over_scaled_1024"] > 1
    assert numbers["query_grad_total_unscaled_over_scaled_1024"] > 1
    assert numbers["query_grad_typical_row_unscaled_over_scaled_1024"] < 0.1


def test_the_written_out_attention_is_sdpa():
    query, key, value, upstream = demo.random_inputs(8)
    for scale in demo.SCALINGS.values():
        results = []
        for attend in (lambda q, k, v: demo.attention(q, k, v, scale)[0],
                       lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=scale)):
            leaves = [ta.tensor(x, requires_grad=True) for x in (query, key, value)]
            output = attend(*leaves)
            output.backward(upstream)
            results.append([output.data] + [leaf.grad for leaf in leaves])
        for written_out, sdpa in zip(*results):
            np.testing.assert_array_equal(written_out, sdpa)


def test_the_picture_is_drawn(run):
    pytest.importorskip("matplotlib")
    picture = run[1] / "sqrt_dk.png"
    assert picture.stat().st_size > 10_000
