"""Long attention: `F.flash_attention` against plain `F.scaled_dot_product_attention`, causal, one
head of width 64 in float64, forward and backward, at a length where the (L, S) arrays of plain
attention are large (L = 4096: 128 MiB each) and at shorter ones, for several block sizes.

Time: the two are interleaved (plain, flash 32, flash 64, ..., plain, ...) and the median over
rounds of the per-round ratio is reported. Memory: the peak that tracemalloc sees (NumPy reports
its arrays to it) during one forward and backward, measured in separate runs, since tracing slows
Python down. BLAS should run on one thread (OPENBLAS_NUM_THREADS=1).
"""
import statistics
import tracemalloc

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.ops.flash_attention import blocks, visible
from tinyattn.tools.bench.timing import check_agreement, interleaved, median_ratio

BLOCK_SIZES = (32, 64, 128, 256, 512)


def attention_inputs(length, width, seed=0):
    """query, key, value and the upstream gradient dL/d(output): (length, width) float64 arrays."""
    random = np.random.default_rng(seed)
    return [random.standard_normal((length, width)) for _ in range(4)]


def sdpa_run(query, key, value, grad_out):
    """Plain causal attention, forward and backward: [output, dL/dquery, dL/dkey, dL/dvalue]."""
    return attention_run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                         query, key, value, grad_out)


def flash_run(block_size):
    """Causal flash attention with this block size, run as `sdpa_run` is."""
    def run(query, key, value, grad_out):
        return attention_run(lambda q, k, v: F.flash_attention(q, k, v, is_causal=True,
                                                               block_size=block_size),
                             query, key, value, grad_out)
    return run


def attention_run(attend, query, key, value, grad_out):
    leaves = [ta.Tensor(x, requires_grad=True) for x in (query, key, value)]
    out = attend(*leaves)
    out.backward(grad_out)
    return [out.data] + [x.grad for x in leaves]


def peak_memory(run, inputs):
    """The largest amount of memory traced at once during `run(*inputs)`, in bytes."""
    tracemalloc.start()
    try:
        run(*inputs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def visited_pairs(length, block_size):
    """How many (query block, key block) pairs causal flash attention visits."""
    spans = blocks(length, block_size)
    return sum(visible(rows, cols, is_causal=True) for rows in spans for cols in spans)


def bench_flash(rounds, lengths=(4096, 1024, 256, 64), width=64, block_sizes=BLOCK_SIZES):
    """Prints, for each length and block size, flash's time and peak memory as ratios to plain
    attention's, and flash's time per visited pair of blocks; returns
    {(length, block_size): (time ratio, memory ratio)}."""
    print(f"Causal attention, one head, width {width}, float64, forward + backward: flash / plain "
          f"(time: median of {rounds} interleaved rounds)")
    print(f"{'L':>6} {'block':>6} {'time ratio':>11} {'memory ratio':>13} {'pairs':>6} "
          f"{'us/pair':>8}   plain: time, peak")
    ratios = {}
    for length in lengths:
        inputs = attention_inputs(length, width)
        implementations = {"plain": sdpa_run}
        implementations.update({block: flash_run(block) for block in block_sizes})
        check_agreement(implementations, inputs, rtol=1e-10, atol=1e-12, reference="plain")
        memory = {name: peak_memory(run, inputs) for name, run in implementations.items()}
        times = interleaved(implementations, inputs, rounds)
        plain = (f"{statistics.median(times['plain']) * 1e3:.1f} ms, "
                 f"{memory['plain'] / 2 ** 20:.1f} MiB")
        for block in block_sizes:
            ratios[length, block] = (median_ratio(times, block, "plain"),
                                     memory[block] / memory["plain"])
            time_ratio, memory_ratio = ratios[length, block]
            pairs = visited_pairs(length, block)
            per_pair = statistics.median(times[block]) / pairs * 1e6
            print(f"{length:>6} {block:>6} {time_ratio:>10.2f}x {memory_ratio:>7.3f} (1/"
                  f"{1 / memory_ratio:.0f}) {pairs:>6} {per_pair:>8.0f}   {plain}")
            plain = ""
    pair_cost = statistics.median(interleaved({1: flash_run(1)}, attention_inputs(32, width),
                                              rounds)[1]) / visited_pairs(32, 1)
    print(f"A pair of 1 x 1 blocks (L = 32, block 1), where the arithmetic is nothing: "
          f"{pair_cost * 1e6:.0f} us per pair, the cost of the NumPy calls themselves")
    return ratios
