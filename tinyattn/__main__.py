"""Command line: `python -m tinyattn bench` (speed) and `python -m tinyattn check` (gradients)."""
import sys

USAGE = """usage: python -m tinyattn COMMAND [options]

commands:
  bench   what the engine costs over hand-written NumPy (and PyTorch, if installed)
  check   run the gradient checks of every op and layer and print a table
"""


def main(argv):
    if not argv or argv[0] not in ("bench", "check"):
        print(USAGE, file=sys.stderr if argv else sys.stdout)
        return 0 if not argv or argv[0] in ("-h", "--help") else 2
    command, options = argv[0], argv[1:]
    if command == "bench":
        from tinyattn import bench
        bench.run_with_one_blas_thread(argv)
        return bench.main(options)
    from tinyattn import check
    return check.main(options)


def console_main():
    """The `tinyattn` console script."""
    sys.exit(main(sys.argv[1:]))


if __name__ == "__main__":
    console_main()
