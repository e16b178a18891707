"""What tinyattn's one speed setting saves on bench 3's training step (demo 11's model), and what
writing GELU and Adam as their formulas costs there.

The ops are written as their formulas. One setting stays for speed, in one named place, because
it is worth more than ~5% of the step:

    keep_freed_memory   memory.py: the C allocator keeps the memory NumPy frees for the next
                        arrays, instead of returning it to the system and faulting it back in

GELU and Adam were written in place (`*=`, `out=`), in two arrays, before; that form is measured
here against the formulas, in one process, the step with each interleaved (A B A B).
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

import numpy as np

from tinyattn.ops.elementwise import SQRT_2_OVER_PI

ONE_THREAD = {name: "1" for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                     "MKL_NUM_THREADS")}
CHILD = """
import ctypes, sys, time
if sys.argv[1] == "without":             # keep_freed_memory then finds no glibc to configure
    def no_library(*args, **kwargs):
        raise OSError("measure_tricks: no allocator settings in this run")
    ctypes.CDLL = no_library
import numpy as np
from tinyattn_tools.bench.training import tinyattn_trainer, training_inputs
model, ids, targets = training_inputs(np.float32)
step = tinyattn_trainer(model)
step(ids, targets)
start = time.process_time()
for _ in range(5):
    step(ids, targets)
print((time.process_time() - start) / 5)
"""


def gelu_in_place():
    """GELU's forward and backward as tinyattn wrote them in place, in two arrays (the sigmoid form
    of the same function): what the formulas are measured against."""
    def forward(self, x):
        s = np.multiply(x, x, out=np.empty_like(x))
        s *= 0.044715
        s += 1.0
        s *= x
        s *= -2.0 * SQRT_2_OVER_PI                  # -2u
        with np.errstate(over="ignore"):
            np.exp(s, out=s)
        s += 1.0
        np.divide(1.0, s, out=s)                    # s = sigmoid(2u)
        self.saved = (x, s)
        return np.multiply(x, s, out=np.empty_like(x))

    def backward(self, grad):
        x, s = self.saved
        two_du_dx = np.multiply(x, x, out=np.empty_like(x))
        two_du_dx *= 2.0 * 3 * 0.044715 * SQRT_2_OVER_PI
        two_du_dx += 2.0 * SQRT_2_OVER_PI
        dout_dx = np.subtract(1.0, s, out=np.empty_like(s))
        dout_dx *= s
        dout_dx *= x
        dout_dx *= two_du_dx
        dout_dx += s
        dout_dx *= grad
        return (dout_dx,)
    return forward, backward


def adam_in_place(self):
    """Adam's step as tinyattn wrote it in place, at most one temporary array at a time."""
    for i, p in enumerate(self.params):
        if p.grad is None:
            continue
        if i not in self.steps:
            self.m[i], self.v[i], self.steps[i] = np.zeros_like(p.data), np.zeros_like(p.data), 0
        self.steps[i] += 1
        m, v, t = self.m[i], self.v[i], self.steps[i]
        self.decay(p)
        grad = self.gradient(p)
        m *= self.beta1
        m += (1.0 - self.beta1) * grad
        square = np.multiply(grad, grad)
        square *= 1.0 - self.beta2
        v *= self.beta2
        v += square
        step = np.divide(v, 1.0 - self.beta2 ** t, out=square)
        np.sqrt(step, out=step)
        step += self.eps
        np.divide(m, step, out=step)
        step *= self.lr / (1.0 - self.beta1 ** t)
        p.data -= step


def measure_in_process(owner, name, ways, rounds, also=None):
    """Seconds per training step with `owner.name` set to each of `ways` in turn, interleaved
    (and `also`, another (owner, name, ways), set alike)."""
    from tinyattn_tools.bench.training import tinyattn_trainer, training_inputs
    settings = [(owner, name, ways)] + ([also] if also else [])
    kept = [(owner_, name_, getattr(owner_, name_)) for owner_, name_, _ in settings]

    def use(way):
        for owner_, name_, ways_ in settings:
            setattr(owner_, name_, ways_[way])
    steps = {}
    for way in ways:
        use(way)
        model, ids, targets = training_inputs(np.float32)
        steps[way] = tinyattn_trainer(model)
    times = {way: [] for way in ways}
    for round_ in range(rounds + 1):                # the first round warms up
        for way in ways:
            use(way)
            start = time.process_time()
            steps[way](ids, targets)
            if round_:
                times[way].append(time.process_time() - start)
    for owner_, name_, value in kept:
        setattr(owner_, name_, value)
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
    from tinyattn import ops, optim
    forward, backward = gelu_in_place()
    report("GELU, training step (float32, one BLAS thread):",
           measure_in_process(ops.Gelu, "forward", {"the formula (as it is)": ops.Gelu.forward,
                                                    "in place": forward}, args.rounds,
                              also=(ops.Gelu, "backward", {"the formula (as it is)":
                                                           ops.Gelu.backward,
                                                           "in place": backward})))
    report("Adam's step, training step:",
           measure_in_process(optim.Adam, "step", {"the formula (as it is)": optim.Adam.step,
                                                   "in place": adam_in_place}, args.rounds))
    report("keep_freed_memory, training step (child processes in turns, 5 steps each):",
           measure_allocator(max(3, args.rounds // 2)))


if __name__ == "__main__":
    main()
