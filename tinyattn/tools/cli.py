"""The command line: `python -m tinyattn check` (gradients) and `python -m tinyattn bench` (speed)."""
import sys

USAGE = """usage: python -m tinyattn COMMAND [options]

commands:
  check   run the gradient checks of every op and layer and print a table
  bench   what the engine costs over hand-written NumPy (and PyTorch, if installed);
          parts 1 (per-op cost), 2 (attention), 3 (a training step): `bench 3` runs one
"""


def main(argv):
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0
    command, options = argv[0], argv[1:]
    if command == "check":
        from tinyattn.tools import checklist
        return checklist.main(options)
    if command == "bench":
        from tinyattn.tools import bench
        bench.run_with_one_blas_thread(argv)
        return bench.main(options)
    print(f"python -m tinyattn: unknown command {command!r}\n\n{USAGE}", file=sys.stderr)
    return 2


def console_main():
    """The `tinyattn` console script."""
    sys.exit(main(sys.argv[1:]))
