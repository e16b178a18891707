"""Demo 10: a mixture of experts, trained with and without the load-balancing loss.

What it shows: a one-block language model whose feed-forward layer is `nn.MixtureOfExperts`
(8 experts, each token sent to its top 2, as in Mixtral) is trained twice from the same initial
weights on the same batches: once on the language-model loss alone, once with the Switch
Transformer's balance loss added (`loss + 0.01 * aux_loss`, the paper's weight); then how the
tokens were shared among the experts, and which words each expert takes.

    python demos/10_experts.py [output folder] [--quick]

`--quick` trains for 20 steps. Its full run's time, as `dev/regenerate.py` measured it, ends its
entry on docs/demos.md.

The data: an endless stream of sentences from a small grammar, one token per word,

    the old cat chases some dogs . a bird sees the quiet mice . some horses hear a fish .

where the verb agrees with its subject ("sees" after a cat, "see" after cats), so the model has to
attend back to the subject's noun. Many next words are free choices, so the loss cannot reach 0.

What is measured: an expert's "load", its share of the token-to-expert assignments in a training
batch (1/num_experts each when balanced; every token makes top_k of them); the balance loss
num_experts * sum_e f_e * P_e (f_e: that share; P_e: the mean router probability of expert e), 1
when both are uniform, larger when tokens crowd onto few experts; at the end, how many experts
collapsed (ended under 1% of the assignments) and how many words send at least 95% of their
occurrences to one same expert (how much the word alone decides its route: the router sees the
word after attention, so its context too). One seed, one learning rate, a tiny model.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn

# %% [markdown]
# The data: windows of the sentence stream, each word's next word as its target.

# %%
SEED = 0
ADJECTIVES = ["big", "small", "red", "old", "happy", "quiet"]
NOUNS = [("cat", "cats"), ("dog", "dogs"), ("bird", "birds"), ("fish", "fish"),
         ("horse", "horses"), ("mouse", "mice")]              # (singular, plural)
VERBS = [("sees", "see"), ("likes", "like"), ("chases", "chase"), ("hears", "hear")]
PARTS_OF_SPEECH = {"determiner": ["the", "a", "some"], "adjective": ADJECTIVES,
                   "noun": sorted({form for forms in NOUNS for form in forms}),
                   "verb": [form for forms in VERBS for form in forms], "full stop": ["."]}
WORDS = [word for words in PARTS_OF_SPEECH.values() for word in words]
WORD_ID = {word: i for i, word in enumerate(WORDS)}
LENGTH = 24


def noun_phrase(random):
    """(words, plural): a determiner, maybe an adjective, a noun."""
    plural = random.random() < 0.5
    determiner = "the" if random.random() < 0.5 else ("some" if plural else "a")
    adjective = [str(random.choice(ADJECTIVES))] if random.random() < 0.5 else []
    return [determiner, *adjective, NOUNS[random.integers(len(NOUNS))][plural]], plural


def sentence(random):
    subject, plural = noun_phrase(random)
    verb = VERBS[random.integers(len(VERBS))][plural]       # agrees with the subject
    return [*subject, verb, *noun_phrase(random)[0], "."]


def text_batch(random, size):
    """(ids, targets), both (size, LENGTH): windows of the sentence stream, starting anywhere in
    a sentence, and the next word at every position."""
    rows = []
    for _ in range(size):
        words = []
        while len(words) < 2 * LENGTH:
            words += sentence(random)
        start = random.integers(0, LENGTH)
        rows.append([WORD_ID[word] for word in words[start:start + LENGTH + 1]])
    rows = np.array(rows)
    return rows[:, :-1], rows[:, 1:]


# %% [markdown]
# The model: one pre-LN block whose feed-forward layer is the mixture of experts.

# %%
EMBED_DIM, NUM_HEADS, HIDDEN_DIM = 32, 2, 64
NUM_EXPERTS, TOP_K = 8, 2


class ExpertLanguageModel(nn.Module):
    """Token ids (B, T) -> next-word logits (B, T, vocabulary): embedding + sinusoidal positions,
    one pre-LN block whose feed-forward is a mixture of experts, LayerNorm, Linear.

        x = x + attention(ln1(x))    causal: each word sees the words before it
        x = x + experts(ln2(x))      each word goes to 2 of the 8 feed-forward experts
    """

    def __init__(self, dtype=np.float32):
        self.embed = nn.Embedding(len(WORDS), EMBED_DIM, dtype=dtype)
        self.positions = nn.PositionalEncoding(EMBED_DIM, LENGTH)
        self.ln1 = nn.LayerNorm(EMBED_DIM, dtype=dtype)
        self.attn = nn.MultiHeadAttention(EMBED_DIM, NUM_HEADS, dtype=dtype)
        self.ln2 = nn.LayerNorm(EMBED_DIM, dtype=dtype)
        self.experts = nn.MixtureOfExperts(EMBED_DIM, NUM_EXPERTS, TOP_K, HIDDEN_DIM, dtype=dtype)
        self.ln = nn.LayerNorm(EMBED_DIM, dtype=dtype)
        self.head = nn.Linear(EMBED_DIM, len(WORDS), dtype=dtype)

    def forward(self, ids):
        x = self.positions(self.embed(ids))                            # (B, T, E)
        x = x + self.attn(self.ln1(x), is_causal=True)[0]              # (B, T, E)
        x = x + self.experts(self.ln2(x))                              # (B, T, E)
        return self.head(self.ln(x))                                   # (B, T, vocabulary)


# %% [markdown]
# Training, with and without the balance loss, from the same initial weights on the same batches,
# recording the experts' loads at every step.

# %%
BALANCE_WEIGHTS = {"without balance loss": 0.0, "with balance loss": 0.01}
BATCH, HELD_OUT, LEARNING_RATE = 32, 256, 3e-3
FULL = {"steps": 600, "eval_every": 50, "print_every": 100}
QUICK = {"steps": 20, "eval_every": 10, "print_every": 10}


def loads(model):
    """Each expert's share of the last forward's token-to-expert assignments, (NUM_EXPERTS,)."""
    chosen = model.experts.selected_experts
    return np.bincount(chosen.ravel(), minlength=NUM_EXPERTS) / chosen.size


def train(label, balance_weight, held_out, steps, eval_every, print_every):
    """demo_tools.train (Adam, the same batches for every run) with balance_weight * aux_loss
    added to the language-model loss. Records, at every step, the language-model loss, the aux
    loss and the loads, and the held-out loss at each checkpoint."""
    ta.manual_seed(SEED)                        # the same initial weights for every run
    model = ExpertLanguageModel()
    routing = {"aux_loss": [], "loads": []}

    def balance(model):
        routing["aux_loss"].append(model.experts.aux_loss.item())
        routing["loads"].append(loads(model))
        return balance_weight * model.experts.aux_loss if balance_weight else None

    curves = demo_tools.train(model, text_batch, demo_tools.sequence_score, held_out, label,
                              LEARNING_RATE, BATCH, SEED, steps, eval_every, print_every,
                              after_forward=balance)
    return dict(curves, model=model, aux_loss=routing["aux_loss"],
                loads=np.array(routing["loads"]))                      # (steps, NUM_EXPERTS)


# %% [markdown]
# At the end: which words each expert takes, the loads over the last steps, and the experts that
# collapsed.

# %%
COLLAPSED = 0.01            # an expert left with less than 1% of the assignments has collapsed
ONE_EXPERT = 0.95           # a word sending this share of its occurrences to one expert


def words_per_expert(model, ids):
    """counts[e, w]: how many times word w (as input) was sent to expert e, on the batch `ids`."""
    with ta.no_grad():
        model(ids)
    chosen = model.experts.selected_experts                            # (B, T, TOP_K)
    counts = np.zeros((NUM_EXPERTS, len(WORDS)), dtype=np.int64)
    np.add.at(counts, (chosen, np.broadcast_to(ids[..., None], chosen.shape)), 1)
    return counts


def word_shares(counts):
    """shares[e, w]: the share of word w's occurrences sent to expert e (each goes to TOP_K)."""
    return counts / np.maximum(counts.sum(axis=0) / TOP_K, 1)          # (experts, words)


def measurements(runs, counts):
    """The loads at the start and over the last tenth of the steps, the losses, the words routed
    to one expert and the experts that collapsed, as flat numbers ("_without", "_with")."""
    without = runs["without balance loss"]
    start = without["loads"][0]                                        # the same in both runs
    numbers = {"steps": len(without["train_loss"]), "num_experts": NUM_EXPERTS, "top_k": TOP_K,
               "balance_weight": BALANCE_WEIGHTS["with balance loss"],
               "collapsed_level": COLLAPSED, "start_load_max": float(start.max()),
               "start_load_min": float(start.min()), "loss_start": without["held_out_loss"][0]}
    for name, suffix in (("without balance loss", "without"), ("with balance loss", "with")):
        run = runs[name]
        last = run["loads"][-max(1, len(run["loads"]) // 10):].mean(axis=0)    # (NUM_EXPERTS,)
        numbers.update({f"load_max_{suffix}": float(last.max()),
                        f"load_min_{suffix}": float(last.min()),
                        f"aux_loss_{suffix}": run["aux_loss"][-1],
                        f"loss_{suffix}": run["held_out_loss"][-1],
                        f"train_loss_{suffix}": run["train_loss"][-1],
                        f"words_to_one_expert_{suffix}":
                            int((word_shares(counts[name]).max(axis=0) >= ONE_EXPERT).sum()),
                        f"collapsed_{suffix}": int((last < COLLAPSED).sum())})
    return numbers


# %% [markdown]
# `main` trains both runs, prints the tables, draws the picture and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    held_out = text_batch(np.random.default_rng(SEED + 1), HELD_OUT)   # never trained on
    print(f"A one-block language model with a mixture of {NUM_EXPERTS} experts (top {TOP_K}) on "
          f"a {len(WORDS)}-word toy grammar; Adam (lr {LEARNING_RATE}), batches of {BATCH} x "
          f"{LENGTH} words, {settings['steps']} steps, float32.\n")
    runs = {name: train(name, weight, held_out, **settings)
            for name, weight in BALANCE_WEIGHTS.items()}
    counts = {name: words_per_expert(run["model"], held_out[0]) for name, run in runs.items()}
    numbers = measurements(runs, counts)
    print_tables(runs, counts, numbers, settings["print_every"])
    demo_tools.print_pictures(plot(runs, counts, args.output / "experts.png"))
    return numbers


# %% [markdown]
# Plumbing, kept out of the experiment's way: the tables, the picture, and the entry on docs/demos.md for
# this demo, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
PAGE_ENTRY = """\
10. [`10_experts.py`](../demos/10_experts.py) — a language model with {num_experts} feed-forward
    experts (top {top_k}) trained twice from the same start, with and without the Switch balance
    loss (weight {balance_weight}). Without it the busiest expert ends with {load_max_without:.1%}
    of the assignments and the idlest with {load_min_without:.1%}; with it, {load_max_with:.1%} and
    {load_min_with:.1%} (aux_loss {aux_loss_without:.3f} vs {aux_loss_with:.3f}, 1 being perfectly
    balanced), for a held-out loss of {loss_without:.3f} vs {loss_with:.3f}. Experts that
    collapsed (ended below {collapsed_level:.0%} of the assignments): {collapsed_without} without
    the balance loss, {collapsed_with} with it. Tables show which words each expert takes.

    ![loads per expert over training, loss curves, words per expert](pictures/experts.png)"""


def print_tables(runs, counts, numbers, every):
    """The loads every `every` steps, side by side for the runs; the numbers at the end; which
    words each expert takes in each run."""
    demo_tools.print_table(
        ["step"] + [f"{name}: experts 0-{NUM_EXPERTS - 1}" for name in runs],
        [[str(step + 1)] + [" ".join(f"{share:3.0%}" for share in run["loads"][step])
                            for run in runs.values()]
         for step in [0, *range(every - 1, numbers["steps"], every)]],
        f"Load per expert (share of a training batch's assignments; even is {1 / NUM_EXPERTS:.1%}"
        "; step 1: the router as initialised):")
    demo_tools.print_table(
        ["run", "final loss", "held-out loss", "aux_loss", "busiest expert", "idlest expert",
         f"under {COLLAPSED:.0%}", f"words >= {ONE_EXPERT:.0%} to one"],
        [[f"{run} balance loss", f"{numbers[f'train_loss_{run}']:.3f}",
          f"{numbers[f'loss_{run}']:.3f}", f"{numbers[f'aux_loss_{run}']:.3f}",
          f"{numbers[f'load_max_{run}']:.1%}", f"{numbers[f'load_min_{run}']:.1%}",
          str(numbers[f"collapsed_{run}"]), str(numbers[f"words_to_one_expert_{run}"])]
         for run in ("without", "with")],
        f"At the end (loads: the mean over the last tenth of the steps; 'under {COLLAPSED:.0%}': "
        f"the experts that collapsed;\nthe last column: of the {len(WORDS)} words, those that "
        "send most of their occurrences to one expert):")
    for name, count in counts.items():
        taken = word_shares(count)                                   # (experts, words)
        rows = []
        for expert, row in enumerate(count):
            kinds = [sum(row[WORD_ID[word]] for word in words) / max(row.sum(), 1)
                     for words in PARTS_OF_SPEECH.values()]
            top = np.argsort(-taken[expert], kind="stable")[:4]
            rows.append([str(expert), f"{row.sum() / count.sum():.0%}"]
                        + [f"{kind:.0%}" for kind in kinds]
                        + [", ".join(f"{WORDS[w]} {taken[expert, w]:.0%}" for w in top if row[w])])
        demo_tools.print_table(
            ["expert", "load"] + list(PARTS_OF_SPEECH)
            + ["words it takes most of (share of their occurrences)"], rows,
            f"Which words each expert takes, {name} (the {HELD_OUT} held-out rows; each "
            f"occurrence of a word goes to {TOP_K} experts):")


def plot(runs, counts, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, grid = plt.subplots(2, 3, figsize=(17, 8.5), layout="constrained")
    colors = plt.get_cmap("tab10").colors
    for column, (name, run) in enumerate(runs.items()):
        axes = grid[0, column]
        steps = np.arange(1, len(run["loads"]) + 1)
        axes.stackplot(steps, run["loads"].T, colors=colors[:NUM_EXPERTS],
                       labels=[f"expert {e}" for e in range(NUM_EXPERTS)])
        for level in np.arange(1, NUM_EXPERTS) / NUM_EXPERTS:
            axes.axhline(level, color="white", linewidth=0.6, linestyle=":")
        axes.set(xlabel="step", ylabel="share of the assignments", ylim=(0, 1),
                 xlim=(1, steps[-1]), title=f"{name}:\nload per expert (dotted: even shares)")
        axes = grid[1, column]
        image = axes.imshow(word_shares(counts[name]), cmap="Purples", vmin=0, vmax=1,
                            aspect="auto")
        axes.set_xticks(range(len(WORDS)), WORDS, rotation=90, fontsize=7)
        axes.set_yticks(range(NUM_EXPERTS))
        axes.set(ylabel="expert", title=f"{name}:\nshare of each word's occurrences per expert")
    grid[0, 0].legend(loc="upper left", fontsize=7, ncol=2)
    figure.colorbar(image, ax=grid[1, :2], shrink=0.8, label="share of the word's occurrences")
    for (name, run), color in zip(runs.items(), ("tab:red", "tab:blue")):
        steps = np.arange(1, len(run["train_loss"]) + 1)
        grid[0, 2].plot(steps, run["train_loss"], color=color, linewidth=0.8, alpha=0.6,
                        label=f"{name} (training batch)")
        grid[0, 2].plot(run["checkpoints"], run["held_out_loss"], "o-", color=color,
                        markersize=3, label=f"{name} (held out)")
        grid[1, 2].plot(steps, run["aux_loss"], color=color, linewidth=0.8, label=name)
    grid[0, 2].set(xlabel="step", ylabel="language-model loss (cross-entropy)",
                   title="Loss curves")
    grid[1, 2].axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
    grid[1, 2].set(xlabel="step", ylabel=f"aux_loss = {NUM_EXPERTS} sum_e f_e P_e",
                   title="Balance loss (1 = perfectly balanced)")
    for axes in grid[:, 2]:
        axes.legend(fontsize=8)
    return demo_tools.save_figure(figure, path, dpi=100)


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
