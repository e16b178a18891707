"""Demo 26 (a T5 translating English number words into German), in its quick mode, and its
pieces: the data, the sinusoidal variant, the alignment."""
import contextlib
import importlib
import io

import numpy as np
import pytest

import tinyattn as ta

demo = importlib.import_module("26_translation")
if demo.num2words is None:
    pytest.skip(demo.MISSING, allow_module_level=True)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The quick run's numbers and output folder, where what it printed is kept (printed.txt)."""
    folder = tmp_path_factory.mktemp("demo26")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        numbers = demo.main([str(folder), "--quick"])
    (folder / "printed.txt").write_text(printed.getvalue())
    return numbers, folder


@pytest.fixture(scope="module")
def tokens():
    return demo.vocabulary(range(demo.NUMBERS))


def small(kind, vocab_size):
    ta.manual_seed(1)
    settings = demo.t5_settings(vocab_size)
    return demo.MODELS[kind](settings, dtype=np.float64)


def test_the_pairs_reorder_and_the_tokens_cover_them(tokens):
    assert demo.english_words(387) == ["three", "hundred", "and", "eighty", "-", "seven"]
    assert demo.german(387) == "dreihundertsiebenundachtzig"
    assert demo.english_words(1234)[:3] == ["one", "thousand", ","]
    assert tokens[:2] == ["<pad>", "</s>"] and len(set(tokens)) == len(tokens)
    assert "#ß" in tokens and "seven" in tokens and "#s" in tokens


def test_encoding_pads_and_ends_each_row(tokens):
    index = {token: i for i, token in enumerate(tokens)}
    sources, mask, targets = demo.encode([7, 387], index)
    assert sources.shape == (2, 7) and targets.shape == (2, 28)
    assert [tokens[i] for i in sources[0, :2]] == ["seven", "</s>"]
    assert np.array_equal(mask[0], [True, True] + [False] * 5) and mask[1].all()
    assert "".join(tokens[i][1:] for i in targets[1, :-1]) == "dreihundertsiebenundachtzig"
    assert targets[1, -1] == demo.EOS and targets[0, 6] == demo.EOS and targets[0, 7] == demo.PAD


def test_the_split_holds_out_a_tenth_and_keeps_the_long_ones_apart():
    training, held_out, longer = demo.split(np.random.default_rng(demo.SEED))
    assert len(held_out) == (len(training) + len(held_out)) // 10
    assert not set(training) & set(held_out) and not set(longer) & set(training)
    assert max(len(demo.german(n)) for n in held_out) <= demo.SHORT
    assert {len(demo.german(n)) for n in longer} == set(range(demo.LONG[0], demo.LONG[1] + 1))


def test_the_loss_falls_and_every_figure_is_a_share(run):
    numbers, _ = run
    for key in ("relative", "sinusoidal"):
        assert numbers[f"{key}_last_loss"] < numbers[f"{key}_first_loss"] - 0.3
        for part in ("greedy", "beam", "longer"):
            assert 0.0 <= numbers[f"{key}_{part}"] <= 1.0
    # the two models differ only by the relative buckets' tables: 2 x 16 buckets x 4 heads
    assert numbers["relative_parameters"] - numbers["sinusoidal_parameters"] == 2 * 16 * 4
    assert numbers["held_out_scored"] == numbers["longer_scored"] == demo.QUICK["evaluated"]


def test_the_sinusoidal_variant_decodes_with_its_cache_as_it_trains(tokens):
    """Step by step through the cache, the logits are those of the whole output at once: the
    positions follow where the cache ends."""
    model = small("sinusoids (2017, Marian)", len(tokens))
    sources = np.array([[5, 6, 7, 1], [8, 9, 1, 0]])
    mask = sources != 0
    outputs = np.array([[0, 30, 31, 32, 33], [0, 34, 35, 36, 37]])
    whole = model(sources, outputs, mask).data                          # (B, T, vocab)
    cache = model.start(sources, mask)
    steps = [model.decode(outputs[:, t:t + 1], cache).data for t in range(outputs.shape[1])]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), whole, rtol=1e-12, atol=1e-12)


def test_the_sinusoidal_variant_sees_positions(tokens):
    """Without positions a bidirectional encoder could not tell "seven hundred" from "hundred
    seven": the logits differ when the input's tokens are swapped."""
    model = small("sinusoids (2017, Marian)", len(tokens))
    outputs = np.array([[0, 30]])
    first = model(np.array([[5, 6, 1]]), outputs).data
    swapped = model(np.array([[6, 5, 1]]), outputs).data
    assert np.abs(first - swapped).max() > 1e-3


def test_the_alignment_reads_the_last_cross_attention(tokens):
    index = {token: i for i, token in enumerate(tokens)}
    model = small("relative buckets (T5)", len(tokens)).eval()
    english, written, weights = demo.alignment(model, 387, index, tokens)
    assert english == demo.english_words(387)
    assert weights.shape == (len(written) + 1, len(english) + 1)
    np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-12)


def test_the_pieces_follow_the_word_each_character_reads():
    weights = np.array([[0.1, 0.9, 0.0], [0.2, 0.8, 0.0], [0.7, 0.3, 0.0], [0.0, 0.0, 1.0]])
    assert demo.read_words(["seven", "ty"], "abc", weights) == [("ab", "ty"), ("c", "seven")]


def test_the_reordering_number_says_units_first():
    assert demo.reordering_number([5, 120, 130, 387, 421]) == 387


def test_it_prints_the_table_and_draws_the_alignment(run):
    numbers, folder = run
    printed = (folder / "printed.txt").read_text()
    assert "Exact-match accuracy: 32 held-out numbers" in printed
    assert f"for {numbers['aligned_number']} (held out)" in printed
    assert "SentencePiece's Unigram model" in printed
    pytest.importorskip("matplotlib")
    assert (folder / "translation_alignment.png").stat().st_size > 5_000


def test_without_num2words_it_says_how_to_install_it_in_one_line(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(demo, "num2words", None)
    assert demo.main([str(tmp_path), "--quick"]) == {"missing": "num2words"}
    assert capsys.readouterr().out == demo.MISSING + "\n"
    assert "`pip install num2words`" in demo.MISSING
    assert list(tmp_path.iterdir()) == []
