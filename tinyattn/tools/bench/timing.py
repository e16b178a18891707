"""How every benchmark measures: interleaved rounds, and the median of per-round ratios."""
import statistics
import time

import numpy as np


def interleaved(implementations, inputs, rounds):
    """Seconds per call of each implementation, one list entry per round, run A B C A B C ..."""
    times = {name: [] for name in implementations}
    for _ in range(rounds):
        for name, fn in implementations.items():
            start = time.perf_counter()
            fn(*inputs)
            times[name].append(time.perf_counter() - start)
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
