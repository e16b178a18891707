"""Demo 17 (the logit lens on demo 11's tiny GPT and on GPT-2), in its quick mode: each row is
scored as the model is, the last row is the model itself, and GPT-2's part runs on the small
GPT-2 of random weights in tests/fixtures."""
import importlib
import json

import numpy as np
import pytest

import regenerate
import tinyattn as ta

demo = importlib.import_module("17_logit_lens")
tiny_gpt = importlib.import_module("11_tiny_gpt")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo17")
    return demo.main([str(folder), "--quick"]), folder


def small_model(vocab_size=7):
    ta.manual_seed(0)
    return tiny_gpt.build_model(vocab_size, "learned", embed_dim=16, num_heads=2, num_layers=2,
                                max_len=tiny_gpt.CONTEXT).eval()


def test_the_last_row_is_the_model_itself(run):
    numbers, _ = run
    assert numbers["rows"] == tiny_gpt.SIZES["num_layers"] + 1 == len(numbers["cross_entropy"])
    assert numbers["agreement"][-1] == 1.0
    assert demo.visible(numbers["example_guesses"][-1]) == numbers["final_guess"]
    assert demo.visible("a b\n`") == "a·b↵'"
    assert all(len(guess) == len(demo.EXAMPLE) - 1 for guess in numbers["example_guesses"])


def test_the_rows_improve_on_the_embeddings_after_a_little_training(run):
    """Even 20 steps teach the blocks more than the embeddings' row can know."""
    numbers, _ = run
    entropy = numbers["cross_entropy"]
    assert entropy[-1] < entropy[0] and numbers["trained_loss"] < np.log(100)
    assert numbers["embeddings_loss"] == entropy[0]


def test_the_scores_are_the_models_own_cross_entropy_and_accuracy():
    """The last row's cross-entropy is F.cross_entropy of the model's logits; a row's accuracy
    and agreement count argmaxes."""
    model = small_model()
    ids = np.random.default_rng(0).integers(0, 7, (3, 9))
    targets = np.random.default_rng(1).integers(0, 7, (3, 9))
    entropy, accuracy, agreement = demo.lens_scores(model, [(ids, targets)])
    logits = model(ids)
    expected = ta.functional.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1)).item()
    assert entropy[-1] == pytest.approx(expected, rel=1e-5)
    guess = logits.data.argmax(axis=-1)
    assert accuracy[-1] == pytest.approx((guess == targets).mean())
    assert agreement[-1] == 1.0
    chunked = demo.lens_scores(model, [(ids, targets)], chunk=4)
    np.testing.assert_allclose(np.array(chunked), np.array((entropy, accuracy, agreement)),
                               rtol=1e-5)


def test_the_example_reading_gives_the_right_characters_probability():
    model, vocabulary = small_model(), "abcdefg"
    guesses, right = demo.example_reading(model, vocabulary, "abcga")
    assert guesses.shape == right.shape == (3, 4)
    logits = model(tiny_gpt.encode("abcg", vocabulary)[None]).data[0]        # (4, 7)
    probabilities = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(right[-1], probabilities[np.arange(4), [1, 2, 6, 0]], rtol=1e-5)
    assert "".join(guesses[-1]) == "".join(vocabulary[i] for i in logits.argmax(axis=-1))


def test_gpt2s_part_runs_on_the_fixture(run):
    numbers, _ = run
    assert numbers["gpt2"] is True and len(numbers["gpt2_cross_entropy"]) == 3   # 2 blocks
    assert numbers["gpt2_agreement"][-1] == 1.0 and len(numbers["gpt2_guesses"]) == 3
    assert numbers["gpt2_sentence"].startswith("On the small GPT-2 of random weights")


def test_without_gpt2s_weights_it_says_so(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(demo, "QUICK", {**demo.QUICK, "steps": 2, "warmup_steps": 1,
                                             "lens_characters": 65})
    monkeypatch.setattr(demo, "gpt2_folder", lambda args: None)
    numbers = demo.main([str(tmp_path), "--quick"])
    assert numbers["gpt2"] is None and "were not on the machine" in numbers["gpt2_sentence"]
    assert "`python -m tinyattn download gpt2` (548 MB) gets them" in capsys.readouterr().out


def test_a_missing_checkpoint_is_named(tmp_path):
    with pytest.raises(SystemExit, match=r"^17_logit_lens.py: there is no checkpoint"):
        demo.main([str(tmp_path), "--checkpoint", str(tmp_path / "none.npz")])


def test_the_readme_entry_and_the_picture(run):
    numbers, folder = run
    assert json.loads(json.dumps(numbers)) == numbers
    run_time = dict(wall_seconds=1.0, processor_seconds=1.0, cpu_count=2, load_average=1.0)
    entry = regenerate.readme_entry("17_logit_lens", {"17_logit_lens": {**numbers, **run_time}})
    assert entry.startswith("17. [`17_logit_lens.py`]")
    assert numbers["cross_entropy_shown"] in " ".join(entry.split())
    pytest.importorskip("matplotlib")
    assert (folder / "logit_lens.png").stat().st_size > 10_000
