"""Demo 7: the quadratic cost of attention, and four ways around it.

What it shows: plain attention scores every query against every key, so its forward and backward
hold (L, L) arrays: doubling the length quadruples the memory, and the time follows. It measures
one causal head of width 64 in float64, forward and backward, at L = 256 ... 16,384, five ways:
plain SDPA; flash attention, the same function block by block (every pair of blocks of 64 on or
below the diagonal), with no (L, L) array; block-sparse attention, flash's algorithm over a local +
global layout only (each block of 64 queries sees its own block and the first one: about 2 L / 64
pairs of blocks, where flash visits about (L / 64)^2 / 2); a sliding window (each query sees its
256 latest keys); causal linear attention (exp(q . k) replaced by phi(q) . phi(k), phi = elu + 1).
The slope of log(cost) against log(L) says how a cost grows: 2 is quadratic, 1 linear. Plain SDPA
is skipped where its predicted peak passes a memory budget (2.5 GiB), and the tables say so.

Then what each computes, on the same inputs at L = 1024. Flash attention is plain attention
computed in another order: its differences are rounding. Block-sparse attention is SDPA under the
mask its layout stands for, to rounding too: another function than plain attention. The sliding
window is plain attention for the first w queries, whose keys all lie in their window; each later
query loses the part of its plain attention weight that falls outside the window (random queries
and keys spread their weight over every key they see), and the demo measures how much. Linear
attention weighs the values by phi(q) . phi(k) instead of exp(q . k). These three are models of
their own, trained as such, not approximations of plain attention.

    python demos/07_quadratic_cost.py [output folder] [--quick]

`--quick` measures L = 256 ... 2048, one timed round each, with a budget of 64 MiB so that the skip
shows there too. Its full run's time, as `dev/regenerate.py` measured it, ends its entry on
docs/demos.md.
"""
import functools
import statistics
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
from tinyattn_tools.bench.timing import interleaved, median_ratio, peak_memory

# %% [markdown]
# What is measured: one causal head, forward and backward on random inputs, computed five ways.

# %%
SEED, WIDTH = 0, 64
BLOCK = 64                 # flash's and block-sparse attention's blocks (their default)
WINDOW = 256
CHUNK = 64                 # linear attention's chunks (its default)


def local_and_global(length, block_size):
    """Each block of queries sees its own block of keys (a local window of one block) and the
    first block (a global one): (Lb, Lb) booleans."""
    n = -(-length // block_size)                  # blocks, the last one maybe short
    return F.local_layout(n, 1) | F.global_layout(n, [0])


ATTENTION = {                            # query, key, value (L, 64) -> output (L, 64)
    "plain": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "flash": lambda q, k, v: F.flash_attention(q, k, v, is_causal=True, block_size=BLOCK),
    "block_sparse": lambda q, k, v: F.block_sparse_attention(
        q, k, v, local_and_global(q.shape[-2], BLOCK), BLOCK, is_causal=True),
    "sliding": lambda q, k, v: F.sliding_window_attention(q, k, v, WINDOW),
    "linear": lambda q, k, v: F.linear_attention(q, k, v, is_causal=True, chunk_size=CHUNK),
}


def random_inputs(length):
    """query, key, value and the upstream gradient dL/d(output): (length, 64) float64 each."""
    return list(np.random.default_rng(SEED).standard_normal((4, length, WIDTH)))


def forward_backward(attention, query, key, value, grad_output):
    """`attention` on leaves holding the inputs, then the backward pass from `grad_output`:
    [output, dL/dquery, dL/dkey, dL/dvalue]."""
    leaves = [ta.Tensor(x, requires_grad=True) for x in (query, key, value)]
    output = attention(*leaves)                                         # (L, 64)
    output.backward(grad_output)
    return [output.data] + [leaf.grad for leaf in leaves]


STEPS = {name: functools.partial(forward_backward, attention)
         for name, attention in ATTENTION.items()}

# %% [markdown]
# The cost against the length: at each length every way is timed in the same rounds, then its peak
# memory measured; plain attention stops where its predicted peak passes the budget. Then the
# slopes, and the ratios docs/demos.md quotes.

# %%
FULL = dict(lengths=[256, 512, 1024, 2048, 4096, 8192, 16384], budget=2.5 * 2 ** 30)
QUICK = dict(lengths=[256, 512, 1024, 2048], budget=64 * 2 ** 20)
FIT_POINTS = 4             # slopes are fitted over this many of the largest lengths
SPARSE_LENGTH = 4096       # where block-sparse attention's time is quoted against flash's


def measure_costs(lengths, budget, quick=False):
    """{length: {"times": {name: [processor seconds per round]}, "peaks": {name: bytes that
    tracemalloc saw NumPy allocate}, "plain_predicted": plain SDPA's peak predicted from its bytes
    per L^2 at the last length it ran at, or None}}. Processor time leaves out the time waited for
    a core on a busy machine; the peak is measured in a run of its own (tracing slows Python)."""
    costs, plain_bytes_per_square = {}, None
    for length in lengths:
        start = time.perf_counter()
        predicted = (None if plain_bytes_per_square is None
                     else plain_bytes_per_square * length ** 2)
        steps = {name: step for name, step in STEPS.items()
                 if name != "plain" or predicted is None or predicted <= budget}
        inputs = random_inputs(length)
        rounds = 1 if quick else 5 if length <= 1024 else 3
        progress = demo_tools.Progress()     # the two longest take ~30 s each: say how far
        times = {name: [] for name in steps}
        for round_ in range(rounds):
            for name, seconds in interleaved(steps, inputs, 1, clock=time.process_time).items():
                times[name] += seconds
            progress(f"  L = {length:>6,}: round {round_ + 1}/{rounds} timed")
        peaks = {}
        for name, step in steps.items():
            peaks[name] = peak_memory(step, inputs)
            progress(f"  L = {length:>6,}: the peak of {LABELS[name]} measured")
        if "plain" in peaks:
            plain_bytes_per_square = peaks["plain"] / length ** 2
        costs[length] = {"times": times, "peaks": peaks, "plain_predicted": predicted}
        print(f"  L = {length:>6,}: measured in {time.perf_counter() - start:5.1f} s"
              + ("" if "plain" in peaks else
                 f" (plain SDPA skipped: it would need about {size(predicted)})"), flush=True)
    return costs


def skipped(costs):
    """[(length, plain SDPA's predicted peak in bytes)] where plain SDPA was skipped."""
    return [(length, cost["plain_predicted"]) for length, cost in costs.items()
            if "plain" not in cost["peaks"]]


def median_time(cost, name):
    return statistics.median(cost["times"][name])


def peak_mib(cost, name):
    return cost["peaks"][name] / 2 ** 20


def cost_numbers(costs):
    """The numbers main returns of the costs: each way's time and peak at each length (None where
    skipped) and their slopes over the FIT_POINTS largest lengths it ran at; plain SDPA's skip; each
    way against plain SDPA at the largest length plain SDPA ran at; block-sparse attention's time
    against flash's (in the same rounds) at SPARSE_LENGTH, or the largest length below."""
    common = max(length for length, cost in costs.items() if "plain" in cost["peaks"])
    skips = skipped(costs)
    sparse_length = max(length for length in costs if length <= SPARSE_LENGTH)
    n = -(-sparse_length // BLOCK)
    causal = F.local_layout(n, n)         # (Lb, Lb) a window of every block: the causal layout
    numbers = {
        "plain_largest_length": common, "plain_peak_gib": costs[common]["peaks"]["plain"] / 2**30,
        "plain_skipped_from": skips[0][0] if skips else None,
        "plain_predicted_gib": skips[0][1] / 2**30 if skips else None,
        "sparse_length": sparse_length, "causal_pairs": int(causal.sum()),
        "block_sparse_pairs": int((local_and_global(sparse_length, BLOCK) & causal).sum()),
        "block_sparse_vs_flash": median_ratio(costs[sparse_length]["times"], "block_sparse",
                                              "flash")}
    for name in STEPS:
        ran = [length for length, cost in costs.items() if name in cost["peaks"]]
        for measure, value, series in (("time", median_time, "time"),
                                       ("memory", peak_mib, "peak_mib")):
            numbers[f"{series}_{name}"] = [value(cost, name) if length in ran else None
                                           for length, cost in costs.items()]
            fitted = ran[-FIT_POINTS:]
            numbers[f"slope_{measure}_{name}"] = float(np.polyfit(
                np.log(fitted), np.log([value(costs[length], name) for length in fitted]), 1)[0])
        if name != "plain":
            numbers[f"{name}_speedup"] = 1 / median_ratio(costs[common]["times"], name, "plain")
            numbers[f"{name}_memory_ratio"] = (costs[common]["peaks"]["plain"]
                                               / costs[common]["peaks"][name])
    return numbers


# %% [markdown]
# What each computes, on the same inputs: outputs and gradients against plain causal attention, and
# how much of plain attention's weight falls outside the window.

# %%
COMPARE_LENGTH = 1024


def compare_outputs(length):
    """Each way's output and gradients against plain causal SDPA's, block-sparse attention's
    against SDPA under its layout's mask, and the share of each query's plain attention weight
    that falls outside its window (L,)."""
    inputs = random_inputs(length)
    plain = STEPS["plain"](*inputs)                   # [out, dL/dq, dL/dk, dL/dv]
    compared = {}
    for name in ("flash", "block_sparse", "sliding", "linear"):
        results = STEPS[name](*inputs)
        compared[name] = {
            "out": largest_difference(results[:1], plain[:1]),
            "grads": largest_difference(results[1:], plain[1:]),
            "relative": float(np.linalg.norm(results[0] - plain[0]) / np.linalg.norm(plain[0])),
            "first_window": float(np.abs(results[0][:WINDOW] - plain[0][:WINDOW]).max()),
        }
    sparse_mask = (F.layout_mask(local_and_global(length, BLOCK), BLOCK, length)
                   & F.local_mask(length, length))    # (L, L) the layout's mask, and causal
    masked = forward_backward(lambda q, k, v: F.scaled_dot_product_attention(
        q, k, v, attn_mask=sparse_mask), *inputs)
    compared["block_sparse"]["masked_sdpa"] = largest_difference(STEPS["block_sparse"](*inputs),
                                                                 masked)
    query, key, value, _ = (ta.tensor(x) for x in inputs)
    _, weights = F.attention(query, key, value, is_causal=True)                 # (L, L)
    outside = (weights.data * ~F.local_mask(length, WINDOW)).sum(axis=-1)     # (L,) per query
    return compared, outside


def largest_difference(arrays, references):
    return float(max(np.abs(got - want).max() for got, want in zip(arrays, references)))


# %% [markdown]
# `main` measures the costs, compares the outputs, prints the tables, draws the pictures (the
# costs, and the patterns of `sparse_patterns.py`) and returns the numbers.

# %%
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
    compared, outside = compare_outputs(COMPARE_LENGTH)
    numbers = {
        **cost_numbers(costs), "blas_threads": blas_threads, "width": WIDTH, "window": WINDOW,
        "block": BLOCK, "smallest_length": lengths[0], "largest_length": lengths[-1],
        "budget_gib": budget / 2**30, "compare_length": COMPARE_LENGTH,
        "flash_max_difference": max(compared["flash"]["out"], compared["flash"]["grads"]),
        "block_sparse_max_difference": compared["block_sparse"]["masked_sdpa"],
        "sliding_first_window_max_difference": compared["sliding"]["first_window"],
        "weight_outside_window_mean": float(outside[WINDOW:].mean()),
        "weight_outside_window_last": float(outside[-1]),
        **{f"{name}_relative_error": c["relative"] for name, c in compared.items()}}
    print_costs(costs, budget, numbers)
    print_comparison(compared, numbers)
    demo_tools.print_pictures(*draw(costs, numbers, attention_patterns(PATTERN_LENGTH),
                                    args.output))
    return numbers


# %% [markdown]
# Plumbing, kept out of the experiment's way: the tables, the pictures, and the entry on docs/demos.md for
# this demo, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
PAGE_ENTRY = """\
7. [`07_quadratic_cost.py`](../demos/07_quadratic_cost.py) — **the quadratic cost.** One causal head
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

   ![time and peak memory against L, log-log, with fitted slopes](pictures/quadratic_cost.png)

   ![six attention patterns, from full to block-sparse](pictures/attention_patterns.png)"""
LABELS = {"plain": "plain SDPA", "flash": f"flash (block {BLOCK})",
          "block_sparse": f"block-sparse, local + global ({BLOCK})",
          "sliding": f"sliding window (w = {WINDOW})", "linear": f"linear, causal (C = {CHUNK})"}


def size(bytes_):
    """A number of bytes in GiB, or in MiB below 1 GiB."""
    return f"{bytes_ / 2**30:.3g} GiB" if bytes_ >= 2**30 else f"{bytes_ / 2**20:.3g} MiB"


def print_costs(costs, budget, numbers):
    """The time and the peak memory of each way at each length, their slopes, and how many times
    plain SDPA's they are at the largest length plain SDPA ran at."""
    common = numbers["plain_largest_length"]
    for title, series, measure, ratio in (
            ("Time of one forward + backward, processor seconds", "time", "time", "speedup"),
            ("Peak memory (tracemalloc), in MiB", "peak_mib", "memory", "memory_ratio")):
        columns = [numbers[f"{series}_{name}"] for name in STEPS]       # a list per way
        rows = [[f"{length:,}"] + ["skipped" if column[i] is None else f"{column[i]:.3g}"
                                   for column in columns] for i, length in enumerate(costs)]
        rows.append(["slope"] + [f"{numbers[f'slope_{measure}_{name}']:.2f}" for name in STEPS])
        rows.append(["plain/this"] + [f"{numbers.get(f'{name}_{ratio}', 1):.1f}x"
                                      for name in STEPS])
        demo_tools.print_table(["L"] + [LABELS[name] for name in STEPS], rows,
                               f"{title} (plain/this: at L = {common:,}, the largest plain SDPA "
                               "ran at):\n")
    if skipped(costs):
        print(f"\nskipped: plain SDPA, where its predicted peak passes the budget of "
              f"{size(budget)}: " + ", ".join(f"{size(predicted)} at L = {length:,}"
                                              for length, predicted in skipped(costs)))
    print(f"slope: the least-squares slope of log(cost) against log(L), over the {FIT_POINTS} "
          "largest lengths each ran at")


def print_comparison(compared, numbers):
    pairs, visited = numbers["causal_pairs"], numbers["block_sparse_pairs"]
    print(f"\nAt L = {numbers['sparse_length']:,}, block-sparse attention (local + global) took "
          f"{numbers['block_sparse_vs_flash']:.3f}x flash's time (the full causal layout), "
          f"visiting {visited:,} of the {pairs:,} pairs of blocks flash visits "
          f"(1/{pairs / visited:.1f}).")
    demo_tools.print_table(
        ["variant", "max |out - plain|", "max |grad - plain's|", "||out - plain|| / ||plain||",
         f"first {WINDOW}: max |out - plain|"],
        [[LABELS[name], f"{c['out']:.1e}", f"{c['grads']:.1e}", f"{c['relative']:.2g}",
          f"{c['first_window']:.1e}"] for name, c in compared.items()],
        f"What they compute: the same random inputs at L = {COMPARE_LENGTH:,}, against plain "
        "causal SDPA:\n")
    print(f"\nBlock-sparse attention against SDPA under the mask its layout stands for: largest "
          f"difference {numbers['block_sparse_max_difference']:.1e}, gradients included.\n\n"
          f"Plain attention weight outside the window (w = {WINDOW}): "
          f"{numbers['weight_outside_window_mean']:.0%} on average over queries {WINDOW} ... "
          f"{COMPARE_LENGTH - 1}, {numbers['weight_outside_window_last']:.0%} for the last one.")


PATTERN_LENGTH, PATTERN_WINDOW, PATTERN_STRIDE, GLOBAL_TOKENS = 64, 8, 8, (0, 32)
PATTERN_BLOCK = 8          # the block of the block-sparse pattern drawn at L = 64


def attention_patterns(length):
    """The patterns drawn, from the masks and layouts of `sparse_patterns.py`: {title: (L, L)
    booleans, True where query i (row) may attend to key j (column)}."""
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


def draw(costs, numbers, patterns, folder):
    """quadratic_cost.png (time and memory against L, log-log) and attention_patterns.png: their
    paths (none without matplotlib)."""
    plt = demo_tools.pyplot()
    if plt is None:
        return []
    figure, (time_axes, memory_axes) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    for axes, series, measure, unit, title in (
            (time_axes, "time", "time", "processor seconds", "Time of one forward + backward"),
            (memory_axes, "peak_mib", "memory", "MiB", "Peak memory (tracemalloc)")):
        for name, marker in zip(STEPS, "osvD^"):       # None (skipped) is drawn as a gap
            axes.plot(list(costs), np.array(numbers[f"{series}_{name}"], dtype=float),
                      marker=marker, label=f"{LABELS[name]}: slope "
                                           f"{numbers[f'slope_{measure}_{name}']:.2f}")
        axes.set(xscale="log", yscale="log", xlabel="L (queries = keys)", ylabel=unit,
                 title=title)
        axes.set_xticks(list(costs), [f"{length:,}" for length in costs])
        axes.set_xticks([], minor=True)
    if skipped(costs):
        lengths, predicted = zip(*skipped(costs))
        memory_axes.plot(lengths, np.array(predicted) / 2**20, "o", markerfacecolor="none",
                         color="C0", label="plain SDPA, predicted (skipped)")
    memory_axes.axhline(numbers["budget_gib"] * 2**10, color="grey", linestyle=":",
                        label=f"budget ({size(numbers['budget_gib'] * 2**30)})")
    for axes in (time_axes, memory_axes):
        axes.legend(fontsize=8)
    figure.suptitle(f"Causal attention, one head of width {WIDTH}, float64: slope 2 = "
                    "quadratic in L, 1 = linear")
    pictures = [demo_tools.save_figure(figure, folder / "quadratic_cost.png", dpi=110)]
    figure, grid = plt.subplots(1, len(patterns), figsize=(3.1 * len(patterns), 3.9),
                                layout="constrained")
    for axes, (title, mask) in zip(grid, patterns.items()):
        axes.imshow(mask, cmap="Blues", vmin=0, vmax=1.4, interpolation="nearest")
        axes.set_title(f"{title}\n{mask.sum():,} of {mask.size:,} pairs", fontsize=9)
        axes.set(xlabel="key j", ylabel="query i", xticks=[], yticks=[])
    figure.suptitle(f"Which keys each query sees (L = {len(mask)}): the pairs attention scores")
    return pictures + [demo_tools.save_figure(figure, folder / "attention_patterns.png", dpi=110)]


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
