"""Demo 13 (softmax, linear, sliding-window and block-sparse attention on associative recall), in
its quick mode: what the question of each variant may see, and the numbers its README entry is
filled from."""
import importlib
import json

import numpy as np
import pytest

import tinyattn as ta

demo = importlib.import_module("13_what_linear_attention_gives_up")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo13")
    return demo.main([str(folder), "--quick"]), folder


def test_recall_batches_ask_about_a_pair_that_is_there():
    keys, values, question, answer = demo.recall_batch(np.random.default_rng(0), 50, 16)
    assert keys.shape == values.shape == (50, 16)
    assert all(len(set(row)) == 16 for row in keys)                 # keys all different
    asked = keys == question[:, None]                               # (50, 16)
    assert asked.sum(axis=1).tolist() == [1] * 50
    assert np.array_equal(values[asked], answer)


def test_the_local_and_global_layout():
    assert demo.local_and_global_layout(4).astype(int).tolist() == [
        [1, 0, 0, 0], [1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 1, 1]]


@pytest.mark.parametrize("name", list(demo.ATTENTION))
def test_the_question_depends_on_exactly_the_pairs_it_sees(name):
    """Changing one pair's token changes the question's output if and only if the variant lets
    the question see that pair: pairs_seen counts what the attention functions really do."""
    num_pairs, width = 40, 8
    random = np.random.default_rng(2)
    x = random.standard_normal((1, num_pairs + 1, width))
    attend = demo.ATTENTION[name]
    with ta.no_grad():
        question = attend(*(ta.tensor(x),) * 3).data[0, -1]
        changes = []
        for pair in range(num_pairs):
            changed = x.copy()
            changed[0, pair] += 1.0
            changes.append(np.abs(attend(*(ta.tensor(changed),) * 3).data[0, -1] - question).max())
    seen = np.array(changes) > 1e-12
    assert seen.sum() == demo.pairs_seen(name, num_pairs)
    expected = {"softmax": range(40), "linear": range(40), "window": range(24, 40),
                "block": [*range(8), *range(32, 40)]}[name]
    assert np.flatnonzero(seen).tolist() == list(expected)


def test_each_run_recalls_and_the_window_and_blocks_see_sixteen_pairs(quick_run):
    numbers, _ = quick_run
    runs = [*demo.ATTENTION, "linear_E16", "linear_E64"]
    assert [demo.run_name("linear", width) for width in demo.LINEAR_WIDTHS] == [
        "linear_E16", "linear", "linear_E64"]
    for run in runs:
        assert all(0 <= numbers[f"recall_{run}_{n}"] <= 1 for n in demo.PAIR_COUNTS)
    for name in ("window", "block"):
        assert numbers[f"seen_{name}_4"] == 4 and numbers[f"seen_{name}_64"] == 16
        assert numbers[f"ceiling_{name}_64"] == pytest.approx(16 / 64 + 48 / 64 / 32)
    assert numbers["seen_softmax_64"] == numbers["seen_linear_64"] == 64
    assert numbers["state_linear"] == 32 * 32 + 32 and numbers["state_window"] == 17 * 64
    assert numbers["state_softmax"] == 65 * 64 and numbers["state_linear_E64"] == 64 * 65


def test_the_verdict_follows_the_numbers():
    def recall(softmax, linear_by_width):
        counts = demo.PAIR_COUNTS
        table = {("softmax", demo.WIDTH): dict.fromkeys(counts, softmax)}
        table.update({("linear", width): {**dict.fromkeys(counts, 0.95), 64: at_64}
                      for width, at_64 in linear_by_width.items()})
        return table
    assert demo.verdict(recall(1.0, {16: 0.2, 32: 0.4, 64: 0.6})).startswith("This run agrees")
    assert demo.verdict(recall(0.5, {16: 0.2, 32: 0.4, 64: 0.6})).endswith(
        ": softmax attention fell under 90% at some count.")
    assert demo.verdict(recall(1.0, {16: 0.2, 32: 0.95, 64: 0.95})).endswith(
        ": linear attention of width 32 did not fall under 90% by 64 pairs.")
    assert demo.verdict(recall(1.0, {16: 0.5, 32: 0.4, 64: 0.6})).endswith(
        ": a wider state did not recall more at 64 pairs.")


def test_the_readme_entry_is_filled_from_flat_json_numbers(quick_run):
    numbers, _ = quick_run
    assert json.loads(json.dumps(numbers)) == numbers
    entry = demo.PAGE_ENTRY.format(**numbers)
    assert entry.startswith("13. [`13_what_linear_attention_gives_up.py`]")
    assert numbers["verdict"] in entry
    assert "](pictures/linear_attention_recall.png)" in entry


def test_the_recall_curves_are_drawn(quick_run):
    pytest.importorskip("matplotlib")
    assert (quick_run[1] / "linear_attention_recall.png").stat().st_size > 10_000
