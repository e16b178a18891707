"""Demo 10 in its quick mode: the toy grammar, and the loads, losses and word counts it records for
the runs with and without the balance loss."""
import importlib

import numpy as np
import pytest
from references import run_quick

demo = importlib.import_module("10_experts")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    return run_quick(demo, tmp_path_factory.mktemp("experts"))


def test_the_grammar_makes_verbs_agree_with_their_subject():
    random = np.random.default_rng(0)
    singular = {forms[0] for forms in demo.VERBS}
    for _ in range(200):
        words = demo.sentence(random)
        verb = next(word for word in words if word in demo.PARTS_OF_SPEECH["verb"])
        subject = words[words.index(verb) - 1]
        plural = any(subject == forms[1] != forms[0] for forms in demo.NOUNS)
        if subject != "fish":                      # "fish" is both: its determiner decides
            assert (verb in singular) != plural, words
        assert words[-1] == "."
    ids, targets = demo.text_batch(random, 5)
    assert ids.shape == targets.shape == (5, demo.LENGTH)
    np.testing.assert_array_equal(ids[:, 1:], targets[:, :-1])


def test_both_runs_start_alike_and_record_every_step(quick_run):
    runs = quick_run[0]["runs"]
    steps = demo.QUICK["steps"]
    without, with_ = runs["without balance loss"], runs["with balance loss"]
    np.testing.assert_array_equal(without["loads"][0], with_["loads"][0])   # same start
    assert without["loss"][0] == with_["loss"][0]
    for run in runs.values():
        assert run["loads"].shape == (steps, demo.NUM_EXPERTS)
        np.testing.assert_allclose(run["loads"].sum(axis=1), 1.0)
        assert len(run["loss"]) == len(run["aux_loss"]) == steps
        assert run["held_out_loss"][-1] < 0.75 * run["held_out_loss"][0]


def test_the_word_counts_cover_every_held_out_assignment(quick_run):
    result, printed = quick_run
    for counts in result["counts"].values():
        assert counts.shape == (demo.NUM_EXPERTS, len(demo.WORDS))
        assert counts.sum() == demo.HELD_OUT * demo.LENGTH * demo.TOP_K
        assert (counts.sum(axis=0) % demo.TOP_K == 0).all()
    assert "words it takes most of" in printed and "busiest expert" in printed
    final = result["runs"]["with balance loss"]["final_loads"]
    assert f"{final.max():.1%}" in printed


def test_the_demo_draws_its_picture(quick_run):
    pytest.importorskip("matplotlib")
    picture = quick_run[0]["picture"]
    assert picture.exists() and picture.stat().st_size > 10_000
