"""The command line: `python -m tinyattn check` (gradients), `python -m tinyattn bench` (speed),
`python -m tinyattn download NAME` (GPT-2's, Qwen3-0.6B's or SmolLM2-135M's weights), `python -m
tinyattn exercises` and `exercise ...` (learning by rewriting the code), `python -m tinyattn view
...` (offline pages)."""
import os
import sys
import textwrap

USAGE = """usage: python -m tinyattn COMMAND [options]

commands:
  check   run the gradient checks of every op and layer and print a table
  bench   ratios measured in one run, against hand-written NumPy and PyTorch (if installed):
{bench_parts}
  download gpt2|qwen3-0.6b|smollm2-135m [FOLDER]
          a model's weights and tokenizer from the Hugging Face hub, each file checked
          (default folder: ~/.cache/tinyattn/NAME)
  exercises  the exercises (tinyattn's own functions to rewrite), with your progress
  exercise start|check|hint|solution NAME [--dir DIR]
          write an exercise's file, check it, get the next hint, see tinyattn's own code
  view graph [--out PATH]
          an interactive page stepping through a TransformerBlock's backward sweep
  view attention [FOLDER] [--text TEXT] [--out PATH]
          an interactive page of GPT-2's attention per layer and head, with dL/dA
"""


def usage():
    """USAGE with the bench's parts as the bench itself names them."""
    from tinyattn_tools import bench
    parts = textwrap.fill(bench.parts_listed() + "; `bench 3 5` runs only those", 100,
                          initial_indent=" " * 10, subsequent_indent=" " * 10)
    return USAGE.format(bench_parts=parts)


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    command, options = argv[0], argv[1:]
    if command == "check":
        from tinyattn_tools import checklist
        return checklist.main(options)
    if command == "exercises":
        from tinyattn_tools.exercises import cli as exercises
        return exercises.list_main(options)
    if command == "exercise":
        from tinyattn_tools.exercises import cli as exercises
        return exercises.main(options)
    if command == "bench":
        from tinyattn_tools import bench
        bench.run_with_one_blas_thread(argv)
        return bench.main(options)
    if command == "view":
        from tinyattn_tools.views import cli as views
        return views.main(options)
    if command == "download":
        from tinyattn_tools import download
        return download.main(options)
    print(f"python -m tinyattn: unknown command {command!r}\n\n{usage()}", file=sys.stderr)
    return 2


def console_main():
    """The `tinyattn` console script. Output cut short by its reader (`... | head`) ends it
    quietly, as the Python documentation advises for SIGPIPE: no traceback, exit status 1."""
    try:
        status = main(sys.argv[1:])
        sys.stdout.flush()             # a reader gone shows here, rather than at exit
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # nothing left to flush
        status = 1
    sys.exit(status)
