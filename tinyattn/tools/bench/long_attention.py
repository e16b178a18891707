"""Attention at long lengths: the variants of chapter 2 against plain causal
`F.scaled_dot_product_attention`, one head of width 64 in float64, forward and backward, at lengths
where plain attention's (L, L) arrays are large (128 MiB each at L = 4096, 512 MiB at 8192):

    flash attention        the same function, block by block: no (L, L) array, and the blocks
                           above the diagonal skipped
    sliding window         SDPA under a causal band of w keys: 2 L w scores, computed by chunks
    linear, causal         another kernel (phi = elu + 1): (L / C, E, Ev) states and (L / C, C, C)
                           weights within chunks of C positions, no scores

Time: the implementations are interleaved (plain, variant, ..., plain, variant, ...) and what is
reported is the median over rounds of the per-round ratio variant / plain. Memory: the peak that
tracemalloc sees during one forward and backward (`timing.peak_memory`).

Before timing, each variant is checked at a small length against what it must equal: flash
against plain causal SDPA, the sliding window against SDPA with the band as its mask, causal
linear attention against itself in one chunk (the causal L x L form, no running state).

`bench_long` is part 4 of `python -m tinyattn bench`. `bench_flash` sweeps flash's block sizes at
several lengths (the trade-off is in `tinyattn.ops.FlashAttention`'s docstring), to choose one on
a given machine:

    OPENBLAS_NUM_THREADS=1 python -c \
        "from tinyattn.tools.bench.long_attention import bench_flash; bench_flash(11)"
"""
import statistics

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.ops.flash_attention import blocks, visible
from tinyattn.tools.bench.timing import check_agreement, interleaved, median_ratio, peak_memory

LONG_SIZES = dict(flash_length=4096, length=8192, width=64, block_size=128, window=128,
                  chunk_size=64)
BLOCK_SIZES = (32, 64, 128, 256, 512)
PLAIN = "plain causal SDPA"


def attention_inputs(length, width=64, seed=0):
    """query, key, value and the upstream gradient dL/d(output): (length, width) float64 arrays."""
    random = np.random.default_rng(seed)
    return [random.standard_normal((length, width)) for _ in range(4)]


def forward_backward(attend):
    """attend(query, key, value) as a benchmark step: fresh leaves, forward, backward with the
    upstream gradient; returns [output, dL/dquery, dL/dkey, dL/dvalue]."""
    def run(query, key, value, grad_out):
        leaves = [ta.Tensor(x, requires_grad=True) for x in (query, key, value)]
        out = attend(*leaves)
        out.backward(grad_out)
        return [out.data] + [x.grad for x in leaves]
    return run


sdpa_run = forward_backward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                           is_causal=True))


def flash_run(block_size):
    return forward_backward(lambda q, k, v: F.flash_attention(q, k, v, is_causal=True,
                                                              block_size=block_size))


def sliding_run(window):
    return forward_backward(lambda q, k, v: F.sliding_window_attention(q, k, v, window))


def linear_run(chunk_size):
    return forward_backward(lambda q, k, v: F.linear_attention(q, k, v, is_causal=True,
                                                               chunk_size=chunk_size))


def variant_names(block_size, window, chunk_size):
    """The variants' names in the table: (flash, sliding window, linear)."""
    return (f"flash (block {block_size})", f"sliding window (w = {window})",
            f"linear, causal (C = {chunk_size})")


def check_against_references(length, block_size, window, chunk_size, tolerance=1e-10):
    """Each variant at `length` against what it must equal: outputs and all gradients."""
    band = F.local_mask(length, window)
    pairs = [(flash_run(block_size), sdpa_run),
             (sliding_run(window),
              forward_backward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                              attn_mask=band))),
             (linear_run(chunk_size), linear_run(length))]
    inputs = attention_inputs(length)
    for name, (variant, reference) in zip(variant_names(block_size, window, chunk_size), pairs):
        check_agreement({name: variant, "reference": reference}, inputs, rtol=tolerance,
                        atol=tolerance, reference="reference")


def bench_long(rounds, flash_length=4096, length=8192, width=64, block_size=128, window=128,
               chunk_size=64):
    """Print flash at `flash_length`, the sliding window and causal linear attention at `length`,
    each against plain causal SDPA at the same length and in the same rounds; returns
    {variant: (time / plain time, peak / plain peak)}."""
    check_against_references(3 * max(block_size, window, chunk_size) + 5, block_size, window,
                             chunk_size)
    flash, sliding, linear = variant_names(block_size, window, chunk_size)
    groups = {flash_length: {flash: flash_run(block_size)},
              length: {sliding: sliding_run(window), linear: linear_run(chunk_size)}}
    print(f"   {'':<28} {'L':>5} {'time':>9} {'peak memory':>12} {'time / plain':>13} "
          f"{'peak / plain':>13}")
    ratios = {}
    for group_length, variants in groups.items():
        implementations = {PLAIN: sdpa_run, **variants}
        inputs = attention_inputs(group_length, width)
        times = interleaved(implementations, inputs, rounds)
        peaks = {name: peak_memory(run, inputs) for name, run in implementations.items()}
        for name in implementations:
            line = (f"   {name:<28} {group_length:>5} {statistics.median(times[name]):7.3f} s "
                    f"{peaks[name] / 2 ** 20:8.1f} MiB")
            if name != PLAIN:
                ratios[name] = (median_ratio(times, name, PLAIN), peaks[name] / peaks[PLAIN])
                time_ratio, memory_ratio = ratios[name]
                line += f" {time_ratio:12.3f}x {f'1/{1 / memory_ratio:.0f}':>13}"
            print(line)
    return ratios


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


LONG_ROUNDS = 3      # at most: one round of plain attention at L = 8192 takes seconds


def bench_long_attention(rounds, torch=None):
    """Part 4, with at most LONG_ROUNDS rounds whatever `rounds` says."""
    rounds = min(rounds, LONG_ROUNDS)
    print(f"Attention at long lengths: causal, one head, width {LONG_SIZES['width']}, float64, "
          f"forward + backward,\n   against plain causal SDPA at the same length; {rounds} "
          f"interleaved rounds (at most {LONG_ROUNDS}, whatever\n   --rounds says: the long runs "
          "take seconds each), peak memory from tracemalloc")
    return bench_long(rounds, **LONG_SIZES)
