"""Demo 8 in its quick mode: what attention sees without positions, the shift task learned with
each encoding, and the extrapolation table; its printed words and README sentences follow its
numbers."""
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
    assert f"{numbers['equivariance_gap_none']:.1e}" in printed and "rounding error" in printed


def test_each_encoding_is_trained_and_tested_longer(quick_run):
    numbers, printed, _ = quick_run
    assert numbers["steps"] == positions.QUICK["steps"] and numbers["dtype"] == "float32"
    for encoding in positions.ENCODINGS:
        assert f"{numbers[f'accuracy_{encoding}']:.1%}" in printed
        for length in positions.TEST_LENGTHS:
            assert 0 <= numbers[f"new_positions_accuracy_{encoding}_{length}"] <= 1
    # what the quick run measures: rotary positions learn the task first, none stays far behind
    assert numbers["accuracy_rope"] > numbers["accuracy_none"] + 0.3
    assert "ALiBi paper" in printed


def test_the_readme_entry_is_filled_from_flat_json_numbers(quick_run):
    numbers, _, folder = quick_run
    assert json.loads(json.dumps(numbers)) == numbers
    assert all(isinstance(value, (bool, int, float, str, type(None)))
               for value in numbers.values())
    entry = positions.README_ENTRY.format(**numbers)
    assert entry.startswith("8. [`08_positions.py`](demos/08_positions.py) — ")
    assert numbers["extrapolation_sentence"] in entry and numbers["alibi_sentence"] in entry
    for picture in ("positions_accuracy.png", "positions_extrapolation.png"):
        assert f"](docs/pictures/{picture})" in entry


def test_reach_is_the_last_position_of_an_unbroken_run_at_90_percent():
    shift = positions.SHIFT
    assert positions.reach(np.array([1.0, 0.95, 0.9, 0.5, 1.0])) == shift + 2
    assert positions.reach(np.array([1.0, 1.0])) == shift + 1
    assert positions.reach(np.array([0.8, 1.0])) is None


def run(trained, first, second, reach=20, losses=(1.0, 0.5, 0.2)):
    """What train_each_encoding gives for one encoding, as far as the words read it."""
    return {"held_out_accuracy": [trained], "held_out_loss": list(losses),
            "checkpoints": [0, 300, 600], "reach": reach,
            "beyond": dict(zip(positions.TEST_LENGTHS, (first, second)))}


def test_the_words_follow_the_numbers():
    runs = {"none": run(0.2, 0.1, 0.1), "sinusoidal": run(1.0, 0.06, 0.06),
            "learned": run(0.95, 0.5, 0.3), "rope": run(1.0, 0.99, 0.6),
            "alibi": run(0.98, 0.97, 0.96)}
    words = positions.extrapolation_words(runs)
    assert "sinusoidal, learned, rope and alibi reached 90%" in words
    assert "sinusoidal from 100% to 6% (fell to about chance)" in words
    assert "rope from 100% to 99% (held) and 60% (fell), 90% or more up to position 20" in words
    assert "alibi learned the task" in words and "held at 32 tokens and held at 64" in words
    runs["alibi"] = run(0.3, 0.2, 0.2, reach=None)
    words = positions.extrapolation_words(runs)
    assert "alibi did not learn the task within the trained length (30%; its held-out loss was " \
           "still falling, from 0.50 at step 300 to 0.20 at step 600)" in words
    assert "steepest slope is 0.25, so a key one position further gets 78%" in words
    runs["alibi"] = run(0.3, 0.2, 0.2, losses=(1.0, 0.5, 0.48))
    assert "its held-out loss had levelled off at 0.48" in positions.extrapolation_words(runs)


def test_the_readme_sentences_follow_the_numbers():
    runs = {"none": run(0.2, 0.1, 0.1), "sinusoidal": run(1.0, 0.16, 0.11, reach=16),
            "learned": run(0.95, 0.08, 0.07, reach=None), "rope": run(1.0, 1.0, 0.56, reach=40),
            "alibi": run(0.38, 0.27, 0.25, reach=None)}
    assert positions.extrapolation_sentence(runs) == (
        "Trained on 16 tokens and tested on 32 / 64, the encodings that learned it score on the "
        "new positions: rope 100% / 56% (≥90% up to position 40), sinusoidal 16% / 11% (up to "
        "16), learned 8% / 7% (under 90% already at position 3).")
    assert positions.alibi_sentence(runs).startswith("ALiBi did not learn this task, so the run "
                                                     "does not test")
    runs["alibi"] = run(0.98, 0.97, 0.5)
    assert ("rope 100% / 56% (≥90% up to position 40), alibi 97% / 50% (up to 20), sinusoidal"
            in positions.extrapolation_sentence(runs))
    assert positions.alibi_sentence(runs) == (
        "ALiBi learned this task, so the run tests its paper's claim that it extrapolates to "
        "longer inputs: its accuracy on the new positions held at 32 tokens and fell at 64.")
    for encoding in runs:
        runs[encoding]["held_out_accuracy"] = [0.5]
    assert positions.extrapolation_sentence(runs).startswith("No encoding reached 90% at the "
                                                             "trained length 16")


def test_the_demo_draws_its_pictures(quick_run):
    pytest.importorskip("matplotlib")
    for picture in ("positions_accuracy.png", "positions_extrapolation.png"):
        assert (quick_run[2] / picture).stat().st_size > 10_000
