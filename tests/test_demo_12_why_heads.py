"""Demo 12 (one attention layer of the same width and parameters, split into 1 to 8 heads), in its
quick mode: the task's answers, where each head looks, and the numbers its README entry is filled
from."""
import importlib
import json

import numpy as np
import pytest

demo = importlib.import_module("12_why_heads")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo12")
    return demo.main([str(folder), "--quick"]), folder


def test_each_answer_names_the_tokens_1_2_and_4_places_back_in_order():
    ids, targets = demo.places_batch(np.random.default_rng(0), 5)
    assert ids.shape == targets.shape == (5, demo.LENGTH)
    assert (targets[:, :4] == demo.IGNORE).all()
    t = np.arange(4, demo.LENGTH)
    answers = targets[:, t]
    np.testing.assert_array_equal(answers // 16, ids[:, t - 1])
    np.testing.assert_array_equal(answers // 4 % 4, ids[:, t - 2])
    np.testing.assert_array_equal(answers % 4, ids[:, t - 4])


def test_weight_on_places_reads_each_heads_weight_at_each_place():
    T = demo.LENGTH
    weights = np.zeros((2, 3, T, T))
    weights[:, 0, np.arange(T), np.maximum(np.arange(T) - 2, 0)] = 1.0     # head 1: 2 back
    weights[:, 1, np.arange(T), np.arange(T)] = 1.0                         # head 2: itself
    weights[:, 2, np.arange(T), np.maximum(np.arange(T) - 1, 0)] = 0.25     # head 3: split
    weights[:, 2, np.arange(T), np.maximum(np.arange(T) - 4, 0)] = 0.75
    np.testing.assert_allclose(demo.weight_on_places(weights), [[0, 1, 0, 0], [0, 0, 0, 1],
                                                                [0.25, 0, 0.75, 0]])


def test_every_head_count_has_the_same_parameters_and_causal_weights(quick_run):
    numbers, _ = quick_run
    assert numbers["parameter_counts_equal"] is True
    assert numbers["parameters_32"] == 17_440       # the count the README entry quotes
    assert numbers["largest_row_sum_error"] < 1e-5
    for width in demo.QUICK["widths"]:
        for heads in demo.HEAD_COUNTS:
            assert 0 <= numbers[f"accuracy_{width}_{heads}"] <= 1
            assert numbers[f"loss_{width}_{heads}"] > 0
    assert all(0 <= numbers[f"owned_32_{heads}"] <= 3 for heads in demo.HEAD_COUNTS)
    assert sum(numbers[f"one_head_place_{place}"] for place in demo.PLACES) <= 1 + 1e-6


def test_the_widest_models_learn_even_in_the_quick_run(quick_run):
    numbers, _ = quick_run
    chance = 1 / demo.CLASSES
    assert all(numbers[f"accuracy_64_{heads}"] > 10 * chance for heads in demo.HEAD_COUNTS)


def test_the_verdict_follows_the_numbers():
    widths = (16, 32)

    def table(one_head, best):
        return {(width, heads): one_head if heads == 1 else best
                for width in widths for heads in demo.HEAD_COUNTS}
    loss = table(0.1, 0.01)
    assert demo.verdict(table(0.5, 1.0), loss, widths).startswith("one head trails")
    assert "at width 16 and 32, but its held-out loss stays 10.0 to 10.0 times" in demo.verdict(
        table(0.99, 1.0), loss, widths)
    accuracy = {**table(0.99, 1.0), (16, 1): 0.9}
    assert "at width 32, not at 16" in demo.verdict(accuracy, loss, widths)


def test_the_readme_entry_is_filled_from_flat_json_numbers(quick_run):
    numbers, _ = quick_run
    assert json.loads(json.dumps(numbers)) == numbers
    entry = demo.PAGE_ENTRY.format(**numbers)
    assert entry.startswith("12. [`12_why_heads.py`](../demos/12_why_heads.py) — ")
    assert numbers["verdict"] in entry
    assert "](pictures/why_heads_attention.png)" in entry


def test_the_pictures_are_drawn(quick_run):
    pytest.importorskip("matplotlib")
    for picture in ("why_heads_attention.png", "why_heads_accuracy.png"):
        assert (quick_run[1] / picture).stat().st_size > 10_000
