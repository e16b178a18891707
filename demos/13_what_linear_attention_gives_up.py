"""Demo 13: what linear attention gives up, and what a window or a block layout gives up.

What it shows: demo 5's associative recall (key-value pairs, then a key to look up) learned by
one attention layer of the same width four times, with softmax attention, causal linear
attention, a sliding window and block-sparse attention; then held-out recall as the number of
pairs grows from 4 to 64, and the same for linear attention at other widths, to see where each
falls off and how that relates to what each keeps of the pairs.

    python demos/13_what_linear_attention_gives_up.py [output folder] [--quick]

The picture is `linear_attention_recall.png` in the output folder (when matplotlib is
installed). `--quick` trains for 20 steps. Its full run's time, as `dev/regenerate.py`
measured it, ends its entry on docs/demos.md.

The model is demo 5's, as a causal sequence: each pair is one token (key embedding + value
embedding), the question comes last (its key + a "?" value), and the answer is read off the
question's output of one attention layer (queries, keys and values projected from the
LayerNorm-ed tokens). Only the attention function changes. Each model is trained on batches of
4, 8, 16, 32 or 64 pairs, drawn at random, and tested on each count separately.

What each keeps of the pairs, to answer the question:
- softmax attention: every key and value, (n + 1) (E + Ev) numbers, growing with the pairs n;
- the sliding window: the last pairs, a fixed number of keys and values; the demo sets it to 16
  pairs, about as many numbers as linear attention's state;
- block-sparse attention (blocks of 8, a query block sees its own block, the one before it and
  the first: "local + global", as in the Sparse Transformer and BigBird): the first 8 pairs and
  the last 8 to 15, a fixed number too. What it is for: skipping the blocks it hides, it does
  work in proportion to the blocks it shows, where a mask alone saves nothing
  (`F.block_sparse_attention`; bench 4 and demo 7 measure what it saves);
- linear attention: a state S = sum_j phi(k_j) v_j^T of E x Ev numbers and z of E, whatever n.

A window or a block layout keeps its pairs exactly and loses the others entirely: its recall can
be no better than the share of pairs it sees (plus a guess at the others, 1 in 32), and the
tables print that ceiling. Linear attention keeps a blur of every pair: reading S with the
question's phi(q) gives sum_j (phi(q) . phi(k_j)) v_j, so the answer comes out clean only if
phi(q) is orthogonal to every other key's features. At most E vectors can be orthogonal in E
numbers, and phi's features (elu(x) + 1 > 0) never are exactly: two keys come close only where
each keeps most of its features near 0, which leaves room for fewer than E of them. So as the
pairs grow toward E and past it the other values leak into the answer: recall should fall with n,
and later for a wider state. The table gives, for each run, the most pairs at which recall still
holds at 90%.

The literature. Zoology (Arora, Eyuboglu et al. 2023, "Zoology: Measuring and Improving Recall in
Efficient Language Models") found that attention solves multi-query associative recall at every
width it tried, while gated-convolution models need a width growing with the sequence length;
its follow-up (Arora et al. 2024, "Simple linear attention language models balance the
recall-throughput tradeoff") names "a key tradeoff between a model's state size and recall
ability" and traces it with linear attention and sliding windows (its model, Based, combines the
two). Both abstracts were re-checked for this demo, not the papers' figures. The entry on docs/demos.md
says whether this run agrees. Tiny models and one seed: what this run saw, not a law.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn

# %% [markdown]
# The settings (the task's sizes, the widths, the window and the blocks, training in the full and
# the quick run), and this demo's entry on docs/demos.md, which `dev/regenerate.py` fills with the
# numbers `main` returns.

# %%
SEED = 0
NUM_KEYS, NUM_VALUES = 64, 32
UNKNOWN = NUM_VALUES                # the value id of the "?" in the question
PAIR_COUNTS = (4, 8, 16, 32, 64)
WIDTH, LINEAR_WIDTHS = 32, (16, 32, 64)
SEEN_BY_WINDOW = 16                 # pairs in the window, besides the question itself
BLOCK_SIZE = 8
BATCH, LEARNING_RATE = 64, 3e-3
HELD_OUT, QUICK_HELD_OUT = 512, 128     # held-out questions of each pair count
HOLDS = 0.9                         # recall that counts as holding up
FULL = {"steps": 800, "eval_every": 100, "print_every": 400}
QUICK = {"steps": 20, "eval_every": 20, "print_every": 20}

PAGE_ENTRY = """\
13. [`13_what_linear_attention_gives_up.py`](../demos/13_what_linear_attention_gives_up.py) —
    **what linear attention gives up.** Demo 5's associative recall with 4 to 64 pairs, learned
    by one attention layer of width {width} with four attention functions. Held-out recall at 4 /
    16 / 64 pairs: softmax {recall_softmax_4:.0%} / {recall_softmax_16:.0%} /
    {recall_softmax_64:.0%} (it keeps every key and value: {state_softmax:,} numbers at 64
    pairs); causal linear attention, whose state is {state_linear:,} numbers whatever the count,
    {recall_linear_4:.0%} / {recall_linear_16:.0%} / {recall_linear_64:.0%}; a sliding window of
    {seen_window_64} pairs ({state_window:,} numbers) {recall_window_4:.0%} /
    {recall_window_16:.0%} / {recall_window_64:.0%}, and block-sparse attention (local + global
    blocks of {block_size}) {recall_block_4:.0%} / {recall_block_16:.0%} /
    {recall_block_64:.0%}: both see {seen_window_64} of 64 pairs, so they can recall at most
    {ceiling_window_64:.0%}. Linear attention of width 16, 32 and 64 (states of
    {state_linear_E16:,}, {state_linear:,} and {state_linear_E64:,} numbers) recalls
    {recall_linear_E16_64:.0%}, {recall_linear_64:.0%} and {recall_linear_E64_64:.0%} at 64 pairs.
    {verdict}

    ![held-out recall against the number of pairs](pictures/linear_attention_recall.png)"""


# %% [markdown]
# The data: distinct keys with random values, then a question about one of them; each training
# batch has a pair count drawn at random.

# %%
def recall_batch(random, size, num_pairs):
    """`size` examples of `num_pairs` pairs: keys and values (size, num_pairs), all keys of a row
    different, the question's key and its answer (size,)."""
    keys = np.argsort(random.random((size, NUM_KEYS)), axis=1)[:, :num_pairs]
    values = random.integers(0, NUM_VALUES, (size, num_pairs))
    asked = random.integers(0, num_pairs, size)           # which pair the question is about
    rows = np.arange(size)
    return keys, values, keys[rows, asked], values[rows, asked]


def mixed_batch(random, size):
    """A training batch of a pair count drawn from PAIR_COUNTS."""
    return recall_batch(random, size, int(random.choice(PAIR_COUNTS)))


# %% [markdown]
# The four attention functions, all causal, all (B, L, E) -> (B, L, E); linear attention in chunks
# of 16 positions (any chunk gives the same numbers; these short sequences waste less on padding).

# %%
def local_and_global_layout(num_blocks):
    """(num_blocks, num_blocks) booleans: query block i sees key blocks i - 1 and i, and block 0
    (a global block, whose own row tril cuts to itself: the attention is causal)."""
    return np.tril(F.local_layout(num_blocks, 2) | F.global_layout(num_blocks, [0]))


def block_sparse(query, key, value):
    num_blocks = -(-query.shape[-2] // BLOCK_SIZE)
    return F.block_sparse_attention(query, key, value, local_and_global_layout(num_blocks),
                                    BLOCK_SIZE, is_causal=True)               # (..., L, Ev)


ATTENTION = {
    "softmax": lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
    "linear": lambda q, k, v: F.linear_attention(q, k, v, is_causal=True, chunk_size=16),
    "window": lambda q, k, v: F.sliding_window_attention(q, k, v, SEEN_BY_WINDOW + 1),
    "block": block_sparse,
}


# %% [markdown]
# The model, demo 5's laid out as a causal sequence with its attention function given, and its
# score on a batch.

# %%
class RecallModel(nn.Module):
    """Demo 5's recall model laid out as a causal sequence, the pairs then the question, with its
    attention function `attend(query, key, value)` given."""

    def __init__(self, attend, embed_dim=WIDTH, dtype=np.float32):
        self.attend = attend
        self.key_embedding = nn.Embedding(NUM_KEYS, embed_dim, dtype=dtype)
        self.value_embedding = nn.Embedding(NUM_VALUES + 1, embed_dim, dtype=dtype)   # + "?"
        self.norm = nn.LayerNorm(embed_dim, dtype=dtype)
        self.q_proj, self.k_proj, self.v_proj = (nn.Linear(embed_dim, embed_dim, dtype=dtype)
                                                 for _ in range(3))
        self.readout = nn.Linear(embed_dim, NUM_VALUES, dtype=dtype)

    def forward(self, keys, values, question):
        """Answer logits (B, NUM_VALUES) for pairs (B, n) and the question's key (B,)."""
        B = len(question)
        key_ids = np.concatenate([keys, question[:, None]], axis=1)                  # (B, n + 1)
        value_ids = np.concatenate([values, np.full((B, 1), UNKNOWN)], axis=1)       # (B, n + 1)
        x = self.norm(self.key_embedding(key_ids) + self.value_embedding(value_ids))  # (B, L, E)
        attended = self.attend(self.q_proj(x), self.k_proj(x), self.v_proj(x))      # (B, L, E)
        return self.readout(attended[:, -1])                 # the question's: (B, NUM_VALUES)


def recall_score(model, batch):
    """(mean cross-entropy as a tensor, share of questions answered right) on one batch."""
    keys, values, question, answer = batch
    logits = model(keys, values, question)                  # (B, NUM_VALUES)
    return F.cross_entropy(logits, answer), float((logits.data.argmax(axis=-1) == answer).mean())


# %% [markdown]
# What each attention function keeps of the pairs: how many it sees, how many numbers it reads, and
# the best recall that allows.

# %%
def pairs_seen(name, num_pairs):
    """How many of the pairs the question's query may attend to."""
    L = num_pairs + 1
    if name == "window":
        return int(F.local_mask(L, SEEN_BY_WINDOW + 1)[-1, :num_pairs].sum())
    if name == "block":
        layout = local_and_global_layout(-(-L // BLOCK_SIZE))
        return int(F.layout_mask(layout, BLOCK_SIZE, L)[-1, :num_pairs].sum())
    return num_pairs


def state_size(name, width, num_pairs):
    """Numbers the question's attention reads from: linear attention's state S and z, or the keys
    and values (E + Ev each) that its query may see (the question's own included)."""
    if name == "linear":
        return width * width + width
    return (pairs_seen(name, num_pairs) + 1) * 2 * width


def ceiling(name, num_pairs):
    """Best recall of a model that sees some pairs exactly and guesses the others' values."""
    seen = pairs_seen(name, num_pairs) / num_pairs
    return seen + (1 - seen) / NUM_VALUES


# %% [markdown]
# One model trained on mixed pair counts and tested on each; the verdict against Zoology and Based;
# how a run's numbers are named.

# %%
def train_and_test(name, width, settings, held_out):
    """A model with attention `name` trained on mixed pair counts; {pairs: held-out recall}."""
    ta.manual_seed(SEED)
    model = RecallModel(ATTENTION[name], width)
    demo_tools.train(model, mixed_batch, recall_score, held_out[max(PAIR_COUNTS)],
                     f"{name}, E {width}", LEARNING_RATE, BATCH, SEED, **settings)
    with ta.no_grad():
        return {n: recall_score(model, held_out[n])[1] for n in PAIR_COUNTS}


def verdict(recall):
    """Whether this run agrees with the literature: softmax attention holds up at every count,
    linear attention holds up at the fewest pairs and falls off at the most, and the wider its
    state, the more it recalls at the most pairs."""
    fewest, most = min(PAIR_COUNTS), max(PAIR_COUNTS)
    linear = recall["linear", WIDTH]
    at_most = [recall["linear", width][most] for width in LINEAR_WIDTHS]
    failed = [what for what, held in [
        (f"softmax attention fell under {HOLDS:.0%} at some count",
         min(recall["softmax", WIDTH].values()) >= HOLDS),
        (f"linear attention of width {WIDTH} did not fall under {HOLDS:.0%} by {most} pairs",
         linear[most] < HOLDS),
        (f"linear attention of width {WIDTH} did not hold {HOLDS:.0%} at {fewest} pairs",
         linear[fewest] >= HOLDS),
        (f"a wider state did not recall more at {most} pairs",
         at_most == sorted(at_most) and at_most[0] < at_most[-1])] if not held]
    if failed:
        return "This run does not fully agree with Zoology and Based: " + "; ".join(failed) + "."
    return ("This run agrees with Zoology and Based: softmax attention recalls at every count, and "
            "linear attention falls off as the pairs grow, later the larger its state.")


def run_name(name, width):
    """How a run's numbers are named: 'linear' at the common width, 'linear_E64' at another."""
    return name if width == WIDTH else f"{name}_E{width}"


# %% [markdown]
# The picture: recall against the number of pairs, with the ceiling of the window and the block
# layout.

# %%
def plot(recall, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(7.5, 4.5))
    linear_colors = {16: "#fdae6b", 64: "#a63603"}          # lighter: narrower
    for (name, width), by_count in recall.items():
        axes.plot(PAIR_COUNTS, [by_count[n] for n in PAIR_COUNTS], "-" if width == WIDTH else "--",
                  marker="o", color=linear_colors.get(width), label=f"{name} (E = {width})")
    axes.plot(PAIR_COUNTS, [ceiling("window", n) for n in PAIR_COUNTS], ":", color="gray",
              label=f"ceiling of window and block ({SEEN_BY_WINDOW} pairs seen)")
    axes.axhline(1 / NUM_VALUES, color="gray", linewidth=0.8, linestyle="--", label="chance")
    demo_tools.log2_axis(axes, PAIR_COUNTS)
    axes.set(ylim=(0, 1.02),
             xlabel="key-value pairs before the question", ylabel="held-out recall",
             title="Associative recall, one attention layer")
    return demo_tools.save_chart(figure, path, axes)


# %% [markdown]
# `main` trains the four attention functions and linear attention's other widths, prints the recall
# table and the verdict, and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    size = QUICK_HELD_OUT if args.quick else HELD_OUT
    held_out = {n: recall_batch(np.random.default_rng(SEED + n), size, n) for n in PAIR_COUNTS}
    print(f"Associative recall: {list(PAIR_COUNTS)} pairs ({NUM_KEYS} keys, {NUM_VALUES} values, "
          f"chance {1 / NUM_VALUES:.1%}), then a question.\nOne causal attention layer, Adam (lr "
          f"{LEARNING_RATE}), {settings['steps']} steps of {BATCH}, each of a pair count drawn at "
          "random, float32:\n")
    runs = [(name, WIDTH) for name in ATTENTION]
    runs += [("linear", width) for width in LINEAR_WIDTHS if width != WIDTH]
    recall = {run: train_and_test(*run, settings, held_out) for run in runs}
    holds = {run: max([n for n in PAIR_COUNTS if recall[run][n] >= HOLDS], default=None)
             for run in runs}            # the most pairs at which recall still holds up

    most = max(PAIR_COUNTS)
    print(f"\nHeld-out recall ({size} questions per count); the numbers the question reads from "
          f"at {most} pairs, and the best\nrecall of a model that sees some pairs exactly and "
          "guesses the others (the ceiling):")
    demo_tools.print_table(
        ["attention", "E", *[f"{n} pairs" for n in PAIR_COUNTS], "numbers read", "ceiling",
         f"holds {HOLDS:.0%} up to"],
        [[name, str(width), *[f"{recall[name, width][n]:.0%}" for n in PAIR_COUNTS],
          f"{state_size(name, width, most):,}", f"{ceiling(name, most):.0%}",
          "-" if holds[name, width] is None else f"{holds[name, width]} pairs"]
         for name, width in runs])
    numbers = {"width": WIDTH, "block_size": BLOCK_SIZE, "steps": settings["steps"],
               "verdict": verdict(recall)}
    for (name, width), by_count in recall.items():
        numbers.update({f"recall_{run_name(name, width)}_{n}": value
                        for n, value in by_count.items()})
        numbers[f"holds_up_to_{run_name(name, width)}"] = holds[name, width]
    for name in ATTENTION:
        numbers[f"state_{name}"] = state_size(name, WIDTH, most)
        numbers.update({f"seen_{name}_{n}": pairs_seen(name, n) for n in PAIR_COUNTS})
        numbers.update({f"ceiling_{name}_{n}": ceiling(name, n) for n in PAIR_COUNTS})
    numbers.update({f"state_linear_E{width}": state_size("linear", width, most)
                    for width in LINEAR_WIDTHS})
    print(f"\n{numbers['verdict']}")
    picture = plot(recall, args.output / "linear_attention_recall.png")
    if picture is not None:
        print(f"picture: {picture}")
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
