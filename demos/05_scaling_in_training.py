"""Demo 5: does dividing the attention scores by sqrt(d_k) matter in training?

What it shows: one small attention model trained twice, once with its scores scaled by
1/sqrt(head_dim) and once unscaled (`scale=1.0`), from the same initial weights, with the same
optimizer (Adam) on the same batches, on a task that cannot be solved without attention; then the
same at a small head size, as a control. It prints a progress line while training, the held-out
loss and accuracy of both runs, and a summary of both head sizes; it draws both loss curves.

    python demos/05_scaling_in_training.py [output folder] [--quick]

The picture is `scaling_in_training.png` in the output folder (when matplotlib is installed).
`--quick` trains for 30 steps only. Its full run's time, as `demos/regenerate.py` measured it,
ends its entry in the README.

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
    attended  = attention(query=LayerNorm(question),                   (B, 1, E)
                          key=LayerNorm(pairs), value=LayerNorm(pairs))
    logits    = Linear(attended)                                       (B, 32 values)

The LayerNorm (one, shared) gives every token unit-variance features, so the size of the scores is
set by the head size and the weights, not by the embeddings' scale.

What to expect (demo 4 measures it without training): a score is a dot product of two
head_dim-long vectors, so its spread grows like sqrt(head_dim). At head_dim 256 the unscaled scores
are 16 times wider than the scaled ones, and the softmax starts out close to one-hot on a pair
chosen by the random initial weights ("top weight at start" in the summary: the mean largest
weight of a question, 1/12 if uniform, 1 if one-hot). Whether that slows training down, and by how
much, is what the demo measures ("steps to 90%": the first held-out check at which 90% of the
questions are answered right). Adam divides every gradient by its running size, so a softmax that
passes little gradient does not by itself make Adam's steps small; but unscaled scores, 16 times
larger, also move 16 times further when the weights take a step. This is one seed and one learning
rate: the demo says what happened in this run, not what always happens.

Underflow. float32 holds numbers down to about 1.2e-38 with full precision; below that they are
subnormal (fewer significant bits) and below about 1.4e-45 they round to exactly 0 (the demo
prints both limits). A softmax weight is exp(s_i - max_j s_j), so a score more than about 87 below
its row's largest gives a subnormal weight, and more than about 103 below gives exactly 0: that
weight's gradient w_i (g_i - sum_j w_j g_j) is then exactly 0 as well, and only a step that moves
the other scores can bring the pair back into play. The second table counts subnormal and zero
weights on the held-out questions after training: the unscaled scores at head_dim 256 reach such
gaps, the scaled ones do not, so the scale is also what keeps the softmax clear of underflow. On
some processors arithmetic on subnormal numbers takes a slow path; so the demo also times one
forward and backward pass of the trained scaled and unscaled models on the same batch ("ms per
step": the median of 20 passes, the two models taking turns so that a busy machine slows them
alike): identical work, only the numbers differ. Close times mean that this processor handles
subnormal numbers at full speed.

The machine. The unscaled run at head_dim 256 is fragile: its softmax is saturated, so which
weight underflows, and when a pair comes back into play, hangs on the last bits of the scores.
Those bits depend on the order in which BLAS adds the products of each matrix product, and that
order on the kernel BLAS picked for the processor: on another processor, or with another kernel
on the same one (`OPENBLAS_CORETYPE=SandyBridge python demos/05_scaling_in_training.py` on an
x86 machine whose OpenBLAS chose Haswell kernels), the unscaled figures (the step, the zero and
subnormal shares) come out different, while the scaled ones stay. The README names the processor
and the kernels of the run it quotes.
"""
import statistics

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.tools.bench.timing import interleaved

SEED = 0
NUM_KEYS, NUM_VALUES, NUM_PAIRS = 32, 32, 12
UNKNOWN = NUM_VALUES            # the value id of the "?" in the question
BATCH, HELD_OUT, LEARNING_RATE = 64, 512, 1e-3
HEAD_DIM, CONTROL_HEAD_DIM = 256, 32
SCALINGS = {"scaled": None, "unscaled": 1.0}    # scale=None means 1/sqrt(head_dim)
TARGET_ACCURACY = 0.9           # "learned the task": this share of held-out questions answered
FULL = {"steps": 300, "eval_every": 25, "print_every": 100}
QUICK = {"steps": 30, "eval_every": 10, "print_every": 10}
TIMED_PASSES = {"full": 20, "quick": 3}    # forward and backward passes timed per model

README_ENTRY = """\
5. [`05_scaling_in_training.py`](demos/05_scaling_in_training.py) — the same effect in training:
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

   ![loss and accuracy curves, scaled and unscaled](docs/pictures/scaling_in_training.png)"""


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
        attended, weights = self.attention(self.norm(asked), self.norm(pairs))  # (B, 1, E), ...
        return self.readout(attended[:, 0]), weights        # (B, NUM_VALUES), (B, H, 1, n)


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


def weight_stats(model, held_out):
    """The held-out questions' attention weights: the mean largest weight of a question, and the
    shares that underflowed float32 (subnormal, or exactly 0)."""
    keys, values, question, _ = held_out
    with ta.no_grad():
        _, weights = model(keys, values, question)                  # (B, H, 1, n)
    weights = weights.data
    smallest_normal = np.finfo(weights.dtype).tiny                  # 1.2e-38 in float32
    return {"top_weight": float(weights.max(axis=-1).mean()),
            "subnormal_weights": float(((0 < weights) & (weights < smallest_normal)).mean()),
            "zero_weights": float((weights == 0).mean())}


def forward_backward(model):
    """One training pass of `model` on a batch, without the optimizer's step: what is timed."""
    def run(batch):
        loss, _ = recall_score(model, batch)
        model.zero_grad()
        loss.backward()
    return run


def milliseconds_per_step(models, batch, passes):
    """The median time of one forward and backward pass of each model on the same batch; the
    models take turns, so that a busy machine slows them alike."""
    times = interleaved({name: forward_backward(model) for name, model in models.items()},
                        [batch], passes)
    return {name: 1e3 * statistics.median(seconds) for name, seconds in times.items()}


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


def verdict(runs):
    """Which run reached TARGET_ACCURACY first: 'scaled', 'unscaled', 'tie' or 'neither'."""
    reached = {name: run["steps_to_learn"] for name, run in runs.items()
               if run["steps_to_learn"] is not None}
    if not reached:
        return "neither"
    first = [name for name, step in reached.items() if step == min(reached.values())]
    return first[0] if len(first) == 1 else "tie"


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


def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    held_out = recall_batch(np.random.default_rng(SEED + 1), HELD_OUT)     # never trained on
    limits = np.finfo(np.float32)
    print(f"Associative recall: {NUM_PAIRS} (key, value) pairs, then a question; chance is "
          f"1/{NUM_VALUES} = {1 / NUM_VALUES:.1%}.\nOne attention head, Adam (lr {LEARNING_RATE}), "
          f"batches of {BATCH}, {settings['steps']} steps, float32:\nsubnormal below "
          f"{limits.tiny:.1e} (a score gap of {-np.log(limits.tiny):.0f}), 0 below "
          f"{limits.smallest_subnormal:.1e} (a gap of {-np.log(limits.smallest_subnormal):.0f}).\n")
    passes = TIMED_PASSES["quick" if args.quick else "full"]
    comparisons = {head_dim: compare(head_dim, held_out, settings, passes)
                   for head_dim in (HEAD_DIM, CONTROL_HEAD_DIM)}

    print(f"\nHeld-out loss and accuracy ({HELD_OUT} questions) at head_dim {HEAD_DIM}:")
    scaled, unscaled = (comparisons[HEAD_DIM][name]["curves"] for name in SCALINGS)
    demo_tools.print_table(
        ["step", "scaled loss", "unscaled loss", "scaled acc", "unscaled acc"],
        [[str(step), f"{scaled['held_out_loss'][i]:.3f}", f"{unscaled['held_out_loss'][i]:.3f}",
          f"{scaled['held_out_accuracy'][i]:.1%}", f"{unscaled['held_out_accuracy'][i]:.1%}"]
         for i, step in enumerate(scaled["checkpoints"])])
    every_run = [(head_dim, name, run) for head_dim, by_name in comparisons.items()
                 for name, run in by_name.items()]
    print("\nBoth head sizes ('top weight': the mean largest attention weight of a held-out "
          "question):")
    demo_tools.print_table(
        ["head_dim", "scores", "top weight at start", f"steps to {TARGET_ACCURACY:.0%}",
         "final loss", "final acc"],
        [[str(head_dim), name, f"{run['top_weight_start']:.0%}",
          f"> {settings['steps']}" if run["steps_to_learn"] is None else str(run["steps_to_learn"]),
          f"{run['final_loss']:.3f}", f"{run['final_accuracy']:.1%}"]
         for head_dim, name, run in every_run])
    print(f"\nAfter training: the held-out attention weights, and the median time of {passes} "
          "forward and backward\npasses of each trained model on one batch (the models taking "
          "turns):")
    demo_tools.print_table(
        ["head_dim", "scores", "top weight", "subnormal weights", "zero weights", "ms per step"],
        [[str(head_dim), name, f"{run['top_weight']:.0%}", f"{run['subnormal_weights']:.1%}",
          f"{run['zero_weights']:.1%}", f"{run['ms_per_step']:.1f}"]
         for head_dim, name, run in every_run])
    numbers = {"dtype": scaled["dtype"], "num_pairs": NUM_PAIRS, "head_dim": HEAD_DIM,
               "control_head_dim": CONTROL_HEAD_DIM, "target_accuracy": TARGET_ACCURACY}
    for head_dim, runs in comparisons.items():
        numbers[f"first_to_learn_{head_dim}"] = verdict(runs)
        print(f"head_dim {head_dim}: first to {TARGET_ACCURACY:.0%} held-out accuracy: "
              f"{verdict(runs)}")
        numbers.update({f"{name}_{head_dim}_{measure}": value for name, run in runs.items()
                        for measure, value in run.items() if measure != "curves"})
    picture = plot(comparisons, args.output / "scaling_in_training.png")
    if picture is not None:
        print(f"loss curves: {picture}")
    return numbers


if __name__ == "__main__":
    main()
