"""Demo 8: how attention knows where a token is, and what each way of telling it does.

What it shows, in three parts:

  (a) Without positions, attention cannot tell orders apart. A transformer layer is
      permutation-equivariant: permute its input tokens and its outputs come out permuted alike,
      f(Px) = P f(x), to rounding error. Each encoding breaks that (measured for all five). And a
      causal model without positions, with one layer, gives the last token the same logits for
      every order of the tokens before it: it sees their multiset. With two layers it does not:
      an earlier token's layer-1 output depends on the tokens before IT, so the causal mask leaks
      order into the second layer (measured too).
  (b) A task that needs positions, learned with each encoding (none, sinusoidal, learned, rope,
      alibi): at every position, name the token 3 places back. The tokens are random, so no
      content says which one that is, only its position.
  (c) Length extrapolation: the same models, trained on sequences of 16 tokens, tested on 32 and
      64, on the positions no model saw in training.

    python demos/08_positions.py [output folder] [--quick]

`--quick` trains for 40 steps. Its full run's time, as `dev/regenerate.py` measured it, ends its
entry on docs/demos.md.

The model: `nn.CausalTransformer(positional=...)`, 2 layers of 4 heads, width 32, float32, Adam,
the same batches for every encoding; its logits at position t are read as the answer for t.

Reading the extrapolation. The ALiBi paper (Press et al. 2022) reports that ALiBi, trained on
short inputs, keeps its perplexity on inputs several times longer, where sinusoidal and rotary
positions degrade. A run tests that claim only if alibi learns the task at the trained length; the
entry on docs/demos.md says whether this one did. ALiBi's penalty is gentle with few heads: the demo
prints the share exp(-m) of the weight that a key one position further keeps against an equal key
one position nearer (m: the steepest slope), so the bias alone cannot point at one exact distance.
Learned positions beyond the trained length are rows of the table that no gradient ever reached.
One toy task, one seed and a 2-layer model, not the paper's language models.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn

SEED = 0
ENCODINGS = ("none", "sinusoidal", "learned", "rope", "alibi")
VOCAB, SHIFT, LENGTH = 16, 3, 16            # random tokens; answer the one SHIFT places back
IGNORE = -100                               # the first SHIFT positions have no answer
EMBED_DIM, NUM_HEADS, NUM_LAYERS = 32, 4, 2
BATCH, LEARNING_RATE = 32, 3e-3
HELD_OUT, QUICK_HELD_OUT = 256, 64          # held-out sequences, of each length
PERMUTED_LENGTH, REORDERED_LENGTH = 10, 12  # part (a): tokens permuted, tokens reordered
TEST_LENGTHS = (2 * LENGTH, 4 * LENGTH)
LEARNED = 0.9              # held-out accuracy that counts as learned: overall, and per position
FULL = {"steps": 600, "eval_every": 50, "print_every": 100}
QUICK = {"steps": 40, "eval_every": 20, "print_every": 40}


# %% [markdown]
# (a) What attention sees without positions: a layer's outputs when its tokens are permuted, and a
# causal model's last logits when the tokens before the last are reordered.

# %%
def encoded_layer(encoding, length):
    """x -> the language model's block (unmasked: not causal here) applied to x with the given
    encoding, float64."""
    ta.manual_seed(SEED)
    block = nn.CausalBlock(EMBED_DIM, NUM_HEADS, rope=encoding == "rope")  # rope: q, k turned
    if encoding == "sinusoidal":
        table = F.sinusoidal_positions(length, EMBED_DIM)
        return lambda x: block(x + table)
    if encoding == "learned":
        table = nn.Embedding(length, EMBED_DIM).weight          # as initialised, N(0, 1)
        return lambda x: block(x + table)
    if encoding == "alibi":
        bias = F.alibi_bias(NUM_HEADS, length)
        return lambda x: block(x, attn_mask=bias)
    return block


def equivariance_gaps(length=PERMUTED_LENGTH):
    """{encoding: max |f(Px) - P f(x)|} for a random x (4, length, E) and permutation P."""
    random = np.random.default_rng(SEED)
    x = random.standard_normal((4, length, EMBED_DIM))
    permutation = random.permutation(length)
    gaps = {}
    with ta.no_grad():
        for encoding in ENCODINGS:
            layer = encoded_layer(encoding, length)
            out = layer(ta.tensor(x)).data                          # f(x)
            out_of_permuted = layer(ta.tensor(x[:, permutation])).data      # f(Px)
            gaps[encoding] = float(np.abs(out_of_permuted - out[:, permutation]).max())
    return gaps


def multiset_gaps(length=REORDERED_LENGTH):
    """{(encoding, layers): max |change of the last position's logits|} when the tokens before
    the last one are put in another order, for causal models of 1 and 2 layers, float64."""
    random = np.random.default_rng(SEED)
    ids = random.integers(0, VOCAB, (64, length))
    reordered = np.concatenate([ids[:, :-1][:, random.permutation(length - 1)], ids[:, -1:]],
                               axis=1)
    gaps = {}
    with ta.no_grad():
        for encoding in ENCODINGS:
            for layers in (1, 2):
                ta.manual_seed(SEED)
                model = nn.CausalTransformer(VOCAB, EMBED_DIM, NUM_HEADS, layers, max_len=length,
                                             positional=encoding)
                change = model(reordered).data[:, -1] - model(ids).data[:, -1]
                gaps[encoding, layers] = float(np.abs(change).max())
    return gaps


# %% [markdown]
# (b) A task that needs positions, and (c) longer than trained: one model per encoding learns to
# name the token 3 places back, then answers on sequences 2 and 4 times longer.

# %%
def shift_batch(random, size, length=LENGTH):
    """(ids, targets), both (size, length): random tokens, and at each position t >= SHIFT the
    token at t - SHIFT (IGNORE before)."""
    ids = random.integers(0, VOCAB, (size, length))
    targets = np.full_like(ids, IGNORE)
    targets[:, SHIFT:] = ids[:, :-SHIFT]
    return ids, targets


def correct_by_position(model, size, length):
    """(size, length) booleans: each held-out answer right or not, on sequences of `length`."""
    ids, targets = shift_batch(np.random.default_rng(SEED + 2), size, length)
    with ta.no_grad():
        predictions = model(ids).data.argmax(axis=-1)               # (size, length)
    return predictions == targets


def reach(by_position, level=LEARNED):
    """The last position up to which every answered position had accuracy >= level (None if the
    first one did not)."""
    below = np.flatnonzero(by_position < level)
    last = len(by_position) if len(below) == 0 else below[0]
    return int(SHIFT + last - 1) if last > 0 else None


def train_each_encoding(settings, held_out_size):
    """One model per encoding trained on the same batches: {encoding: the curves
    demo_tools.train returns, with "beyond" ({test length: accuracy on the positions past
    LENGTH}), "by_position" (the accuracy at each answered position of the longest test length)
    and "reach" (how far that stays at LEARNED or more)}."""
    held_out = shift_batch(np.random.default_rng(SEED + 1), held_out_size)   # never trained on
    runs = {}
    for encoding in ENCODINGS:
        ta.manual_seed(SEED)
        model = nn.CausalTransformer(VOCAB, EMBED_DIM, NUM_HEADS, NUM_LAYERS,
                                     max_len=max(TEST_LENGTHS), dtype=np.float32,
                                     positional=encoding)
        run = demo_tools.train(model, shift_batch, demo_tools.sequence_score, held_out, encoding,
                               LEARNING_RATE, BATCH, SEED, **settings)
        correct = {length: correct_by_position(model, held_out_size, length)
                   for length in TEST_LENGTHS}
        run["beyond"] = {length: float(correct[length][:, LENGTH:].mean())
                         for length in TEST_LENGTHS}
        run["by_position"] = correct[max(TEST_LENGTHS)][:, SHIFT:].mean(axis=0)
        run["reach"] = reach(run["by_position"])
        runs[encoding] = run
    return runs


# %% [markdown]
# `main` measures (a), trains and tests (b) and (c), prints the tables, draws the pictures and
# returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    equivariance, multiset = equivariance_gaps(), multiset_gaps()
    print_part_a(equivariance, multiset)
    print(f"\nTraining one model per encoding: {settings['steps']} steps of {BATCH} sequences, "
          f"Adam (lr {LEARNING_RATE}), float32.")
    runs = train_each_encoding(settings, QUICK_HELD_OUT if args.quick else HELD_OUT)
    print_parts_b_and_c(runs)
    demo_tools.print_pictures(*draw(runs, args.output))
    return flat_numbers(equivariance, multiset, runs)


# %% [markdown]
# Plumbing, kept out of the experiment's way: the tables, the pictures, and the entry on docs/demos.md for
# this demo, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
PAGE_ENTRY = """\
8. [`08_positions.py`](../demos/08_positions.py) — without positions a layer is
   permutation-equivariant (gap {equivariance_gap_none:.0e}), and one causal layer sees only the
   multiset of earlier tokens ({multiset_gap_none_1_layer:.0e}; with two layers the causal mask
   leaks order: {multiset_gap_none_2_layers:.0e}). Naming the token {shift} places back, held-out
   accuracy after {steps} steps: sinusoidal {accuracy_sinusoidal:.0%}, learned
   {accuracy_learned:.0%}, rope {accuracy_rope:.0%}, none {accuracy_none:.0%}, alibi
   {accuracy_alibi:.0%}. Trained on {trained_length} tokens and tested on {first_test_length}
   and {second_test_length}, the accuracy on the new positions is: sinusoidal
   {new_positions_accuracy_sinusoidal_32:.0%} and {new_positions_accuracy_sinusoidal_64:.0%},
   learned {new_positions_accuracy_learned_32:.0%} and {new_positions_accuracy_learned_64:.0%},
   rope {new_positions_accuracy_rope_32:.0%} and {new_positions_accuracy_rope_64:.0%}, alibi
   {new_positions_accuracy_alibi_32:.0%} and {new_positions_accuracy_alibi_64:.0%}, none
   {new_positions_accuracy_none_32:.0%} and {new_positions_accuracy_none_64:.0%}. The ALiBi paper
   reports that ALiBi extrapolates to longer inputs; here alibi {alibi_verdict}.

   ![held-out accuracy per encoding](pictures/positions_accuracy.png)

   ![accuracy at each position, tested longer](pictures/positions_extrapolation.png)"""


def print_part_a(equivariance, multiset):
    demo_tools.print_table(
        ["encoding", "|f(Px) - P f(x)|", "causal, 1 layer", "causal, 2 layers"],
        [[encoding, f"{equivariance[encoding]:.1e}", f"{multiset[encoding, 1]:.1e}",
          f"{multiset[encoding, 2]:.1e}"] for encoding in ENCODINGS],
        f"(a) A layer, its {PERMUTED_LENGTH} tokens permuted: max |f(Px) - P f(x)|; a causal "
        f"model, the tokens before the\n    last of {REORDERED_LENGTH} reordered: max change of "
        "the last position's logits (float64, untrained)")


def print_parts_b_and_c(runs):
    first, second = TEST_LENGTHS
    demo_tools.print_table(
        ["encoding", "held-out loss", "seconds", f"length {LENGTH} (trained)",
         f"{first}: positions {LENGTH}-{first - 1}", f"{second}: positions {LENGTH}-{second - 1}",
         f">= {LEARNED:.0%} up to"],
        [[encoding, f"{run['held_out_loss'][-1]:.3f}", f"{run['seconds']:.1f}",
          f"{run['held_out_accuracy'][-1]:.1%}", f"{run['beyond'][first]:.1%}",
          f"{run['beyond'][second]:.1%}", "-" if run["reach"] is None else str(run["reach"])]
         for encoding, run in runs.items()],
        f"(b) Name the token {SHIFT} places back ({VOCAB} random tokens, chance {1 / VOCAB:.1%}): "
        f"held-out accuracy at the trained length;\n(c) tested longer: accuracy on the positions "
        "no model was trained on, and the last position up to which it stays high")
    steepest = F.alibi_slopes(NUM_HEADS).max()
    print(f"\nalibi's steepest slope at {NUM_HEADS} heads: m = {steepest:g}, so a key one position "
          f"further keeps exp(-m) = {np.exp(-steepest):.0%} of the weight\nof an equal key one "
          "position nearer.\n")


def alibi_verdict(runs):
    """docs/demos.md's phrase on ALiBi: whether this run learned the task, and so tests the claim."""
    if runs["alibi"]["held_out_accuracy"][-1] >= LEARNED:
        return f"reached {LEARNED:.0%} at the trained length, so this run tests that claim"
    return f"stayed under {LEARNED:.0%} at the trained length, so this run does not test it"


def flat_numbers(equivariance, multiset, runs):
    """What main returns: the measured numbers under flat names (`accuracy_rope`,
    `new_positions_accuracy_rope_64`, ...), the settings docs/demos.md names, and its ALiBi phrase."""
    some_run = runs[ENCODINGS[0]]
    first, second = TEST_LENGTHS
    numbers = {"shift": SHIFT, "trained_length": LENGTH, "first_test_length": first,
               "second_test_length": second, "steps": len(some_run["train_loss"]),
               "dtype": some_run["dtype"], "alibi_verdict": alibi_verdict(runs)}
    for encoding, run in runs.items():
        numbers.update({
            f"equivariance_gap_{encoding}": equivariance[encoding],
            f"multiset_gap_{encoding}_1_layer": multiset[encoding, 1],
            f"multiset_gap_{encoding}_2_layers": multiset[encoding, 2],
            f"accuracy_{encoding}": run["held_out_accuracy"][-1],
            f"loss_{encoding}": run["held_out_loss"][-1],
            f"training_seconds_{encoding}": run["seconds"], f"reach_{encoding}": run["reach"],
            **{f"new_positions_accuracy_{encoding}_{length}": run["beyond"][length]
               for length in TEST_LENGTHS}})
    return numbers


def draw(runs, folder):
    """positions_accuracy.png (held-out accuracy per encoding) and positions_extrapolation.png
    (accuracy at every position of the longest test): their paths (none without matplotlib)."""
    plt = demo_tools.pyplot()
    if plt is None:
        return []
    figure, axes = plt.subplots(figsize=(7, 4))
    accuracies = [run["held_out_accuracy"][-1] for run in runs.values()]
    axes.bar(list(runs), accuracies, color="tab:blue")
    for i, accuracy in enumerate(accuracies):
        axes.text(i, accuracy + 0.01, f"{accuracy:.0%}", ha="center", fontsize=9)
    axes.axhline(1 / VOCAB, color="gray", linestyle="--", linewidth=0.8)
    axes.text(-0.45, 1 / VOCAB + 0.01, "chance", color="gray", fontsize=8)
    axes.set(ylim=(0, 1.08), ylabel="held-out accuracy",
             title=f"Name the token {SHIFT} places back, length {LENGTH}")
    figure.tight_layout()
    pictures = [demo_tools.save_figure(figure, folder / "positions_accuracy.png", dpi=120)]
    figure, axes = plt.subplots(figsize=(9, 4.5))
    for encoding, run in runs.items():
        positions = np.arange(SHIFT, SHIFT + len(run["by_position"]))
        axes.plot(positions, run["by_position"], label=encoding, linewidth=1.2)
    axes.axvspan(SHIFT, LENGTH - 0.5, color="gray", alpha=0.15, label="trained lengths")
    axes.axhline(1 / VOCAB, color="gray", linestyle="--", linewidth=0.8)
    axes.set(xlabel=f"position in a sequence of {max(TEST_LENGTHS)} tokens",
             ylabel="held-out accuracy", ylim=(0, 1.05),
             title=f"Trained on {LENGTH} tokens: accuracy at every position")
    return pictures + [demo_tools.save_chart(figure, folder / "positions_extrapolation.png", axes)]


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
