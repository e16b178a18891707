"""Demos 5 and 6 in their quick mode: training with and without scaling the attention scores, and
the attention heatmaps of a trained model. Each demo runs once per module; the tests read its
numbers."""
import importlib

import numpy as np
import pytest
from references import run_quick

import tinyattn as ta

scaling = importlib.import_module("05_scaling_in_training")
heatmap = importlib.import_module("06_attention_heatmap")


@pytest.fixture(scope="module")
def scaling_run(tmp_path_factory):
    return run_quick(scaling, tmp_path_factory.mktemp("scaling"))


@pytest.fixture(scope="module")
def heatmap_run(tmp_path_factory):
    return run_quick(heatmap, tmp_path_factory.mktemp("heatmap"))


def test_the_scaled_and_unscaled_models_start_from_the_same_weights():
    models = []
    for scale in scaling.SCALINGS.values():
        ta.manual_seed(scaling.SEED)
        models.append(scaling.RecallModel(scaling.HEAD_DIM, scale=scale).state_dict())
    assert models[0].keys() == models[1].keys()
    assert all(np.array_equal(models[0][name], models[1][name]) for name in models[0])


def test_recall_batches_ask_about_a_pair_that_is_there():
    keys, values, question, answer = scaling.recall_batch(np.random.default_rng(0), 100)
    assert all(len(set(row)) == scaling.NUM_PAIRS for row in keys)      # keys all different
    position = (keys == question[:, None]).argmax(axis=1)
    assert (keys == question[:, None]).sum(axis=1).tolist() == [1] * 100
    assert np.array_equal(values[np.arange(100), position], answer)


def test_the_scaled_model_learns_recall_and_the_unscaled_one_lags(scaling_run):
    result, printed = scaling_run
    runs = result["comparisons"][scaling.HEAD_DIM]
    scaled, unscaled = runs["scaled"], runs["unscaled"]
    steps = scaling.QUICK["steps"]
    assert len(scaled["train_loss"]) == len(unscaled["train_loss"]) == steps
    assert scaled["checkpoints"] == list(range(0, steps + 1, scaling.QUICK["eval_every"]))
    assert scaled["held_out_loss"][-1] < 0.25 * scaled["held_out_loss"][0]
    assert scaled["held_out_accuracy"][-1] > 0.9
    assert result["verdict"] == "scaled"            # what the quick run measures at head_dim 256
    assert unscaled["initial_top_weight"] > scaled["initial_top_weight"]
    assert scaled["dtype"] == unscaled["dtype"] == "float32"
    assert f"{scaled['held_out_loss'][-1]:.3f}" in printed
    assert "scaling made training faster" in printed


def test_the_scaling_demo_draws_its_curves(scaling_run):
    pytest.importorskip("matplotlib")
    picture = scaling_run[0]["picture"]
    assert picture.exists() and picture.stat().st_size > 10_000


def test_reversal_batches_hold_the_reversed_digits():
    ids, targets = heatmap.reversal_batch(np.random.default_rng(0), 5)
    length = heatmap.LENGTH
    assert ids.shape == targets.shape == (5, 2 * length)
    assert (ids[:, length] == heatmap.SEPARATOR).all()
    assert (targets[:, :length] == heatmap.IGNORE).all()
    assert np.array_equal(targets[:, length:], ids[:, :length][:, ::-1])


def test_the_trained_model_reverses_and_a_head_looks_at_the_mirror(heatmap_run):
    result, printed = heatmap_run
    assert result["accuracy"] > 0.5                 # chance is 1 in 10
    assert max(share["mirror"] for share in result["shares"].values()) > 0.5
    for share in result["shares"].values():
        assert sum(share.values()) == pytest.approx(1.0)
    assert "* = the key it needs" in printed


def test_the_heatmap_weights_are_causal_rows_that_sum_to_one(heatmap_run):
    result = heatmap_run[0]
    assert result["largest_row_sum_error"] < 1e-5
    length = 2 * heatmap.LENGTH
    for layer_weights in result["example_weights"]:
        assert layer_weights.shape == (heatmap.NUM_HEADS, length, length)
        assert (layer_weights >= 0).all()
        assert not np.triu(layer_weights, k=1).any()        # no query sees a later key


def test_the_heatmap_demo_draws_its_picture(heatmap_run):
    pytest.importorskip("matplotlib")
    picture = heatmap_run[0]["picture"]
    assert picture.exists() and picture.stat().st_size > 10_000
