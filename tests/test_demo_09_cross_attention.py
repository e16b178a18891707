"""Demo 9 in its quick mode: the toy translation data, and what the trained encoder-decoder's
attention weights are (causal self-attention, cross-attention over the real source words)."""
import importlib

import numpy as np
import pytest
from references import run_quick

demo = importlib.import_module("09_cross_attention")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("cross_attention")
    return (*run_quick(demo, folder), folder)


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
    numbers, printed, _ = quick_run
    assert numbers["steps"] == demo.QUICK["steps"]
    assert numbers["held_out_loss"] < 0.5 * numbers["held_out_loss_start"]
    assert numbers["per_word"] > 0.3                     # chance: 1 in 20 words
    assert 0 <= numbers["exact_match"] <= numbers["per_word"]
    assert max(numbers[f"cross_{head}"] for head in demo.HEADS) > 0.5
    for head in demo.HEADS:
        assert sum(numbers[f"self_{head}_{kind}"] for kind in demo.SELF_KINDS) == pytest.approx(1)
    assert "sentences right" in printed and f"{numbers['per_word']:.1%}" in printed


def test_self_attention_is_causal_and_cross_attention_skips_padding(quick_run):
    numbers = quick_run[0]
    assert numbers["largest_weight_on_a_later_word"] == 0.0
    assert numbers["largest_weight_on_padding"] == 0.0
    assert numbers["largest_row_sum_error"] < 1e-5


def test_where_heads_look_counts_each_target_word_once():
    alignment = np.array([[1, 0, -1]])                       # two words, then the end token
    weights = {"self": [np.zeros((1, demo.NUM_HEADS, 3, 3))],
               "cross": [np.zeros((1, demo.NUM_HEADS, 3, 2))]}
    weights["cross"][0][0, 0, [0, 1], [1, 0]] = 1.0          # head 1 follows the alignment
    weights["cross"][0][0, 1, :, 0] = 1.0                    # head 2 stays on source word 0
    weights["self"][0][0, 0, :, 0] = 1.0                     # head 1 on the start token
    weights["self"][0][0, 1, [0, 1, 2], [0, 1, 2]] = 1.0     # head 2: on itself (row 0: start)
    cross_attention, self_attention = demo.where_heads_look(weights, alignment)
    assert cross_attention == {"L1H1": 1.0, "L1H2": 0.5}
    assert self_attention["L1H1"] == {"start_token": 1.0, "itself": 0.0, "previous": 0.0,
                                      "elsewhere": 0.0}
    assert self_attention["L1H2"] == {"start_token": 0.5, "itself": 0.5, "previous": 0.0,
                                      "elsewhere": 0.0}


def test_the_demo_draws_its_picture(quick_run):
    pytest.importorskip("matplotlib")
    picture = quick_run[2] / "cross_attention.png"
    assert picture.stat().st_size > 10_000
