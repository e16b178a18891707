"""What the demos share: their command line, their tables, matplotlib when it is installed and how
a line chart is finished, the training loop of demos 5, 6, 8, 9, 10, 12 and 13 (demo 10 adds its
balance loss through `after_forward`), the count of where attention heads look (demos 6 and 9),
and the speed of generation with and without the key/value cache (demos 11 and 14), and the
progress lines of a long loop (`Progress`).

Every demo takes the folder to write its pictures to (default: `tinyattn-demos/` under the current
directory, made when the first picture is saved) and `--quick`, a smaller run that the test suite
uses.

Every demo also opens as a notebook (jupytext reads its `# %%` cells). In a Jupyter kernel a
demo's last cell calls `main()` with no arguments, where the command line is the kernel's own: the
parser then runs the quick version and says so (`DemoArgumentParser`), and the pictures go to the
`tinyattn-demos/` beside demos/, where `python demos/NN_name.py` run from the checkout puts them.

BLAS on one thread: the demos multiply small matrices, which gain nothing from BLAS threads, and on
a busy machine threads that wait for a free core make every product slower. `parse` limits BLAS to
one thread, for the rest of the process, with threadpoolctl when it is installed (the `plots` and
`dev` extras install it); without it, `OPENBLAS_NUM_THREADS=1` in the environment does the same.
"""
import argparse
import os
import pathlib
import sys
import time

import numpy as np

import tinyattn as ta
import tinyattn.functional as F

DEFAULT_OUTPUT = "tinyattn-demos"
PROGRESS_SECONDS = 10.0         # between a long loop's lines: at most this and one step
ROOT = pathlib.Path(__file__).resolve().parent.parent        # the checkout, which holds demos/


def argument_parser(doc):
    """A parser with the arguments every demo has; a demo may add its own before parsing."""
    parser = DemoArgumentParser(description=doc.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", nargs="?", default=default_output(), type=pathlib.Path,
                        help=f"folder for the pictures (default: {default_output()})")
    parser.add_argument("--quick", action="store_true",
                        help="a smaller, faster run (what the tests run)")
    return parser


def parse(doc, argv):
    """A demo's command line, parsed (`args.output`, `args.quick`), and BLAS on one thread."""
    args = argument_parser(doc).parse_args(argv)
    one_blas_thread()
    return args


class DemoArgumentParser(argparse.ArgumentParser):
    """argparse's parser, which in a Jupyter kernel parses `--quick` when given no arguments.

    There a demo's last cell calls `main()`, so the parser would read `sys.argv`, which is the
    kernel's own command line (`ipykernel_launcher.py -f kernel-....json`): not the demo's. Demos
    that add arguments of their own (11, 14) build on `argument_parser`, so they do the same."""

    def parse_args(self, args=None, namespace=None):
        if args is None and in_jupyter_kernel():
            print(f"(In a notebook this demo runs its quick version, writing any pictures to "
                  f"{default_output()}; for the full run, call `main([])` in a cell or run the "
                  f"script in a terminal.)")
            args = ["--quick"]
        return super().parse_args(args, namespace)


def in_jupyter_kernel():
    """Whether this code runs in a Jupyter kernel (Jupyter, JupyterLab, VS Code, Colab): whether
    the IPython shell running it is ipykernel's `ZMQInteractiveShell`, which every such kernel is
    or extends. A kernel imports that module before it runs a cell; a script that does not is no
    kernel, and IPython in a terminal (`%run`, which sets `sys.argv`) has another shell."""
    zmqshell = sys.modules.get("ipykernel.zmqshell")
    if zmqshell is None:
        return False
    from IPython import get_ipython
    return isinstance(get_ipython(), zmqshell.ZMQInteractiveShell)


def default_output():
    """Where the pictures go when no folder is named: `tinyattn-demos/` under the current
    directory; in a Jupyter kernel, whose current directory is the notebook's folder (demos/),
    the one beside demos/, where the scripts run from the checkout write theirs."""
    return ROOT / DEFAULT_OUTPUT if in_jupyter_kernel() else pathlib.Path(DEFAULT_OUTPUT)


def one_blas_thread():
    """Limit BLAS to one thread for the rest of the process, or say how when threadpoolctl is
    missing."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        if "OPENBLAS_NUM_THREADS" not in os.environ:
            print("(threadpoolctl is not installed, so BLAS may use several threads, which slows "
                  "these small products\non a busy machine: `pip install threadpoolctl`, or set "
                  "OPENBLAS_NUM_THREADS=1)")
        return
    threadpool_limits(1, user_api="blas")


def blas_threads():
    """How many threads BLAS may use now, as threadpoolctl reports it (None without it)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    return max((pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "blas"),
               default=None)


def pyplot():
    """matplotlib.pyplot drawing to files, or None (with a note) when matplotlib is missing."""
    try:
        import matplotlib
    except ImportError:
        print("(matplotlib is not installed, so no picture: `pip install matplotlib` for one; "
              "the printed tables hold the same numbers)")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def save_figure(figure, path, **savefig_options):
    """Write a matplotlib figure to `path` (making its folder), free its memory, return the path."""
    import matplotlib.pyplot as plt
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, **savefig_options)
    plt.close(figure)
    return path


def save_chart(figure, path, *legend_axes):
    """Give each of `legend_axes` its legend and a light grid, fit the figure's layout and save it
    to `path` at 120 dpi: how demos 5, 8, 12 and 13 finish their line charts."""
    for axes in legend_axes:
        axes.legend(fontsize=8)
        axes.grid(alpha=0.3)
    figure.tight_layout()
    return save_figure(figure, path, dpi=120)


class Progress:
    """A long loop's progress, so that a full run is never silent for long. On a terminal: one
    line that the next overwrites, ended at the loop's last step. Elsewhere (a pipe, a log file,
    a notebook's output, where a line cannot be overwritten): a line each time `every` seconds of
    wall time have passed since the last one (or since the loop began), so a quick run, shorter
    than that, prints none."""

    def __init__(self, every=PROGRESS_SECONDS):
        self.every, self.last = every, time.perf_counter()

    def __call__(self, message, last=False):
        """Say `message` (where the loop is) as above; `last`: this is the loop's last step."""
        if sys.stdout.isatty():
            print(f"\r{message}", end="\n" if last else "", flush=True)
        elif time.perf_counter() - self.last >= self.every:
            print(message, flush=True)
            self.last = time.perf_counter()


def print_pictures(*paths):
    """Say where each picture was saved (None: not drawn, matplotlib being missing)."""
    for path in paths:
        if path is not None:
            print(f"picture: {path}")


def log2_axis(axes, ticks):
    """An x-axis on a log2 scale, labelled at `ticks` only (1, 2, 4, 8 heads; 4 ... 64 pairs)."""
    axes.set_xscale("log", base=2)
    axes.minorticks_off()
    axes.set_xticks(ticks, [str(tick) for tick in ticks])


def print_table(headers, rows, title=None):
    """Print rows of already formatted strings under their headers, right-aligned in columns,
    after a blank line and the `title`, if there is one."""
    if title is not None:
        print(f"\n{title}")
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    for line in [headers, ["-" * w for w in widths], *rows]:
        print("  ".join(str(cell).rjust(w) for cell, w in zip(line, widths)))


def train(model, make_batch, score, held_out, label, learning_rate, batch_size, seed, steps,
          eval_every, print_every, after_forward=None):
    """Train `model` with Adam on `steps` fresh batches from `make_batch(random, batch_size)`.

    `score(model, batch)` gives (loss tensor, accuracy). Before the first step and every
    `eval_every` steps the model is scored on the `held_out` batch, which it never trains on; a
    line of scores is printed every `print_every` steps (a multiple of `eval_every`), and a
    `Progress` line between them. The batches
    come from a generator seeded with `seed`, so two models trained alike see exactly the same
    examples in the same order. `after_forward(model)`, if given, is called after each training
    step's forward pass; what it returns, unless None, is added to the loss before backward (an
    auxiliary loss: the training loss recorded stays the score's). Returns the training loss of
    every step and the held-out loss and accuracy at each checkpoint.
    """
    optimizer = ta.optim.Adam(model.parameters(), lr=learning_rate)
    random = np.random.default_rng(seed)
    curves = {"train_loss": [], "checkpoints": [], "held_out_loss": [], "held_out_accuracy": []}
    start = time.perf_counter()

    def checkpoint(step):
        with ta.no_grad():
            loss, accuracy = score(model, held_out)
        curves["checkpoints"].append(step)
        curves["held_out_loss"].append(loss.item())
        curves["held_out_accuracy"].append(accuracy)
        if step % print_every == 0 or step == steps:
            print(f"  {label:<22} step {step:>4}/{steps}   held-out loss {loss.item():6.3f}   "
                  f"accuracy {accuracy:6.1%}   {time.perf_counter() - start:5.1f} s", flush=True)

    checkpoint(0)
    progress = Progress()
    for step in range(1, steps + 1):
        loss, _ = score(model, make_batch(random, batch_size))
        extra_loss = None if after_forward is None else after_forward(model)
        optimizer.zero_grad()
        (loss if extra_loss is None else loss + extra_loss).backward()
        optimizer.step()
        curves["train_loss"].append(loss.item())
        if step % eval_every == 0 or step == steps:
            checkpoint(step)
        progress(f"  {label:<22} step {step:>4}/{steps}")
    curves["seconds"] = time.perf_counter() - start
    curves["dtype"] = str(loss.dtype)
    return curves


def sequence_score(model, batch, ignore_index=-100):
    """(mean cross-entropy as a tensor, share of answers right) of a model giving logits
    (B, T, vocab) for a batch (ids, targets), both (B, T); targets equal to ignore_index (the
    positions without an answer) are left out of both."""
    ids, targets = batch
    logits = model(ids)                                             # (B, T, vocab)
    answered = targets != ignore_index
    accuracy = float((logits.data.argmax(axis=-1) == targets)[answered].mean())
    vocab = logits.shape[-1]
    return F.cross_entropy(logits.reshape(-1, vocab), targets.reshape(-1), ignore_index), accuracy


def first_fit_shares(kinds, counted=None, rest="other"):
    """{kind: the share of the positions that fit it}, each position counted under the first kind
    it fits, in the order of `kinds` ({kind: booleans}, all of one shape), and under `rest` if it
    fits none; `counted` (booleans of that shape) limits the shares to those positions."""
    taken = np.zeros_like(next(iter(kinds.values())))
    counted = np.ones_like(taken) if counted is None else counted
    shares = {}
    for kind, fits in kinds.items():
        shares[kind] = float((fits & ~taken)[counted].mean())
        taken = taken | fits
    shares[rest] = float((~taken)[counted].mean())
    return shares


def generation_speed(model, prompt_ids, length, sampling, seed, rounds=3):
    """Tokens per second writing `length` tokens after `prompt_ids` (1, T) with `sampling`
    (temperature, top_k), with the cache (`generate`) and recomputing every prefix: the median
    over interleaved rounds, each drawing from a generator seeded with `seed`. Both must write the
    same tokens."""
    times, tokens = {name: [] for name in ("cached", "recomputed")}, {}
    for _ in range(rounds):
        for name in times:
            ta.manual_seed(seed)
            start = time.perf_counter()
            tokens[name] = model.generate(prompt_ids, length, **sampling,
                                          use_cache=name == "cached")
            times[name].append(time.perf_counter() - start)
    if not np.array_equal(tokens["cached"], tokens["recomputed"]):
        raise AssertionError("generation with the cache wrote other tokens than without it")
    return {name: length / float(np.median(seconds)) for name, seconds in times.items()}
