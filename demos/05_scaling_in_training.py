"""Demo 5: does dividing the attention scores by sqrt(d_k) matter in training?

What it shows: one small attention model trained twice, once with its scores scaled by
1/sqrt(head_dim) and once unscaled (`scale=1.0`), from the same initial weights, with the same
optimizer (Adam) on the same batches, on a task that cannot be solved without attention. It prints
a progress line while training, a table of held-out loss and accuracy for both runs, a control run
at a small head size, and a paragraph saying what the numbers show; it draws both loss curves.

    python demos/05_scaling_in_training.py [output folder] [--quick]

The picture is `scaling_in_training.png` in the output folder (when matplotlib is installed). The
full run takes well under a minute; `--quick` trains for a few dozen steps only.

The task, associative recall. The model sees 12 (key, value) pairs, then is asked for one key and
must answer that key's value:

    pairs:     (k=7, v=3)  (k=21, v=30)  (k=4, v=3)  ...      12 pairs, 12 different keys
    question:  k=21 ?                                          answer: 30

The pair holding the answer is anywhere in the list, so no fixed position helps: the question has
to find its pair by content. That is what attention does, with the question as the query and the
pairs as the keys and values.

The model, one attention layer (E = embed_dim, here one head, so head_dim = E):

    pairs     = key_embedding(k_i) + value_embedding(v_i)              (B, 12, E)
    question  = key_embedding(k)   + value_embedding("?")              (B, 1, E)
    attended  = attention(query=question, key=pairs, value=pairs)      (B, 1, E)
    logits    = Linear(attended)                                       (B, 32 values)

What to expect (demo 4 measures it without training): a score is a dot product of two head_dim-long
vectors, so its spread grows like sqrt(head_dim). At head_dim 256 the unscaled scores are 16 times
wider than the scaled ones, and the softmax starts out close to one-hot on a pair chosen by the
random initial weights. Whether that slows training down, and by how much, is what this demo
measures: at head_dim 256, and as a control at head_dim 32.
"""
import textwrap

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn

SEED = 0
NUM_KEYS, NUM_VALUES, NUM_PAIRS = 32, 32, 12
UNKNOWN = NUM_VALUES            # the value id of the "?" in the question
BATCH, HELD_OUT, LEARNING_RATE = 64, 512, 1e-3
HEAD_DIM, CONTROL_HEAD_DIM = 256, 32
SCALINGS = {"scaled": None, "unscaled": 1.0}    # scale=None means 1/sqrt(head_dim)
TARGET_ACCURACY = 0.9           # "learned the task": this share of held-out questions answered
FULL = {"steps": 300, "eval_every": 25, "print_every": 100}
QUICK = {"steps": 40, "eval_every": 10, "print_every": 20}


def recall_batch(random, size):
    """`size` examples: keys and values (size, 12), the question's key and its answer (size,)."""
    keys = np.argsort(random.random((size, NUM_KEYS)), axis=1)[:, :NUM_PAIRS]   # all different
    values = random.integers(0, NUM_VALUES, (size, NUM_PAIRS))
    asked = random.integers(0, NUM_PAIRS, size)          # which pair the question is about
    rows = np.arange(size)
    return keys, values, keys[rows, asked], values[rows, asked]


class RecallModel(nn.Module):
    """One attention layer: the question attends over the (key, value) pairs, a Linear reads the
    answer off what it gathered. The LayerNorm gives every token unit-variance features, so the
    size of the scores is set by the head size and the weights, not by the embeddings' scale."""

    def __init__(self, embed_dim, num_heads=1, scale=None, dtype=np.float32):
        self.key_embedding = nn.Embedding(NUM_KEYS, embed_dim, dtype=dtype)
        self.value_embedding = nn.Embedding(NUM_VALUES + 1, embed_dim, dtype=dtype)   # + "?"
        self.norm = nn.LayerNorm(embed_dim, dtype=dtype)
        self.attention = nn.MultiHeadAttention(embed_dim, num_heads, scale=scale, dtype=dtype)
        self.readout = nn.Linear(embed_dim, NUM_VALUES, dtype=dtype)

    def forward(self, keys, values, question):
        """(answer logits (B, NUM_VALUES), attention weights (B, H, 1, NUM_PAIRS))."""
        B = len(question)
        pairs = self.key_embedding(keys) + self.value_embedding(values)            # (B, n, E)
        unknown = np.full((B, 1), UNKNOWN)
        asked = self.key_embedding(question[:, None]) + self.value_embedding(unknown)  # (B, 1, E)
        attended, weights = self.attention(self.norm(asked), self.norm(pairs))
        #                                                           # (B, 1, E), (B, H, 1, n)
        return self.readout(attended[:, 0]), weights                # (B, NUM_VALUES), ...


def recall_score(model, batch):
    """(mean cross-entropy as a tensor, share of questions answered right) on one batch."""
    keys, values, question, answer = batch
    logits, _ = model(keys, values, question)                       # (B, NUM_VALUES)
    accuracy = float((logits.data.argmax(axis=-1) == answer).mean())
    return F.cross_entropy(logits, answer), accuracy


def steps_to_learn(curves):
    """The first checkpoint at which held-out accuracy reached TARGET_ACCURACY, or None."""
    return next((step for step, accuracy in zip(curves["checkpoints"], curves["held_out_accuracy"])
                 if accuracy >= TARGET_ACCURACY), None)


def top_weight(model, held_out):
    """How peaked the attention is: the largest weight of each question's softmax, averaged over
    the held-out questions (1 / NUM_PAIRS if uniform, 1 if one-hot)."""
    keys, values, question, _ = held_out
    with ta.no_grad():
        _, weights = model(keys, values, question)                  # (B, H, 1, n)
    return float(weights.data.max(axis=-1).mean())


def compare(head_dim, held_out, settings):
    """Train the scaled and the unscaled model, from the same initial weights, at one head size."""
    runs = {}
    for name, scale in SCALINGS.items():
        ta.manual_seed(SEED)        # the same initial weights for both: only `scale` differs
        model = RecallModel(head_dim, num_heads=1, scale=scale)
        initial_top_weight = top_weight(model, held_out)
        label = f"head_dim {head_dim}, {name}"
        runs[name] = demo_tools.train(model, recall_batch, recall_score, held_out, label,
                                      LEARNING_RATE, BATCH, SEED, **settings)
        runs[name]["initial_top_weight"] = initial_top_weight
        runs[name]["steps_to_learn"] = steps_to_learn(runs[name])
    return runs


def checkpoint_table(runs):
    rows = [[str(step)] + [f"{runs[name]['held_out_loss'][i]:.3f}" for name in SCALINGS]
            + [f"{runs[name]['held_out_accuracy'][i]:.1%}" for name in SCALINGS]
            for i, step in enumerate(runs["scaled"]["checkpoints"])]
    demo_tools.print_table(["step", "scaled loss", "unscaled loss", "scaled acc", "unscaled acc"],
                           rows)


def summary_table(comparisons, steps):
    rows = []
    for head_dim, runs in comparisons.items():
        for name in SCALINGS:
            run = runs[name]
            learned = run["steps_to_learn"]
            rows.append([str(head_dim), name, f"{run['initial_top_weight']:.0%}",
                         str(learned) if learned is not None else f"> {steps}",
                         f"{run['held_out_loss'][-1]:.3f}", f"{run['held_out_accuracy'][-1]:.1%}",
                         f"{run['seconds']:.1f}"])
    demo_tools.print_table(["head_dim", "scores", "top weight at start",
                            f"steps to {TARGET_ACCURACY:.0%}", "final loss", "final acc",
                            "seconds"], rows)


def reached(run, steps):
    learned = run["steps_to_learn"]
    return f"at step {learned}" if learned is not None else f"not within {steps} steps"


def verdict(runs):
    """Which run learned first: 'scaled', 'unscaled', 'tie' or 'neither'."""
    scaled, unscaled = runs["scaled"]["steps_to_learn"], runs["unscaled"]["steps_to_learn"]
    if scaled is None and unscaled is None:
        return "neither"
    if unscaled is None or (scaled is not None and scaled < unscaled):
        return "scaled"
    if scaled is None or unscaled < scaled:
        return "unscaled"
    return "tie"


def interpretation(comparisons, steps):
    """A paragraph saying what the measured numbers show, whichever way they came out."""
    big, small = comparisons[HEAD_DIM], comparisons[CONTROL_HEAD_DIM]
    target = f"{TARGET_ACCURACY:.0%} held-out accuracy"
    spacing = big["scaled"]["checkpoints"][1] - big["scaled"]["checkpoints"][0]
    peaked = (": unscaled, the softmax starts out nearly committed to pairs picked by the random "
              "weights" if big["unscaled"]["initial_top_weight"] > 0.5 else "")
    outcome = {
        "scaled": "so here scaling made training faster",
        "unscaled": "so here the unscaled model learned faster: scaling did not help",
        "tie": ("so here scaling made no difference to how fast the task was learned, to the "
                f"resolution of the held-out checks (every {spacing} steps)"),
        "neither": "so neither learned the task in this run (too few steps to tell)",
    }
    text = (f"At head_dim {HEAD_DIM}, the scaled model reached {target} "
            f"{reached(big['scaled'], steps)} and the unscaled one "
            f"{reached(big['unscaled'], steps)}, {outcome[verdict(big)]}. Before training, a "
            "question's largest attention weight averaged "
            f"{big['unscaled']['initial_top_weight']:.0%} unscaled against "
            f"{big['scaled']['initial_top_weight']:.0%} scaled (uniform over {NUM_PAIRS} pairs "
            f"would be {1 / NUM_PAIRS:.0%}){peaked}. The final held-out losses were "
            f"{big['scaled']['held_out_loss'][-1]:.3f} scaled and "
            f"{big['unscaled']['held_out_loss'][-1]:.3f} unscaled. In the control at head_dim "
            f"{CONTROL_HEAD_DIM}, where the unscaled scores are only sqrt({CONTROL_HEAD_DIM}) = "
            f"{CONTROL_HEAD_DIM ** 0.5:.1f} times wider, the scaled model reached {target} "
            f"{reached(small['scaled'], steps)} and the unscaled one "
            f"{reached(small['unscaled'], steps)}, {outcome[verdict(small)]}. This is one seed "
            f"and one learning rate ({LEARNING_RATE}). Note that Adam divides every gradient by "
            "its running size, so a softmax that passes little gradient (demo 4) does not by "
            f"itself make Adam's steps small; but unscaled scores, {HEAD_DIM ** 0.5:.0f} times "
            f"larger, also move {HEAD_DIM ** 0.5:.0f} times further when the weights take a step.")
    return textwrap.fill(text, width=98)


def plot(comparisons, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"scaled": "tab:blue", "unscaled": "tab:red"}
    for name in SCALINGS:
        losses = comparisons[HEAD_DIM][name]["train_loss"]
        loss_axes.plot(range(1, len(losses) + 1), losses, color=colors[name], linewidth=1,
                       label=f"{name}" + (" (1/sqrt(d_k))" if name == "scaled" else " (scale=1)"))
        for head_dim, style in ((HEAD_DIM, "-"), (CONTROL_HEAD_DIM, ":")):
            run = comparisons[head_dim][name]
            accuracy_axes.plot(run["checkpoints"], run["held_out_accuracy"], style, marker="o",
                               markersize=3, color=colors[name],
                               label=f"head_dim {head_dim}, {name}")
    loss_axes.set(yscale="log", xlabel="step", ylabel="training loss (cross-entropy, log scale)",
                  title=f"Associative recall, one attention head of size {HEAD_DIM}")
    accuracy_axes.set(xlabel="step", ylabel="held-out accuracy", ylim=(0, 1.02),
                      title=f"Held-out accuracy (control: head_dim {CONTROL_HEAD_DIM}, dotted)")
    accuracy_axes.axhline(1 / NUM_VALUES, color="gray", linewidth=0.8, linestyle="--")
    last_step = comparisons[HEAD_DIM]["scaled"]["checkpoints"][-1]
    accuracy_axes.text(last_step, 1 / NUM_VALUES + 0.01, "chance", color="gray", fontsize=8,
                       ha="right")
    for axes in (loss_axes, accuracy_axes):
        axes.legend(fontsize=8)
        axes.grid(alpha=0.3)
    figure.tight_layout()
    return demo_tools.save_figure(figure, path, dpi=120)


def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    folder = args.output
    settings = QUICK if args.quick else FULL
    held_out = recall_batch(np.random.default_rng(SEED + 1), HELD_OUT)     # never trained on
    print(f"Associative recall: {NUM_PAIRS} (key, value) pairs, then a question; chance is "
          f"1/{NUM_VALUES} = {1 / NUM_VALUES:.1%}.\nOne attention head, Adam (lr {LEARNING_RATE}), "
          f"batches of {BATCH}, {settings['steps']} steps, float32.\n")
    comparisons = {head_dim: compare(head_dim, held_out, settings)
                   for head_dim in (HEAD_DIM, CONTROL_HEAD_DIM)}

    print(f"\nHeld-out loss and accuracy ({HELD_OUT} questions) at head_dim {HEAD_DIM}:")
    checkpoint_table(comparisons[HEAD_DIM])
    print("\nBoth head sizes ('top weight at start': the mean largest attention weight before "
          "training):")
    summary_table(comparisons, settings["steps"])
    print("\n" + interpretation(comparisons, settings["steps"]) + "\n")
    picture = plot(comparisons, folder / "scaling_in_training.png")
    if picture is not None:
        print(f"loss curves: {picture}")
    return {"comparisons": comparisons, "verdict": verdict(comparisons[HEAD_DIM]),
            "control_verdict": verdict(comparisons[CONTROL_HEAD_DIM]), "picture": picture}


if __name__ == "__main__":
    main()
