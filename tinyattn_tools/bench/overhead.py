"""Per-op overhead: a long chain of tiny elementwise ops, where the engine's bookkeeping dominates.

Each step of the chain is four ops, x = tanh(x * w + b) * 0.5, with w and b requiring grad; the
chain runs forward and backward in tinyattn, by hand in NumPy, and in PyTorch when installed.
"""
import statistics

import numpy as np

import tinyattn as ta
from tinyattn_tools.bench.timing import check_agreement, interleaved, median_ratio

CHAIN_OPS = 2000
OPS_PER_STEP = 4


def chain_inputs(seed=0):
    random = np.random.default_rng(seed)
    return (random.standard_normal((8, 8)), 0.5 * random.standard_normal((8, 8)),
            0.1 * random.standard_normal((8, 8)))


def chain_tinyattn(x0, w0, b0):
    x, w, b = (ta.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    h = x
    for _ in range(CHAIN_OPS // OPS_PER_STEP):
        h = (h * w + b).tanh() * 0.5
    h.sum().backward()
    return x.grad, w.grad, b.grad


def chain_numpy(x0, w0, b0):
    h, saved = x0, []
    for _ in range(CHAIN_OPS // OPS_PER_STEP):
        t = np.tanh(h * w0 + b0)
        saved.append((h, t))
        h = t * 0.5
    grad_h, grad_w, grad_b = np.ones_like(h), np.zeros_like(w0), np.zeros_like(b0)
    for h, t in reversed(saved):
        grad_pre = grad_h * 0.5 * (1 - t * t)      # through * 0.5 and tanh
        grad_b += grad_pre
        grad_w += grad_pre * h
        grad_h = grad_pre * w0
    return grad_h, grad_w, grad_b


def chain_torch(torch):
    def run(x0, w0, b0):
        x, w, b = (torch.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        h = x
        for _ in range(CHAIN_OPS // OPS_PER_STEP):
            h = (h * w + b).tanh() * 0.5
        h.sum().backward()
        return x.grad.numpy(), w.grad.numpy(), b.grad.numpy()
    return run


def bench_chain(rounds, torch=None):
    implementations = {"tinyattn": chain_tinyattn, "numpy": chain_numpy}
    if torch is not None:
        implementations["pytorch"] = chain_torch(torch)
    inputs = chain_inputs()
    check_agreement(implementations, inputs)
    interleaved(implementations, inputs, 2)   # warm up
    times = interleaved(implementations, inputs, rounds)
    print(f"Per-op overhead: a chain of {CHAIN_OPS} elementwise ops on an (8, 8) tensor, "
          f"forward + backward, {rounds} interleaved rounds")
    for name in implementations:
        per_op = statistics.median(times[name]) / CHAIN_OPS * 1e6
        label = {"numpy": "numpy, by hand"}.get(name, name)
        print(f"   {label:<16} {per_op:7.2f} us/op")
    ratios = {"tinyattn / numpy": median_ratio(times, "tinyattn", "numpy")}
    if torch is not None:
        ratios["tinyattn / pytorch"] = median_ratio(times, "tinyattn", "pytorch")
    for label, ratio in ratios.items():
        print(f"   {label:<20} {ratio:5.2f}x   (median of per-round ratios)")
    return ratios
