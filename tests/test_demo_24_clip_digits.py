"""Demo 24 (CLIP on digits and words), in its quick mode: the loss falls, zero-shot classification
by an unseen phrasing and retrieval both ways are well above chance, and the captions are built as
the docstring says."""
import contextlib
import importlib
import io

import numpy as np
import pytest

pytest.importorskip("sklearn", reason="demo 24 reads scikit-learn's digits: pip install "
                                      "scikit-learn (the demos extra)")
pytest.importorskip("num2words", reason="demo 24 spells its captions with num2words: pip install "
                                        "num2words (the demos extra)")
demo = importlib.import_module("24_clip_digits")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The quick run's numbers, what it printed, and its output folder."""
    folder = tmp_path_factory.mktemp("demo24")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        numbers = demo.main([str(folder), "--quick"])
    return numbers, printed.getvalue(), folder


def test_the_contrastive_loss_falls_from_guessing(run):
    numbers, _, _ = run
    assert numbers["first_loss"] == pytest.approx(np.log(10), abs=0.15)   # 10 pairs, a guess
    assert numbers["last_loss"] < numbers["first_loss"] - 1.0              # 2.38 -> 1.09


def test_zero_shot_by_an_unseen_phrasing_is_well_above_chance(run):
    numbers, printed, _ = run
    assert numbers["held_out"] == 397 and numbers["unseen_prompt"] == "a picture of a seven"
    assert numbers["zero_shot_accuracy"] > 0.4                             # chance 0.1; 56%
    assert numbers["seen_phrasing_accuracy"] > 0.4                         # 58%
    assert numbers["seen_prompt"] == "a photo of the digit seven"
    assert numbers["vit_accuracy"] > 0.4                                   # 66%
    assert "CLIP, zero-shot by 'a picture of a seven' ..." in printed


def test_retrieval_both_ways_is_well_above_chance(run):
    numbers, _, _ = run
    assert numbers["retrieval_pairs"] == 400
    assert numbers["image_to_text"] > 0.4 and numbers["text_to_image"] > 0.4   # 57%, 66%


def test_a_run_prints_the_same_numbers(run):
    """Seeded: the quick run again, with nothing else changed, gives the same numbers."""
    numbers, _, folder = run
    with contextlib.redirect_stdout(io.StringIO()):
        again = demo.main([str(folder), "--quick"])
    timing = {"clip_seconds", "vit_seconds"}
    assert {k: v for k, v in again.items() if k not in timing} == \
           {k: v for k, v in numbers.items() if k not in timing}


def test_captions_are_word_ids_ended_and_padded_by_the_end_of_text_id():
    words = demo.vocabulary()
    eos = len(words)
    assert "picture" in words and "seven" in words and "7" in words
    ids = demo.encode(["a photo of the digit seven", "seven"], words)
    assert ids.shape == (2, demo.CONTEXT) and ids.dtype == np.int64
    assert [words[i] for i in ids[0, :6]] == "a photo of the digit seven".split()
    assert ids[0, 6] == eos and ids[1, 0] == words.index("seven") and (ids[1, 1:] == eos).all()


def test_the_unseen_phrasing_is_no_training_phrasing():
    trained = {demo.caption(phrasing, digit) for phrasing in demo.TRAINING_PHRASINGS
               for digit in range(10)}
    assert all(demo.caption(demo.UNSEEN_PHRASING, digit) not in trained for digit in range(10))
    assert demo.caption("a handwritten {digit}", 3) == "a handwritten 3"


def test_a_batch_holds_one_picture_of_each_digit():
    labels = np.repeat(np.arange(10), 5)
    batch = demo.one_of_each_digit(labels, np.arange(50), np.random.default_rng(0))
    assert np.array_equal(labels[batch], np.arange(10))


def test_the_split_holds_out_397_pictures_once():
    train, held_out = demo.split(1797, np.random.default_rng(0))
    assert len(held_out) == 397 and len(train) == 1400
    assert np.array_equal(np.sort(np.concatenate([train, held_out])), np.arange(1797))


def test_a_missing_package_is_named_with_how_to_install_it(monkeypatch, capsys):
    monkeypatch.setattr(demo, "missing_packages", lambda: ["num2words"])
    assert demo.main(["--quick"]) == {}
    assert capsys.readouterr().out.strip().endswith(
        "Demo 24 needs num2words, which is not installed: `pip install num2words` (or the `demos` "
        "extra).")


def test_the_similarity_matrix_is_drawn(run):
    pytest.importorskip("matplotlib")
    assert (run[2] / "clip_digits.png").stat().st_size > 10_000
