"""Attention at long lengths: the variants of chapter 2 against plain causal
`F.scaled_dot_product_attention`, one head of width 64 in float64, forward and backward, at lengths
where plain attention's (L, L) arrays are large (128 MiB each at L = 4096, 512 MiB at 8192):

    flash attention        the same function, block by block: no (L, L) array, and the blocks
                           above the diagonal skipped (the full causal layout of blocks)
    block-sparse           `F.block_sparse_attention` with a local + global layout: each block of
                           queries sees its own block and the first one, about 1/16 of the
                           causal pairs of blocks at L = 4096 in blocks of 64; the work skipped
                           is the work its mask hides, so its time is compared with flash's too
    sliding window         SDPA under a causal band of w keys: 2 L w scores, computed by chunks
    linear, causal         another kernel (phi = elu + 1): (L / C, E, Ev) states and (L / C, C, C)
                           weights within chunks of C positions, no scores

Time: the implementations are interleaved (plain, variant, ..., plain, variant, ...) and what is
reported is the median over rounds of the per-round ratio variant / plain. Memory: the peak that
tracemalloc sees during one forward and backward (`timing.peak_memory`).

Before timing, each variant is checked at a small length against what it must equal: flash
against plain causal SDPA, block-sparse attention against SDPA under the mask its layout stands
for, the sliding window against SDPA with the band as its mask, causal linear attention against
itself in one chunk (the causal L x L form, no running state).

`bench_long` is part 4 of `python -m tinyattn bench`. `bench_flash` sweeps flash's block sizes at
several lengths (the trade-off is in `tinyattn.ops.flash_attention.FlashAttention`'s docstring), to see which
does best on a given machine:

    OPENBLAS_NUM_THREADS=1 python -c \\
        "from tinyattn_tools.bench.long_attention import bench_flash; bench_flash(11)"
"""
import statistics

import tinyattn.functional as F
from tinyattn_tools.bench.timing import (attention_inputs, check_agreement, forward_backward,
                                         interleaved, median_ratio, peak_memory)

LONG_SIZES = dict(flash_length=4096, length=8192, width=64, block_size=64, window=128,
                  chunk_size=64)
BLOCK_SIZES = (32, 64, 128, 256, 512)
PLAIN = "plain causal SDPA"
SPARSE_VS_FULL = "block-sparse / full causal layout"


def num_blocks(length, block_size):
    return -(-length // block_size)


def causal_layout(length, block_size):
    """Every pair of blocks on or below the diagonal: what flash visits when causal (a local
    layout whose window holds every block)."""
    n = num_blocks(length, block_size)
    return F.local_layout(n, n)


def local_and_global_layout(length, block_size):
    """The block-sparse row's layout: each query block sees its own block (local, a window of one
    block) and the first block (global)."""
    n = num_blocks(length, block_size)
    return F.local_layout(n, 1) | F.global_layout(n, [0])


sdpa_run = forward_backward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                           is_causal=True))


def flash_run(block_size):
    return forward_backward(lambda q, k, v: F.flash_attention(q, k, v, is_causal=True,
                                                              block_size=block_size))


def block_sparse_run(block_size):
    return forward_backward(lambda q, k, v: F.block_sparse_attention(
        q, k, v, local_and_global_layout(q.shape[-2], block_size), block_size, is_causal=True))


def sliding_run(window):
    return forward_backward(lambda q, k, v: F.sliding_window_attention(q, k, v, window))


def linear_run(chunk_size):
    return forward_backward(lambda q, k, v: F.linear_attention(q, k, v, is_causal=True,
                                                               chunk_size=chunk_size))


def variant_names(block_size, window, chunk_size):
    """The variants' names in the table: (flash, block-sparse, sliding window, linear)."""
    return (f"flash (block {block_size})", f"block-sparse, local + global ({block_size})",
            f"sliding window (w = {window})", f"linear, causal (C = {chunk_size})")


def sdpa_under(mask):
    return forward_backward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                           attn_mask=mask))


def check_against_references(length, block_size, window, chunk_size, tolerance=1e-10):
    """Each variant at `length` against what it must equal: outputs and all gradients."""
    sparse_mask = (F.layout_mask(local_and_global_layout(length, block_size), block_size, length)
                   & F.local_mask(length, length))                  # and-ed with the causal mask
    pairs = [(flash_run(block_size), sdpa_run),
             (block_sparse_run(block_size), sdpa_under(sparse_mask)),
             (sliding_run(window), sdpa_under(F.local_mask(length, window))),
             (linear_run(chunk_size), linear_run(length))]
    inputs = attention_inputs(length)
    for name, (variant, reference) in zip(variant_names(block_size, window, chunk_size), pairs):
        check_agreement({name: variant, "reference": reference}, inputs, rtol=tolerance,
                        atol=tolerance, reference="reference")


def bench_long(rounds, flash_length=4096, length=8192, width=64, block_size=64, window=128,
               chunk_size=64):
    """Print flash and block-sparse attention at `flash_length`, the sliding window and causal
    linear attention at `length`, each against plain causal SDPA at the same length and in the
    same rounds, then block-sparse against flash; returns {variant: (time / plain time,
    peak / plain peak)}, and under SPARSE_VS_FULL (time / flash time, visited pairs / flash's)."""
    check_against_references(3 * max(block_size, window, chunk_size) + 5, block_size, window,
                             chunk_size)
    flash, sparse, sliding, linear = variant_names(block_size, window, chunk_size)
    groups = {flash_length: {flash: flash_run(block_size), sparse: block_sparse_run(block_size)},
              length: {sliding: sliding_run(window), linear: linear_run(chunk_size)}}
    print(f"   {'':<34} {'L':>5} {'time':>9} {'peak memory':>12} {'time / plain':>13} "
          f"{'peak / plain':>13}")
    ratios = {}
    for group_length, variants in groups.items():
        implementations = {PLAIN: sdpa_run, **variants}
        inputs = attention_inputs(group_length, width)
        times = interleaved(implementations, inputs, rounds)
        peaks = {name: peak_memory(run, inputs) for name, run in implementations.items()}
        for name in implementations:
            line = (f"   {name:<34} {group_length:>5} {statistics.median(times[name]):7.3f} s "
                    f"{peaks[name] / 2 ** 20:8.1f} MiB")
            if name != PLAIN:
                ratios[name] = (median_ratio(times, name, PLAIN), peaks[name] / peaks[PLAIN])
                time_ratio, memory_ratio = ratios[name]
                line += f" {time_ratio:12.3f}x {f'1/{1 / memory_ratio:.0f}':>13}"
            print(line)
        if sparse in variants:
            full = causal_layout(group_length, block_size)
            visited = (local_and_global_layout(group_length, block_size) & full).sum()
            ratios[SPARSE_VS_FULL] = (median_ratio(times, sparse, flash), visited / full.sum())
            print(f"   {SPARSE_VS_FULL} (flash) at L = {group_length}: time "
                  f"{ratios[SPARSE_VS_FULL][0]:.3f}x, for {visited} of the {full.sum()} pairs of "
                  f"blocks (1/{full.sum() / visited:.1f})")
    return ratios


def visited_pairs(length, block_size):
    """How many (query block, key block) pairs causal flash attention visits."""
    return int(causal_layout(length, block_size).sum())


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
