"""Demo 3 (the gradient-check walkthrough): its numbers say what it claims."""
import importlib

import pytest

demo = importlib.import_module("03_gradcheck_walkthrough")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo03")
    return demo.main([str(folder), "--quick"]), folder


def test_one_element_by_hand_matches_backward(run):
    numbers, _ = run
    assert abs(numbers["one_element_numerical"] - numbers["one_element_analytical"]) < 1e-8
    assert abs(numbers["one_element_analytical"]) > 1e-2          # a real gradient, not ~0
    assert numbers["sum_of_softmax_gradient"] < 1e-12              # why v must be random


def test_multi_head_attention_passes_gradcheck(run):
    numbers, _ = run
    assert numbers["mha_passed"] is True
    assert numbers["mha_numbers_compared"] == 2 * 3 * 8 + 4 * (8 * 8 + 8)
    assert numbers["mha_worst_abs"] < 1e-7
    assert numbers["key_bias_grad"] < 1e-12


def test_wrong_sigmoid_is_caught_located_and_its_ratio_is_the_missing_factor(run):
    numbers, _ = run
    assert numbers["wrong_op_caught"] is True
    message = numbers["wrong_op_message"]
    assert "input 0" in message and "element (" in message
    assert "analytical gradient" in message and "numerical" in message
    assert numbers["wrong_op_ratio_error"] < 1e-4
    assert numbers["right_op_passed"] is True


def test_eps_trade_off_by_the_median(run):
    numbers, _ = run
    assert numbers["eps_elements"] == demo.EPS_DRAWS * 5
    assert 1e-8 <= numbers["best_eps_float64"] <= 1e-4     # neither the largest nor the smallest
    assert numbers["best_eps_float32"] > numbers["best_eps_float64"]
    assert numbers["float32_over_float64"] > 1e3
    assert numbers["float32_step_lost"] is True


def test_the_eps_picture_is_drawn(run):
    pytest.importorskip("matplotlib")
    picture = run[1] / "gradcheck_eps.png"
    assert picture.stat().st_size > 10_000
