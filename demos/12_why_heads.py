"""Demo 12: why several attention heads, when one head can already look everywhere?

What it shows: one attention layer of the same total width E and the same number of parameters,
split into 1, 2, 4 or 8 heads, learns a task in which every answer has to gather tokens from
several places at once; the held-out accuracy of each head count over a few seeds, at a few
widths; and each head's attention on one example, to see whether the heads split the work.

    python demos/12_why_heads.py [output folder] [--quick]

The pictures are `why_heads_attention.png` (the heads of the 1-, 2- and 4-head models on one
held-out example) and `why_heads_accuracy.png` (held-out accuracy and loss against the number of
heads, one line per width) in the output folder (when matplotlib is installed). `--quick` trains
one seed for 40 steps at each width. Its full run's time, as `dev/regenerate.py` measured it,
ends its entry on docs/demos.md.

The task: random tokens from a vocabulary of 4; at every position t (from the fifth on) name the
tokens 1, 2 and 4 places back, in order, as one of 4^3 = 64 answers:

    tokens   2 0 3 1 1 2 ...
    t = 5:   the tokens at t - 1, t - 2, t - 4 are 1, 1, 0: answer (1, 1, 0)

It is demo 8's "the token 3 places back" with three places instead of one. A filter reading
fixed offsets is a convolution, and Cordonnier et al. 2020 ("On the Relationship between
Self-Attention and Convolutional Layers") prove that a multi-head attention layer expresses one
by giving every offset a head of its own: with as many heads as places, each head can put all its
weight on one place. The model is `nn.CausalTransformer` with one layer and learned positions;
the number of heads changes only how the same four E x E projections are cut up (head size E / H).

Why one head might not do. A head forms one softmax per query, so its output is one weighted
average of values: w1 v(x[t-1]) + w2 v(x[t-2]) + w4 v(x[t-4]) if it looks at the three places.
With equal weights that average would be the same for (1, 1, 0) and (0, 1, 1): the order would be
lost. Three heads hand the layer three averages, side by side, and nothing is mixed. One head can
still keep the order by weighting the places unequally (the demo measures its weights), which
leaves the feed-forward layer to un-mix a sum of three vectors in E numbers: easier the wider E
is. Against that, more heads at the same width are narrower heads (8 heads of width 16 are of
size 2), and a narrow head can hardly point at one exact position (Bhojanapalli et al. 2020,
"Low-Rank Bottleneck in Multi-head Attention Models"). Which wins at which width is what the
tables measure. One learning rate and a few seeds: the demo reports what happened in this run.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn

# %% [markdown]
# The settings (the task, the head counts, training in the full and the quick run), and the
# entry on docs/demos.md for this demo, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
VOCAB, LENGTH = 4, 16
PLACES = (1, 2, 4)                  # the answer at t names the tokens at t - 1, t - 2, t - 4
CLASSES = VOCAB ** len(PLACES)      # 64 ordered triples
IGNORE = -100                       # the first positions have no answer
ANSWERED = np.arange(max(PLACES), LENGTH)
HEAD_COUNTS = (1, 2, 4, 8)
BATCH, LEARNING_RATE = 32, 3e-3
HELD_OUT_SEED = 1000                # training batches use the seeds 0, 1, 2
AS_WELL = 0.02                      # one head "does as well": within 2 points of the best
FULL = {"widths": (16, 32, 64), "seeds": (0, 1, 2), "steps": 400, "eval_every": 50,
        "held_out": 256}
QUICK = {"widths": (16, 32, 64), "seeds": (0,), "steps": 40, "eval_every": 40, "held_out": 64}
DRAWN_WIDTH, DRAWN_HEADS = 32, (1, 2, 4)

PAGE_ENTRY = """\
12. [`12_why_heads.py`](../demos/12_why_heads.py) — **why several heads.** One attention layer of
    width E, split into 1, 2, 4 or 8 heads (the same parameters: {parameters_32:,} at E = 32),
    learns to name the tokens 1, 2 and 4 places back ({classes} answers). Held-out accuracy, mean
    of {seeds} seeds, with 1 / 2 / 4 / 8 heads: {accuracy_16_1:.0%} / {accuracy_16_2:.0%} /
    {accuracy_16_4:.0%} / {accuracy_16_8:.0%} at E = 16, {accuracy_32_1:.0%} /
    {accuracy_32_2:.0%} / {accuracy_32_4:.0%} / {accuracy_32_8:.0%} at E = 32,
    {accuracy_64_1:.0%} / {accuracy_64_2:.0%} / {accuracy_64_4:.0%} / {accuracy_64_8:.0%} at E =
    64 (held-out loss at E = 32: {loss_32_1:.3f} / {loss_32_2:.3f} / {loss_32_4:.3f} /
    {loss_32_8:.3f}): {verdict}. At E = 32, the places that draw over half of some head's weight
    number {owned_32_2} of 3 with 2 heads and {owned_32_4} with 4; the single head puts
    {one_head_place_1:.0%}, {one_head_place_2:.0%} and {one_head_place_4:.0%} of its weight on
    them, one average of the three tokens, whose unequal weights are all that can keep their
    order.

    ![each head's attention, 1, 2 and 4 heads](pictures/why_heads_attention.png)

    ![accuracy and loss against the number of heads](pictures/why_heads_accuracy.png)"""


# %% [markdown]
# The data: random tokens, and at each answered position the tokens 1, 2 and 4 places back as one
# class.

# %%
def places_batch(random, size):
    """(ids, targets), both (size, LENGTH): random tokens, and at each answered position the
    triple of tokens PLACES back as one class, x[t-1] * 16 + x[t-2] * 4 + x[t-4] (IGNORE before)."""
    ids = random.integers(0, VOCAB, (size, LENGTH))
    triples = np.zeros((size, len(ANSWERED)), dtype=ids.dtype)
    for place in PLACES:                    # base-4 digits, the token 1 place back first
        triples = VOCAB * triples + ids[:, ANSWERED - place]
    targets = np.full_like(ids, IGNORE)
    targets[:, ANSWERED] = triples
    return ids, targets


# %% [markdown]
# How much weight each head puts on each place, on average over the held-out answers.

# %%
def weight_on_places(weights):
    """(H, len(PLACES) + 1): each head's mean weight on each place, and on every other key, over
    the answered queries of the held-out batch; weights (B, H, T, T)."""
    on_place = np.stack([weights[:, :, ANSWERED, ANSWERED - place].mean(axis=(0, 2))
                         for place in PLACES], axis=1)                  # (H, places)
    return np.concatenate([on_place, 1 - on_place.sum(axis=1, keepdims=True)], axis=1)


# %% [markdown]
# One model trained: a width, a head count and a seed, the same batches whatever the head count.

# %%
def train_one(width, num_heads, seed, held_out, settings):
    """A one-layer model trained from seed `seed` (the same batches for every head count): its
    held-out accuracy and loss, its number of parameters and its attention on the held-out batch."""
    ta.manual_seed(seed)
    model = nn.CausalTransformer(CLASSES, width, num_heads, 1, max_len=LENGTH,
                                 positional="learned", dtype=np.float32)
    curves = demo_tools.train(model, places_batch, demo_tools.sequence_score, held_out,
                              f"E {width}, {heads_named(num_heads)}, seed {seed}", LEARNING_RATE,
                              BATCH, seed, settings["steps"], settings["eval_every"],
                              print_every=settings["steps"])
    with ta.no_grad():
        _, (weights,) = model(held_out[0], return_weights=True)          # [(B, H, T, T)]
    return {"accuracy": curves["held_out_accuracy"][-1], "loss": curves["held_out_loss"][-1],
            "weights": weights.data,
            "parameters": sum(p.size for p in model.parameters())}


# %% [markdown]
# The sentence docs/demos.md quotes: at which widths one head does as well as the best head count, and
# at what loss.

# %%
def verdict(accuracy, loss, widths):
    """docs/demos.md's phrase: at which widths one head comes within AS_WELL of the best head
    count's accuracy, and how much higher its held-out loss stays there."""
    as_well = [width for width in widths
               if accuracy[width, 1] >= max(accuracy[width, h] for h in HEAD_COUNTS) - AS_WELL]
    if not as_well:
        return f"one head trails the best head count by more than {AS_WELL:.0%} at every width"
    ratios = [loss[width, 1] / min(loss[width, h] for h in HEAD_COUNTS) for width in as_well]
    others = [width for width in widths if width not in as_well]
    where = (f"at width {' and '.join(map(str, as_well))}"
             + (f", not at {' and '.join(map(str, others))}" if others else ""))
    return (f"one head comes within {AS_WELL:.0%} of the best accuracy {where}, but its "
            f"held-out loss stays {min(ratios):.1f} to {max(ratios):.1f} times the best")


# %% [markdown]
# The two pictures: each head's attention on one example, and accuracy and loss against the number
# of heads.

# %%
def plot_attention(ids, weights, path):
    """One heatmap per head of the DRAWN_HEADS models on one example, the places circled."""
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    columns = max(DRAWN_HEADS)
    figure, grid = plt.subplots(len(DRAWN_HEADS), columns, figsize=(3.1 * columns,
                                3.2 * len(DRAWN_HEADS)), squeeze=False, layout="constrained")
    for row, num_heads in enumerate(DRAWN_HEADS):
        shares = weight_on_places(weights[num_heads][:1])
        for head in range(columns):
            axes = grid[row, head]
            if head >= num_heads:
                axes.axis("off")
                continue
            image = axes.imshow(weights[num_heads][0, head], cmap="Blues", vmin=0, vmax=1)
            for place in PLACES:
                axes.scatter(ANSWERED - place, ANSWERED, s=18, facecolors="none",
                             edgecolors="tab:red", linewidths=0.7)
            axes.set_xticks(range(LENGTH), ids, fontsize=6)
            axes.set_yticks(range(LENGTH), ids, fontsize=6)
            axes.set_title(f"{heads_named(num_heads)}: head {head + 1}\n"
                           + " ".join(f"{p} back {s:.0%}" for p, s in zip(PLACES, shares[head])),
                           fontsize=8)
    figure.colorbar(image, ax=grid, shrink=0.5, label="attention weight")
    figure.suptitle(f"One held-out example, width {DRAWN_WIDTH} (rows: queries, columns: keys; "
                    "red circles: the places each answer needs)")
    return demo_tools.save_figure(figure, path, dpi=110)


def plot_accuracy(accuracy, loss, widths, path):
    """Held-out accuracy and loss against the number of heads, one line per width."""
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, (accuracy_axes, loss_axes) = plt.subplots(1, 2, figsize=(11, 4))
    for width in widths:
        for axes, measure in ((accuracy_axes, accuracy), (loss_axes, loss)):
            axes.plot(HEAD_COUNTS, [measure[width, h] for h in HEAD_COUNTS], marker="o",
                      label=f"E = {width}")
    accuracy_axes.axhline(1 / CLASSES, color="gray", linestyle="--", linewidth=0.8,
                          label="chance")
    for axes in (accuracy_axes, loss_axes):
        demo_tools.log2_axis(axes, HEAD_COUNTS)
        axes.set_xlabel("heads (same width E, same parameters)")
    accuracy_axes.set(ylim=(0, 1.02), ylabel="held-out accuracy",
                      title="Naming the tokens 1, 2 and 4 places back")
    loss_axes.set(yscale="log", ylabel="held-out loss (cross-entropy, log scale)",
                  title="The same runs' held-out loss")
    return demo_tools.save_chart(figure, path, accuracy_axes, loss_axes)


# %% [markdown]
# Two helpers: a head count in words, and one measure averaged over the seeds.

# %%
def heads_named(count):
    return f"{count} head" + "s" * (count > 1)


def mean_over_seeds(runs, measure, widths, seeds):
    """{(width, heads): the mean over seeds of one measure of the runs}."""
    return {(width, heads): float(np.mean([runs[width, heads, seed][measure] for seed in seeds]))
            for width in widths for heads in HEAD_COUNTS}


# %% [markdown]
# `main` trains every width, head count and seed, prints the accuracy table and where each head
# looks, draws the pictures and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    widths, seeds = settings["widths"], settings["seeds"]
    held_out = places_batch(np.random.default_rng(HELD_OUT_SEED),
                            settings["held_out"])               # sequences never trained on
    print(f"Naming the tokens {PLACES} places back ({CLASSES} answers, chance {1 / CLASSES:.1%}): "
          f"one layer, {settings['steps']} steps of {BATCH} sequences, Adam (lr {LEARNING_RATE}), "
          f"seeds {list(seeds)}, float32.\n")
    runs = {(width, heads, seed): train_one(width, heads, seed, held_out, settings)
            for width in widths for heads in HEAD_COUNTS for seed in seeds}
    accuracy, loss = (mean_over_seeds(runs, measure, widths, seeds)
                      for measure in ("accuracy", "loss"))
    lowest = {key: min(runs[(*key, seed)]["accuracy"] for seed in seeds) for key in accuracy}
    parameters = {width: {runs[width, heads, seeds[0]]["parameters"] for heads in HEAD_COUNTS}
                  for width in widths}
    print(f"\nHeld-out accuracy (the lowest seed's in brackets) and loss, mean over {len(seeds)} "
          "seed(s); every head count\nof a width has the same parameters:")
    demo_tools.print_table(
        ["width E", "parameters"] + [heads_named(heads) for heads in HEAD_COUNTS],
        [[str(width), " / ".join(f"{count:,}" for count in parameters[width])]
         + [f"{accuracy[width, heads]:.1%} ({lowest[width, heads]:.0%}) {loss[width, heads]:.3f}"
            for heads in HEAD_COUNTS] for width in widths])

    drawn = {heads: runs[DRAWN_WIDTH, heads, seeds[0]]["weights"] for heads in HEAD_COUNTS}
    shares = {heads: weight_on_places(drawn[heads]) for heads in HEAD_COUNTS}
    owned = {heads: int((shares[heads][:, :len(PLACES)] > 0.5).any(axis=0).sum())
             for heads in HEAD_COUNTS}          # places to which some head gives over half
    print(f"\nWhere each head looks (width {DRAWN_WIDTH}, seed {seeds[0]}): its mean weight on "
          "each place, over the held-out answers")
    demo_tools.print_table(
        ["model", "head"] + [f"{place} back" for place in PLACES] + ["elsewhere"],
        [[heads_named(heads), str(head + 1)] + [f"{share:.0%}" for share in shares[heads][head]]
         for heads in HEAD_COUNTS for head in range(heads)])
    numbers = {"classes": CLASSES, "seeds": len(seeds), "steps": settings["steps"],
               "verdict": verdict(accuracy, loss, widths),
               "parameter_counts_equal": all(len(counts) == 1 for counts in parameters.values()),
               "largest_row_sum_error": max(float(np.abs(w.sum(axis=-1) - 1).max())
                                            for w in drawn.values())}
    numbers.update({f"parameters_{width}": min(parameters[width]) for width in widths})
    for width, heads in accuracy:
        numbers[f"accuracy_{width}_{heads}"] = accuracy[width, heads]
        numbers[f"loss_{width}_{heads}"] = loss[width, heads]
    numbers.update({f"owned_{DRAWN_WIDTH}_{heads}": count for heads, count in owned.items()})
    numbers.update({f"one_head_place_{place}": float(share)
                    for place, share in zip(PLACES, shares[1][0])})
    print("\nPlaces to which some head gives over half of its weight: "
          + ", ".join(f"{heads_named(heads)}: {owned[heads]}" for heads in HEAD_COUNTS)
          + f"\nVerdict: {numbers['verdict']}.")
    pictures = [plot_attention(held_out[0][0], {h: drawn[h][:1] for h in DRAWN_HEADS},
                               args.output / "why_heads_attention.png"),
                plot_accuracy(accuracy, loss, widths, args.output / "why_heads_accuracy.png")]
    for picture in filter(None, pictures):
        print(f"picture: {picture}")
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
