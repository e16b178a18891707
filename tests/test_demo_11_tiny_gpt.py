"""Demo 11 (a tiny GPT on Python's documentation), in its quick mode, and its checkpoint and
--sample command line."""
import contextlib
import importlib
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import tinyattn as ta

demo = importlib.import_module("11_tiny_gpt")
DEMO = demo.__file__


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The quick run's numbers and output folder, where what it printed is kept (printed.txt)."""
    folder = tmp_path_factory.mktemp("demo11")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        numbers = demo.main([str(folder), "--quick"])
    (folder / "printed.txt").write_text(printed.getvalue())
    return numbers, folder


def sample(checkpoint, prompt, *options):
    return demo.main(["--sample", str(checkpoint), "--prompt", prompt, "--length", "30",
                      *options])


def small_model(seed=0, vocab_size=7):
    ta.manual_seed(seed)
    return demo.build_model(vocab_size, "learned", embed_dim=16, num_heads=2, num_layers=1,
                            max_len=demo.CONTEXT)


def test_the_loss_falls_on_the_training_windows(run):
    numbers, _ = run
    losses = numbers["train_losses"]
    assert len(losses) == len(numbers["eval_steps"]) >= 3
    assert losses[-1] < losses[0] - 0.5                # 4.8 (worse than uniform) -> about 3.3
    assert numbers["last_batch_loss"] < numbers["first_batch_loss"] - 0.5
    assert numbers["val_loss"] == numbers["val_losses"][-1] < numbers["val_losses"][0]


def test_the_text_and_the_baselines(run):
    numbers, _ = run
    text = demo.documentation_text()
    assert numbers["characters"] == len(text) > 400_000
    assert numbers["vocabulary_size"] == len(set(text))
    # a bigram model knows more than a unigram one, which beats a uniform guess
    assert numbers["bigram"] < numbers["unigram"] < np.log(numbers["vocabulary_size"])


def test_the_baselines_are_the_mean_negative_log_likelihoods():
    train, val = np.array([0, 1, 0, 1, 0, 0]), np.array([1, 0, 0])
    unigram, bigram = demo.baselines(train, val, 2)
    # scored: the validation characters after the first, 0 and 0 (after 1, then after 0)
    # unigram counts plus one: 0 -> 4 + 1, 1 -> 2 + 1
    # bigram counts plus one: after 0, 0 -> 1 + 1 and 1 -> 2 + 1; after 1, 0 -> 2 + 1 and 1 -> 0 + 1
    assert unigram == pytest.approx(-np.mean(np.log([5 / 8, 5 / 8])))
    assert bigram == pytest.approx(-np.mean(np.log([3 / 4, 2 / 5])))


def test_windows_and_their_targets_one_character_later():
    ids, targets = demo.windows(np.arange(100), np.array([0, 30]))
    assert ids.shape == targets.shape == (2, demo.CONTEXT)
    assert np.array_equal(ids[1], np.arange(30, 30 + demo.CONTEXT))
    assert np.array_equal(targets, ids + 1)


def test_consecutive_batches_predict_every_character_once():
    data = np.arange(1000)
    batches = demo.consecutive_batches(data, count=4)
    assert [len(ids) for ids, _ in batches] == [4, 4, 4, 3]        # 15 windows of 64
    targets = np.concatenate([targets.reshape(-1) for _, targets in batches])
    assert np.array_equal(targets, data[1:1 + 15 * demo.CONTEXT])


def test_the_loss_on_the_whole_validation_part(run):
    numbers, _ = run
    assert numbers["val_characters_scored"] == 15 * demo.CONTEXT       # the quick run's 1,000
    assert 0 < numbers["val_loss_all"] < numbers["val_losses"][0]


def test_quick_mode_says_what_it_scored_and_times_no_writing(run):
    """It scores the first 1,000 characters of the validation part, not all of it, and 8
    characters of writing are too few to time (it printed a cache speed-up of 0.9x)."""
    printed = (run[1] / "printed.txt").read_text()
    assert re.search(r"Validation loss over 960 of the \d{2},\d{3} characters of the validation "
                     r"part \(its first 1,000 only, in quick mode, cut into "
                     r"consecutive windows of 64\)", printed)
    assert "all of it" not in printed and "characters/s" not in printed
    assert ("Writing 8 characters after the prompt with the key/value cache gives those of "
            "recomputing every prefix (quick mode does not time so few)") in printed


def test_the_readme_shows_the_first_whole_lines_of_the_sample():
    assert demo.first_lines("ab\ncd\nef", 7) == "ab↵cd"
    assert demo.first_lines("abcdefgh\nij", 5) == "abcde"           # one line, too long: cut


def test_a_checkpoint_round_trips(tmp_path):
    model, vocabulary = small_model(), "abcdefg"
    path = tmp_path / "ck.npz"
    demo.save_checkpoint(model, vocabulary, path)
    assert [p.name for p in tmp_path.iterdir()] == ["ck.npz"]       # no temporary left
    loaded, loaded_vocabulary = demo.load_checkpoint(path)
    ids = np.array([[0, 3, 6, 2, 1]])
    assert loaded_vocabulary == vocabulary
    np.testing.assert_array_equal(loaded(ids).data, model(ids).data)
    assert loaded(ids).dtype == np.float32


def test_the_trained_checkpoint_gives_the_models_held_out_loss(run):
    numbers, folder = run
    model, vocabulary = demo.load_checkpoint(folder / demo.CHECKPOINT)
    assert len(vocabulary) == numbers["vocabulary_size"] and model.positional == demo.POSITIONAL
    parts = demo.split(demo.encode(demo.documentation_text(), vocabulary))
    held_out = demo.held_out_batches(*parts, demo.QUICK["eval_batches"])
    assert demo.held_out_loss(model, held_out["val"]) == numbers["val_loss"]


def test_sampling_is_reproducible_under_a_seed(run):
    checkpoint = run[1] / demo.CHECKPOINT
    first, second = sample(checkpoint, "The "), sample(checkpoint, "The ")
    assert first == second and len(first["text"]) == 30
    model, vocabulary = demo.load_checkpoint(checkpoint)
    prompt = demo.encode("The ", vocabulary)[None]
    for seed in (demo.SEED, demo.SEED + 1):             # the demo's seed, then another one
        ta.manual_seed(seed)
        text = demo.decode(model.generate(prompt, 30, **demo.SAMPLING)[0, 4:], vocabulary)
        assert (text == first["text"]) == (seed == demo.SEED)


def test_a_prompt_character_outside_the_vocabulary_is_named(run):
    with pytest.raises(SystemExit, match=r"the prompt holds a character outside the model's "
                                         r"vocabulary: 'é' \(U\+00E9\); the vocabulary is the "
                                         r"\d+ characters of the text"):
        sample(run[1] / demo.CHECKPOINT, "café")
    with pytest.raises(SystemExit, match=r"holds characters outside the model's vocabulary: "
                                         r"'ï' \(U\+00EF\), '€' \(U\+20AC\);"):
        sample(run[1] / demo.CHECKPOINT, "naïve €")


@pytest.mark.parametrize("content, reason", [
    (None, r"there is no checkpoint file '.*ck.npz'"),
    (lambda good: good[:len(good) // 2], r"'.*ck.npz' is not a tinyattn checkpoint: the zip "
                                         r"archive is damaged or cut short"),
    (lambda good: b"not a checkpoint", r"'.*ck.npz' is not a tinyattn checkpoint \(safetensors, "
                                       r"or NumPy \.npz\): the header length"),
])
def test_a_missing_or_damaged_checkpoint_is_a_clear_error(tmp_path, capsys, content, reason):
    path = tmp_path / "ck.npz"
    if content is not None:
        demo.save_checkpoint(small_model(), "abcdefg", tmp_path / "good.npz")
        path.write_bytes(content((tmp_path / "good.npz").read_bytes()))
    files = sorted(tmp_path.iterdir())
    with pytest.raises(SystemExit, match=rf"^11_tiny_gpt.py: load: {reason}"):
        sample(path, "abc")
    assert sorted(tmp_path.iterdir()) == files and capsys.readouterr().out == ""  # no output


def test_the_command_line_ends_with_the_error_alone_and_a_non_zero_status(tmp_path):
    tinyattn_folder = os.path.dirname(os.path.dirname(ta.__file__))     # this tinyattn, found
    finished = subprocess.run([sys.executable, DEMO, "--sample", str(tmp_path / "ck.npz")],
                              capture_output=True, text=True, timeout=120,
                              env=dict(os.environ, PYTHONPATH=tinyattn_folder))
    assert finished.returncode == 1 and finished.stdout == ""
    assert finished.stderr == f"11_tiny_gpt.py: load: there is no checkpoint file " \
                              f"'{tmp_path / 'ck.npz'}'\n"                # no traceback
    assert list(tmp_path.iterdir()) == []


def test_a_checkpoint_of_another_model_is_named(tmp_path):
    small_model().save(tmp_path / "plain.npz")             # parameters only: no vocabulary
    with pytest.raises(SystemExit, match="not one of this demo: it holds no vocabulary"):
        sample(tmp_path / "plain.npz", "abc")


def test_the_loss_curves_are_drawn(run):
    pytest.importorskip("matplotlib")
    assert (run[1] / "tiny_gpt_loss.png").stat().st_size > 10_000
