"""Rerun the demos and rewrite docs/demos.md, the page of what they measured: pictures, numbers,
and the list of demos.

    python dev/regenerate.py             # every demo in full (it prints how long they took)
    python dev/regenerate.py 04 05       # only these; the others keep their recorded numbers

Each numbered demo (`demos/NN_name.py`) runs in full in a Python process of its own, with BLAS on
one thread (OPENBLAS_NUM_THREADS=1), drawing into a fresh temporary folder; the numbers its `main`
returns are kept. Once every demo asked for has run, and only then:

- the pictures the page links (`pictures/NAME.png` in a demo's entry) are copied from that
  folder into docs/pictures/. A picture the run could not draw (matplotlib or Graphviz's `dot`
  missing) stops everything with an error: no stale picture is left in place as if it were new;
- docs/pictures/results.json records each demo's numbers: {"04_sqrt_dk": {...}, ...}, and how
  long its full run took, measured here: `wall_seconds`, `processor_seconds` (roughly its run time
  on an idle machine), with the machine's `cpu_count` and its `load_average` over the last minute
  when the run ended (the demo's own work included), its `processor` and the `blas` that did its
  matrix products (the library and the kernels it chose for this processor);
- the page's list of demos, between `<!-- demos:start -->` and `<!-- demos:end -->`, is
  rewritten: each demo's `PAGE_ENTRY` filled with its numbers, in the demos' order, its first
  paragraph ending with its run time (`run_time`), so no demo types a run time in by hand.

Why the machine is named: times differ from one machine to another, and so do some results.
OpenBLAS picks its kernels for the processor it finds (`OPENBLAS_CORETYPE` overrides the choice),
and kernels add the products of a float32 matrix product in different orders, so their last bits
differ; a training run whose softmax is saturated (demo 5, unscaled) can turn such a difference
into another run. The load average cannot show everything either: a virtual machine shares its
host, and one demo's processor time has differed widely between two runs of the same code on
machines of the same kind.

It prints how long each demo took, and the total. tests/test_readme.py checks, without running
any demo, that the page's list is the templates filled with results.json and that every picture
it links exists: a number edited by hand, or a template changed without a rerun, fails the tests.

Adding a demo (chapter 2's demos 07-11, say) needs no change here, since the demos are found by
their file names. Write `demos/NN_name.py` like the others:
- `main(argv)` parses with `demo_tools.parse(__doc__, argv)` and returns a dict of the numbers it
  measured, as JSON can hold them (int, float, bool, str, None, lists of them), under names a
  template can use (`ratio_1024`, not nested dicts), its settings too where the entry names them
  (`"head_dim": HEAD_DIM`), so that no number in the entry is typed;
- `PAGE_ENTRY` is its entry of the page's numbered list, in markdown, as a str.format template
  filled from those numbers (`{ratio_1024:.1e}`), its links written from docs/ (the demo as
  `../demos/NN_name.py`), with its picture, if it draws one, linked as
  `![what it shows](pictures/NAME.png)` and saved by the demo as NAME.png in its output folder.
  Its run time is not in it: regenerate adds it. The demo's docstring says so rather than typing
  one;
then run `python dev/regenerate.py NN` and commit docs/demos.md and docs/pictures/.

A demo that needs what a machine may lack (demo 14: GPT-2's weights, which are downloaded, not
shipped) also has `can_run_in_full()`, saying whether this machine has it, and
`PAGE_ENTRY_WITHOUT_RESULTS`, its entry while results.json holds no numbers of it: what a reader
who runs it will see, with no number in it. Where it cannot run, regenerate leaves it out (asked
for by name, it stops with the reason) and keeps what results.json holds of it.
"""
import importlib
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEMOS = ROOT / "demos"
sys.path.insert(0, str(DEMOS))          # the demos' shared printing, demo_tools

import demo_tools  # noqa: E402

PAGE = ROOT / "docs" / "demos.md"
PICTURES = ROOT / "docs" / "pictures"
RESULTS = PICTURES / "results.json"
START, END = "<!-- demos:start -->", "<!-- demos:end -->"
WIDTH = 100                      # the page's line width
PICTURE_LINK = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")       # ![alt](path): the path
RUN_ONE = ("import importlib, json, sys; "
           "numbers = importlib.import_module(sys.argv[1]).main([sys.argv[2]]); "
           "open(sys.argv[3], 'w').write(json.dumps(numbers))")


def demo_names():
    """Every numbered demo, in order: ['01_first_gradient', '02_draw_graph', ...]."""
    return sorted(path.stem for path in DEMOS.glob("[0-9][0-9]_*.py"))


def seconds(value):
    """A duration as the page gives it: 0.6 s, 13 s, 105 s."""
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


def run_time(numbers):
    """The sentence that ends a demo's first paragraph on the page: its measured run time, and
    the machine (the processor and the BLAS, once recorded: runs before regenerate named them
    did not record them)."""
    machine = f"a {numbers['cpu_count']}-core machine"
    if "processor" in numbers:
        machine += f" ({numbers['processor']}; {numbers['blas']})"
    return (f"Full run: {seconds(numbers['processor_seconds'])} of processor time, "
            f"{seconds(numbers['wall_seconds'])} wall, on {machine} with a load average of "
            f"{numbers['load_average']:.1f}.")


def processor():
    """The processor's model name as Linux gives it ("AMD EPYC"), or as Python's platform module
    does elsewhere."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            names = [line.split(":", 1)[1].strip() for line in cpuinfo
                     if line.startswith("model name")]
    except OSError:
        names = []
    return names[0] if names else platform.processor() or platform.machine()


def blas():
    """Which BLAS does NumPy's matrix products, as threadpoolctl reports it: "BLAS: openblas
    0.3.31, Haswell kernels"."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "BLAS: not named (threadpoolctl is not installed)"
    pools = [pool for pool in threadpool_info() if pool["user_api"] == "blas"]
    return "BLAS: " + ", ".join(f"{pool['internal_api']} {pool['version']}"
                                + (f", {pool['architecture']} kernels"
                                   if pool.get("architecture") else "") for pool in pools)


def readme_entry(name, results):
    """Demo `name`'s PAGE_ENTRY filled with its numbers in `results`, its run time added to its
    first paragraph, each paragraph rewrapped to the page's width (numbers change the lines'
    lengths) and indented under the list item's number ("7. ", "10. "); a demo without numbers
    recorded gives its PAGE_ENTRY_WITHOUT_RESULTS, if it has one, as markdown wants."""
    demo = importlib.import_module(name)
    if name not in results and hasattr(demo, "PAGE_ENTRY_WITHOUT_RESULTS"):
        paragraphs = demo.PAGE_ENTRY_WITHOUT_RESULTS.split("\n\n")
    elif name not in results:
        raise KeyError(f"no numbers recorded for demo {name}: run python dev/regenerate.py "
                       f"{name[:2]}")
    else:
        paragraphs = demo.PAGE_ENTRY.format(**results[name]).split("\n\n")
        paragraphs[0] += " " + run_time(results[name])
    indent = " " * len(paragraphs[0].split()[0] + " ")
    return "\n\n".join(
        textwrap.fill(" ".join(paragraph.split()), WIDTH, initial_indent=indent if i else "",
                      subsequent_indent=indent, break_long_words=False, break_on_hyphens=False)
        for i, paragraph in enumerate(paragraphs))


def readme_section(results):
    """The page's list of demos, as regenerate writes it between the markers."""
    return "\n\n".join(readme_entry(name, results) for name in demo_names())


def split_page(page_text):
    """(the page before the list of demos, the list, the page after it): the list is what lies
    between the markers, without the newlines next to them."""
    before, rest = page_text.split(START, 1)
    section, after = rest.split(END, 1)
    return before + START + "\n", section.strip("\n"), "\n" + END + after


def pictures_linked(markdown):
    """The paths of the pictures a markdown text shows, relative to its own folder."""
    return PICTURE_LINK.findall(markdown)


def run(name, folder):
    """Run demo `name` in full in a new process, drawing into `folder`: its numbers (as JSON
    gives them back) and how long it took: the seconds, the processor seconds it used (its run
    time on an idle machine), the machine's cores and its load average at the end."""
    numbers_file = folder.with_name(folder.name + ".json")     # beside the folder, not in it
    start, processor_start = time.perf_counter(), os.times()
    finished = subprocess.run([sys.executable, "-c", RUN_ONE, name, str(folder), str(numbers_file)],
                              cwd=DEMOS, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    if finished.returncode != 0:
        sys.exit(f"regenerate: demo {name} failed (exit code {finished.returncode}); nothing was "
                 "written")
    processor_end = os.times()
    used = (processor_end.children_user - processor_start.children_user
            + processor_end.children_system - processor_start.children_system)
    numbers = json.loads(numbers_file.read_text())
    taken = sorted(numbers.keys() & (RUN_TIME_NAMES | MACHINE_NAMES))
    if taken:
        sys.exit(f"regenerate: demo {name} returns {', '.join(taken)}, a name regenerate gives its "
                 "own measurement of the whole run: rename it in the demo; nothing was written")
    return dict(numbers, wall_seconds=time.perf_counter() - start, processor_seconds=used,
                cpu_count=os.cpu_count(), load_average=os.getloadavg()[0],
                processor=processor(), blas=blas())


RUN_TIME_NAMES = {"wall_seconds", "processor_seconds", "cpu_count", "load_average"}
MACHINE_NAMES = {"processor", "blas"}


def chosen(prefixes):
    """The demos named by `prefixes` ("04", "04_sqrt_dk"), or all of them when there are none,
    less those that cannot run in full here (`can_run_in_full`)."""
    names = [name for name in demo_names() if not prefixes
             or any(name.startswith(prefix) for prefix in prefixes)]
    unknown = [prefix for prefix in prefixes if not any(n.startswith(prefix) for n in names)]
    if unknown:
        sys.exit(f"regenerate: no demo named {', '.join(unknown)}; the demos: "
                 f"{', '.join(demo_names())}")
    runnable = []
    for name in names:
        can_run = getattr(importlib.import_module(name), "can_run_in_full", lambda: True)
        if can_run():
            runnable.append(name)
        elif prefixes:
            sys.exit(f"regenerate: demo {name} cannot run in full on this machine (its "
                     f"docstring says what it needs); nothing was written")
        else:
            print(f"regenerate: leaving out demo {name}, which cannot run in full on this "
                  f"machine (its docstring says what it needs); its entry stays as it is")
    return runnable


def main(argv=None):
    names = chosen(sys.argv[1:] if argv is None else argv)
    results = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    copies, rows = {}, []
    with tempfile.TemporaryDirectory() as scratch:
        for name in names:
            print(f"\n===== {name} =====", flush=True)
            folder = pathlib.Path(scratch) / name
            results[name] = run(name, folder)
            links = pictures_linked(readme_entry(name, results))
            for link in links:
                drawn = folder / pathlib.Path(link).name
                if not drawn.is_file():
                    sys.exit(f"regenerate: demo {name} drew no {drawn.name} (is matplotlib "
                             "installed, and Graphviz's `dot`?); nothing was written")
                copies[drawn] = PAGE.parent / link
            rows.append([name, f"{results[name]['wall_seconds']:.1f}",
                         f"{results[name]['processor_seconds']:.1f}",
                         f"{results[name]['load_average']:.1f}", ", ".join(links) or "(none)"])
        section = readme_section(results)
        for drawn, target in copies.items():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(drawn, target)
    RESULTS.write_text(json.dumps(results, indent=1) + "\n")
    before, _, after = split_page(PAGE.read_text())
    PAGE.write_text(before + section + after)
    print(f"\nWrote {RESULTS.relative_to(ROOT)}, the pictures below and the list of demos in "
          f"{PAGE.relative_to(ROOT)}.\nEach demo's full run, BLAS on one thread ('processor seconds': its run time on "
          f"an idle machine; {os.cpu_count()} cores):")
    rows.append(["total", *(f"{sum(results[name][field] for name in names):.1f}"
                            for field in ("wall_seconds", "processor_seconds")), "", ""])
    demo_tools.print_table(["demo", "seconds", "processor seconds", "load average",
                            "pictures"], rows)


if __name__ == "__main__":
    main()
