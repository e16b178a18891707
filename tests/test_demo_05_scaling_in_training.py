"""Demo 5 (training with and without scaling the attention scores), in its quick mode."""
import importlib

import numpy as np
import pytest

import tinyattn as ta

demo = importlib.import_module("05_scaling_in_training")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo05")
    return demo.main([str(folder), "--quick"]), folder


def test_the_scaled_and_unscaled_models_start_from_the_same_weights():
    models = []
    for scale in demo.SCALINGS.values():
        ta.manual_seed(demo.SEED)
        models.append(demo.RecallModel(demo.HEAD_DIM, scale=scale).state_dict())
    assert models[0].keys() == models[1].keys()
    assert all(np.array_equal(models[0][name], models[1][name]) for name in models[0])


def test_recall_batches_ask_about_a_pair_that_is_there():
    keys, values, question, answer = demo.recall_batch(np.random.default_rng(0), 100)
    assert all(len(set(row)) == demo.NUM_PAIRS for row in keys)      # keys all different
    position = (keys == question[:, None]).argmax(axis=1)
    assert (keys == question[:, None]).sum(axis=1).tolist() == [1] * 100
    assert np.array_equal(values[np.arange(100), position], answer)


def test_the_scaled_model_learns_recall_and_the_unscaled_one_lags(run):
    numbers, _ = run
    assert numbers["dtype"] == "float32"
    assert numbers["scaled_256_final_loss"] < 0.25 * numbers["scaled_256_held_out_loss_start"]
    assert numbers["scaled_256_final_accuracy"] > 0.9
    assert numbers["first_to_learn_256"] == "scaled"     # what the quick run measures
    assert numbers["unscaled_256_steps_to_learn"] is None
    assert numbers["unscaled_256_top_weight_start"] > 0.5 > numbers["scaled_256_top_weight_start"]


def test_unscaled_weights_underflow_and_scaled_ones_do_not(run):
    numbers, _ = run
    assert numbers["unscaled_256_zero_weights"] > 0.1
    assert numbers["unscaled_256_subnormal_weights"] > 0.01
    for head_dim in (demo.HEAD_DIM, demo.CONTROL_HEAD_DIM):
        assert numbers[f"scaled_{head_dim}_zero_weights"] == 0
        assert numbers[f"scaled_{head_dim}_subnormal_weights"] == 0
    assert all(numbers[f"{name}_256_ms_per_step"] > 0 for name in demo.SCALINGS)


def test_the_verdict_reads_the_first_step_at_target():
    def runs(scaled, unscaled):
        return {"scaled": {"steps_to_learn": scaled}, "unscaled": {"steps_to_learn": unscaled}}
    assert demo.verdict(runs(50, 175)) == "scaled"
    assert demo.verdict(runs(None, 175)) == "unscaled"
    assert demo.verdict(runs(225, 225)) == "tie"
    assert demo.verdict(runs(None, None)) == "neither"


def test_the_curves_are_drawn(run):
    pytest.importorskip("matplotlib")
    picture = run[1] / "scaling_in_training.png"
    assert picture.stat().st_size > 10_000
