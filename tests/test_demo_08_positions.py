"""Demo 8 in its quick mode: what attention sees without positions, the shift task learned with
each encoding, and the extrapolation table; its printed words follow its numbers."""
import contextlib
import importlib
import io

import numpy as np
import pytest

positions = importlib.import_module("08_positions")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = positions.main([str(tmp_path_factory.mktemp("positions")), "--quick"])
    return result, printed.getvalue()


def test_shift_batches_hold_the_token_three_back():
    ids, targets = positions.shift_batch(np.random.default_rng(0), 5, length=9)
    assert ids.shape == targets.shape == (5, 9)
    assert (targets[:, :positions.SHIFT] == positions.IGNORE).all()
    np.testing.assert_array_equal(targets[:, positions.SHIFT:], ids[:, :-positions.SHIFT])


def test_without_positions_only_rounding_error_is_left(quick_run):
    result, printed = quick_run
    equivariance, multiset = result["equivariance"], result["multiset"]
    assert equivariance["none"] < 1e-13 and multiset["none", 1] < 1e-13
    assert multiset["none", 2] > 1e-3                   # the causal mask leaks order
    for encoding in positions.ENCODINGS[1:]:
        assert equivariance[encoding] > 1e-2 and multiset[encoding, 1] > 1e-2
    assert f"{equivariance['none']:.1e}" in printed and "rounding error" in printed


def test_each_encoding_is_trained_and_tested_longer(quick_run):
    result, printed = quick_run
    runs = result["runs"]
    assert list(runs) == list(positions.ENCODINGS)
    steps = positions.QUICK["steps"]
    for encoding, run in runs.items():
        assert len(run["train_loss"]) == steps and run["dtype"] == "float32"
        assert set(run["beyond"]) == set(positions.TEST_LENGTHS)
        assert len(run["by_position"]) == max(positions.TEST_LENGTHS) - positions.SHIFT
        assert f"{run['held_out_accuracy'][-1]:.1%}" in printed
    # what the quick run measures: rotary positions learn the task first, none stays far behind
    assert runs["rope"]["held_out_accuracy"][-1] > runs["none"]["held_out_accuracy"][-1] + 0.3
    assert "ALiBi paper" in printed


def test_the_words_follow_the_numbers():
    def run(trained, first, second, reach=20, losses=(1.0, 0.5, 0.2)):
        return {"held_out_accuracy": [trained], "held_out_loss": list(losses),
                "checkpoints": [0, 300, 600], "reach": reach,
                "beyond": dict(zip(positions.TEST_LENGTHS, (first, second)))}
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


def test_the_demo_draws_its_pictures(quick_run):
    pytest.importorskip("matplotlib")
    for picture in quick_run[0]["pictures"]:
        assert picture.exists() and picture.stat().st_size > 10_000
