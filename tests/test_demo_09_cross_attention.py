"""Demo 9 in its quick mode: the toy translation data, and what the trained encoder-decoder's
attention weights are (causal self-attention, cross-attention over the real source words)."""
import importlib

import numpy as np
import pytest
from references import run_quick

demo = importlib.import_module("09_cross_attention")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    return run_quick(demo, tmp_path_factory.mktemp("cross_attention"))


def test_the_toy_language_puts_adjectives_after_nouns_and_the_verb_last():
    words = {"adjective 1": "big", "noun 1": "cat", "verb": "sees", "adjective 2": "small",
             "noun 2": "dog"}
    assert demo.sentence_pair(words) == (["big", "cat", "sees", "small", "dog"],
                                         ["chat", "grand", "chien", "petit", "voit"],
                                         [1, 0, 4, 3, 2])
    words.update({"adjective 1": None, "adjective 2": None, "noun 2": "cat"})
    assert demo.sentence_pair(words) == (["cat", "sees", "cat"], ["chat", "chat", "voit"],
                                         [0, 2, 1])


def test_batches_hold_the_shifted_target_and_skip_the_held_out_sentences():
    held_out, keys = demo.held_out_set(np.random.default_rng(1), 200)
    assert len(keys) == 200 and len(held_out["src"]) == 200
    batch = demo.training_batches(keys)(np.random.default_rng(0), 2000)
    sources = {tuple(row) for row in batch["src"]}
    assert not sources & {tuple(row) for row in held_out["src"]}
    start, end = demo.TARGET_ID[demo.START], demo.TARGET_ID[demo.END]
    assert (batch["tgt_in"][:, 0] == start).all()
    lengths = (batch["tgt_out"] != demo.IGNORE).sum(axis=1)
    rows = np.arange(len(lengths))
    assert (batch["tgt_out"][rows, lengths - 1] == end).all()
    words = (batch["tgt_out"][:, :-1] != end) & (batch["tgt_out"][:, :-1] != demo.IGNORE)
    np.testing.assert_array_equal(batch["tgt_in"][:, 1:][words], batch["tgt_out"][:, :-1][words])
    assert (batch["alignment"][rows, lengths - 1] == -1).all()
    assert (batch["src_mask"].sum(axis=1) == lengths - 1).all()      # one target word per source


def test_the_quick_run_learns_part_of_the_task(quick_run):
    result, printed = quick_run
    curves = result["curves"]
    assert curves["held_out_loss"][-1] < 0.5 * curves["held_out_loss"][0]
    assert result["per_word"] > 0.3                     # chance: 1 in 20 words
    assert 0 <= result["exact_match"] <= result["per_word"]
    assert max(result["cross"].values()) > 0.5
    for shares in result["self"].values():
        assert sum(shares.values()) == pytest.approx(1.0)
    assert "sentences right" in printed and f"{result['per_word']:.1%}" in printed


def test_self_attention_is_causal_and_cross_attention_skips_padding(quick_run):
    result = quick_run[0]
    padding = ~result["held_out"]["src_mask"][:, None, None, :]      # (B, 1, 1, S)
    for self_weights, cross_weights in zip(result["weights"]["self"], result["weights"]["cross"]):
        assert not np.triu(self_weights, k=1).any()
        assert (np.broadcast_to(padding, cross_weights.shape) <= (cross_weights == 0)).all()
        np.testing.assert_allclose(cross_weights.sum(axis=-1), 1.0, atol=1e-5)


def test_the_demo_draws_its_picture(quick_run):
    pytest.importorskip("matplotlib")
    picture = quick_run[0]["picture"]
    assert picture.exists() and picture.stat().st_size > 10_000
