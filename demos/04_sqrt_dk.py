"""Demo 4: why attention divides its scores by sqrt(d_k).

What it shows: with random queries and keys, the unscaled scores q . k grow like sqrt(d_k), the
softmax turns almost one-hot, and the gradient it lets through collapses by orders of magnitude;
divided by sqrt(d_k), the scores keep a standard deviation of 1 and the gradient stays the same at
every width. It also shows what does not vanish. Every number is measured by tinyattn's backward
pass through attention, scaled (1/sqrt(d_k), `F.scaled_dot_product_attention`'s default) and
unscaled (scale 1). The attention is written out in three lines, as
`F.scaled_dot_product_attention` computes it (tests/test_demo_04_sqrt_dk.py checks that they
agree), so that the scores and the weights are tensors of their own, which keep their gradients
when asked to (`retain_grad()`).

    python demos/04_sqrt_dk.py [output folder] [--quick]

It prints two tables and draws `sqrt_dk.png` in the output folder when matplotlib is installed.
`--quick` sweeps fewer widths (16 ... 1024) than the full sweep (4 ... 4096). Its full run's
time, as `dev/regenerate.py` measured it, ends its entry on docs/demos.md.

Why the scores grow: q . k = q_1 k_1 + ... + q_dk k_dk is a sum of d_k independent products, each
of mean 0 and variance 1 when q and k have unit-variance entries, so its variance is d_k and its
standard deviation sqrt(d_k). Dividing by sqrt(d_k) brings it back to 1.

Why wide scores starve the gradient: with w = softmax(s) and g = dL/dw,

    dL/ds_i = w_i (g_i - sum_j w_j g_j)

When one weight is close to 1 and the others close to 0, every term is close to 0: the losing keys
because w_i ~ 0, the winner because g_i - sum_j w_j g_j ~ g_i - g_i. So we measure, for each query
row, how much of the gradient arriving at the weights survives the softmax:

    ratio = ||dL/ds|| / ||dL/dw||      (a row with ratio < 1e-3 counts as saturated)

The first table shows it: scaled, the ratio stays put at every width; unscaled, it falls as the
mean largest weight nears 1 and more rows saturate. The second table compares what reaches the
inputs, unscaled over scaled. A typical query row's gradient collapses with the ratio: most queries
can no longer learn which key to look at. What does not vanish is the gradient to the values,
dL/dv = weights^T @ grad, which never passes through the softmax's Jacobian (the weights still sum
to 1, only on fewer keys), and the norm of the whole gradient to the queries and keys: the rows
that are not saturated still pass gradient, and in dL/dq = scale * dL/ds @ k the unscaled version
multiplies by 1 where the scaled one multiplies by 1/sqrt(d_k). A typical key row keeps more of its
gradient than a typical query row, because each key collects gradient from every query, the
unsaturated ones included. So without the scale the gradient does not just shrink: it gathers on
the few rows that happen not to be saturated while the others get almost nothing, which no single
learning rate suits.
"""
import math

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F

# %% [markdown]
# The settings (the sizes of the attention, the widths swept, the threshold of a saturated row),
# and this demo's entry on docs/demos.md, which `dev/regenerate.py` fills with the numbers `main`
# returns.

# %%
SEED = 0
BATCH, HEADS, QUERIES, KEYS, VALUE_DIM = 2, 4, 64, 64, 32
KEY_DIMS_FULL = [4, 16, 64, 256, 1024, 4096]
KEY_DIMS_QUICK = [16, 64, 256, 1024]
SATURATED = 1e-3          # a row passing less than this share of its gradient is saturated
SCALINGS = {"scaled": None, "unscaled": 1.0}    # scale=None means 1/sqrt(d_k)
COMPARED = ("median_ratio", "query_grad_typical_row", "key_grad_typical_row",
            "query_grad_total", "key_grad_total", "value_grad_total")   # table 2: unscaled / scaled

PAGE_ENTRY = """\
4. [`04_sqrt_dk.py`](../demos/04_sqrt_dk.py) — **the main demo.** Random unit-variance queries and
   keys of width d_k = {smallest_key_dim} … {largest_key_dim}, attention with and without the
   1/√d_k scale, a random upstream gradient backpropagated by tinyattn. Scaled, the share of
   gradient the softmax lets through (median over rows of ‖dL/dscores‖ / ‖dL/dweights‖) stays
   between {scaled_ratio_min:.1e} and {scaled_ratio_max:.1e} at every width; unscaled, the scores'
   std grows like √d_k ({score_std_unscaled_1024:.0f} at d_k = 1024), the weights turn one-hot and
   the ratio collapses to {median_ratio_unscaled_1024:.1e} at d_k = 1024
   ({median_ratio_unscaled_over_scaled_1024:.0e} times the scaled one,
   {saturated_fraction_unscaled_1024:.0%} of rows saturated) and
   {median_ratio_unscaled_4096:.0e} at 4096. What does not vanish: the gradient to the values
   ({value_grad_total_unscaled_over_scaled_1024:.1f}× the scaled one at d_k = 1024) and the total
   gradient to the queries ({query_grad_total_unscaled_over_scaled_1024:.0f}×), which gathers in
   the few unsaturated rows: a typical query row gets
   {query_grad_typical_row_unscaled_over_scaled_1024:.2f}× the scaled gradient.

   ![gradient through the softmax against d_k, scaled and unscaled](pictures/sqrt_dk.png)"""


# %% [markdown]
# The inputs of one width: queries and keys of its own, values and an upstream gradient shared by
# every width.

# %%
def random_inputs(key_dim):
    """Queries and keys with unit-variance entries, drawn for this width alone (so the quick and
    the full sweep measure the same numbers), and one value tensor and upstream gradient shared by
    every width: dL/dweights = grad @ value^T is then the same array everywhere, and only what
    the softmax does with it changes."""
    random = np.random.default_rng([SEED, key_dim])
    query = random.standard_normal((BATCH, HEADS, QUERIES, key_dim))       # (B, H, L, E)
    key = random.standard_normal((BATCH, HEADS, KEYS, key_dim))            # (B, H, S, E)
    shared = np.random.default_rng(SEED)
    value = shared.standard_normal((BATCH, HEADS, KEYS, VALUE_DIM))        # (B, H, S, Ev)
    upstream = shared.standard_normal((BATCH, HEADS, QUERIES, VALUE_DIM))  # (B, H, L, Ev)
    return query, key, value, upstream


# %% [markdown]
# Attention written out as `F.scaled_dot_product_attention` computes it, and one forward and
# backward pass through it that measures what the gradients say.

# %%
def row_norms(array):
    return np.linalg.norm(array, axis=-1)


def attention(query, key, value, scale):
    """(output, scores, weights): attention as F.scaled_dot_product_attention computes it."""
    scale = 1 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.mT) * scale                 # (B, H, L, S)
    weights = F.softmax(scores, axis=-1)              # (B, H, L, S)
    return weights @ value, scores, weights           # (B, H, L, Ev), ...


def measure(query, key, value, upstream, scale):
    """One forward and backward pass through attention: what the gradients say."""
    query_t, key_t, value_t = (ta.tensor(x, requires_grad=True) for x in (query, key, value))
    output, scores, weights = attention(query_t, key_t, value_t, scale)
    scores.retain_grad()          # an op's output keeps .grad only when asked, as in PyTorch
    weights.retain_grad()
    output.backward(upstream)
    ratio = row_norms(scores.grad) / row_norms(weights.grad)     # (B, H, L) one per query row
    return {
        "score_std": float(scores.data.std()),
        "mean_max_weight": float(weights.data.max(axis=-1).mean()),
        "median_ratio": float(np.median(ratio)),
        "saturated_fraction": float((ratio < SATURATED).mean()),
        "query_grad_typical_row": float(np.median(row_norms(query_t.grad))),
        "key_grad_typical_row": float(np.median(row_norms(key_t.grad))),
        "query_grad_total": float(np.linalg.norm(query_t.grad)),
        "key_grad_total": float(np.linalg.norm(key_t.grad)),
        "value_grad_total": float(np.linalg.norm(value_t.grad)),
    }


# %% [markdown]
# The sweep over d_k, scaled and unscaled, and its results flattened into the numbers `main`
# returns.

# %%
def sweep(key_dims):
    """{d_k: {"scaled": measurements, "unscaled": measurements}} on the same inputs per d_k."""
    results = {}
    for key_dim in key_dims:
        inputs = random_inputs(key_dim)
        results[key_dim] = {name: measure(*inputs, scale) for name, scale in SCALINGS.items()}
    return results


def flat(results):
    """The numbers main returns: `median_ratio_unscaled_1024`, ...,
    `median_ratio_unscaled_over_scaled_1024`, ..., and what the sweep concludes."""
    numbers = {"smallest_key_dim": min(results), "largest_key_dim": max(results)}
    for key_dim, by_scaling in results.items():
        for scaling, measured in by_scaling.items():
            for name, value in measured.items():
                numbers[f"{name}_{scaling}_{key_dim}"] = value
        for name in COMPARED:
            numbers[f"{name}_unscaled_over_scaled_{key_dim}"] = (by_scaling["unscaled"][name]
                                                                 / by_scaling["scaled"][name])
    scaled_ratios = [by_scaling["scaled"]["median_ratio"] for by_scaling in results.values()]
    numbers.update(scaled_ratio_min=min(scaled_ratios), scaled_ratio_max=max(scaled_ratios))
    onsets = [key_dim for key_dim in results     # unscaled passes under half the scaled ratio
              if numbers[f"median_ratio_unscaled_over_scaled_{key_dim}"] < 0.5]
    numbers["onset_key_dim"] = onsets[0] if onsets else None
    return numbers


# %% [markdown]
# The two tables, and the picture.

# %%
def print_tables(results, numbers):
    print("\nWhat the softmax does ('median grad ratio' = median over the query rows of\n"
          f"||dL/dscores|| / ||dL/dweights||; 'saturated' = rows where that ratio is below "
          f"{SATURATED:g}):\n")
    demo_tools.print_table(
        ["d_k", "scores", "std(scores)", "mean max weight", "median grad ratio", "saturated rows"],
        [[str(key_dim), name, f"{measured['score_std']:.2f}",
          f"{measured['mean_max_weight']:.3f}", f"{measured['median_ratio']:.2e}",
          f"{measured['saturated_fraction']:.1%}"]
         for key_dim, by_scaling in results.items() for name, measured in by_scaling.items()])
    print("\nWhat reaches the inputs, unscaled / scaled ('typical row' = median over rows of the "
          "row's norm;\n'all' = norm of the whole gradient):\n")
    demo_tools.print_table(
        ["d_k", "median grad ratio", "dL/dq typical row", "dL/dk typical row", "dL/dq all",
         "dL/dk all", "dL/dv all"],
        [[str(key_dim)] + [f"{numbers[f'{name}_unscaled_over_scaled_{key_dim}']:.2g}"
                           for name in COMPARED] for key_dim in results])
    print(f"\nScaled, the median grad ratio stays between {numbers['scaled_ratio_min']:.2e} and "
          f"{numbers['scaled_ratio_max']:.2e};\nunscaled, it first falls below half the scaled one "
          f"at d_k = {numbers['onset_key_dim']}.")


def plot(results, path):
    """Median gradient ratio and mean max weight against d_k, scaled and unscaled."""
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    key_dims = list(results)
    figure, (ratio_axes, weight_axes) = plt.subplots(1, 2, figsize=(11, 4.5))
    for name, style, label in (("scaled", "o-", "scaled: q.k / sqrt(d_k)"),
                               ("unscaled", "s--", "unscaled: q.k")):
        for axes, measured in ((ratio_axes, "median_ratio"), (weight_axes, "mean_max_weight")):
            axes.plot(key_dims, [results[d][name][measured] for d in key_dims], style,
                      label=label)
    ratio_axes.axhline(SATURATED, color="grey", linestyle=":", label="saturated below this")
    ratio_axes.set(yscale="log", ylabel="median ||dL/dscores|| / ||dL/dweights||",
                   title="How much gradient the softmax lets through")
    weight_axes.axhline(1 / KEYS, color="grey", linestyle=":", label=f"uniform (1/{KEYS})")
    weight_axes.set(ylim=(0, 1.05), ylabel="mean of each row's largest weight",
                    title="How one-hot the attention weights are")
    for axes in (ratio_axes, weight_axes):
        axes.set_xscale("log", base=2)
        axes.set_xticks(key_dims, [str(d) for d in key_dims])
        axes.set_xlabel("d_k (width of queries and keys)")
        axes.legend()
    figure.suptitle(f"Attention on random unit-variance queries and keys ({KEYS} keys per "
                    "query): scores divided by sqrt(d_k), or not")
    figure.tight_layout()
    return demo_tools.save_figure(figure, path, dpi=120)


# %% [markdown]
# `main` runs the sweep, prints the tables, draws the picture and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    key_dims = KEY_DIMS_QUICK if args.quick else KEY_DIMS_FULL
    print(f"Attention on random unit-variance queries and keys: batch {BATCH}, {HEADS} heads, "
          f"{QUERIES} queries, {KEYS} keys,\nvalues of width {VALUE_DIM}, a random upstream "
          f"gradient; d_k = {', '.join(map(str, key_dims))}, each scaled and unscaled.")
    results = sweep(key_dims)
    numbers = flat(results)
    print_tables(results, numbers)
    picture = plot(results, args.output / "sqrt_dk.png")
    if picture is not None:
        print(f"\nPicture: {picture}")
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
