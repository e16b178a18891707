"""What the demos share: their command line, their tables, and matplotlib when it is installed.

Every demo takes the folder to write its pictures to (default: `tinyattn-demos/` under the current
directory) and `--quick`, a smaller run that the test suite uses.
"""
import argparse
import pathlib

DEFAULT_OUTPUT = "tinyattn-demos"


def argument_parser(doc):
    """A parser with the arguments every demo has; a demo may add its own before parsing."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output", nargs="?", default=DEFAULT_OUTPUT, type=pathlib.Path,
                        help=f"folder for the pictures (default: ./{DEFAULT_OUTPUT})")
    parser.add_argument("--quick", action="store_true",
                        help="a smaller, faster run (what the tests run)")
    return parser


def parse(doc, argv):
    """A demo's command line, parsed (`args.output`, `args.quick`), its output folder created."""
    args = argument_parser(doc).parse_args(argv)
    args.output.mkdir(parents=True, exist_ok=True)
    return args


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
    """Write a matplotlib figure to `path`, free its memory, and return the path."""
    import matplotlib.pyplot as plt
    figure.savefig(path, **savefig_options)
    plt.close(figure)
    return path


def print_table(headers, rows):
    """Print rows of already formatted strings under their headers, right-aligned in columns."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]
    for line in [headers, ["-" * w for w in widths], *rows]:
        print("  ".join(str(cell).rjust(w) for cell, w in zip(line, widths)))
