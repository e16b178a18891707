"""Demo 10: a mixture of experts, trained with and without the load-balancing loss.

What it shows: a one-block language model whose feed-forward layer is `nn.MixtureOfExperts`
(8 experts, each token sent to its top 2, as in Mixtral) is trained twice from the same initial
weights on the same batches: once on the language-model loss alone, once with the Switch
Transformer's balance loss added (`loss + 0.01 * aux_loss`, the paper's weight). It prints and
draws how the tokens are shared among the experts over training, the loss curves, and which words
each expert takes at the end.

    python demos/10_experts.py [output folder] [--quick]

The picture is `experts.png` in the output folder (when matplotlib is installed). `--quick`
trains for 20 steps. Its full run's time, as `demos/regenerate.py` measured it, ends its entry in
the README.

The data: an endless stream of sentences from a small grammar, one token per word,

    the old cat chases some dogs . a bird sees the quiet mice . some horses hear a fish .

determiner, maybe an adjective, noun, verb, determiner, maybe an adjective, noun, full stop; the
verb agrees with its subject ("sees" after a cat, "see" after cats), so the model has to attend
back to the subject's noun. Many next words are free choices, so the loss cannot reach 0.

What is measured: "load" is an expert's share of the token-to-expert assignments in a training
batch (1/num_experts each when balanced; every token makes top_k of them). The balance loss is
num_experts * sum_e f_e * P_e (f_e: that share; P_e: the mean router probability of expert e): 1
when both are uniform, larger when tokens crowd onto few experts. The tables show the loads over
training (the first row: the random router before any step, already uneven), and at the end the
loads over the last tenth of the steps, the losses, the aux loss, how many words send at least
95% of their occurrences to one same expert (how much the word alone decides its route: the
router sees the word after attention, so its context too) and how many experts collapsed (ended
under 1% of the assignments). One seed, one learning rate, a tiny model.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn

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
LENGTH, EMBED_DIM, NUM_HEADS, HIDDEN_DIM = 24, 32, 2, 64
NUM_EXPERTS, TOP_K = 8, 2
BALANCE_WEIGHTS = {"without balance loss": 0.0, "with balance loss": 0.01}
BATCH, HELD_OUT, LEARNING_RATE = 32, 256, 3e-3
FULL = {"steps": 600, "eval_every": 50, "print_every": 100}
QUICK = {"steps": 20, "eval_every": 10, "print_every": 10}
COLLAPSED = 0.01            # an expert left with less than 1% of the assignments has collapsed
ONE_EXPERT = 0.95           # a word sending this share of its occurrences to one expert

README_ENTRY = """\
10. [`10_experts.py`](demos/10_experts.py) — a language model with {num_experts} feed-forward
    experts (top {top_k}) trained twice from the same start, with and without the Switch balance
    loss (weight {balance_weight}). Without it the busiest expert ends with {load_max_without:.1%}
    of the assignments and the idlest with {load_min_without:.1%}; with it, {load_max_with:.1%} and
    {load_min_with:.1%} (aux_loss {aux_loss_without:.3f} vs {aux_loss_with:.3f}, 1 being perfectly
    balanced), for a held-out loss of {loss_without:.3f} vs {loss_with:.3f}. Experts that
    collapsed (ended below {collapsed_level:.0%} of the assignments): {collapsed_without} without
    the balance loss, {collapsed_with} with it. Tables show which words each expert takes.

    ![loads per expert over training, loss curves, words per expert](docs/pictures/experts.png)"""


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


def words_per_expert(model, ids):
    """counts[e, w]: how many times word w (as input) was sent to expert e, on the batch `ids`."""
    with ta.no_grad():
        model(ids)
    chosen = model.experts.selected_experts                            # (B, T, TOP_K)
    counts = np.zeros((NUM_EXPERTS, len(WORDS)), dtype=np.int64)
    np.add.at(counts, (chosen, np.broadcast_to(ids[..., None], chosen.shape)), 1)
    return counts


def load_table(runs, every):
    """The loads at every `every`-th step, side by side for the runs."""
    names = list(runs)
    steps = len(runs[names[0]]["loads"])
    rows = []
    for step in [0, *range(every - 1, steps, every)]:
        row = [str(step + 1)]
        for name in names:
            row.append(" ".join(f"{share:3.0%}" for share in runs[name]["loads"][step]))
        rows.append(row)
    demo_tools.print_table(["step"] + [f"{name}: experts 0-{NUM_EXPERTS - 1}" for name in names],
                           rows)


def top_words_table(counts, how_many=4):
    """Per expert: its share of the assignments, the share of each part of speech among its
    tokens, and the words it takes most of: the share of the word's occurrences sent to it."""
    occurrences = counts.sum(axis=0) / TOP_K                          # (words,)
    taken = counts / np.maximum(occurrences, 1)                        # (experts, words)
    rows = []
    for expert, row in enumerate(counts):
        kinds = [sum(row[WORD_ID[word]] for word in words) / max(row.sum(), 1)
                 for words in PARTS_OF_SPEECH.values()]
        top = np.argsort(-taken[expert], kind="stable")[:how_many]
        rows.append([str(expert), f"{row.sum() / counts.sum():.0%}"]
                    + [f"{kind:.0%}" for kind in kinds]
                    + [", ".join(f"{WORDS[w]} {taken[expert, w]:.0%}" for w in top if row[w])])
    demo_tools.print_table(["expert", "load"] + list(PARTS_OF_SPEECH)
                           + ["words it takes most of (share of their occurrences)"], rows)


def final_loads(run):
    """Each expert's load over the last tenth of the steps, (NUM_EXPERTS,)."""
    return run["loads"][-max(1, len(run["loads"]) // 10):].mean(axis=0)


def words_with_one_expert(counts):
    """How many words send at least ONE_EXPERT of their occurrences to one same expert."""
    occurrences = counts.sum(axis=0) / TOP_K
    return int(((counts / np.maximum(occurrences, 1)).max(axis=0) >= ONE_EXPERT).sum())


def measurements(runs, counts):
    """What the demo measured, as flat numbers: the loads at the start and over the last tenth of
    the steps, the last aux loss, the held-out and last training loss, the words routed to one
    expert, and the experts that collapsed, per run ("_without", "_with" the balance loss)."""
    without = runs["without balance loss"]
    start = without["loads"][0]                                        # the same in both runs
    numbers = {"steps": len(without["train_loss"]), "num_experts": NUM_EXPERTS, "top_k": TOP_K,
               "balance_weight": BALANCE_WEIGHTS["with balance loss"],
               "collapsed_level": COLLAPSED, "start_load_max": float(start.max()),
               "start_load_min": float(start.min()), "loss_start": without["held_out_loss"][0]}
    for name, suffix in (("without balance loss", "without"), ("with balance loss", "with")):
        run, last = runs[name], final_loads(runs[name])
        numbers.update({f"load_max_{suffix}": float(last.max()),
                        f"load_min_{suffix}": float(last.min()),
                        f"aux_loss_{suffix}": run["aux_loss"][-1],
                        f"loss_{suffix}": run["held_out_loss"][-1],
                        f"train_loss_{suffix}": run["train_loss"][-1],
                        f"words_to_one_expert_{suffix}": words_with_one_expert(counts[name]),
                        f"collapsed_{suffix}": int((last < COLLAPSED).sum())})
    return numbers


def print_summary(numbers):
    rows = [[f"{name} balance loss", f"{numbers[f'train_loss_{name}']:.3f}",
             f"{numbers[f'loss_{name}']:.3f}", f"{numbers[f'aux_loss_{name}']:.3f}",
             f"{numbers[f'load_max_{name}']:.1%}", f"{numbers[f'load_min_{name}']:.1%}",
             str(numbers[f"collapsed_{name}"]), str(numbers[f"words_to_one_expert_{name}"])]
            for name in ("without", "with")]
    demo_tools.print_table(["run", "final loss", "held-out loss", "aux_loss", "busiest expert",
                            "idlest expert", f"under {COLLAPSED:.0%}",
                            f"words >= {ONE_EXPERT:.0%} to one"], rows)


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
        shares = counts[name] / (counts[name].sum(axis=0) / TOP_K)     # (experts, words)
        image = axes.imshow(shares, cmap="Purples", vmin=0, vmax=1, aspect="auto")
        axes.set_xticks(range(len(WORDS)), WORDS, rotation=90, fontsize=7)
        axes.set_yticks(range(NUM_EXPERTS))
        axes.set(ylabel="expert", title=f"{name}:\nshare of each word's occurrences per expert")
    grid[0, 0].legend(loc="upper left", fontsize=7, ncol=2)
    figure.colorbar(image, ax=grid[1, :2], shrink=0.8, label="share of the word's occurrences")
    axes = grid[0, 2]
    for (name, run), color in zip(runs.items(), ("tab:red", "tab:blue")):
        axes.plot(np.arange(1, len(run["train_loss"]) + 1), run["train_loss"], color=color,
                  linewidth=0.8, alpha=0.6, label=f"{name} (training batch)")
        axes.plot(run["checkpoints"], run["held_out_loss"], "o-", color=color, markersize=3,
                  label=f"{name} (held out)")
    axes.set(xlabel="step", ylabel="language-model loss (cross-entropy)", title="Loss curves")
    axes.legend(fontsize=8)
    axes = grid[1, 2]
    for (name, run), color in zip(runs.items(), ("tab:red", "tab:blue")):
        axes.plot(np.arange(1, len(run["aux_loss"]) + 1), run["aux_loss"], color=color,
                  linewidth=0.8, label=name)
    axes.axhline(1.0, color="gray", linewidth=0.8, linestyle="--")
    axes.set(xlabel="step", ylabel=f"aux_loss = {NUM_EXPERTS} sum_e f_e P_e",
             title="Balance loss (1 = perfectly balanced)")
    axes.legend(fontsize=8)
    return demo_tools.save_figure(figure, path, dpi=100)


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

    print("\nLoad per expert (share of a training batch's assignments; even is "
          f"{1 / NUM_EXPERTS:.1%}):")
    load_table(runs, settings["print_every"])
    numbers = measurements(runs, counts)
    print(f"\nAt the end (loads: the mean over the last tenth of the steps; 'under "
          f"{COLLAPSED:.0%}': the experts that collapsed;\nthe last column: of the {len(WORDS)} "
          "words, those that send most of their occurrences to one expert):")
    print_summary(numbers)
    for name in runs:
        print(f"\nWhich words each expert takes, {name} (the {HELD_OUT} held-out rows; each "
              f"occurrence of a word goes to {TOP_K} experts):")
        top_words_table(counts[name])
    picture = plot(runs, counts, args.output / "experts.png")
    if picture is not None:
        print(f"loads, losses and word shares: {picture}")
    return numbers


if __name__ == "__main__":
    main()
