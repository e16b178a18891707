"""Every demo opens as a notebook: jupytext reads its `# %%` cells (nothing but the .py file is
committed), and a demo converted with jupytext and run top to bottom in a real Jupyter kernel
runs its quick version and prints what it measures. jupytext, nbclient and ipykernel come with
the dev extra; without them the tests that need them skip, saying so."""
import importlib
import pathlib
import re
import shutil
import sys

import pytest

import demo_tools
import regenerate

MAIN_CALL = 'if __name__ == "__main__":\n    main()'
EXECUTED = "04_sqrt_dk"                 # a quick demo, converted and run in a kernel


def read_notebook(path):
    jupytext = pytest.importorskip("jupytext", reason="jupytext is not installed (dev extra)")
    return jupytext.read(path, fmt="py:percent")


@pytest.mark.parametrize("name", regenerate.demo_names())
def test_the_demo_is_a_notebook_of_cells_that_ends_by_running_main(name):
    cells = read_notebook(regenerate.DEMOS / f"{name}.py").cells
    markdown = [cell.source for cell in cells if cell.cell_type == "markdown"]
    code = [cell.source for cell in cells if cell.cell_type == "code"]
    assert markdown and all(text.strip() for text in markdown)
    assert len(code) >= 4                   # the imports, the demo's parts, main, its call
    assert code[0].startswith('"""Demo ')   # the docstring opens the first cell
    assert code[-1] == MAIN_CALL


def test_every_demo_parses_its_command_line_through_demo_tools():
    """So that in a notebook every demo gets the kernel's quick run (demo 14 adds arguments)."""
    for name in regenerate.demo_names():
        source = (regenerate.DEMOS / f"{name}.py").read_text()
        assert "argparse" not in source and "sys.argv" not in source, name
        assert ("demo_tools.parse(__doc__, argv)" in source
                or "demo_tools.argument_parser(__doc__)" in source), name


def test_in_a_kernel_main_without_arguments_runs_quick_and_says_so(monkeypatch, capsys):
    monkeypatch.setattr(demo_tools, "in_jupyter_kernel", lambda: True)
    monkeypatch.setattr(sys, "argv", ["ipykernel_launcher.py", "-f", "kernel-1.json"])
    args = demo_tools.parse("Demo 0.", None)
    assert args.quick and args.output == demo_tools.ROOT / "tinyattn-demos"
    assert capsys.readouterr().out.startswith("(In a notebook this demo runs its quick version")
    full = demo_tools.parse("Demo 0.", [])                       # main([]) in a cell
    assert not full.quick and full.output == demo_tools.ROOT / "tinyattn-demos"
    assert capsys.readouterr().out == ""
    gpt2 = importlib.import_module("14_gpt2")
    assert gpt2.command_line(None).weights == str(gpt2.FIXTURE)   # quick: the small GPT-2


def test_outside_a_kernel_the_command_line_is_read_as_before(monkeypatch, capsys):
    assert not demo_tools.in_jupyter_kernel()
    monkeypatch.setattr(sys, "argv", ["04_sqrt_dk.py"])
    args = demo_tools.parse("Demo 0.", None)
    assert not args.quick and args.output == pathlib.Path("tinyattn-demos")
    monkeypatch.setattr(sys, "argv", ["04_sqrt_dk.py", "out", "--quick"])
    args = demo_tools.parse("Demo 0.", None)
    assert args.quick and args.output == pathlib.Path("out")
    assert "notebook" not in capsys.readouterr().out


def test_a_demo_converted_to_a_notebook_runs_quick_in_a_kernel(tmp_path):
    """Demo 4 and demo_tools are copied to tmp_path/demos/, the kernel's current directory, as a
    notebook's is its folder; the pictures then go to tmp_path/tinyattn-demos/, not the
    checkout's. A row of the printed table is compared with the same measurement made here."""
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed (dev extra)")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (dev extra)")
    demos = tmp_path / "demos"
    demos.mkdir()
    for name in (f"{EXECUTED}.py", "demo_tools.py"):
        shutil.copy(regenerate.DEMOS / name, demos)
    notebook = read_notebook(demos / f"{EXECUTED}.py")
    nbclient.NotebookClient(notebook, timeout=60, kernel_name="python3",
                            resources={"metadata": {"path": str(demos)}}).execute()
    printed = "".join(output.get("text", "") for cell in notebook.cells
                      for output in cell.get("outputs", []))

    assert printed.startswith("(In a notebook this demo runs its quick version, writing any "
                              f"pictures to {tmp_path / 'tinyattn-demos'};")
    demo = importlib.import_module(EXECUTED)
    assert f"d_k = {', '.join(map(str, demo.KEY_DIMS_QUICK))}, each" in printed
    measured = demo.measure(*demo.random_inputs(1024), demo.SCALINGS["unscaled"])
    row = re.search(r"^ *1024 +unscaled +(\S+) +(\S+) +(\S+) +(\S+)$", printed, re.MULTILINE)
    assert row is not None, f"no row of d_k = 1024, unscaled, in what it printed:\n{printed}"
    assert row.groups() == (f"{measured['score_std']:.2f}", f"{measured['mean_max_weight']:.3f}",
                            f"{measured['median_ratio']:.2e}",
                            f"{measured['saturated_fraction']:.1%}")
    assert re.search(r"falls below half the scaled one\s+at d_k = 256\.", printed)
    if "matplotlib is not installed" not in printed:
        assert (tmp_path / "tinyattn-demos" / "sqrt_dk.png").stat().st_size > 10_000
