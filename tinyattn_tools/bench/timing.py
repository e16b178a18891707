"""How every benchmark measures: interleaved rounds, the median of per-round ratios, and the peak
memory that tracemalloc sees; and one step of attention to measure, forward and backward."""
import statistics
import time
import tracemalloc

import numpy as np

import tinyattn as ta


def interleaved(implementations, inputs, rounds, clock=time.perf_counter):
    """Seconds per call of each implementation, one list entry per round, run A B C A B C ...

    `clock` is the wall clock by default; `time.process_time` counts only the processor time
    this process used, leaving out the time it waited for a core on a busy machine."""
    times = {name: [] for name in implementations}
    for _ in range(rounds):
        for name, fn in implementations.items():
            start = clock()
            fn(*inputs)
            times[name].append(clock() - start)
    return times


def median_ratio(times, name, baseline):
    """The median over rounds of time(name) / time(baseline), both measured in the same round."""
    return statistics.median(t / b for t, b in zip(times[name], times[baseline]))


def check_agreement(implementations, inputs, rtol=1e-6, atol=1e-9, reference="numpy"):
    """All implementations must compute the same arrays as the `reference` one before their speed
    means anything, and keep its dtype."""
    results = {name: fn(*inputs) for name, fn in implementations.items()}
    for name, result in results.items():
        for got, want in zip(result, results[reference]):
            if got.dtype != want.dtype:
                raise AssertionError(f"bench: {name} computed a {got.dtype} array, not "
                                     f"{want.dtype}")
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol,
                                       err_msg=f"bench: {name} computes different arrays")


def peak_memory(fn, inputs):
    """The most bytes traced at once during fn(*inputs), beyond what was held before: NumPy reports
    its arrays to tracemalloc. Measured in a run of its own, since tracing slows Python down."""
    tracemalloc.start()
    try:
        fn(*inputs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def attention_inputs(length, width=64, seed=0):
    """query, key, value and the upstream gradient dL/d(output): (length, width) float64 arrays."""
    random = np.random.default_rng(seed)
    return [random.standard_normal((length, width)) for _ in range(4)]


def forward_backward(attend):
    """attend(query, key, value) as a step to measure: fresh leaves, forward, backward with the
    upstream gradient; returns [output, dL/dquery, dL/dkey, dL/dvalue]."""
    def run(query, key, value, grad_out):
        leaves = [ta.Tensor(x, requires_grad=True) for x in (query, key, value)]
        out = attend(*leaves)
        out.backward(grad_out)
        return [out.data] + [x.grad for x in leaves]
    return run
