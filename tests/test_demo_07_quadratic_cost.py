"""The quadratic-cost demo, in its quick mode: its measured numbers show what it claims (memory
only: tracemalloc counts the same bytes on every run, while times move with the machine's load)."""
import importlib
import json

import numpy as np
import pytest

import tinyattn.functional as F

demo = importlib.import_module("07_quadratic_cost")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """The quick run's numbers and output folder."""
    folder = tmp_path_factory.mktemp("quadratic_cost")
    return demo.main([str(folder), "--quick"]), folder


def test_flash_computes_what_plain_attention_computes(quick_run):
    numbers, _ = quick_run
    assert numbers["flash_max_difference"] < 1e-12
    assert numbers["flash_relative_error"] < 1e-12


def test_block_sparse_attention_computes_sdpa_under_its_layouts_mask(quick_run):
    numbers, _ = quick_run
    assert numbers["block_sparse_max_difference"] < 1e-12
    assert numbers["block_sparse_relative_error"] > 0.1         # not plain attention


def test_block_sparse_attention_visits_a_few_of_the_causal_pairs(quick_run):
    numbers, _ = quick_run
    assert numbers["sparse_length"] == 2048                     # the quick run's largest length
    # 32 blocks of 64: 528 pairs on or below the diagonal; 32 local and 31 more global
    assert (numbers["block_sparse_pairs"], numbers["causal_pairs"]) == (63, 528)
    assert numbers["block_sparse_vs_flash"] > 0


def test_sliding_window_and_linear_attention_compute_other_functions(quick_run):
    numbers, _ = quick_run
    assert numbers["sliding_first_window_max_difference"] < 1e-12   # the window holds every key
    assert numbers["sliding_relative_error"] > 0.1
    assert numbers["linear_relative_error"] > 0.1
    assert 0.1 < numbers["weight_outside_window_mean"] < numbers["weight_outside_window_last"] < 1


def test_plain_memory_grows_quadratically_the_others_linearly(quick_run):
    numbers, _ = quick_run
    assert 1.7 < numbers["slope_memory_plain"] < 2.1
    for name in ("flash", "block_sparse", "sliding", "linear"):
        assert numbers[f"slope_memory_{name}"] < 1.1
        assert numbers["slope_memory_plain"] > numbers[f"slope_memory_{name}"] + 0.6
        assert numbers[f"{name}_memory_ratio"] > 2


def test_plain_attention_is_skipped_past_the_budget_and_the_table_says_so(quick_run, capsys):
    numbers, _ = quick_run
    assert numbers["plain_skipped_from"] == numbers["largest_length"]
    assert numbers["plain_predicted_gib"] > numbers["budget_gib"] > numbers["plain_peak_gib"]
    assert numbers["peak_mib_plain"][-1] is None and None not in numbers["peak_mib_flash"]
    budget = 600_000          # bytes: between plain SDPA's predicted peaks at L = 64 and 128
    costs = demo.measure_costs([32, 64, 128], budget, quick=True)
    assert ["plain" in cost["peaks"] for cost in costs.values()] == [True, True, False]
    assert costs[128]["plain_predicted"] == pytest.approx(costs[64]["peaks"]["plain"] * 4)
    demo.print_costs(costs, budget, demo.cost_numbers(costs))
    out = capsys.readouterr().out
    assert "skipped" in out and "at L = 128" in out


def test_each_pattern_is_drawn_under_its_own_name():
    length, stride, block = demo.PATTERN_LENGTH, demo.PATTERN_STRIDE, demo.PATTERN_BLOCK
    patterns = demo.attention_patterns(length)
    titles = {" ".join(title.split()): mask for title, mask in patterns.items()}
    np.testing.assert_array_equal(
        titles[f"Sparse Transformer (local + strided, stride {stride})"],
        F.local_mask(length, stride) | F.strided_mask(length, stride))
    i, j = np.indices((length, length))                  # query i, key j
    np.testing.assert_array_equal(
        titles[f"block-sparse (local + global blocks of {block}, causal)"],
        (j <= i) & ((j // block == i // block) | (j // block == 0)))


def test_readme_entry_is_filled_from_the_numbers(quick_run):
    numbers, _ = quick_run
    assert json.loads(json.dumps(numbers)) == numbers            # what regenerate records
    entry = demo.PAGE_ENTRY.format(**numbers)
    assert entry.startswith("7. [`07_quadratic_cost.py`](../demos/07_quadratic_cost.py) — ")
    assert "pictures/quadratic_cost.png" in entry
    assert "pictures/attention_patterns.png" in entry


def test_blas_ran_on_one_thread(quick_run):
    pytest.importorskip("threadpoolctl")          # without it, the demo cannot tell
    numbers, _ = quick_run
    assert numbers["blas_threads"] == 1


def test_pictures_are_written(quick_run):
    pytest.importorskip("matplotlib")
    _, folder = quick_run
    for name in ("quadratic_cost.png", "attention_patterns.png"):
        assert (folder / name).stat().st_size > 10_000
