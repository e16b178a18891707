"""Demo 6: where a trained transformer's attention heads look.

What it shows: a small causal transformer (`nn.CausalTransformer`, 2 layers of 2 heads) trained to
reverse a list of digits, then its attention weights on one held-out example, drawn as a grid of
heatmaps (one per layer and head) with the tokens on the axes, and a table, over all the held-out
examples, of where each head looks and whether that is where the task needs it to look.

    python demos/06_attention_heatmap.py [output folder] [--quick]

The picture is `attention_heatmap.png` in the output folder (when matplotlib is installed), and
`attention_view.html` shows the same example in a browser, a head at a time, with the gradient of
the example's loss with respect to the weights (dL/dA) beside them (`tinyattn.viz.attention_view`).
`--quick` trains for 80 steps. BLAS runs on one thread: these small products gain nothing from
threads that wait for a core on a busy machine. This demo's entry on docs/demos.md ends with its
full run's time, as `dev/regenerate.py` measured it.

The task: 8 digits, a separator "|", then the same digits backwards.

    3 1 4 1 5 9 2 6 | 6 2 9 5 1 4 1 3       positions 0-7 the digits, 8 the separator,
                                            9-16 the digits backwards

It is trained as a language model: at every position the model predicts the next token, and the
loss counts the reversed half only (the first half is random and cannot be predicted). With causal
attention, query position p sees the keys 0 ... p. The digit to write after position p
(p = 8, the separator, up to 15) is the one at position 15 - p: the mirror image of the next
position across the separator. A head that has learned to fetch it draws an anti-diagonal in the
rows from the separator down.

Each heatmap row is one query position, and its weights sum to 1 over the keys it can see (the
causal mask leaves the upper triangle empty). The rows above the separator belong to the random
first half, which the loss does not score. Each heatmap's title gives, over all the held-out
examples (not only the one drawn), the share of answer rows whose largest weight is on the mirror
key. The table counts, for each head, where the largest weight of an answer row falls: on the
mirror key, next to it, on the separator, on the row's own position, on the one before, or
elsewhere (the first of these that fits). A head that reads the mirror key for every answer is
what lets the model write the reversed digits.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
import tinyattn.viz as viz

# %% [markdown]
# The settings (the task's sizes, the model's, and training's in the full and the quick run), and
# this demo's entry on docs/demos.md, which `dev/regenerate.py` fills with the numbers `main`
# returns.

# %%
SEED = 0
NUM_DIGITS, LENGTH = 10, 8
SEPARATOR = NUM_DIGITS              # token id 10, drawn as "|"
VOCAB = NUM_DIGITS + 1
IGNORE = -100                       # F.cross_entropy's ignore_index: positions the loss skips
EMBED_DIM, NUM_HEADS, NUM_LAYERS = 32, 2, 2
BATCH, HELD_OUT, LEARNING_RATE = 64, 512, 3e-3
FULL = {"steps": 300, "eval_every": 50, "print_every": 50}
QUICK = {"steps": 80, "eval_every": 20, "print_every": 40}
ANSWER_QUERIES = np.arange(LENGTH, 2 * LENGTH)         # the separator, the digits written so far
MIRROR_KEYS = 2 * LENGTH - 1 - ANSWER_QUERIES          # the key each of them needs

PAGE_ENTRY = """\
6. [`06_attention_heatmap.py`](../demos/06_attention_heatmap.py) — a {num_layers}-layer causal
   transformer learns to reverse {length} digits ({accuracy:.0%} held-out accuracy); its per-head
   attention weights on one held-out example, with the key each answer needs circled. Over all
   {held_out} held-out examples, the second layer's heads put their largest weight on the mirrored
   position for {L2H1_mirror:.0%} and {L2H2_mirror:.0%} of the answers, the first layer's for
   {L1H1_mirror:.0%} and {L1H2_mirror:.0%}.

   ![attention weights per layer and head](pictures/attention_heatmap.png)"""


# %% [markdown]
# The data: random digits, the separator, the digits backwards, with targets on the reversed half
# only.

# %%
def reversal_batch(random, size):
    """(ids, targets), both (size, 2 * LENGTH): the tokens fed in, and the next token wherever it
    belongs to the reversed half (IGNORE elsewhere)."""
    digits = random.integers(0, NUM_DIGITS, (size, LENGTH))
    separator = np.full((size, 1), SEPARATOR)
    sequence = np.concatenate([digits, separator, digits[:, ::-1]], axis=1)    # (size, 2L + 1)
    ids, targets = sequence[:, :-1], sequence[:, 1:].copy()                    # (size, 2L)
    targets[:, :LENGTH] = IGNORE
    return ids, targets


def token_labels(ids):
    return ["|" if token == SEPARATOR else str(token) for token in ids]


# %% [markdown]
# Where each head's largest weight falls on the answer rows, over all the held-out examples.

# %%
def where_heads_look(weights):
    """For every (layer, head): the share of answer queries whose largest weight is on each kind
    of key, counted in this order (the first kind that fits): the mirror key the task needs, a
    key next to it, the separator, the query's own position, the one before it, anything else."""
    shares = {}
    for layer, layer_weights in enumerate(weights):                 # (B, H, T, T)
        top_keys = layer_weights[:, :, ANSWER_QUERIES, :].argmax(axis=-1)   # (B, H, L)
        for head in range(layer_weights.shape[1]):
            top = top_keys[:, head]                                 # (B, L)
            shares[f"L{layer + 1}H{head + 1}"] = demo_tools.first_fit_shares({
                "mirror": top == MIRROR_KEYS, "beside_mirror": abs(top - MIRROR_KEYS) == 1,
                "separator": top == LENGTH, "itself": top == ANSWER_QUERIES,
                "previous": top == ANSWER_QUERIES - 1})
    return shares


# %% [markdown]
# One held-out example, printed row by row and drawn as a heatmap per head.

# %%
def print_example(ids, targets, predictions, example_weights):
    """One row per answer query: what it must write, the key it needs, and each head's top key."""
    labels = token_labels(ids)
    heads = [(layer, head) for layer in range(len(example_weights))
             for head in range(example_weights[layer].shape[0])]
    rows = []
    for query, needed in zip(ANSWER_QUERIES, MIRROR_KEYS):
        row = [f"{query} '{labels[query]}'", f"{targets[query]} (wrote {predictions[query]})",
               f"{needed} '{labels[needed]}'"]
        for layer, head in heads:
            top = int(example_weights[layer][head, query].argmax())
            row.append(f"{top} '{labels[top]}'" + (" *" if top == needed else "  "))
        rows.append(row)
    demo_tools.print_table(["query", "must write", "needs key"]
                           + [f"L{layer + 1}H{head + 1} top key" for layer, head in heads], rows)


def plot(ids, example_weights, shares, path):
    """One heatmap per layer and head; each title says over all held-out examples how often that
    head's top key is the mirror."""
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    labels = token_labels(ids)
    num_layers, num_heads = len(example_weights), example_weights[0].shape[0]
    figure, grid = plt.subplots(num_layers, num_heads, figsize=(4.6 * num_heads, 5.2 * num_layers),
                                squeeze=False, layout="constrained")
    for layer in range(num_layers):
        for head in range(num_heads):
            axes = grid[layer, head]
            image = axes.imshow(example_weights[layer][head], cmap="Blues", vmin=0, vmax=1)
            axes.scatter(MIRROR_KEYS, ANSWER_QUERIES, s=60, facecolors="none",
                         edgecolors="tab:red", linewidths=1)    # where the task needs it to look
            axes.set_xticks(range(len(labels)), labels)
            axes.set_yticks(range(len(labels)), labels)
            axes.set(xlabel="key (position attended to)", ylabel="query (position attending)",
                     title=f"layer {layer + 1}, head {head + 1}\ntop key on the mirror in "
                           f"{shares[f'L{layer + 1}H{head + 1}']['mirror']:.0%} of answer rows")
    figure.colorbar(image, ax=grid, shrink=0.6, label="attention weight")
    figure.suptitle(f"Attention weights on one held-out example (red circles: the key each answer "
                    f"query needs);\npercentages: answer rows of all {HELD_OUT} held-out examples")
    return demo_tools.save_figure(figure, path, dpi=110)


# %% [markdown]
# The same example as a page: the weights again, this time keeping their gradients, dL/dA of the
# example's loss, to draw beside them.

# %%
def attention_page(model, ids, targets):
    """attention_view of one example (ids, targets: (T,)), with dL/dA of its loss."""
    logits, weights = model(ids[None], return_weights=True)    # (1, T, VOCAB), [(1, H, T, T)]
    for layer_weights in weights:
        layer_weights.retain_grad()
    F.cross_entropy(logits[0], targets, ignore_index=IGNORE).backward()
    model.zero_grad()                                          # the page needed dL/dA only
    return viz.attention_view(token_labels(ids), weights, grads=[w.grad for w in weights])


# %% [markdown]
# `main` trains the model with the loop the demos share (`demo_tools.train`), reads its attention
# weights on the held-out examples, and reports where each head looks.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    ta.manual_seed(SEED)
    model = nn.CausalTransformer(VOCAB, EMBED_DIM, NUM_HEADS, NUM_LAYERS, max_len=2 * LENGTH,
                                 dtype=np.float32)
    print(f"Reversing {LENGTH} digits with a causal transformer ({NUM_LAYERS} layers x "
          f"{NUM_HEADS} heads, embed_dim {EMBED_DIM}), Adam (lr {LEARNING_RATE}), "
          f"{settings['steps']} steps:\n")
    held_out = reversal_batch(np.random.default_rng(SEED + 1), HELD_OUT)    # never trained on
    curves = demo_tools.train(model, reversal_batch, demo_tools.sequence_score, held_out,
                              "reversal", LEARNING_RATE, BATCH, SEED, **settings)

    ids, targets = held_out
    with ta.no_grad():
        logits, weights = model(ids, return_weights=True)       # (B, T, VOCAB), [(B, H, T, T)]
    weights = [layer_weights.data for layer_weights in weights]
    shares = where_heads_look(weights)
    example_weights = [layer_weights[0] for layer_weights in weights]   # [(H, T, T)]

    print(f"\nOne held-out example, {' '.join(token_labels(ids[0]))} (the model is fed its "
          "input, which stops before the last answer digit)\nEach answer query "
          "(position 'token') and the key each head attends to most (* = the key it needs):")
    print_example(ids[0], targets[0], logits.data[0].argmax(axis=-1), example_weights)
    print(f"\nOver all {HELD_OUT} held-out examples, where each head's largest weight falls "
          f"(answer queries {ANSWER_QUERIES[0]} to {ANSWER_QUERIES[-1]}):")
    kinds = list(shares["L1H1"])
    demo_tools.print_table(["head"] + kinds, [[head] + [f"{share[kind]:.0%}" for kind in kinds]
                                              for head, share in shares.items()])
    numbers = {"accuracy": curves["held_out_accuracy"][-1], "held_out": HELD_OUT,
               "length": LENGTH, "num_layers": NUM_LAYERS,
               "largest_row_sum_error": max(float(np.abs(layer_weights.sum(axis=-1) - 1).max())
                                            for layer_weights in weights),
               "largest_weight_on_a_later_key": max(float(np.triu(layer_weights, k=1).max())
                                                    for layer_weights in weights)}
    numbers.update({f"{head}_{kind}": share[kind] for head, share in shares.items()
                    for kind in kinds})
    best = max(shares, key=lambda head: shares[head]["mirror"])
    print(f"\nheld-out accuracy {numbers['accuracy']:.1%} (chance: {1 / NUM_DIGITS:.0%}); the head "
          f"that looks at the mirror key most: {best} ({shares[best]['mirror']:.0%})")
    picture = plot(ids[0], example_weights, shares, args.output / "attention_heatmap.png")
    if picture is not None:
        print(f"heatmaps: {picture}")
    page = attention_page(model, ids[0], targets[0]).save(args.output / "attention_view.html")
    print(f"the same example, a head at a time with dL/dA, in a browser: {page.resolve()}")
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
