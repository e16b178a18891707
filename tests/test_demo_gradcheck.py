"""Demo 3 (the gradient-check walkthrough) runs, and its numbers say what it claims."""
import importlib

import pytest


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    demo = importlib.import_module("03_gradcheck_walkthrough")
    return demo.main([str(tmp_path_factory.mktemp("demo03")), "--quick"])


def test_one_element_by_hand_matches_backward(results):
    assert abs(results["one_element_numerical"] - results["one_element_analytical"]) < 1e-8
    assert abs(results["one_element_analytical"]) > 1e-2          # a real gradient, not ~0
    assert results["sum_of_softmax_gradient"] < 1e-12              # why v must be random


def test_multi_head_attention_passes_gradcheck(results):
    assert results["mha_passed"] is True
    assert results["mha_numbers_compared"] == 2 * 3 * 8 + 4 * (8 * 8 + 8)
    assert results["mha_worst_abs"] < 1e-7
    assert results["mha_worst_rel"] < 1e-5


def test_wrong_sigmoid_is_caught_and_the_right_one_passes(results):
    assert results["wrong_op_caught"] is True
    message = results["wrong_op_message"]
    assert "input 0" in message and "element (" in message
    assert "analytical gradient" in message and "numerical" in message
    assert min(results["wrong_op_ratios"]) > 0 and max(results["wrong_op_ratios"]) < 1
    assert results["right_op_passed"] is True


def test_eps_trade_off(results):
    steps, errors = results["eps_steps"], results["eps_errors"]
    float64, float32 = errors["float64"], errors["float32"]
    best = steps[float64.index(min(float64))]
    assert 1e-8 <= best <= 1e-4                      # neither the largest nor the smallest eps
    assert min(float32) > 100 * min(float64)
    assert float32[-1] > 0.1 * abs(results["one_element_analytical"])  # eps lost in float32
