"""Demo 7: the quadratic cost of attention, and four ways around it.

What it shows: plain attention scores every query against every key, so its forward and backward
hold (L, L) arrays: doubling the length quadruples the memory, and the time follows. It measures
one causal head of width 64 in float64, forward + backward with a random upstream gradient, at
L = 256 ... 16,384, for

    plain SDPA        F.scaled_dot_product_attention(q, k, v, is_causal=True)
    flash             F.flash_attention(q, k, v, is_causal=True): the same function, block by
                      block (blocks of 64, its default): every pair of blocks on or below the
                      diagonal, the full causal layout
    block-sparse      F.block_sparse_attention(q, k, v, layout, 64, is_causal=True) with a local
                      + global layout: each block of 64 queries sees its own block and the first
                      one; flash's algorithm over those pairs of blocks only
    sliding window    F.sliding_window_attention(q, k, v, window=256): each query sees its 256
                      latest keys only
    linear, causal    F.linear_attention(q, k, v, is_causal=True, chunk_size=64): exp(q . k)
                      replaced by phi(q) . phi(k), phi = elu + 1

Time is processor time (`time.process_time`: the time this process computed, not the time it
waited for a core on a busy machine), the median over interleaved rounds (5 up to L = 1024, 3
beyond); peak memory is what tracemalloc sees NumPy allocate during one forward + backward (a run
of its own: tracing slows Python down). The slopes of log(cost) against log(L), fitted over the four
largest lengths each one ran at, say how the cost grows: 2 is quadratic, 1 linear. Plain SDPA is
skipped where its peak, predicted from the bytes per L^2 it needed at the largest length it ran
at, would pass a memory budget of 2.5 GiB, and the tables say so. Block-sparse attention visits
about 2 L / 64 pairs of blocks where flash visits about (L / 64)^2 / 2: the demo prints its time
over flash's, measured in the same rounds, at L = 4,096, with the share of the pairs it visits.

Then, on the same inputs at L = 1024, what each computes, against plain causal attention. Flash
attention is plain attention computed in another order: its differences are rounding.
Block-sparse attention is SDPA under the mask its layout stands for, to rounding too, and that
is another function than plain attention. The sliding window is plain attention for the first w
queries, whose keys all lie in their window; each later query loses the part of its plain
attention weight that falls outside the window (random queries and keys spread their weight over
every key they see), and the demo measures how much that is. Linear attention weighs the values
by phi(q) . phi(k) instead of exp(q . k): another function altogether. These three are models of
their own, trained as such, not approximations of plain attention. Last, a picture of attention
patterns, drawn from the masks and layouts of `tinyattn/functional/sparse_patterns.py`: full,
causal, local (the sliding window's band), the Sparse Transformer's (local + strided), Longformer's
(a band and global tokens) and the block-sparse layout timed above (local + global blocks).

    python demos/07_quadratic_cost.py [output folder] [--quick]

It draws `quadratic_cost.png` and `attention_patterns.png` in the output folder. BLAS runs on one
thread. `--quick` measures L = 256 ... 2048, one timed round each, with a budget of 64 MiB so
that the skip shows there too (a few seconds). Its full run's time, as `demos/regenerate.py`
measured it, ends its entry in the README.
"""
import statistics
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
from tinyattn.tools.bench.timing import (attention_inputs, forward_backward, interleaved,
                                         median_ratio, peak_memory)

WIDTH = 64
BLOCK = 64                 # flash's and block-sparse attention's blocks (their default)
WINDOW = 256
CHUNK = 64                 # linear attention's chunks (its default)
FULL = dict(lengths=[256, 512, 1024, 2048, 4096, 8192, 16384], budget=2.5 * 2 ** 30)
QUICK = dict(lengths=[256, 512, 1024, 2048], budget=64 * 2 ** 20)
FIT_POINTS = 4             # slopes are fitted over this many of the largest lengths
COMPARE_LENGTH = 1024      # where the outputs are compared
SPARSE_LENGTH = 4096       # where block-sparse attention's time is quoted against flash's
PATTERN_LENGTH, PATTERN_WINDOW, PATTERN_STRIDE, GLOBAL_TOKENS = 64, 8, 8, (0, 32)
PATTERN_BLOCK = 8          # the block of the block-sparse pattern drawn at L = 64
GIB, MIB = 2 ** 30, 2 ** 20


def local_and_global(length, block_size):
    """Each block of queries sees its own block of keys (a local window of one block) and the
    first block (a global one): (Lb, Lb) booleans."""
    n = -(-length // block_size)                  # blocks, the last one maybe short
    return F.local_layout(n, 1) | F.global_layout(n, [0])


def block_sparse(q, k, v):
    layout = local_and_global(q.shape[-2], BLOCK)                   # (L / 64, L / 64)
    return F.block_sparse_attention(q, k, v, layout, BLOCK, is_causal=True)     # (L, 64)


# Each run: (query, key, value, dL/d(output)) -> [output, dL/dquery, dL/dkey, dL/dvalue]
RUNS = {
    "plain": forward_backward(lambda q, k, v: F.scaled_dot_product_attention(q, k, v,
                                                                             is_causal=True)),
    "flash": forward_backward(lambda q, k, v: F.flash_attention(q, k, v, is_causal=True,
                                                                block_size=BLOCK)),
    "block_sparse": forward_backward(block_sparse),
    "sliding": forward_backward(lambda q, k, v: F.sliding_window_attention(q, k, v, WINDOW)),
    "linear": forward_backward(lambda q, k, v: F.linear_attention(q, k, v, is_causal=True,
                                                                  chunk_size=CHUNK)),
}
LABELS = {"plain": "plain SDPA", "flash": f"flash (block {BLOCK})",
          "block_sparse": f"block-sparse, local + global ({BLOCK})",
          "sliding": f"sliding window (w = {WINDOW})", "linear": f"linear, causal (C = {CHUNK})"}

README_ENTRY = """\
7. [`07_quadratic_cost.py`](demos/07_quadratic_cost.py) — **the quadratic cost.** One causal head
   of width {width}, forward + backward, at L = {smallest_length:,} … {largest_length:,}. Plain
   attention's peak memory grows as L^{slope_memory_plain:.2f} (the slope on a log-log plot):
   {plain_peak_gib:.1f} GiB at L = {plain_largest_length:,}, and {plain_predicted_gib:.1f} GiB
   predicted at {plain_skipped_from:,}, past the demo's {budget_gib:.3g} GiB budget, so it is
   skipped there. Flash attention computes the same function (largest difference
   {flash_max_difference:.0e}, gradients included) in memory growing as
   L^{slope_memory_flash:.2f} ({flash_memory_ratio:.0f}× less than plain at L =
   {plain_largest_length:,}, and {flash_speedup:.1f}× faster), but its time still grows as
   L^{slope_time_flash:.1f} (plain: L^{slope_time_plain:.1f}). Block-sparse attention with a local +
   global layout (each block of {block} queries sees its own block and the first one) visits
   {block_sparse_pairs:,} of the {causal_pairs:,} pairs of blocks that causal flash visits at L =
   {sparse_length:,}, and there takes {block_sparse_vs_flash:.2f}× flash's time (measured in the
   same rounds); its time grows as L^{slope_time_block_sparse:.1f}. It computes SDPA under the mask
   its layout stands for (largest difference {block_sparse_max_difference:.0e}), which is another
   function than plain attention (at L = {compare_length:,}, ||out - plain|| / ||plain|| =
   {block_sparse_relative_error:.2f}: each query averages the values of at most 2 × {block} keys,
   its own block's and the first block's, instead of all the keys before it). The sliding window
   (w = {window}) and causal linear attention grow as L^{slope_time_sliding:.1f} and
   L^{slope_time_linear:.1f} in time ({sliding_speedup:.0f}× and {linear_speedup:.0f}× faster
   than plain at L = {plain_largest_length:,}) and as L^{slope_memory_sliding:.2f} and
   L^{slope_memory_linear:.2f} in memory, but compute other functions: on random inputs at L =
   {compare_length:,} their outputs are {sliding_relative_error:.0%} and
   {linear_relative_error:.0%} away from plain attention's (relative error), and past the first
   {window} queries, {weight_outside_window_mean:.0%} of a query's plain attention weight lies
   outside its window on average.

   ![time and peak memory against L, log-log, with fitted slopes](docs/pictures/quadratic_cost.png)

   ![six attention patterns, from full to block-sparse](docs/pictures/attention_patterns.png)"""


def rounds_at(length, quick):
    """Timed rounds at this length: fewer where one round takes seconds, one in a quick run."""
    return 1 if quick else 5 if length <= 1024 else 3


def size(bytes_):
    """A number of bytes in GiB, or in MiB below 1 GiB."""
    return f"{bytes_ / GIB:.3g} GiB" if bytes_ >= GIB else f"{bytes_ / MIB:.3g} MiB"


def measure_costs(lengths, budget, quick=False):
    """Time and peak memory of every variant at every length, plain SDPA only while its predicted
    peak fits the budget: {length: {"times": {name: [s per round]}, "peaks": {name: bytes},
    "plain_predicted": bytes, or None before plain has run}}."""
    costs, plain_bytes_per_square = {}, None
    for length in lengths:
        start = time.perf_counter()
        predicted = (None if plain_bytes_per_square is None
                     else plain_bytes_per_square * length ** 2)     # plain SDPA's peak, bytes
        runs = {name: run for name, run in RUNS.items()
                if name != "plain" or predicted is None or predicted <= budget}
        inputs = attention_inputs(length, WIDTH)      # query, key, value, upstream: (L, 64)
        times = interleaved(runs, inputs, rounds_at(length, quick), clock=time.process_time)
        peaks = {name: peak_memory(run, inputs) for name, run in runs.items()}
        if "plain" in peaks:
            plain_bytes_per_square = peaks["plain"] / length ** 2
        costs[length] = {"times": times, "peaks": peaks, "plain_predicted": predicted}
        print(f"  L = {length:>6,}: measured in {time.perf_counter() - start:5.1f} s"
              + ("" if "plain" in peaks else
                 f" (plain SDPA skipped: it would need about {size(predicted)})"),
              flush=True)
    return costs


def median_time(cost, name):
    return statistics.median(cost["times"][name])


def peak_mib(cost, name):
    return cost["peaks"][name] / MIB


def slope(costs, name, value):
    """The slope of log(value) against log(L) over the FIT_POINTS largest lengths `name` ran at,
    `value(cost, name)` giving its time or peak at one length."""
    lengths = [length for length, cost in costs.items() if name in cost["peaks"]][-FIT_POINTS:]
    values = [value(costs[length], name) for length in lengths]
    return float(np.polyfit(np.log(lengths), np.log(values), 1)[0])


def compare_outputs(length):
    """On the same inputs: each variant's output and gradients against plain causal SDPA's, and
    block-sparse attention's against SDPA under its layout's mask; the share of each query's plain
    attention weight that falls outside its window."""
    inputs = attention_inputs(length, WIDTH)
    plain = RUNS["plain"](*inputs)                    # [out, dL/dq, dL/dk, dL/dv]
    sparse_mask = (F.layout_mask(local_and_global(length, BLOCK), BLOCK, length)
                   & F.local_mask(length, length))    # (L, L) the layout's mask, and causal
    masked = forward_backward(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=sparse_mask))(*inputs)
    compared = {}
    for name in ("flash", "block_sparse", "sliding", "linear"):
        results = RUNS[name](*inputs)
        compared[name] = {
            "out": largest_difference(results[:1], plain[:1]),
            "grads": largest_difference(results[1:], plain[1:]),
            "relative": float(np.linalg.norm(results[0] - plain[0]) / np.linalg.norm(plain[0])),
            "first_window": float(np.abs(results[0][:WINDOW] - plain[0][:WINDOW]).max()),
        }
    compared["block_sparse"]["masked_sdpa"] = largest_difference(RUNS["block_sparse"](*inputs),
                                                                 masked)
    query, key, value, _ = inputs
    _, weights = F.attention(ta.tensor(query), ta.tensor(key), ta.tensor(value), is_causal=True)
    outside = (weights.data * ~F.local_mask(length, WINDOW)).sum(axis=-1)     # (L,) per query
    return compared, outside


def largest_difference(arrays, references):
    return float(max(np.abs(got - want).max() for got, want in zip(arrays, references)))


def sparse_against_flash(cost, length):
    """Block-sparse attention's time over flash's (the full causal layout), measured in the same
    rounds at `length`, and how many pairs of blocks each visits."""
    n = -(-length // BLOCK)
    causal = F.local_layout(n, n)         # (Lb, Lb) a window of every block: the causal layout
    return {"sparse_length": length,
            "block_sparse_vs_flash": median_ratio(cost["times"], "block_sparse", "flash"),
            "block_sparse_pairs": int((local_and_global(length, BLOCK) & causal).sum()),
            "causal_pairs": int(causal.sum())}


def print_costs(costs, budget):
    names = list(RUNS)
    for title, value in (("Time of one forward + backward, processor seconds", median_time),
                         ("Peak memory (tracemalloc), in MiB", peak_mib)):
        print(f"\n{title}:\n")
        rows = [[f"{length:,}"] + [f"{value(cost, name):.3g}" if name in cost["peaks"]
                                   else "skipped" for name in names]
                for length, cost in costs.items()]
        rows.append(["slope"] + [f"{slope(costs, name, value):.2f}" for name in names])
        demo_tools.print_table(["L"] + [LABELS[name] for name in names], rows)
    skipped = [(length, cost["plain_predicted"]) for length, cost in costs.items()
               if "plain" not in cost["peaks"]]
    if skipped:
        print(f"\nskipped: plain SDPA, where its predicted peak passes the budget of "
              f"{size(budget)}: " + ", ".join(f"{size(predicted)} at L = {length:,}"
                                              for length, predicted in skipped))
    print(f"slope: the least-squares slope of log(cost) against log(L), over the {FIT_POINTS} "
          "largest lengths each ran at")


def print_comparison(compared, outside, length):
    print(f"\nWhat they compute: the same random inputs at L = {length:,}, against plain causal "
          "SDPA:\n")
    rows = [[LABELS[name], f"{c['out']:.1e}", f"{c['grads']:.1e}", f"{c['relative']:.2g}",
             f"{c['first_window']:.1e}"] for name, c in compared.items()]
    demo_tools.print_table(["variant", "max |out - plain|", "max |grad - plain's|",
                            "||out - plain|| / ||plain||", f"first {WINDOW}: max |out - plain|"],
                           rows)
    print(f"\nBlock-sparse attention against SDPA under the mask its layout stands for: largest "
          f"difference {compared['block_sparse']['masked_sdpa']:.1e}, gradients included.")
    print(f"\nPlain attention weight outside the window (w = {WINDOW}): "
          f"{outside[WINDOW:].mean():.0%} on average over queries {WINDOW} ... {length - 1}, "
          f"{outside[-1]:.0%} for the last one.")


def plot_costs(costs, budget, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    for axes, value, unit in ((time_axes, median_time, "processor seconds"),
                              (memory_axes, peak_mib, "MiB")):
        for name, marker in zip(RUNS, "osvD^"):
            lengths = [length for length, cost in costs.items() if name in cost["peaks"]]
            axes.plot(lengths, [value(costs[length], name) for length in lengths], marker=marker,
                      label=f"{LABELS[name]}: slope {slope(costs, name, value):.2f}")
        axes.set(xscale="log", yscale="log", xlabel="L (queries = keys)", ylabel=unit)
        axes.set_xticks(list(costs), [f"{length:,}" for length in costs])
        axes.set_xticks([], minor=True)
    skipped = [(length, cost["plain_predicted"] / MIB) for length, cost in costs.items()
               if "plain" not in cost["peaks"]]
    if skipped:
        memory_axes.plot(*zip(*skipped), "o", markerfacecolor="none", color="C0",
                         label="plain SDPA, predicted (skipped)")
    memory_axes.axhline(budget / MIB, color="grey", linestyle=":",
                        label=f"budget ({size(budget)})")
    time_axes.set_title("Time of one forward + backward")
    memory_axes.set_title("Peak memory (tracemalloc)")
    for axes in (time_axes, memory_axes):
        axes.legend(fontsize=8)
    figure.suptitle(f"Causal attention, one head of width {WIDTH}, float64: slope 2 = "
                    "quadratic in L, 1 = linear")
    return demo_tools.save_figure(figure, path, dpi=110)


def attention_patterns(length):
    """{title: (L, L) booleans, True where query i (row) may attend to key j (column)}."""
    causal = F.local_mask(length, length)         # a window of every key: causal attention
    layout = local_and_global(length, PATTERN_BLOCK)
    return {
        "full": np.ones((length, length), dtype=bool),
        "causal": causal,
        f"local (sliding window,\nw = {PATTERN_WINDOW})": F.local_mask(length, PATTERN_WINDOW),
        f"Sparse Transformer (local\n+ strided, stride {PATTERN_STRIDE})":
            F.sparse_transformer_mask(length, PATTERN_STRIDE),
        f"global (Longformer: band\n|i - j| < {PATTERN_WINDOW}, tokens "
        f"{', '.join(map(str, GLOBAL_TOKENS))})":
            F.longformer_mask(length, PATTERN_WINDOW, GLOBAL_TOKENS),
        f"block-sparse (local + global\nblocks of {PATTERN_BLOCK}, causal)":
            F.layout_mask(layout, PATTERN_BLOCK, length) & causal,
    }


def plot_patterns(patterns, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, grid = plt.subplots(1, len(patterns), figsize=(3.1 * len(patterns), 3.9),
                                layout="constrained")
    for axes, (title, mask) in zip(grid, patterns.items()):
        axes.imshow(mask, cmap="Blues", vmin=0, vmax=1.4, interpolation="nearest")
        axes.set_title(f"{title}\n{mask.sum():,} of {mask.size:,} pairs", fontsize=9)
        axes.set(xlabel="key j", ylabel="query i", xticks=[], yticks=[])
    figure.suptitle(f"Which keys each query sees (L = {len(mask)}): the pairs attention scores")
    return demo_tools.save_figure(figure, path, dpi=110)


def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    lengths, budget = settings["lengths"], settings["budget"]
    blas_threads = demo_tools.blas_threads()
    print(f"Causal attention, one head of width {WIDTH}, float64, forward + backward, at\nL = "
          f"{', '.join(f'{length:,}' for length in lengths)} (BLAS threads: "
          f"{'unknown' if blas_threads is None else blas_threads}; memory budget for plain "
          f"SDPA: {size(budget)}):\n", flush=True)
    costs = measure_costs(lengths, budget, args.quick)
    print_costs(costs, budget)

    common = max(length for length, cost in costs.items() if "plain" in cost["peaks"])
    cost = costs[common]
    print(f"\nAt L = {common:,}, the largest length plain SDPA ran at:\n")
    rows = [[LABELS[name], f"{median_time(cost, name):.3g} s",
             f"{1 / median_ratio(cost['times'], name, 'plain'):.1f}x",
             f"{cost['peaks'][name] / MIB:.1f} MiB",
             f"{cost['peaks']['plain'] / cost['peaks'][name]:.1f}x"] for name in RUNS]
    demo_tools.print_table(["variant", "time", "faster than plain", "peak memory",
                            "less memory than plain"], rows)

    sparse_length = max(length for length in costs if length <= SPARSE_LENGTH)
    sparse = sparse_against_flash(costs[sparse_length], sparse_length)
    print(f"\nAt L = {sparse_length:,}, block-sparse attention (local + global) took "
          f"{sparse['block_sparse_vs_flash']:.3f}x flash's time (the full causal layout), "
          f"visiting {sparse['block_sparse_pairs']:,} of the {sparse['causal_pairs']:,} pairs of "
          f"blocks flash visits (1/{sparse['causal_pairs'] / sparse['block_sparse_pairs']:.1f}).")

    compared, outside = compare_outputs(COMPARE_LENGTH)
    print_comparison(compared, outside, COMPARE_LENGTH)

    patterns = attention_patterns(PATTERN_LENGTH)
    print(f"\nAttention patterns at L = {PATTERN_LENGTH} (drawn in attention_patterns.png):\n")
    demo_tools.print_table(["pattern", "pairs scored", "of L^2"],
                           [[" ".join(title.split()), f"{mask.sum():,}", f"{mask.mean():.0%}"]
                            for title, mask in patterns.items()])
    pictures = [plot_costs(costs, budget, args.output / "quadratic_cost.png"),
                plot_patterns(patterns, args.output / "attention_patterns.png")]
    for path in pictures:
        if path is not None:
            print(f"Picture: {path}")

    skipped = [length for length, cost in costs.items() if "plain" not in cost["peaks"]]
    numbers = {
        "smallest_length": lengths[0], "largest_length": lengths[-1], "budget_gib": budget / GIB,
        "plain_largest_length": common, "plain_peak_gib": cost["peaks"]["plain"] / GIB,
        "plain_skipped_from": skipped[0] if skipped else None,
        "plain_predicted_gib": costs[skipped[0]]["plain_predicted"] / GIB if skipped else None,
        "compare_length": COMPARE_LENGTH, **sparse,
        "flash_max_difference": max(compared["flash"]["out"], compared["flash"]["grads"]),
        "block_sparse_max_difference": compared["block_sparse"]["masked_sdpa"],
        "sliding_first_window_max_difference": compared["sliding"]["first_window"],
        "weight_outside_window_mean": float(outside[WINDOW:].mean()),
        "weight_outside_window_last": float(outside[-1]),
        "blas_threads": blas_threads, "width": WIDTH, "window": WINDOW, "block": BLOCK,
    }
    for name in RUNS:
        numbers[f"slope_time_{name}"] = slope(costs, name, median_time)
        numbers[f"slope_memory_{name}"] = slope(costs, name, peak_mib)
        numbers[f"time_{name}"] = [median_time(c, name) if name in c["peaks"] else None
                                   for c in costs.values()]
        numbers[f"peak_mib_{name}"] = [peak_mib(c, name) if name in c["peaks"] else None
                                       for c in costs.values()]
        if name != "plain":
            numbers[f"{name}_speedup"] = 1 / median_ratio(cost["times"], name, "plain")
            numbers[f"{name}_memory_ratio"] = cost["peaks"]["plain"] / cost["peaks"][name]
            numbers[f"{name}_relative_error"] = compared[name]["relative"]
    return numbers


if __name__ == "__main__":
    main()
