"""Demo 4: why attention divides its scores by sqrt(d_k).

What it shows: with random queries and keys, the unscaled scores q . k grow like sqrt(d_k), the
softmax turns almost one-hot, and the gradient it lets through collapses by orders of magnitude;
divided by sqrt(d_k), the scores keep a standard deviation of 1 and the gradient stays the same at
every width. It also shows what does not vanish. Every number is measured by tinyattn's backward
pass through `F.scaled_dot_product_attention`, scaled (the default, 1/sqrt(d_k)) and unscaled
(`scale=1.0`).

    python demos/04_sqrt_dk.py [output folder] [--quick]

It prints two tables and a paragraph saying what they mean, and draws `sqrt_dk.png` in the output
folder when matplotlib is installed. `--quick` sweeps fewer widths (16 ... 1024); the full sweep
(4 ... 4096) takes a few seconds.

Why the scores grow: q . k = q_1 k_1 + ... + q_dk k_dk is a sum of d_k independent products, each
of mean 0 and variance 1 when q and k have unit-variance entries, so its variance is d_k and its
standard deviation sqrt(d_k). Dividing by sqrt(d_k) brings it back to 1.

Why wide scores starve the gradient: with w = softmax(s) and g = dL/dw,

    dL/ds_i = w_i (g_i - sum_j w_j g_j)

When one weight is close to 1 and the others close to 0, every term is close to 0: the losing keys
because w_i ~ 0, the winner because g_i - sum_j w_j g_j ~ g_i - g_i. So we measure, for each query
row, how much of the gradient arriving at the weights survives the softmax:

    ratio = ||dL/ds|| / ||dL/dw||      (a row with ratio < 1e-3 counts as saturated)
"""
import textwrap
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F

SEED = 0
BATCH, HEADS, QUERIES, KEYS, VALUE_DIM = 2, 4, 64, 64, 32
KEY_DIMS_FULL = [4, 16, 64, 256, 1024, 4096]
KEY_DIMS_QUICK = [16, 64, 256, 1024]
SATURATED = 1e-3          # a row passing less than this share of its gradient is saturated
HEADLINE_KEY_DIM = 1024   # the width the closing paragraph quotes, when it was measured
SCALINGS = {"scaled": None, "unscaled": 1.0}    # scale=None means 1/sqrt(d_k)


def path_back_to_softmax(output):
    """The graph nodes from `output` back to the first softmax: [output's node, ..., softmax].

    Every tensor an op makes has a node (`tensor._node`) naming the op (`node.name`) and listing
    the nodes of its inputs (`node.parents`; None for a constant). Walking those parents
    breadth-first from the output finds the softmax without assuming where in the graph it sits.
    """
    paths = [[output._node]]
    while paths:
        path = paths.pop(0)
        if path[-1].name == "softmax":
            return path
        paths.extend(path + [parent] for parent in path[-1].parents if parent is not None)
    raise ValueError("there is no softmax in the graph that produced this tensor")


def describe_graph(path):
    """The path's nodes with their output shapes, and the node that made the softmax's input."""
    scores_node = path[-1].parents[0]
    return ("  output = " + " <- ".join(f"{node.name} {node.shape}" for node in path)
            + f" <- {scores_node.name} {scores_node.shape}"
            + "\n  the softmax's output is the weights; its input, made by that last "
            + f"{scores_node.name}, is the scores")


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


def row_norms(array):
    return np.linalg.norm(array, axis=-1)


def measure(query, key, value, upstream, scale):
    """One forward and backward pass through attention; what the engine's gradients say."""
    query_t, key_t, value_t = (ta.tensor(x, requires_grad=True) for x in (query, key, value))
    with ta.retain_grads():       # every op output keeps its .grad, not only the leaves
        output = F.scaled_dot_product_attention(query_t, key_t, value_t, scale=scale)  # (B,H,L,Ev)
    output.backward(upstream)

    path = path_back_to_softmax(output)
    weights = path[-1].output                 # (B, H, L, S) the softmax's output
    scores = path[-1].parents[0].output       # (B, H, L, S) the softmax's input
    ratio = row_norms(scores.grad) / row_norms(weights.grad)     # (B, H, L) one per query row
    return {
        "graph": describe_graph(path),
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


def sweep(key_dims):
    """{d_k: {"scaled": measurements, "unscaled": measurements}}, on the same inputs per d_k."""
    results = {}
    for key_dim in key_dims:
        inputs = random_inputs(key_dim)
        results[key_dim] = {name: measure(*inputs, scale) for name, scale in SCALINGS.items()}
    return results


def unscaled_over_scaled(results, key_dim, name):
    return results[key_dim]["unscaled"][name] / results[key_dim]["scaled"][name]


def print_tables(results):
    print("\nWhat the softmax does ('median grad ratio' = median over the query rows of\n"
          f"||dL/dscores|| / ||dL/dweights||; 'saturated' = rows where that ratio is below "
          f"{SATURATED:g}):\n")
    rows = []
    for key_dim, by_scaling in results.items():
        for name, measured in by_scaling.items():
            rows.append([str(key_dim), name, f"{measured['score_std']:.2f}",
                         f"{measured['mean_max_weight']:.3f}", f"{measured['median_ratio']:.2e}",
                         f"{measured['saturated_fraction']:.1%}"])
    demo_tools.print_table(["d_k", "scores", "std(scores)", "mean max weight",
                            "median grad ratio", "saturated rows"], rows)

    print("\nWhat reaches the inputs, unscaled / scaled ('typical row' = median over rows of the "
          "row's norm;\n'all' = norm of the whole gradient):\n")
    rows = []
    for key_dim in results:
        rows.append([str(key_dim)] + [
            f"{unscaled_over_scaled(results, key_dim, name):.2g}"
            for name in ("median_ratio", "query_grad_typical_row", "key_grad_typical_row",
                         "query_grad_total", "key_grad_total", "value_grad_total")])
    demo_tools.print_table(["d_k", "median grad ratio", "dL/dq typical row", "dL/dk typical row",
                            "dL/dq all", "dL/dk all", "dL/dv all"], rows)


def interpretation(results):
    """Three paragraphs saying what the tables mean, with the measured numbers filled in."""
    key_dim = HEADLINE_KEY_DIM if HEADLINE_KEY_DIM in results else max(results)
    paragraphs = [scaled_paragraph(results, key_dim), collapse_paragraph(results, key_dim),
                  what_survives_paragraph(results, key_dim)]
    return "\n\n".join(textwrap.fill(paragraph, width=99) for paragraph in paragraphs)


def scaled_paragraph(results, key_dim):
    scaled = results[key_dim]["scaled"]
    ratios = [by_scaling["scaled"]["median_ratio"] for by_scaling in results.values()]
    return (f"What the numbers mean. Divided by sqrt(d_k), the scores keep a standard deviation of "
            f"about 1 at every width, the softmax stays soft (mean max weight "
            f"{scaled['mean_max_weight']:.2f} at d_k={key_dim}), and it passes a steady share of "
            f"the gradient: the median ratio stays between {min(ratios):.2e} and "
            f"{max(ratios):.2e}.")


def collapse_paragraph(results, key_dim):
    scaled, unscaled = results[key_dim]["scaled"], results[key_dim]["unscaled"]
    smallest = min(results)
    onset = next((d for d in results if unscaled_over_scaled(results, d, "median_ratio") < 0.5),
                 None)
    onset_text = ("" if onset is None else
                  f" The unscaled ratio first falls below half the scaled one at d_k={onset}, "
                  f"where the unscaled scores' std is "
                  f"{results[onset]['unscaled']['score_std']:.0f};"
                  f" at d_k={smallest} it is still "
                  f"{unscaled_over_scaled(results, smallest, 'median_ratio'):.2g}x the scaled one.")
    return (f"Unscaled, the std of the scores grows like sqrt(d_k) ({unscaled['score_std']:.1f} at "
            f"d_k={key_dim}), the softmax turns almost one-hot (mean max weight "
            f"{unscaled['mean_max_weight']:.3f}) and its Jacobian w_i (delta_ij - w_j) goes to "
            f"zero: at d_k={key_dim} the median ratio is {unscaled['median_ratio']:.1e}, "
            f"{scaled['median_ratio'] / unscaled['median_ratio']:.0f}x below the scaled "
            f"{scaled['median_ratio']:.1e}, and {unscaled['saturated_fraction']:.0%} of the rows "
            f"are saturated. A typical query row then gets "
            f"{unscaled_over_scaled(results, key_dim, 'query_grad_typical_row'):.2g}x the scaled "
            f"gradient: most queries can no longer learn which key to look at.{onset_text}")


def what_survives_paragraph(results, key_dim):
    unsaturated = 1.0 - results[key_dim]["unscaled"]["saturated_fraction"]
    return (f"What does not vanish. The gradient to the values, dL/dv = weights^T @ grad, never "
            f"passes through the softmax's Jacobian: it is "
            f"{unscaled_over_scaled(results, key_dim, 'value_grad_total'):.2g}x the scaled one at "
            f"d_k={key_dim}, because the weights still sum to 1, only on fewer keys. Nor does the "
            f"gradient to the queries and keys as a whole: its norm is "
            f"{unscaled_over_scaled(results, key_dim, 'query_grad_total'):.2g}x the scaled one for "
            f"the queries. The {unsaturated:.0%} of rows that are not saturated (no single key "
            f"takes all the weight) still pass gradient, and in dL/dq = scale * dL/dscores @ k "
            f"the unscaled version multiplies by 1 where the scaled one multiplies by "
            f"1/sqrt(d_k). A typical "
            f"key row gets {unscaled_over_scaled(results, key_dim, 'key_grad_typical_row'):.2g}x "
            f"the scaled gradient, because each key collects gradient from every query, the "
            f"unsaturated ones included. So without the scale the gradient does not just shrink: "
            f"it gathers on the rows that happen not to be saturated, while the others get almost "
            f"nothing, which no single learning rate suits.")


def plot(results, folder):
    """Median gradient ratio and mean max weight against d_k, scaled and unscaled."""
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    key_dims = list(results)
    figure, (ratio_axes, weight_axes) = plt.subplots(1, 2, figsize=(11, 4.5))
    for name, style in (("scaled", "o-"), ("unscaled", "s--")):
        label = "scaled: q.k / sqrt(d_k)" if name == "scaled" else "unscaled: q.k"
        ratio_axes.plot(key_dims, [results[d][name]["median_ratio"] for d in key_dims], style,
                        label=label)
        weight_axes.plot(key_dims, [results[d][name]["mean_max_weight"] for d in key_dims],
                         style, label=label)
    ratio_axes.axhline(SATURATED, color="grey", linestyle=":", label="saturated below this")
    ratio_axes.set(yscale="log", xlabel="d_k (width of queries and keys)",
                   ylabel="median ||dL/dscores|| / ||dL/dweights||",
                   title="How much gradient the softmax lets through")
    weight_axes.axhline(1 / KEYS, color="grey", linestyle=":", label=f"uniform (1/{KEYS})")
    weight_axes.set(ylim=(0, 1.05), xlabel="d_k (width of queries and keys)",
                    ylabel="mean of each row's largest weight",
                    title="How one-hot the attention weights are")
    for axes in (ratio_axes, weight_axes):
        axes.set_xscale("log", base=2)
        axes.set_xticks(key_dims, [str(d) for d in key_dims])
        axes.legend()
    figure.suptitle(f"Attention on random unit-variance queries and keys ({QUERIES} keys per "
                    "query): scores divided by sqrt(d_k), or not")
    figure.tight_layout()
    path = folder / "sqrt_dk.png"
    return demo_tools.save_figure(figure, path, dpi=120)


def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    folder = args.output
    key_dims = KEY_DIMS_QUICK if args.quick else KEY_DIMS_FULL
    print(__doc__.split("\n\n")[1])
    print("\n" + textwrap.fill(
        f"Attention on random unit-variance queries and keys: batch {BATCH}, {HEADS} heads, "
        f"{QUERIES} queries, {KEYS} keys, values of width {VALUE_DIM}, a random upstream "
        f"gradient; d_k = {', '.join(map(str, key_dims))}, each scaled and unscaled.", width=99))
    start = time.perf_counter()
    results = sweep(key_dims)
    seconds = time.perf_counter() - start
    first = results[key_dims[0]]["scaled"]
    print(f"\nThe graph, walked back from the output to the softmax (d_k={key_dims[0]}):\n"
          f"{first['graph']}")
    print_tables(results)
    print(f"\n(measured by tinyattn in {seconds:.1f} s)\n")
    print(interpretation(results))
    path = plot(results, folder)
    if path is not None:
        print(f"\nPicture: {path}")
    return results


if __name__ == "__main__":
    main()
