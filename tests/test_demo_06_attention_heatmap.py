"""Demo 6 (the attention heatmaps of a trained model), in its quick mode."""
import importlib

import numpy as np
import pytest

demo = importlib.import_module("06_attention_heatmap")
HEADS = [f"L{layer}H{head}" for layer in (1, 2) for head in (1, 2)]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo06")
    return demo.main([str(folder), "--quick"]), folder


def test_reversal_batches_hold_the_reversed_digits():
    ids, targets = demo.reversal_batch(np.random.default_rng(0), 5)
    length = demo.LENGTH
    assert ids.shape == targets.shape == (5, 2 * length)
    assert (ids[:, length] == demo.SEPARATOR).all()
    assert (targets[:, :length] == demo.IGNORE).all()
    assert np.array_equal(targets[:, length:], ids[:, :length][:, ::-1])


def test_the_trained_model_reverses_and_a_head_looks_at_the_mirror(run):
    numbers, _ = run
    assert numbers["accuracy"] > 0.5                 # chance is 1 in 10
    assert max(numbers[f"{head}_mirror"] for head in HEADS) > 0.5
    kinds = ("mirror", "beside_mirror", "separator", "itself", "previous", "other")
    for head in HEADS:
        assert sum(numbers[f"{head}_{kind}"] for kind in kinds) == pytest.approx(1.0)


def test_the_weights_are_causal_rows_that_sum_to_one(run):
    numbers, _ = run
    assert numbers["largest_row_sum_error"] < 1e-5
    assert numbers["largest_weight_on_a_later_key"] == 0.0     # no query sees a later key


def test_where_heads_look_counts_each_answer_row_once():
    length = 2 * demo.LENGTH
    weights = np.zeros((1, 1, length, length))
    weights[0, 0, demo.ANSWER_QUERIES, demo.MIRROR_KEYS] = 1.0      # a perfect mirror head
    assert demo.where_heads_look([weights])["L1H1"]["mirror"] == 1.0
    weights[0, 0, demo.ANSWER_QUERIES, demo.LENGTH] = 2.0           # now: all on the separator
    share = demo.where_heads_look([weights])["L1H1"]
    # the separator's own row needs key 7, next to the separator: the first kind that fits counts
    assert share == {"mirror": 0.0, "beside_mirror": 1 / demo.LENGTH,
                     "separator": 1 - 1 / demo.LENGTH, "itself": 0.0, "previous": 0.0,
                     "other": 0.0}


def test_the_heatmaps_are_drawn(run):
    pytest.importorskip("matplotlib")
    picture = run[1] / "attention_heatmap.png"
    assert picture.stat().st_size > 10_000


def test_the_page_holds_the_examples_weights_and_their_gradients(run):
    page = (run[1] / "attention_view.html").read_text()
    assert '"layers":2,"heads":2,"length":16' in page
    assert '"grads":null' not in page
