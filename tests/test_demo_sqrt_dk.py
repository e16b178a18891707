"""The sqrt(d_k) demo, in its quick mode: its measured numbers show what it claims."""
import importlib
import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sqrt_dk")
    demo = importlib.import_module("04_sqrt_dk")
    return demo, demo.main([str(folder), "--quick"]), folder


def ratios(results, scaling):
    return [results[key_dim][scaling]["median_ratio"] for key_dim in sorted(results)]


def test_quick_run_covers_1024(quick_run):
    _, results, _ = quick_run
    assert 1024 in results and len(results) >= 3


def test_scaled_ratio_stays_flat(quick_run):
    _, results, _ = quick_run
    scaled = ratios(results, "scaled")
    assert max(scaled) / min(scaled) < 1.5


def test_unscaled_ratio_falls_with_d_k(quick_run):
    _, results, _ = quick_run
    unscaled = ratios(results, "unscaled")
    assert all(wider < narrower for narrower, wider in zip(unscaled, unscaled[1:]))
    relative = [u / s for u, s in zip(unscaled, ratios(results, "scaled"))]
    assert all(wider < narrower for narrower, wider in zip(relative, relative[1:]))


def test_unscaled_collapses_at_1024(quick_run):
    _, results, _ = quick_run
    scaled, unscaled = results[1024]["scaled"], results[1024]["unscaled"]
    assert unscaled["median_ratio"] * 100 <= scaled["median_ratio"]
    assert unscaled["saturated_fraction"] > 0.5
    assert scaled["saturated_fraction"] == 0.0
    assert unscaled["mean_max_weight"] > 0.9 > 0.2 > scaled["mean_max_weight"]


def test_score_std_grows_like_sqrt_d_k_only_unscaled(quick_run):
    _, results, _ = quick_run
    for key_dim, by_scaling in results.items():
        assert by_scaling["unscaled"]["score_std"] == pytest.approx(math.sqrt(key_dim), rel=0.1)
        assert by_scaling["scaled"]["score_std"] == pytest.approx(1.0, rel=0.1)


def test_what_does_not_vanish(quick_run):
    # The paragraph says the value gradient and the queries' total gradient do not vanish,
    # while the typical query row's gradient does.
    _, results, _ = quick_run
    scaled, unscaled = results[1024]["scaled"], results[1024]["unscaled"]
    assert unscaled["value_grad_total"] > scaled["value_grad_total"]
    assert unscaled["query_grad_total"] > scaled["query_grad_total"]
    assert unscaled["query_grad_typical_row"] < 0.1 * scaled["query_grad_typical_row"]


def test_graph_walk_finds_softmax_by_name(quick_run):
    demo, _, _ = quick_run
    query, key, value = (ta.tensor(np.ones((2, 3, 4)), requires_grad=True) for _ in range(3))
    path = demo.path_back_to_softmax(F.scaled_dot_product_attention(query, key, value) * 2.0)
    assert [node.name for node in path] == ["mul", "matmul", "softmax"]
    with pytest.raises(ValueError, match="no softmax"):
        demo.path_back_to_softmax(query @ key.mT)


def test_picture_is_written(quick_run):
    pytest.importorskip("matplotlib")
    _, _, folder = quick_run
    picture = folder / "sqrt_dk.png"
    assert picture.exists() and picture.stat().st_size > 10_000
