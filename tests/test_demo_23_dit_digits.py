"""Demo 23 (a DiT trained with DDPM on scikit-learn's digits, sampled, its samples judged by demo
22's ViT and by their distance to the training images; adaLN-Zero against cross-attention at
equal parameters), in its quick mode: what it prints, the cross-attention model, the matched
sizes and the measures on cases worked by hand."""
import contextlib
import importlib
import io

import numpy as np
import pytest

import tinyattn as ta
from tinyattn.diffusion import DDPMSchedule

pytest.importorskip("sklearn", reason="scikit-learn holds the digits: pip install scikit-learn")
demo = importlib.import_module("23_dit_digits")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The quick run's numbers, what it printed, and its output folder."""
    folder = tmp_path_factory.mktemp("demo23")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        numbers = demo.main([str(folder), "--quick"])
    return numbers, printed.getvalue(), folder


def test_the_table_prints_each_model_and_guidance_with_its_numbers(run):
    numbers, printed, _ = run
    flat = " ".join(printed.split())
    for key, name in (("adaln", "adaLN-Zero"), ("cross", "cross-attention")):
        for suffix, guidance in (("", "None"), ("_guided", str(demo.GUIDANCE))):
            assert (f"{name} {numbers[f'loss_{key}']:.4f} {guidance} "
                    f"{numbers[f'recognised_{key}{suffix}']:.1%} "
                    f"{numbers[f'distance_{key}{suffix}']:.3f} "
                    f"{numbers[f'closest_{key}{suffix}']:.3f} "
                    f"{numbers[f'step_ms_{key}']:.1f}") in flat
    assert f"costs {numbers['step_ratio_cross']:.2f}x" in flat
    assert f"median {numbers['distance_held_out']:.3f}" in flat
    assert numbers["step_ratio_cross"] == pytest.approx(
        numbers["step_ms_cross"] / numbers["step_ms_adaln"])


def test_the_two_models_have_equal_parameters_as_near_as_the_width_allows(run):
    numbers, printed, _ = run
    E, L = demo.SETTINGS.hidden_size, demo.SETTINGS.num_layers
    assert abs(numbers["parameters_cross"] - numbers["parameters_adaln"]) <= (2 * E + 1) * L / 2
    count = demo.parameter_count(demo.CrossAttentionDiT(demo.SETTINGS, numbers["cross_hidden_dim"],
                                                        dtype=np.float32))
    assert count == numbers["parameters_cross"]
    assert (f"adaLN-Zero (nn.DiT) {numbers['parameters_adaln']:,}; cross-attention "
            f"{numbers['parameters_cross']:,}") in printed


def test_both_models_start_from_the_same_loss_and_train_on_the_same_noise(run):
    """Both output Linears start at zero: at step 0 both predict no noise, so their held-out
    losses are equal, the mean square of the same noise."""
    numbers, _, _ = run
    assert numbers["losses_adaln"][0] == numbers["losses_cross"][0]
    assert numbers["losses_adaln"][-1] < numbers["losses_adaln"][0]
    assert numbers["losses_cross"][-1] < numbers["losses_cross"][0]


def test_the_cross_attention_block_is_its_three_residual_branches():
    ta.manual_seed(0)
    block = demo.CrossAttentionBlock(8, 2, 12, dtype=np.float64)
    random = np.random.default_rng(0)
    x, condition = (ta.tensor(random.standard_normal(shape)) for shape in ((2, 5, 8), (2, 2, 8)))
    expected = x + block.attn(block.ln1(x))[0]
    expected = expected + block.cross(block.ln2(expected), condition)[0]
    expected = expected + block.mlp(block.ln3(expected))
    np.testing.assert_allclose(block(x, condition).data, expected.data, rtol=1e-12)
    # the patches read the condition: another condition, another output
    other = ta.tensor(random.standard_normal((2, 2, 8)))
    assert not np.allclose(block(x, other).data, block(x, condition).data)


def test_the_cross_attention_model_reads_the_timestep_and_the_class():
    ta.manual_seed(0)
    model = demo.CrossAttentionDiT(demo.SETTINGS, 32, dtype=np.float64)
    assert (model.out.weight.data == 0).all()          # starts at "no noise", as DiT
    model.out.weight.data[...] = np.random.default_rng(1).standard_normal(
        model.out.weight.shape) * 0.1
    x = ta.tensor(np.random.default_rng(0).standard_normal((2, 1, 8, 8)))
    base = model(x, np.array([3, 3]), np.array([1, 1])).data
    assert base.shape == (2, 1, 8, 8)
    assert not np.allclose(model(x, np.array([50, 50]), np.array([1, 1])).data, base)
    assert not np.allclose(model(x, np.array([3, 3]), np.array([2, 2])).data, base)
    # the null class is the table's last row
    assert model.classes.weight.shape[0] == demo.CLASSES + 1
    model(x, np.array([3, 3]), np.array([demo.CLASSES, 0]))


def test_the_cross_attention_model_gradchecks_whole():
    """Float64, a random upstream gradient (gradcheck's): the images and every parameter."""
    ta.manual_seed(0)
    settings = demo.SETTINGS.__class__(sample_size=4, patch_size=2, in_channels=1,
                                       out_channels=1, num_layers=2, num_heads=2, head_dim=4,
                                       num_classes=3)
    model = demo.CrossAttentionDiT(settings, 6, dtype=np.float64)
    model.out.weight.data[...] = np.random.default_rng(1).standard_normal(model.out.weight.shape)
    images = ta.tensor(np.random.default_rng(0).standard_normal((2, 1, 4, 4)),
                       requires_grad=True)

    def predicted_noise(*leaves):
        return model(images, np.array([1, 7]), np.array([0, 3]))
    assert ta.gradcheck(predicted_noise, [images, *model.parameters()], atol=1e-7, rtol=1e-5)


def test_the_null_share_of_labels_is_replaced():
    labels = np.arange(10000) % 10
    noised = demo.noised_labels(labels, np.random.default_rng(0))
    replaced = noised == demo.CLASSES
    assert 0.09 < replaced.mean() < 0.11
    np.testing.assert_array_equal(noised[~replaced], labels[~replaced])


def test_the_held_out_loss_uses_the_same_noise_each_time():
    ta.manual_seed(0)
    model = demo.CrossAttentionDiT(demo.SETTINGS, 16, dtype=np.float32)
    schedule = DDPMSchedule(20, beta_end=demo.BETA_END)
    images = np.random.default_rng(0).uniform(-1, 1, (4, 1, 8, 8)).astype(np.float32)
    labels = np.arange(4)
    first = demo.held_out_loss(model, schedule, images, labels)
    assert demo.held_out_loss(model, schedule, images, labels) == first
    # the model predicts zero at first: the loss is the noise's mean square
    noise_random = np.random.default_rng(demo.HELD_OUT_SEED)
    noise_random.integers(0, 20, 4)
    noise = noise_random.standard_normal(images.shape).astype(np.float32)
    assert first == pytest.approx(float((noise ** 2).mean()), rel=1e-6)


def test_nearest_distances_and_recognised_on_cases_worked_by_hand():
    references = np.zeros((3, 1, 8, 8))
    references[1] += 1.0
    references[2, 0, 0, 0] = 2.0
    images = np.zeros((2, 1, 8, 8))
    images[0] += 0.75                                  # nearest: all ones, 0.25 x 8
    images[1, 0, 0, 0] = 1.5                           # nearest: the one pixel of 2, 0.5
    np.testing.assert_allclose(demo.nearest_distances(images, references), [2.0, 0.5])

    class Says(ta.nn.Module):
        def forward(self, images):
            logits = np.zeros((images.shape[0], demo.CLASSES))
            logits[:, 3] = 1.0
            return ta.tensor(logits)

    assert demo.recognised(Says(), np.zeros((4, 1, 8, 8)), np.array([3, 3, 1, 3])) == 0.75


def test_the_mosaic_puts_each_class_on_its_row_framed():
    images = np.zeros((20, 1, 8, 8), dtype=np.float32)
    for n in range(20):
        images[n, 0, n % 8, 0] = 1.0            # sample n (class n // 2, column n % 2)
    picture = demo.mosaic(images, 2)
    assert picture.shape == (100, 20)
    for n in range(20):
        row, column = n // 2, n % 2
        cell = picture[10 * row:10 * row + 10, 10 * column:10 * column + 10]
        np.testing.assert_array_equal(cell[1:-1, 1:-1], images[n, 0])
        assert (cell[0] == -1).all() and (cell[:, -1] == -1).all()


def test_samples_come_class_by_class():
    ta.manual_seed(0)
    model = demo.CrossAttentionDiT(demo.SETTINGS, 16, dtype=np.float32)
    images, labels = demo.samples_of(model, DDPMSchedule(3, beta_end=0.1), 2, None)
    assert images.shape == (20, 1, 8, 8) and images.dtype == np.float32
    np.testing.assert_array_equal(labels, np.repeat(np.arange(10), 2))


def test_the_entry_fills_from_the_numbers(run):
    numbers, _, _ = run
    entry = demo.PAGE_ENTRY.format(**numbers)
    assert f"{numbers['parameters_cross']:,}" in entry


def test_the_pictures_are_drawn(run):
    pytest.importorskip("matplotlib")
    for name in ("dit_digits_samples.png", "dit_digits_training.png"):
        assert (run[2] / name).stat().st_size > 10_000

