"""Demo 16 (LoRA against full fine-tuning), in its quick mode: what trains and what it costs, the
start every method shares, the saved adapters and the merge, GPT-2 from the fixture; the new text
and the base read from demo 11's checkpoint; and the README entry filled from the numbers."""
import contextlib
import importlib
import io

import numpy as np
import pytest

import regenerate
import tinyattn as ta

demo = importlib.import_module("16_lora")
tiny_gpt = importlib.import_module("11_tiny_gpt")
NAMES = ("full", "r1", "r4", "r16")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo16")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        numbers = demo.main([str(folder), "--quick"])
    return numbers, folder, printed.getvalue()


def test_what_trains_and_adamws_state_for_it(run):
    numbers, _, _ = run
    E, layers = tiny_gpt.SIZES["embed_dim"], tiny_gpt.SIZES["num_layers"]
    assert numbers["trainable_full"] == numbers["base_parameters"]
    for rank in demo.RANKS:     # q, k, v and out in every block: rank * (E + E) each
        assert numbers[f"trainable_r{rank}"] == 4 * layers * rank * (E + E)
    for name in NAMES:          # two float32 moving averages per trained number
        assert numbers[f"optimizer_kilobytes_{name}"] * 1e3 == 2 * 4 * numbers[f"trainable_{name}"]


def test_every_method_starts_from_the_base_and_learns_the_code(run):
    """B = 0: an adapted model computes what the base computes, so every run starts from the
    same two losses, exactly; then each one's loss on the code falls."""
    numbers, _, _ = run
    for name in NAMES:
        assert numbers[f"curve_new_{name}"][0] == numbers["base_new"]
        assert numbers[f"curve_old_{name}"][0] == numbers["base_old"]
        assert numbers[f"new_{name}"] < numbers["base_new"]
        assert numbers[f"learned_{name}"] == numbers["base_new"] - numbers[f"new_{name}"]
        assert numbers[f"forgotten_{name}"] == numbers[f"old_{name}"] - numbers["base_old"]
    assert len(numbers["curve_new_r4"]) == 1 + demo.FINE_TUNE_QUICK["steps"] // \
        demo.FINE_TUNE_QUICK["eval_every"]


def test_the_adapters_saved_alone_are_small_and_merge_to_the_same_logits(run):
    numbers, folder, printed = run
    assert (folder / "lora_r4" / "adapters.safetensors").stat().st_size == \
        numbers["adapters_kilobytes"] * 1e3
    assert numbers["adapters_kilobytes"] * 1e3 < numbers["model_megabytes"] * 1e6 / 20
    assert 0 < numbers["merged_difference"] < 1e-4        # float32 rounding, nothing more
    assert "Merged into the weights (merge_lora)" in printed
    assert (folder / "lora.png").is_file()


def test_gpt2_is_timed_on_the_fixture_in_quick_mode(run):
    numbers, _, printed = run
    assert "the small GPT-2 of tests/fixtures" in printed
    assert (numbers["gpt2_batch"], numbers["gpt2_tokens"]) == (1, 16)
    assert numbers["gpt2_lora_trainable"] == 2 * 4 * demo.GPT2_RANK * (32 + 32)
    assert numbers["gpt2_lora_step_seconds"] > 0 and numbers["gpt2_full_step_seconds"] > 0


def test_the_new_text_leaves_out_what_the_base_cannot_read():
    code, left_out = demo.source_code_text("abcdefghijklmnopqrstuvwxyz ")
    assert set(code) <= set("abcdefghijklmnopqrstuvwxyz ") and left_out > 0
    vocabulary = "".join(sorted(set(tiny_gpt.documentation_text())))
    code, left_out = demo.source_code_text(vocabulary)
    assert "def " in code and left_out < len(code) / 1000


def test_the_base_can_be_demo_11s_checkpoint(tmp_path, capsys):
    vocabulary = "".join(sorted(set(tiny_gpt.documentation_text())))
    ta.manual_seed(0)
    model = tiny_gpt.build_model(len(vocabulary), tiny_gpt.POSITIONAL, **tiny_gpt.SIZES)
    tiny_gpt.save_checkpoint(model, vocabulary, tmp_path / "tiny_gpt.npz")
    base = demo.read_base(tmp_path / "tiny_gpt.npz", vocabulary)
    ids = np.array([[1, 2, 3]])
    np.testing.assert_array_equal(base(ids).data, model.eval()(ids).data)
    assert "The base: demo 11's checkpoint" in capsys.readouterr().out
    small = tiny_gpt.build_model(len(vocabulary), tiny_gpt.POSITIONAL, embed_dim=16, num_heads=2,
                                 num_layers=1, max_len=tiny_gpt.CONTEXT)
    tiny_gpt.save_checkpoint(small, vocabulary, tmp_path / "small.npz")
    with pytest.raises(SystemExit, match="is not demo 11's model on this Python's documentation"):
        demo.read_base(tmp_path / "small.npz", vocabulary)
    with pytest.raises(SystemExit, match="16_lora.py: "):
        demo.read_base(tmp_path / "missing.npz", vocabulary)


def test_the_readme_entry_takes_the_demos_numbers(run):
    numbers, _, _ = run
    recorded = {**numbers, "wall_seconds": 1.0, "processor_seconds": 1.0, "cpu_count": 2,
                "load_average": 1.0}
    entry = regenerate.readme_entry("16_lora", {"16_lora": recorded})
    assert entry.startswith("16. [`16_lora.py`](../demos/16_lora.py)")
    for name in NAMES:
        assert f"{numbers[f'new_{name}']:.2f}" in entry
    assert f"{numbers['trainable_r4']:,}" in entry and "pictures/lora.png" in entry


def test_the_pictures_title_says_the_way_its_axes_go(monkeypatch):
    """The code's loss falls to the right (its axis is inverted): the title says so."""
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt
    drawn = []

    def save_figure(figure, path, **options):
        drawn.append(figure.axes[0])
        plt.close(figure)

    monkeypatch.setattr(demo.demo_tools, "save_figure", save_figure)
    history = {"new": [2.4, 2.0], "old": [1.7, 1.8], "trainable": 10, "steps": [0, 5]}
    demo.plot({name: history for name in NAMES}, None)
    axes = drawn[0]
    assert axes.xaxis_inverted() and axes.get_xlim()[0] > axes.get_xlim()[1]
    assert "learned (right)" in axes.get_title() and "falls to the right" in axes.get_xlabel()

