"""Demo 8 in its quick mode: what attention sees without positions, the shift task learned with
each encoding, and the extrapolation table; its README phrase on ALiBi follows its numbers."""
import contextlib
import importlib
import io
import json

import numpy as np
import pytest

positions = importlib.import_module("08_positions")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """The quick run's numbers, what it printed, and its output folder."""
    folder = tmp_path_factory.mktemp("positions")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        numbers = positions.main([str(folder), "--quick"])
    return numbers, printed.getvalue(), folder


def test_shift_batches_hold_the_token_three_back():
    ids, targets = positions.shift_batch(np.random.default_rng(0), 5, length=9)
    assert ids.shape == targets.shape == (5, 9)
    assert (targets[:, :positions.SHIFT] == positions.IGNORE).all()
    np.testing.assert_array_equal(targets[:, positions.SHIFT:], ids[:, :-positions.SHIFT])


def test_without_positions_only_rounding_error_is_left(quick_run):
    numbers, printed, _ = quick_run
    assert numbers["equivariance_gap_none"] < 1e-13
    assert numbers["multiset_gap_none_1_layer"] < 1e-13
    assert numbers["multiset_gap_none_2_layers"] > 1e-3            # the causal mask leaks order
    for encoding in positions.ENCODINGS[1:]:
        assert numbers[f"equivariance_gap_{encoding}"] > 1e-2
        assert numbers[f"multiset_gap_{encoding}_1_layer"] > 1e-2
    assert f"{numbers['equivariance_gap_none']:.1e}" in printed


def test_each_encoding_is_trained_and_tested_longer(quick_run):
    numbers, printed, _ = quick_run
    assert numbers["steps"] == positions.QUICK["steps"] and numbers["dtype"] == "float32"
    for encoding in positions.ENCODINGS:
        assert f"{numbers[f'accuracy_{encoding}']:.1%}" in printed
        for length in positions.TEST_LENGTHS:
            assert 0 <= numbers[f"new_positions_accuracy_{encoding}_{length}"] <= 1
    # what the quick run measures: rotary positions learn the task first, none stays far behind
    assert numbers["accuracy_rope"] > numbers["accuracy_none"] + 0.3
    assert "steepest slope at 4 heads: m = 0.25" in printed


def test_the_readme_entry_is_filled_from_flat_json_numbers(quick_run):
    numbers, _, folder = quick_run
    assert json.loads(json.dumps(numbers)) == numbers
    assert all(isinstance(value, (bool, int, float, str, type(None)))
               for value in numbers.values())
    entry = positions.PAGE_ENTRY.format(**numbers)
    assert entry.startswith("8. [`08_positions.py`](../demos/08_positions.py) — ")
    assert numbers["alibi_verdict"] in entry
    assert f"tested on {2 * positions.LENGTH}" in entry
    for picture in ("positions_accuracy.png", "positions_extrapolation.png"):
        assert f"](pictures/{picture})" in entry


def test_reach_is_the_last_position_of_an_unbroken_run_at_90_percent():
    shift = positions.SHIFT
    assert positions.reach(np.array([1.0, 0.95, 0.9, 0.5, 1.0])) == shift + 2
    assert positions.reach(np.array([1.0, 1.0])) == shift + 1
    assert positions.reach(np.array([0.8, 1.0])) is None


def test_the_alibi_verdict_follows_alibis_accuracy():
    def runs(accuracy):
        return {"alibi": {"held_out_accuracy": [0.1, accuracy]}}
    assert positions.alibi_verdict(runs(0.95)).endswith("so this run tests that claim")
    assert positions.alibi_verdict(runs(positions.LEARNED)).endswith("tests that claim")
    assert positions.alibi_verdict(runs(0.3)).endswith("so this run does not test it")


def test_the_demo_draws_its_pictures(quick_run):
    pytest.importorskip("matplotlib")
    for picture in ("positions_accuracy.png", "positions_extrapolation.png"):
        assert (quick_run[2] / picture).stat().st_size > 10_000
