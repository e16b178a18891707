"""Demo 10: the toy grammar; what `train` records (every step's loads, the same start for both
runs) and what `words_per_expert` counts, on a few steps; and the numbers of its quick run, with
and without the balance loss."""
import importlib

import numpy as np
import pytest

import tinyattn as ta
from references import run_quick

demo = importlib.import_module("10_experts")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("experts")
    return (*run_quick(demo, folder), folder)


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


def test_both_runs_start_alike_and_record_every_step():
    held_out = demo.text_batch(np.random.default_rng(1), 8)
    steps = 2
    runs = [demo.train(name, weight, held_out, steps, eval_every=steps, print_every=steps)
            for name, weight in demo.BALANCE_WEIGHTS.items()]
    without, with_ = runs
    np.testing.assert_array_equal(without["loads"][0], with_["loads"][0])   # same start
    assert without["train_loss"][0] == with_["train_loss"][0]
    assert without["train_loss"][1] != with_["train_loss"][1]   # the balance loss changed step 1
    for run in runs:
        assert run["loads"].shape == (steps, demo.NUM_EXPERTS)
        np.testing.assert_allclose(run["loads"].sum(axis=1), 1.0)
        assert len(run["train_loss"]) == len(run["aux_loss"]) == steps
        assert run["checkpoints"] == [0, steps] and len(run["held_out_loss"]) == 2


def test_the_word_counts_cover_every_assignment():
    ta.manual_seed(0)
    ids, _ = demo.text_batch(np.random.default_rng(0), 4)
    counts = demo.words_per_expert(demo.ExpertLanguageModel(), ids)
    assert counts.shape == (demo.NUM_EXPERTS, len(demo.WORDS))
    occurrences = np.bincount(ids.ravel(), minlength=len(demo.WORDS))
    np.testing.assert_array_equal(counts.sum(axis=0), demo.TOP_K * occurrences)
    assert counts.max() <= occurrences.max()                # top-k experts are k different ones


def test_the_quick_runs_learn_and_report_the_loads(quick_run):
    numbers, printed, _ = quick_run
    assert numbers["steps"] == demo.QUICK["steps"]
    even = 1 / demo.NUM_EXPERTS
    for run in ("without", "with"):
        assert numbers[f"loss_{run}"] < 0.75 * numbers["loss_start"]
        assert numbers[f"load_min_{run}"] <= even <= numbers[f"load_max_{run}"]
        assert numbers[f"collapsed_{run}"] == 0 or numbers[f"load_min_{run}"] < demo.COLLAPSED
        assert 0 <= numbers[f"words_to_one_expert_{run}"] <= len(demo.WORDS)
    assert "words it takes most of" in printed and "busiest expert" in printed
    assert f"{numbers['load_max_with']:.1%}" in printed
    entry = demo.PAGE_ENTRY.format(**numbers)
    assert (f"collapsed (ended below 1% of the assignments): {numbers['collapsed_without']} "
            f"without") in " ".join(entry.split())


def test_the_demo_draws_its_picture(quick_run):
    pytest.importorskip("matplotlib")
    picture = quick_run[2] / "experts.png"
    assert picture.stat().st_size > 10_000
