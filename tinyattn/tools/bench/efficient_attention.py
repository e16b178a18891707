"""Attention that scales, against plain attention at a length where the (L, L) arrays hurt.

One head, width 64, float64, forward and backward: plain causal SDPA (its (L, L) scores, weights
and their gradients), sliding-window attention (2 L w scores) and causal linear attention (no
scores at all: (L / C, E, Ev) states and (L / C, C, C) weights inside the chunks). Times come from
interleaved rounds (the speed-up is the median over rounds of SDPA's time / the variant's time,
both from the same round); peak memory is what tracemalloc sees NumPy allocate during one
forward + backward, measured in a pass of its own (tracing slows the allocations it counts).

The three do not compute the same function: sliding-window attention is SDPA under a banded
mask, linear attention another kernel altogether. Before timing, each is checked at a small length
against what it must equal: SDPA with the band, and linear attention computed as one chunk.
"""
import statistics
import tracemalloc

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.tools.bench.timing import interleaved, median_ratio

EFFICIENT_SIZES = dict(length=8192, width=64, window=128)
SDPA, SLIDING, LINEAR = "sdpa, causal", "sliding window", "linear, causal"


def efficient_inputs(length, width=64, seed=0):
    """query, key, value (L, width) and an upstream gradient, standard normal float64."""
    random = np.random.default_rng(seed)
    return [random.standard_normal((length, width)) for _ in range(4)]


def forward_backward(attend):
    """attend(query, key, value) as a benchmark step: fresh leaves, forward, backward with the
    upstream gradient; returns the output and the three gradients."""
    def run(query, key, value, upstream):
        leaves = [ta.tensor(a, requires_grad=True) for a in (query, key, value)]
        out = attend(*leaves)
        out.backward(upstream)
        return [out.data] + [leaf.grad for leaf in leaves]
    return run


def efficient_implementations(window, chunk_size=64):
    return {
        SDPA: forward_backward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                             is_causal=True)),
        SLIDING: forward_backward(lambda q, k, v: F.sliding_window_attention(q, k, v, window)),
        LINEAR: forward_backward(lambda q, k, v: F.linear_attention(q, k, v, is_causal=True,
                                                                chunk_size=chunk_size)),
    }


def efficient_references(window, length):
    """What each variant must equal, as forward + backward steps: SDPA under the band, and causal
    linear attention in a single chunk (the plain causal L x L form, no running state)."""
    band = F.local_mask(length, window)
    return {
        SLIDING: forward_backward(lambda q, k, v: F.scaled_dot_product_attention(
            q, k, v, attn_mask=band)),
        LINEAR: forward_backward(lambda q, k, v: F.linear_attention(
            q, k, v, is_causal=True, chunk_size=length)),
    }


def check_efficient_agreement(window, length, chunk_size=64, tolerance=1e-10):
    """Each variant, at `length`, against its reference: outputs and all gradients."""
    inputs = efficient_inputs(length)
    variants = efficient_implementations(window, chunk_size)
    for name, reference in efficient_references(window, length).items():
        for got, want in zip(variants[name](*inputs), reference(*inputs)):
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance,
                                       err_msg=f"bench: {name} computes different arrays")


def peak_memory(fn, inputs):
    """The most bytes NumPy held at once during fn(*inputs), beyond what was held before."""
    tracemalloc.start()
    try:
        fn(*inputs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def bench_efficient(rounds, length=8192, width=64, window=128, chunk_size=64):
    """Print the table; return {variant: (speed-up over SDPA, SDPA's peak / the variant's)}."""
    check_efficient_agreement(window, length=3 * window + 5, chunk_size=chunk_size)
    implementations = efficient_implementations(window, chunk_size)
    inputs = efficient_inputs(length, width)
    times = interleaved(implementations, inputs, rounds)
    peaks = {name: peak_memory(fn, inputs) for name, fn in implementations.items()}
    print(f"3. Attention that scales: one head, L = {length}, width {width}, float64, forward + "
          f"backward (window w = {window}, chunks of C = {chunk_size}), {rounds} interleaved "
          "rounds")
    print(f"   {'':<16} {'time':>9} {'peak memory':>12} {'faster than SDPA':>17} "
          f"{'SDPA peak / peak':>17}")
    ratios = {}
    for name in implementations:
        speedup = median_ratio(times, SDPA, name)
        memory_ratio = peaks[SDPA] / peaks[name]
        ratios[name] = (speedup, memory_ratio)
        print(f"   {name:<16} {statistics.median(times[name]):7.3f} s "
              f"{peaks[name] / 2**20:8.1f} MiB {speedup:16.1f}x {memory_ratio:16.1f}x")
    return ratios
