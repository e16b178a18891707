"""How every benchmark measures: interleaved rounds, the median of per-round ratios, and the peak
memory that tracemalloc sees."""
import statistics
import time
import tracemalloc

import numpy as np


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
