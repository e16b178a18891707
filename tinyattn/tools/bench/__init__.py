"""`python -m tinyattn bench`: what the engine costs on top of the NumPy it calls.

Each benchmark runs the same computation written two or three ways -- with tinyattn, by hand in
NumPy (forward and backward written out), and in PyTorch when it happens to be installed --
interleaved (A B C A B C ...) so that a noisy neighbour on a shared machine slows all of them
alike. What is reported is the median over rounds of the per-round ratio, never a lone absolute
time. BLAS runs on one thread, so that the ratios compare the work done, not how it was spread
over cores.

    overhead.py    a chain of 2,000 tiny ops: the engine's cost per op
    attention.py   multi-head self-attention, forward and backward
    training.py    one training step of a small GPT (forward, loss, backward, AdamW)
"""
import argparse
import os
import sys

import numpy as np

from tinyattn.tools.bench.attention import MHA_SIZES, bench_mha
from tinyattn.tools.bench.overhead import bench_chain
from tinyattn.tools.bench.training import bench_training_step

BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def run_with_one_blas_thread(argv):
    """Start this command again with BLAS limited to one thread, unless it already is.

    The limit must be set before NumPy loads its BLAS, and `import tinyattn` has loaded it by now.
    """
    if all(os.environ.get(name) == "1" for name in BLAS_THREAD_VARIABLES):
        return
    env = dict(os.environ, **{name: "1" for name in BLAS_THREAD_VARIABLES})
    os.execve(sys.executable, [sys.executable, "-m", "tinyattn", *argv], env)


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def part_number(text):
    value = int(text)
    if value not in PARTS:
        raise argparse.ArgumentTypeError(f"the parts are 1, 2 and 3, got {value}")
    return value


PARTS = (1, 2, 3)


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m tinyattn bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", type=part_number, metavar="PART",
                        help="run only these parts (1, 2, 3; default: all)")
    parser.add_argument("--rounds", type=positive_int, default=30,
                        help="interleaved rounds (default 30)")
    args = parser.parse_args(argv)
    args.parts = args.parts or PARTS
    return args


def main(argv):
    args = parse(argv)
    try:
        import torch
        torch.set_num_threads(1)
        print(f"PyTorch {torch.__version__} found: it is measured too.")
    except ImportError:
        torch = None
        print("PyTorch is not installed: comparing with NumPy only.")
    print(f"NumPy {np.__version__}, BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}")
    if 1 in args.parts:
        print()
        bench_chain(args.rounds, torch)
    if 2 in args.parts:
        sizes = ", ".join(f"{name}={value}" for name, value in MHA_SIZES.items())
        print(f"\n2. Multi-head self-attention, forward + backward ({sizes}), {args.rounds} "
              "interleaved rounds")
        for dtype in (np.float32, np.float64):
            bench_mha(args.rounds, dtype, torch)
    if 3 in args.parts:
        bench_training_step(args.rounds, torch)
