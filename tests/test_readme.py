"""The list of demos on docs/demos.md is what `python dev/regenerate.py` writes: each demo's
PAGE_ENTRY filled with the numbers recorded in docs/pictures/results.json and ended by the run
time regenerate measured, so editing the page, a template or the numbers alone fails here; every
picture the README and the docs pages show exists; no demo types a run time of its own; and every
whole program the README shows runs. No demo runs here."""
import code
import importlib
import json
import re
import string

import pytest

import regenerate

# "13 s", "4-6 s", "2.5 min", "10 seconds": a duration typed into a text
TYPED_DURATION = re.compile(r"\d(?:[\d.,]*\d)?(?:\s*-\s*\d[\d.,]*)?"    # 13, 4-6, 2.5
                            r"\s*(?:s|min|minutes?|seconds?)\b")


def recorded():
    return json.loads(regenerate.RESULTS.read_text())


def test_every_demo_has_recorded_numbers_or_an_entry_without_them_and_no_other():
    assert set(recorded()) <= set(regenerate.demo_names())
    for name in set(regenerate.demo_names()) - set(recorded()):
        assert hasattr(importlib.import_module(name), "PAGE_ENTRY_WITHOUT_RESULTS"), name


def test_a_demo_that_cannot_run_here_is_left_out_and_said(monkeypatch, capsys):
    demo = importlib.import_module("14_gpt2")
    monkeypatch.setattr(demo, "can_run_in_full", lambda: False)
    assert "14_gpt2" not in regenerate.chosen([]) and "11_tiny_gpt" in regenerate.chosen([])
    assert "leaving out demo 14_gpt2, which cannot run in full" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="demo 14_gpt2 cannot run in full on this machine"):
        regenerate.chosen(["14"])
    monkeypatch.setattr(demo, "can_run_in_full", lambda: True)
    assert regenerate.chosen(["14"]) == ["14_gpt2"]


def test_an_entry_without_results_has_no_run_time_and_no_number():
    entry = regenerate.readme_entry("14_gpt2", {})
    assert entry.startswith("14. [`14_gpt2.py`]") and "Full run" not in entry
    assert "python -m tinyattn download gpt2" in entry


def test_every_demo_has_its_measured_run_time():
    for name, numbers in recorded().items():
        assert all(isinstance(numbers.get(field), (int, float))
                   for field in regenerate.RUN_TIME_NAMES), name
        assert numbers["wall_seconds"] > 0 and numbers["processor_seconds"] > 0, name


def test_the_demo_list_is_the_templates_filled_with_the_recorded_numbers():
    _, section, _ = regenerate.split_page(regenerate.PAGE.read_text())
    assert section == regenerate.readme_section(recorded())


def test_the_run_time_ends_each_entrys_first_paragraph():
    numbers = {"wall_seconds": 20.4, "processor_seconds": 0.64, "cpu_count": 2,
               "load_average": 3.14}
    assert regenerate.run_time(numbers) == ("Full run: 0.6 s of processor time, 20 s wall, on a "
                                            "2-core machine with a load average of 3.1.")
    numbers.update(processor="AMD EPYC", blas="BLAS: openblas 0.3.31, Haswell kernels")
    assert regenerate.run_time(numbers) == ("Full run: 0.6 s of processor time, 20 s wall, on a "
                                            "2-core machine (AMD EPYC; BLAS: openblas 0.3.31, "
                                            "Haswell kernels) with a load average of 3.1.")
    for name, numbers in recorded().items():
        first_paragraph = regenerate.readme_entry(name, recorded()).split("\n\n")[0]
        assert " ".join(first_paragraph.split()).endswith(regenerate.run_time(numbers))


def test_no_demo_template_uses_a_name_of_regenerates_own_run_time():
    """A demo's number named like one of regenerate's (processor_seconds: the whole run's) would
    be overwritten by it, and its entry would quote the wrong measurement."""
    for name in regenerate.demo_names():
        template = importlib.import_module(name).PAGE_ENTRY
        fields = {field for _, field, _, _ in string.Formatter().parse(template) if field}
        assert not fields & (regenerate.RUN_TIME_NAMES | regenerate.MACHINE_NAMES), name


def test_the_machine_is_named_as_this_one_is():
    assert regenerate.processor() and regenerate.blas().startswith("BLAS: ")


def test_no_demo_types_a_run_time():
    texts = {name: importlib.import_module(name).__doc__ for name in regenerate.demo_names()}
    texts.update(regenerate=regenerate.__doc__,
                 **{f"{name}.{entry}": getattr(importlib.import_module(name), entry)
                    for name in regenerate.demo_names()
                    for entry in ("PAGE_ENTRY", "PAGE_ENTRY_WITHOUT_RESULTS")
                    if hasattr(importlib.import_module(name), entry)})
    assert TYPED_DURATION.search("took 4-6 s") and TYPED_DURATION.search("2.5 min")
    assert not TYPED_DURATION.search("12 steps, 256 keys, 1e-3 ms")
    typed = {name: TYPED_DURATION.findall(text) for name, text in texts.items()}
    assert {name: found for name, found in typed.items() if found} == {}


def test_every_picture_the_pages_show_exists_and_docs_pictures_holds_no_other():
    pages = [regenerate.ROOT / "README.md", *sorted((regenerate.ROOT / "docs").glob("*.md"))]
    linked = {(page.parent / path).resolve()
              for page in pages for path in regenerate.pictures_linked(page.read_text())}
    assert linked and all(path.is_file() for path in linked)
    assert {path.resolve() for path in regenerate.PICTURES.iterdir()} == linked | {
        regenerate.RESULTS.resolve()}


def python_blocks(text):
    """The README's ```python code blocks that are whole programs (they import tinyattn; the
    others show part of a file), in order."""
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    return [block for block in blocks if "import tinyattn as ta" in block]


def test_every_python_block_of_the_readme_runs(monkeypatch, capsys):
    """The Ten lines, GPT-2 from the fixture, and the recipe for an op of your own: each block as
    a reader would paste it, run from the repository's root."""
    blocks = python_blocks((regenerate.ROOT / "README.md").read_text())
    assert len(blocks) >= 3
    monkeypatch.chdir(regenerate.ROOT)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})
    assert "Attention is all you need" in capsys.readouterr().out


def test_every_python_block_of_the_readme_can_be_pasted_into_the_repl(monkeypatch):
    """Pasted into Python's prompt line by line, a blank line ends a block (a class whose methods
    are set apart by blank lines is cut short): each block runs there too, with no error."""
    monkeypatch.chdir(regenerate.ROOT)
    for block in python_blocks((regenerate.ROOT / "README.md").read_text()):
        errors = []
        console = code.InteractiveConsole({"__name__": "readme"})
        console.write = errors.append                     # where the prompt prints a traceback
        for line in block.splitlines() + [""]:
            console.push(line)
        assert not errors, "".join(errors)
