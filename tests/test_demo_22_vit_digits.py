"""Demo 22 (a ViT learns scikit-learn's digits, against an MLP and a one-layer ViT of the same
parameters), in its quick mode: what it prints, the sizes it matches, the rollout and the
positions' measures on cases worked by hand."""
import contextlib
import importlib
import io

import numpy as np
import pytest

import tinyattn as ta

pytest.importorskip("sklearn", reason="scikit-learn holds the digits: pip install scikit-learn")
demo = importlib.import_module("22_vit_digits")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The quick run's numbers, what it printed, and its output folder."""
    folder = tmp_path_factory.mktemp("demo22")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        numbers = demo.main([str(folder), "--quick"])
    return numbers, printed.getvalue(), folder


def test_the_digits_are_split_once_and_scaled_to_plus_minus_one():
    train_images, train_labels, held_images, held_labels = demo.digits()
    assert train_images.shape == (1297, 1, 8, 8) and held_images.shape == (500, 1, 8, 8)
    assert train_images.dtype == np.float32
    assert train_images.min() == -1.0 and train_images.max() == 1.0
    assert set(held_labels) == set(range(10)) and len(train_labels) == 1297
    again = demo.digits()
    np.testing.assert_array_equal(again[2], held_images)


def test_the_table_prints_each_model_with_its_numbers(run):
    numbers, printed, _ = run
    flat = " ".join(printed.split())
    for key, name in (("vit", "ViT"), ("mlp", "MLP"), ("one_layer", "one-layer ViT")):
        assert (f"{name} {numbers[f'parameters_{key}']:,} {numbers[f'accuracy_{key}']:.1%} "
                f"{numbers[f'loss_{key}']:.3f}") in flat
    assert (f"{numbers['rollout_on_ink']:.1%} on patches with ink "
            f"({numbers['ink_share']:.1%} of the patches)") in flat
    assert (f"of its row {numbers['row_cosine']:.3f}, of its column {numbers['column_cosine']:.3f}"
            f", of neither {numbers['other_cosine']:.3f}") in flat
    assert f"for {numbers['nearest_in_line']} of 16 patches" in flat


def test_the_three_models_have_about_the_same_parameters(run):
    numbers, _, _ = run
    vit = numbers["parameters_vit"]
    assert vit == demo.parameter_count(demo.vit())
    # the MLP: 64 h + h + 10 h + 10 at the nearest h
    assert numbers["parameters_mlp"] == 75 * numbers["mlp_hidden"] + 10
    assert abs(numbers["parameters_mlp"] - vit) <= 75 / 2
    # the one-layer ViT: the nearest of the widths a step of 4 apart
    width = numbers["one_layer_width"]
    for other in (width - 4, width + 4):
        assert (abs(demo.parameter_count(demo.one_layer_vit(other)) - vit)
                >= abs(numbers["parameters_one_layer"] - vit))
    assert abs(numbers["parameters_one_layer"] - vit) < 0.05 * vit


def test_the_mlp_reads_the_64_pixels():
    ta.manual_seed(0)
    model = demo.MLP(64, 5, 10, dtype=np.float64)
    images = np.random.default_rng(0).standard_normal((3, 1, 8, 8))
    hidden = images.reshape(3, 64) @ model.hidden.weight.data.T + model.hidden.bias.data
    gelu = ta.functional.gelu(ta.tensor(hidden)).data
    expected = gelu @ model.out.weight.data.T + model.out.bias.data
    np.testing.assert_allclose(model(ta.tensor(images)).data, expected, rtol=1e-12)


def test_rollout_of_one_layer_mixes_the_weights_with_the_identity():
    """One layer: the class token's row of (A + I) / 2, A the heads' mean."""
    random = np.random.default_rng(0)
    weights = random.random((2, 3, 5, 5))
    weights /= weights.sum(axis=-1, keepdims=True)
    expected = 0.5 * weights.mean(axis=1)[:, 0, 1:]          # the identity adds to token 0 only
    np.testing.assert_allclose(demo.attention_rollout([weights]), expected, rtol=1e-12)


def test_rollout_multiplies_the_layers_first_layer_on_the_right():
    """Layer 1: every token reads token 2; layer 2: every token reads token 1. The rollout is
    (A2 + I) / 2 times (A1 + I) / 2, and its class row sums to 1 over all the tokens."""
    T = 3
    first = np.zeros((1, 1, T, T))
    first[..., 2] = 1.0                              # every token reads token 2
    second = np.zeros((1, 1, T, T))
    second[0, 0, :, 1] = 1.0                         # every token reads token 1
    mixed1 = 0.5 * first[0, 0] + 0.5 * np.eye(T)
    mixed2 = 0.5 * second[0, 0] + 0.5 * np.eye(T)
    expected = (mixed2 @ mixed1)[0, 1:]
    np.testing.assert_allclose(demo.attention_rollout([first, second])[0], expected)
    # and not the other order
    assert not np.allclose((mixed1 @ mixed2)[0, 1:], expected)
    rows = demo.attention_rollout([first, second]).sum() + (mixed2 @ mixed1)[0, 0]
    assert rows == pytest.approx(1.0)


def test_the_rollout_is_read_from_the_models_attention():
    ta.manual_seed(0)
    model = demo.vit(np.float64)
    images = np.random.default_rng(0).uniform(-1, 1, (2, 1, 8, 8))
    rollout = demo.rollout_of(model, images)
    assert rollout.shape == (2, 16) and (rollout > 0).all() and (rollout.sum(axis=1) < 1).all()


def test_the_positions_measures_on_a_grid_of_known_similarity():
    assert demo.neighbours(3).sum(axis=1).tolist() == [3, 5, 3, 5, 8, 5, 3, 5, 3]
    rows, columns = np.divmod(np.arange(16), 4)
    # similarity 1 in the same row, 0.5 in the same column, -0.1 elsewhere
    similarity = np.where(rows[:, None] == rows, 1.0,
                          np.where(columns[:, None] == columns, 0.5, -0.1))
    measures = demo.position_measures(similarity)
    assert (measures["row_cosine"], measures["column_cosine"], measures["other_cosine"]) == (
        1.0, 0.5, pytest.approx(-0.1))
    # each patch: 2 or 3 neighbours in its row (1.0), as many in its column (0.5), the rest
    near = demo.neighbours(4)
    assert measures["neighbour_cosine"] == pytest.approx(similarity[near].mean())
    assert measures["nearest_in_line"] == 16
    # falling with the distance on the diagonals only: every nearest is off its row and column
    diagonal = -np.abs((rows - columns)[:, None] - (rows - columns)) - 5.0 * (
        (rows[:, None] == rows) | (columns[:, None] == columns))
    assert demo.position_measures(diagonal)["nearest_in_line"] == 0


def test_position_similarity_is_the_cosine_of_the_learned_rows():
    ta.manual_seed(0)
    model = demo.vit(np.float64)
    similarity = demo.position_similarity(model)
    table = model.positions.data[0, 1:]
    assert similarity.shape == (16, 16)
    np.testing.assert_allclose(np.diag(similarity), 1.0, rtol=1e-12)
    assert similarity[0, 5] == pytest.approx(
        table[0] @ table[5] / np.linalg.norm(table[0]) / np.linalg.norm(table[5]), rel=1e-12)


def test_the_entry_fills_from_the_numbers(run):
    numbers, _, _ = run
    entry = demo.PAGE_ENTRY.format(**numbers)
    assert f"{numbers['parameters_vit']:,} parameters" in entry


def test_the_pictures_are_drawn(run):
    pytest.importorskip("matplotlib")
    for name in ("vit_digits_rollout.png", "vit_digits_positions.png"):
        assert (run[2] / name).stat().st_size > 10_000
