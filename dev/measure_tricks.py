"""What each of tinyattn's two speed tricks saves on bench 3's training step (demo 11's model).

The ops are written as their formulas; two tricks stay, each in one named place, because each is
worth more than ~5% of the step:

    keep_freed_memory   plumbing.py: the C allocator keeps the memory NumPy frees for the next
                        arrays, instead of returning it to the system and faulting it back in
    folded rows         nn/layers.py, Linear.forward: the batch axes folded into rows, so that
                        x @ W^T and its backward are single 2-D products

Linear's folding is measured in one process, the step with and without it interleaved (A B A B).
The allocator setting is process-wide, so it is measured in child processes started in turns,
one with tinyattn as it is and one where the setting cannot reach glibc (so glibc keeps its own
defaults); each child times the same steps, and the ratio of each pair of turns is reported.
Run: python dev/measure_tricks.py [--rounds N]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "MKL_NUM_THREADS")}
CHILD = """
import ctypes, sys, time
if sys.argv[1] == "without":             # keep_freed_memory then finds no glibc to configure
    def no_library(*args, **kwargs):
        raise OSError("measure_tricks: no allocator settings in this run")
    ctypes.CDLL = no_library
import numpy as np
from tinyattn.tools.bench.training import tinyattn_trainer, training_inputs
model, ids, targets = training_inputs(np.float32)
step = tinyattn_trainer(model)
step(ids, targets)
start = time.process_time()
for _ in range(5):
    step(ids, targets)
print((time.process_time() - start) / 5)
"""


def unfolded_linear(self, x):
    """Linear.forward as the formula alone: x @ W^T + b on the whole (..., in) array."""
    y = x @ self.weight.T
    return y + self.bias if self.bias is not None else y


def measure_folding(rounds):
    import numpy as np
    from tinyattn import nn
    from tinyattn.tools.bench.training import tinyattn_trainer, training_inputs
    folded = nn.Linear.forward
    ways = {"folded rows (as it is)": folded, "x @ W^T unfolded": unfolded_linear}
    steps = {}
    for name, forward in ways.items():
        nn.Linear.forward = forward
        model, ids, targets = training_inputs(np.float32)
        steps[name] = tinyattn_trainer(model)
    times = {name: [] for name in ways}
    for round_ in range(rounds + 1):                # the first round warms up
        for name, forward in ways.items():
            nn.Linear.forward = forward
            start = time.process_time()
            steps[name](ids, targets)
            if round_:
                times[name].append(time.process_time() - start)
    nn.Linear.forward = folded
    return times


def measure_allocator(rounds):
    env = dict(os.environ, **ONE_THREAD)
    times = {"with keep_freed_memory": [], "glibc's defaults": []}
    for _ in range(rounds):
        for name, argument in zip(times, ("with", "without")):
            out = subprocess.run([sys.executable, "-c", CHILD, argument], env=env, check=True,
                                 capture_output=True, text=True).stdout
            times[name].append(float(out))
    return times


def report(title, times):
    first, second = times
    ratios = [b / a for a, b in zip(times[first], times[second])]
    print(title)
    for name, seconds in times.items():
        print(f"   {name:<24} {statistics.median(seconds) * 1e3:7.1f} ms per step")
    print(f"   {second} / {first}: {statistics.median(ratios):.2f}x "
          f"(median of {len(ratios)} paired ratios)")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args(argv)
    if any(os.environ.get(name) != "1" for name in ONE_THREAD):
        os.execve(sys.executable, [sys.executable, *sys.argv], dict(os.environ, **ONE_THREAD))
    report("Linear's folded rows, training step (float32, one BLAS thread):",
           measure_folding(args.rounds))
    report("keep_freed_memory, training step (child processes in turns, 5 steps each):",
           measure_allocator(max(3, args.rounds // 2)))


if __name__ == "__main__":
    main()
