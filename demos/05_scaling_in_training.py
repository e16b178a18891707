"""Demo 5: does dividing the attention scores by sqrt(d_k) matter in training?

What it shows: one small attention model learns associative recall twice, its scores scaled by
1/sqrt(head_dim) or unscaled (`scale=1.0`), from the same initial weights, with Adam on the same
batches; then the same at a small head size, as a control.

    python demos/05_scaling_in_training.py [output folder] [--quick]

`--quick` trains for 30 steps. Its full run's time, as `dev/regenerate.py` measured it, ends its
entry on docs/demos.md.

The task: 12 (key, value) pairs, then a question about one key, whose value is the answer:

    pairs:     (k=7, v=3)  (k=21, v=30)  (k=4, v=3)  ...      12 pairs, 12 different keys
    question:  k=21 ?                                          answer: 30

The pair is anywhere in the list, so the question must find it by content: what attention does,
with the question as the query and the pairs as the keys and values.

What to expect (demo 4 measures it without training): a score is a dot product of two
head_dim-long vectors, so its spread grows like sqrt(head_dim). At head_dim 256 the unscaled scores
are 16 times wider, and the softmax starts out nearly one-hot on a pair chosen by the initial
weights. Adam divides every gradient by its running size, so a softmax that passes little gradient
does not by itself make Adam's steps small; but unscaled scores, 16 times larger, also move 16
times further when the weights take a step. Whether that slows training, and by how much, is what
the demo measures, with one seed and one learning rate: this run, not a law.

Underflow. A softmax weight is exp(s_i - max_j s_j): in float32 it is subnormal (fewer significant
bits) when its score lies more than about 87 below its row's largest, and exactly 0 beyond about
103. Its gradient w_i (g_i - sum_j w_j g_j) is then exactly 0 as well, and only a step that moves
the other scores can bring the pair back into play. Arithmetic on subnormal numbers is slow on
some processors: the demo times a training pass of each trained model, the same work on other
numbers. The unscaled run at head_dim 256 is saturated, so its figures hang on the last bits of
the scores, which depend on the BLAS kernel (`OPENBLAS_CORETYPE=SandyBridge` on an x86 machine
whose OpenBLAS chose Haswell kernels moves them; the scaled ones stay).
"""
import functools
import statistics

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn_tools.bench.timing import interleaved

# %% [markdown]
# The task: associative recall, in batches that both runs of a comparison see alike.

# %%
SEED = 0
NUM_KEYS, NUM_VALUES, NUM_PAIRS = 32, 32, 12
UNKNOWN = NUM_VALUES            # the value id of the "?" in the question
BATCH, HELD_OUT, LEARNING_RATE = 64, 512, 1e-3
HEAD_DIM, CONTROL_HEAD_DIM = 256, 32
SCALINGS = {"scaled": None, "unscaled": 1.0}    # scale=None means 1/sqrt(head_dim)
TARGET_ACCURACY = 0.9           # "learned the task": this share of held-out questions answered
FULL = {"steps": 300, "eval_every": 25, "print_every": 100}
QUICK = {"steps": 30, "eval_every": 10, "print_every": 10}


def recall_batch(random, size):
    """`size` examples: keys and values (size, 12), the question's key and its answer (size,)."""
    keys = np.argsort(random.random((size, NUM_KEYS)), axis=1)[:, :NUM_PAIRS]   # all different
    values = random.integers(0, NUM_VALUES, (size, NUM_PAIRS))
    asked = random.integers(0, NUM_PAIRS, size)          # which pair the question is about
    rows = np.arange(size)
    return keys, values, keys[rows, asked], values[rows, asked]


# %% [markdown]
# The model: one attention layer, the question its query and the pairs its keys and values; `scale`
# is all that differs between the two runs.

# %%
class RecallModel(nn.Module):
    """The LayerNorm gives every token unit-variance features, so the size of the scores is set by
    the head size and the weights, not by the embeddings' scale."""

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
        attended, weights = self.attention(self.norm(asked), self.norm(pairs))  # (B, 1, E), ...
        return self.readout(attended[:, 0]), weights        # (B, NUM_VALUES), (B, H, 1, n)


def recall_score(model, batch):
    """(mean cross-entropy as a tensor, share of questions answered right) on one batch."""
    keys, values, question, answer = batch
    logits, _ = model(keys, values, question)                       # (B, NUM_VALUES)
    accuracy = float((logits.data.argmax(axis=-1) == answer).mean())
    return F.cross_entropy(logits, answer), accuracy


# %% [markdown]
# What is measured: how soon a run answers 90% of the held-out questions, how peaked its attention
# weights are and how many of them underflowed float32, and how long one training pass takes.

# %%
def steps_to_learn(curves):
    """The first checkpoint at which held-out accuracy reached TARGET_ACCURACY, or None."""
    return next((step for step, accuracy in zip(curves["checkpoints"], curves["held_out_accuracy"])
                 if accuracy >= TARGET_ACCURACY), None)


def verdict(runs):
    """Which run reached TARGET_ACCURACY first: 'scaled', 'unscaled', 'tie' or 'neither'."""
    reached = sorted((run["steps_to_learn"], name) for name, run in runs.items()
                     if run["steps_to_learn"] is not None)
    if len(reached) > 1 and reached[0][0] == reached[1][0]:
        return "tie"
    return reached[0][1] if reached else "neither"


def weight_stats(model, held_out):
    """The held-out questions' attention weights: the mean largest weight of a question, and the
    shares that underflowed float32 (subnormal, or exactly 0)."""
    keys, values, question, _ = held_out
    with ta.no_grad():
        weights = model(keys, values, question)[1].data             # (B, H, 1, n)
    smallest_normal = np.finfo(weights.dtype).tiny                  # 1.2e-38 in float32
    return {"top_weight": float(weights.max(axis=-1).mean()),
            "subnormal_weights": float(((0 < weights) & (weights < smallest_normal)).mean()),
            "zero_weights": float((weights == 0).mean())}


def forward_backward(model, batch):
    """One training pass of `model` on a batch, without the optimizer's step: what is timed."""
    model.zero_grad()
    recall_score(model, batch)[0].backward()


def milliseconds_per_step(models, batch, passes):
    """The median time of one forward and backward pass of each model on the same batch; the
    models take turns, so that a busy machine slows them alike."""
    steps = {name: functools.partial(forward_backward, model) for name, model in models.items()}
    times = interleaved(steps, [batch], passes)
    return {name: 1e3 * statistics.median(seconds) for name, seconds in times.items()}


# %% [markdown]
# The experiment: at each head size, the scaled and the unscaled model trained from the same initial
# weights, then a training pass of each timed.

# %%
def compare(head_dim, held_out, settings, passes):
    """Train the scaled and the unscaled model, from the same initial weights, at one head size;
    {name: what was measured}, with the training curves under "curves"."""
    runs, models = {}, {}
    for name, scale in SCALINGS.items():
        ta.manual_seed(SEED)        # the same initial weights for both: only `scale` differs
        model = models[name] = RecallModel(head_dim, scale=scale)
        top_weight_start = weight_stats(model, held_out)["top_weight"]
        curves = demo_tools.train(model, recall_batch, recall_score, held_out,
                                  f"head_dim {head_dim}, {name}", LEARNING_RATE, BATCH, SEED,
                                  **settings)
        runs[name] = {"curves": curves, "top_weight_start": top_weight_start,
                      **weight_stats(model, held_out), "steps_to_learn": steps_to_learn(curves),
                      "held_out_loss_start": curves["held_out_loss"][0],
                      "final_loss": curves["held_out_loss"][-1],
                      "final_accuracy": curves["held_out_accuracy"][-1]}
    timed_batch = recall_batch(np.random.default_rng(SEED + 2), BATCH)
    for name, milliseconds in milliseconds_per_step(models, timed_batch, passes).items():
        runs[name]["ms_per_step"] = milliseconds
    return runs


# %% [markdown]
# `main` runs the experiment at both head sizes, prints the tables, draws the picture and returns
# the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    passes = 3 if args.quick else 20          # forward and backward passes timed per model
    held_out = recall_batch(np.random.default_rng(SEED + 1), HELD_OUT)     # never trained on
    print(f"Associative recall: {NUM_PAIRS} (key, value) pairs, then a question; chance is "
          f"1/{NUM_VALUES} = {1 / NUM_VALUES:.1%}.\nOne attention head, Adam (lr {LEARNING_RATE}), "
          f"batches of {BATCH}, {settings['steps']} steps, float32.\n")
    comparisons = {head_dim: compare(head_dim, held_out, settings, passes)
                   for head_dim in (HEAD_DIM, CONTROL_HEAD_DIM)}
    print_tables(comparisons, settings, passes)
    demo_tools.print_pictures(plot(comparisons, args.output / "scaling_in_training.png"))
    return flat_numbers(comparisons)


# %% [markdown]
# Plumbing, kept out of the experiment's way: the tables, the picture, and the entry on docs/demos.md for
# this demo, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
PAGE_ENTRY = """\
5. [`05_scaling_in_training.py`](../demos/05_scaling_in_training.py) — the same effect in training:
   one attention head learns associative recall ({num_pairs} key-value pairs, then a question),
   scaled and unscaled, from the same initial weights. At head size {head_dim} the scaled model
   reaches {target_accuracy:.0%} held-out accuracy at step {scaled_256_steps_to_learn}, the
   unscaled one at step {unscaled_256_steps_to_learn} (the picture shows both loss curves); at
   head size {control_head_dim} (the control) they take {scaled_32_steps_to_learn} and
   {unscaled_32_steps_to_learn} steps. The unscaled scores also underflow float32: after
   training, {unscaled_256_zero_weights:.0%} of the unscaled model's attention weights are exactly
   0, so their gradient is 0 too, and {unscaled_256_subnormal_weights:.0%} are subnormal (scaled:
   {scaled_256_zero_weights:.0%} and {scaled_256_subnormal_weights:.0%}). Timed in turns on the
   machine that made this list, a forward and backward pass took {unscaled_256_ms_per_step:.0f} ms
   unscaled and {scaled_256_ms_per_step:.0f} ms scaled. One seed and one learning rate: the demo
   says so.

   ![loss and accuracy curves, scaled and unscaled](pictures/scaling_in_training.png)"""


def print_tables(comparisons, settings, passes):
    limits = np.finfo(np.float32)
    demo_tools.print_table(
        ["head_dim", "scores", "top weight: start", "end", f"steps to {TARGET_ACCURACY:.0%}",
         "final loss", "final acc", "subnormal", "zero", "ms/step"],
        [[str(head_dim), name, f"{run['top_weight_start']:.0%}", f"{run['top_weight']:.0%}",
          f"> {settings['steps']}" if run["steps_to_learn"] is None else str(run["steps_to_learn"]),
          f"{run['final_loss']:.3f}", f"{run['final_accuracy']:.1%}",
          f"{run['subnormal_weights']:.1%}", f"{run['zero_weights']:.1%}",
          f"{run['ms_per_step']:.1f}"]
         for head_dim, runs in comparisons.items() for name, run in runs.items()],
        "Both head sizes. Top weight: the mean largest attention weight of a held-out question, at "
        "the start and after\ntraining; subnormal, zero: the shares of the held-out weights that "
        f"underflowed float32 after training (subnormal\nbelow {limits.tiny:.1e}, a score gap of "
        f"{-np.log(limits.tiny):.0f}; 0 below {limits.smallest_subnormal:.1e}, a gap of "
        f"{-np.log(limits.smallest_subnormal):.0f}); ms/step: the median time of {passes} forward "
        "and backward\npasses of each trained model on one batch, the models taking turns.")
    for head_dim, runs in comparisons.items():
        print(f"head_dim {head_dim}: first to {TARGET_ACCURACY:.0%} held-out accuracy: "
              f"{verdict(runs)}")


def flat_numbers(comparisons):
    """What main returns: `scaled_256_steps_to_learn`, `first_to_learn_32`, ... and the settings
    docs/demos.md names."""
    numbers = {"dtype": comparisons[HEAD_DIM]["scaled"]["curves"]["dtype"],
               "num_pairs": NUM_PAIRS, "head_dim": HEAD_DIM, "control_head_dim": CONTROL_HEAD_DIM,
               "target_accuracy": TARGET_ACCURACY}
    for head_dim, runs in comparisons.items():
        numbers[f"first_to_learn_{head_dim}"] = verdict(runs)
        numbers.update({f"{name}_{head_dim}_{measure}": value for name, run in runs.items()
                        for measure, value in run.items() if measure != "curves"})
    return numbers


def plot(comparisons, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, (loss_axes, accuracy_axes) = plt.subplots(1, 2, figsize=(12, 4.5))
    colors = {"scaled": "tab:blue", "unscaled": "tab:red"}
    for name in SCALINGS:
        losses = comparisons[HEAD_DIM][name]["curves"]["train_loss"]
        loss_axes.plot(range(1, len(losses) + 1), losses, color=colors[name], linewidth=1,
                       label=name + (" (1/sqrt(d_k))" if name == "scaled" else " (scale=1)"))
        for head_dim, style in ((HEAD_DIM, "-"), (CONTROL_HEAD_DIM, ":")):
            curves = comparisons[head_dim][name]["curves"]
            accuracy_axes.plot(curves["checkpoints"], curves["held_out_accuracy"], style,
                               marker="o", markersize=3, color=colors[name],
                               label=f"head_dim {head_dim}, {name}")
    loss_axes.set(yscale="log", xlabel="step", ylabel="training loss (cross-entropy, log scale)",
                  title=f"Associative recall, one attention head of size {HEAD_DIM}")
    accuracy_axes.set(xlabel="step", ylabel="held-out accuracy", ylim=(0, 1.02),
                      title=f"Held-out accuracy (control: head_dim {CONTROL_HEAD_DIM}, dotted)")
    accuracy_axes.axhline(1 / NUM_VALUES, color="gray", linewidth=0.8, linestyle="--",
                          label="chance")
    return demo_tools.save_chart(figure, path, loss_axes, accuracy_axes)


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
