"""Demo 15: induction heads form: a circuit born in training, found, read from its weights,
switched off and patched.

What it shows: a transformer of two attention layers and nothing else, trained by tinyattn on
random tokens whose second half repeats the first, learns to copy: the loss on the repeated half
falls far below a guess's, while on the first half (random tokens: nothing to predict) it cannot.
Olsson et al. 2022 ("In-context Learning and Induction Heads") find that models learn this in
a short stretch of training, a phase change, and tie it to two heads forming together, in two
layers:

- a previous-token head in the first layer: at every position, it attends to the token before
  and writes that token into the residual stream;
- an induction head in the second layer: at a token A, its query looks for a key saying "the
  token before me was A" (the previous-token head's output), finds the token B that followed A
  last time, and copies it: [A][B] ... [A] -> [B].

The second needs the first (K-composition, Elhage et al. 2021, "A Mathematical Framework for
Transformer Circuits"), so no induction head can form in the first layer. The demo measures at
every evaluation the loss on each half and each head's two scores (on held-out sequences):

    induction score       the weight from each token of the second copy to the token after its
                          previous occurrence, averaged (Olsson et al.'s definition, as demo 14)
    previous-token score  the weight from each token to the one before it, averaged

and names the steps where the repeated-half loss has made 10%, half and 90% of its fall, and
the steps where a head of either kind first scores above THRESHOLD. It also reads the circuit
from the weights alone at every evaluation (tinyattn/circuits.py): how much each second-layer
head's key reads what each first-layer head writes (K-composition, against Q- and
V-composition), and how much each head's OV circuit copies (the share of tokens whose own logit
is the largest of W_E W_OV^T W_U^T). After training, direct logit attribution names the pieces
of the residual stream that push the right token on the repeated half. Then, with chapter 4's
hooks (`model.hooks`), it zero-ablates the heads it found and measures what the repeated-half
loss loses, against every other head; and it patches each head's output, and the residual
stream the second layer reads position by position, from a clean run (the sequence repeated)
into a corrupted one (its first copy replaced by other random tokens), with activation patching
(one forward pass per head or position) and attribution patching (one backward pass for all of
them, tinyattn/interpretability.py), to see where the two agree.

    python demos/15_induction_heads.py [output folder] [--quick]

The pictures: `induction_heads.png` (the losses, every head's scores, the composition and the
copying over training; the direct logit attribution; the patching of each head) and
`induction_heads_attention.png` (every head's attention on one held-out sequence after
training); `induction_heads_attention.html` is the same attention as an interactive page
(`viz.attention_view`). `--quick` trains for fewer steps, past the phase change (what the tests
run). The full run's time, as `dev/regenerate.py` measured it, ends the demo's entry on
docs/demos.md.
"""
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.interpretability import (ablate_head, activation_patching, attribution_names,
                                       attribution_patching, composition_scores,
                                       direct_logit_attribution, ov_circuit)

# %% [markdown]
# The settings. Sequences are a random span of `n` tokens written twice, `n` drawn from SPANS at
# every step: with spans of many lengths, the copy's source is at no fixed distance, so no head
# can find it by position alone; it has to find it by content, which is what an induction head
# does. The held-out sequences (a generator of their own) have three span lengths. A head scoring
# above THRESHOLD counts as an induction (or previous-token) head: one that spreads its weight
# evenly scores `chance_induction_score()` (printed at the start), several times less, and 0.4
# is what demo 14 asks of GPT-2's heads.

# %%
SEED = 0                            # of the weights and the training batches
HELD_OUT_SEED = 1000                # of the held-out and the corrupted sequences
VOCAB, WIDTH, HEADS, LAYERS = 64, 64, 4, 2
SPANS = (6, 16)                     # the span length n is drawn from 6 ... 16
HELD_OUT_SPANS = (6, 11, 16)
BATCH, HELD_OUT_BATCH, LEARNING_RATE = 32, 32, 3e-3
THRESHOLD = 0.4
FULL = dict(steps=1500, eval_every=10, print_every=100)
QUICK = dict(steps=400, eval_every=20, print_every=100)


def repeated_spans(random, count, n):
    """(count, 2n) token ids: a random span of n tokens, written twice."""
    span = random.integers(0, VOCAB, (count, n))
    return np.concatenate([span, span], axis=1)


def held_out_sequences():
    """One batch of HELD_OUT_BATCH sequences for each of HELD_OUT_SPANS."""
    random = np.random.default_rng(HELD_OUT_SEED)
    return [repeated_spans(random, HELD_OUT_BATCH, n) for n in HELD_OUT_SPANS]


# %% [markdown]
# The model: token embeddings, two blocks of attention alone (no feed-forward), a final LayerNorm
# and the output layer, built from tinyattn's layers. Its positions are rotary (RoPE, applied in
# every attention layer), so a head sees the offset between a query and a key directly: "attend
# to the token before" is the same rotation at every position, what a previous-token head needs.
# Each block and the model name their activations (`hook`), so `run_with_cache` and `hooks`
# reach them, and the attention layers name theirs ("weights", "heads", ...).

# %%
class AttentionOnlyBlock(nn.Module):
    """x + attention(ln(x)): a TransformerBlock without its feed-forward half. (B, T, E) in and
    out; it names the residual stream as it comes in, "resid_pre", and as it goes out,
    "resid_post"."""

    activations = ("resid_pre", "resid_post")

    def __init__(self, embed_dim, num_heads):
        self.ln = nn.LayerNorm(embed_dim, dtype=np.float32)
        self.attn = nn.MultiHeadAttention(embed_dim, num_heads, rope=True, dtype=np.float32)

    def forward(self, x):
        x = self.hook("resid_pre", x)                                   # (B, T, E)
        attended, _ = self.attn(self.ln(x), is_causal=True)             # (B, T, E)
        return self.hook("resid_post", x + attended)                    # (B, T, E)


class AttentionOnlyTransformer(nn.Module):
    """ids (B, T) -> logits (B, T, VOCAB): embedding, LAYERS attention-only blocks, LayerNorm,
    head; float32. It names "embed" and "final" (B, T, E), as nn.CausalTransformer does."""

    activations = ("embed", "final")

    def __init__(self):
        self.embed = nn.Embedding(VOCAB, WIDTH, dtype=np.float32)
        self.blocks = [AttentionOnlyBlock(WIDTH, HEADS) for _ in range(LAYERS)]
        self.ln = nn.LayerNorm(WIDTH, dtype=np.float32)
        self.head = nn.Linear(WIDTH, VOCAB, dtype=np.float32)

    def forward(self, ids):
        x = self.hook("embed", self.embed(ids))                         # (B, T, E)
        for block in self.blocks:
            x = block(x)                                                # (B, T, E)
        return self.head(self.hook("final", self.ln(x)))                # (B, T, VOCAB)


# %% [markdown]
# What is measured. At position t the model predicts token t + 1. In a sequence of 2n tokens the
# first half's predictions (of tokens 1 ... n - 1) can do no better than a guess, log VOCAB; the
# repeated half's (of tokens n + 1 ... 2n - 1) can be perfect, by copying. (Token n, the first of
# the copy, is left out of both: nothing says that the span starts again.) The scores read the
# attention weights (B, H, T, T) of every layer from `run_with_cache`.

# %%
def next_token_losses(logits, ids):
    """-log p(token t + 1) at every position t < 2n - 1: (B, 2n - 1), a NumPy array."""
    log_probabilities = F.log_softmax(ta.tensor(logits)).data                 # (B, 2n, VOCAB)
    targets = ids[:, 1:, None]                                                # (B, 2n - 1, 1)
    return -np.take_along_axis(log_probabilities[:, :-1], targets, axis=-1)[..., 0]


def half_losses(losses, n):
    """(mean loss on the first half, on the repeated half), from next_token_losses."""
    return float(losses[:, :n - 1].mean()), float(losses[:, n:].mean())


def induction_scores(weights, n):
    """(layers, heads): the weight from each token t of the second copy (t = n ... 2n - 1) to the
    token after its previous occurrence (t - n + 1), averaged; weights (B, layers, H, 2n, 2n)."""
    queries = np.arange(n, 2 * n)                                   # (n,) the second copy
    return weights[..., queries, queries - n + 1].mean(axis=(0, -1))


def previous_token_scores(weights):
    """(layers, heads): the weight from each token t >= 1 to token t - 1, averaged."""
    queries = np.arange(1, weights.shape[-1])
    return weights[..., queries, queries - 1].mean(axis=(0, -1))


def chance_induction_score():
    """The induction score of a head that spreads its weight evenly over the tokens it may see
    (1 / (t + 1) at query t), over the held-out span lengths: the score of not looking."""
    return float(np.mean([np.mean(1 / (np.arange(n, 2 * n) + 1)) for n in HELD_OUT_SPANS]))


@ta.no_grad()
def measure(model, held_out, ablated=()):
    """Mean first-half and repeated-half losses and scores over the held-out batches, with the
    heads `ablated` ([(layer, head)]) zeroed through hooks: (first, repeated, induction (L, H),
    previous-token (L, H))."""
    names = [f"blocks.{layer}.attn.weights" for layer in range(LAYERS)]
    zeroed = [(f"blocks.{layer}.attn.heads", ablate_head(head)) for layer, head in ablated]
    halves, induction, previous = [], [], []
    with model.hooks(zeroed):
        for ids in held_out:
            n = ids.shape[1] // 2
            logits, cache = model.run_with_cache(ids, names=names)
            halves.append(half_losses(next_token_losses(logits.data, ids), n))
            weights = np.stack([cache[name] for name in names], axis=1)   # (B, L, H, 2n, 2n)
            induction.append(induction_scores(weights, n))
            previous.append(previous_token_scores(weights))
    first, repeated = np.mean(halves, axis=0)
    return float(first), float(repeated), np.mean(induction, axis=0), np.mean(previous, axis=0)


# %% [markdown]
# Reading the circuit from its weights (tinyattn/circuits.py), at every evaluation, with no input
# at all:
#
# - composition: how much each second-layer head's query (Q), key (K) or value (V) reads what each
#   first-layer head's OV circuit writes, Elhage et al.'s ratio of the raw weights. An induction
#   head's key must read the previous-token head's output: K-composition. Weights in random
#   directions score about 1 / sqrt(WIDTH), the same model before training about that too;
# - copying: a head's OV circuit from tokens to logits, W_E W_OV^T W_U^T (VOCAB, VOCAB), whose row
#   a is what the head adds to every logit when it attends to token a. A head that copies adds most
#   to a itself: the share of rows whose largest entry is on the diagonal (1 / VOCAB by chance).
#
# After training, direct logit attribution splits the logit of each right token of the repeated
# half into what each piece of the residual stream added to it: the embeddings, each head, the
# biases (the final LayerNorm's scale held at the run's).

# %%
def composition(model):
    """(3, H, H): the Q-, K- and V-composition scores of the second layer's heads (rows) with the
    first layer's (columns)."""
    return np.stack([composition_scores(model, kind)[1, :, 0] for kind in "qkv"])


def copying_shares(model):
    """(layers, heads): for each head, the share of tokens a whose own logit is the largest of
    row a of W_E W_OV^T W_U^T, the logits the head's output adds when it attends to a."""
    W_E, W_U = model.embed.weight.data, model.head.weight.data             # (VOCAB, E) both
    shares = np.zeros((LAYERS, HEADS))
    for layer, block in enumerate(model.blocks):
        for head in range(HEADS):
            logits = W_E @ ov_circuit(block.attn, head).T @ W_U.T          # (VOCAB, VOCAB)
            shares[layer, head] = np.mean(logits.argmax(axis=-1) == np.arange(VOCAB))
    return shares


def pair_means(scores, induction_heads, previous_heads):
    """(the mean over (induction head, previous-token head) pairs, over every other pair of a
    second-layer and a first-layer head) of scores (..., H, H); None where there is none."""
    chosen = np.zeros((HEADS, HEADS), dtype=bool)
    for _, later in induction_heads:
        for _, earlier in previous_heads:
            chosen[later, earlier] = True

    def mean(mask):
        return scores[..., mask].mean(axis=-1) if mask.any() else None
    return mean(chosen), mean(~chosen)


def read_circuit(history, induction_heads, previous_heads):
    """What the weights said over training: {"pairs", "others": (evaluations, 3) the Q-, K- and
    V-composition of the (induction head, previous-token head) pairs, and of every other pair,
    on average; "copying": (evaluations,) the induction heads' mean copying share;
    "first_layer_copying": (evaluations,) the largest share of a first-layer head}."""
    pairs, others = pair_means(history["composition"], induction_heads, previous_heads)
    heads = [history["copying"][:, layer, head] for layer, head in induction_heads]
    return {"pairs": pairs, "others": others,
            "copying": np.mean(heads, axis=0) if heads else None,
            "first_layer_copying": history["copying"][:, 0].max(axis=-1)}


@ta.no_grad()
def logit_attribution(model, ids):
    """{piece: its mean direct logit attribution to the right token of the repeated half}: for
    positions n ... 2n - 2 of `ids`, the token at the next position."""
    n = ids.shape[1] // 2
    _, cache = model.run_with_cache(ids, names=attribution_names(model))
    totals = {}
    for position in range(n, 2 * n - 1):
        attributions = direct_logit_attribution(model, cache, ids[:, position + 1], position)
        for piece, values in attributions.items():
            totals[piece] = totals.get(piece, 0.0) + float(values.mean()) / (n - 1)
    return totals


# %% [markdown]
# Training: Adam on fresh batches, each of one span length; every `eval_every` steps, the
# held-out measures and the circuit's.

# %%
def train(model, held_out, settings):
    """Train; returns the history of the held-out measures and the training time (evaluations
    aside)."""
    optimizer = ta.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    random = np.random.default_rng(SEED)
    history = {"steps": [], "first": [], "repeated": [], "induction": [], "previous": [],
               "composition": [], "copying": []}
    seconds = 0.0

    def evaluate(step):
        first, repeated, induction, previous = measure(model, held_out)
        for key, value in zip(("steps", "first", "repeated", "induction", "previous"),
                              (step, first, repeated, induction, previous)):
            history[key].append(value)
        history["composition"].append(composition(model))             # (3, H, H)
        history["copying"].append(copying_shares(model))              # (L, H)
        if step % settings["print_every"] == 0 or step == settings["steps"]:
            print_progress(step, first, repeated, induction, previous, seconds)

    evaluate(0)
    for step in range(1, settings["steps"] + 1):
        start = time.perf_counter()
        ids = repeated_spans(random, BATCH, int(random.integers(SPANS[0], SPANS[1] + 1)))
        logits = model(ids)                                             # (B, 2n, VOCAB)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds += time.perf_counter() - start
        if step % settings["eval_every"] == 0:
            evaluate(step)
    for key in ("induction", "previous", "composition", "copying"):
        history[key] = np.array(history[key])         # (evaluations, L, H), (evaluations, 3, H, H)
    return history, seconds


# %% [markdown]
# The phase change: the steps at which the repeated-half loss has made 10%, 50% and 90% of its
# fall (from its first value to its last), and the first steps where a head scores above
# THRESHOLD, in each layer.

# %%
def step_of_fall(steps, losses, share):
    """The first step at which `losses` has made `share` of its fall from its first value to its
    last."""
    level = losses[0] - share * (losses[0] - losses[-1])
    return int(steps[int(np.argmax(np.asarray(losses) <= level))])


def first_step_above(steps, scores, layer):
    """The first step at which a head of `layer` scores above THRESHOLD; None if none does."""
    above = (scores[:, layer] > THRESHOLD).any(axis=-1)                # (evaluations,)
    return int(steps[int(np.argmax(above))]) if above.any() else None


def heads_above(scores):
    """[(layer, head)] of the heads scoring above THRESHOLD, best first."""
    found = [(int(layer), int(head)) for layer, head in zip(*np.nonzero(scores > THRESHOLD))]
    return sorted(found, key=lambda where: -scores[where])


# %% [markdown]
# Patching. The clean input is a held-out batch; the corrupted one has its first copy replaced by
# other random tokens, so the second copy repeats nothing. The metric is the mean log-probability
# of the repeated half's tokens (n + 1 ... 2n - 1): high on the clean input, a guess's on the
# corrupted one. Two things are patched from the clean run into the corrupted one, and for each,
# how much of the metric comes back is measured (activation patching: one forward pass per head
# or position) and estimated (attribution patching: one backward pass for all of them):
#
# - each head's output ("heads", before the heads are merged), which reaches the logits through
#   linear maps and the final LayerNorm only;
# - the residual stream the second layer reads ("blocks.1.resid_pre"), one position at a time:
#   a clean token in the first copy is a key that an induction head's query can find, and its
#   softmax then moves its weight to that key, a change that the slope at the corrupted run
#   need not see (the docstring of tinyattn/interpretability.py says why).

# %%
def corrupted_copy(ids, random):
    """The sequences with their first half replaced by other random tokens."""
    n = ids.shape[1] // 2
    corrupted = ids.copy()
    corrupted[:, :n] = random.integers(0, VOCAB, (len(ids), n))
    return corrupted


def repeated_half_log_probability(ids):
    """The metric, a function of the logits (B, 2n, VOCAB) returning a one-element Tensor: the
    mean log-probability of tokens n + 1 ... 2n - 1 of `ids`."""
    n = ids.shape[1] // 2
    positions = np.arange(n, 2 * n - 1)                                     # (n - 1,)
    rows = np.arange(len(ids))[:, None]                                     # (B, 1)

    def metric(logits):
        log_probabilities = F.log_softmax(logits)                           # (B, 2n, VOCAB)
        return log_probabilities[rows, positions, ids[:, positions + 1]].mean()
    return metric


def patching(model, clean):
    """The metric on the clean and the corrupted input, and what patching brings back, measured
    and estimated: {"heads": (L, H) each head's output, "stream": (2n,) each position of the
    stream the second layer reads}, each {"measured": array, "estimated": array}."""
    corrupted = corrupted_copy(clean, np.random.default_rng(HELD_OUT_SEED + 1))
    metric = repeated_half_log_probability(clean)
    heads = [f"blocks.{layer}.attn.heads" for layer in range(LAYERS)]
    stream = "blocks.1.resid_pre"
    with ta.no_grad():
        clean_logits, cache = model.run_with_cache(clean, names=heads + [stream])
        corrupted_value = metric(model(corrupted)).item()
    results = {}
    for part, names, per in (("heads", heads, dict(per_head=True)),
                             ("stream", [stream], dict(per_position=True))):
        arguments = (model, corrupted, cache, metric, names)
        measured = activation_patching(*arguments, **per)
        estimated = attribution_patching(*arguments, **per)
        results[part] = {"measured": np.stack([measured[name] for name in names]).squeeze(),
                         "estimated": np.stack([estimated[name] for name in names]).squeeze()}
    return metric(clean_logits).item(), corrupted_value, results


# %% [markdown]
# `main` trains, finds the heads, ablates them, patches them, and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    ta.manual_seed(SEED)
    model = AttentionOnlyTransformer()
    held_out = held_out_sequences()
    print(f"A {LAYERS}-layer attention-only transformer ({HEADS} heads a layer, width {WIDTH}, "
          f"RoPE, {sum(p.size for p in model.parameters()):,} parameters) on spans of "
          f"{SPANS[0]}-{SPANS[1]} random tokens out of {VOCAB}, written twice; Adam, learning "
          f"rate {LEARNING_RATE}, {BATCH} sequences a step, {settings['steps']} steps. Held out: "
          f"{HELD_OUT_BATCH} sequences of each span length {HELD_OUT_SPANS}. A guess scores "
          f"log {VOCAB} = {np.log(VOCAB):.2f}; a head that does not look scores "
          f"{chance_induction_score():.3f} as an induction head.\n")
    history, seconds = train(model, held_out, settings)
    steps = np.array(history["steps"])

    phase = step_of_fall(steps, history["repeated"], 0.5)
    fall_begins, fall_ends = (step_of_fall(steps, history["repeated"], share)
                              for share in (0.1, 0.9))
    induction_step = first_step_above(steps, history["induction"], 1)
    previous_step = first_step_above(steps, history["previous"], 0)
    induction, previous = history["induction"][-1], history["previous"][-1]
    induction_heads, previous_heads = heads_above(induction), heads_above(previous)
    print_phase_change(phase, induction_step, previous_step, induction_heads, previous_heads,
                       induction, previous, history, seconds)

    circuit = read_circuit(history, induction_heads, previous_heads)
    copying = history["copying"][-1]                                    # (L, H) after training
    attributions = logit_attribution(model, held_out[1])                # the middle span length
    print_circuit(circuit, steps, phase, copying, history["copying"][0],
                  history["copying"].max(axis=0), attributions)

    trained_first, trained_repeated = history["first"][-1], history["repeated"][-1]
    ablations = {"induction": measure(model, held_out, induction_heads)[1],
                 "previous": measure(model, held_out, previous_heads)[1],
                 "both": measure(model, held_out, induction_heads + previous_heads)[1]}
    found = set(induction_heads + previous_heads)
    alone = {(layer, head): measure(model, held_out, [(layer, head)])[1]
             for layer in range(LAYERS) for head in range(HEADS)}
    print_ablations(trained_repeated, ablations, alone, induction_heads, previous_heads)

    clean = held_out[1]                                         # the middle span length
    clean_value, corrupted_value, patched = patching(model, clean)
    n, lost = clean.shape[1] // 2, clean_value - corrupted_value
    print_patching(clean_value, corrupted_value, patched, n)

    with ta.no_grad():
        _, cache = model.run_with_cache(clean[:1])
    weights = [cache[f"blocks.{layer}.attn.weights"] for layer in range(LAYERS)]  # (1, H, T, T)
    pictures = save_pictures(args.output, history, patched, lost, clean[0], weights, induction,
                             previous, circuit, attributions)
    demo_tools.print_pictures(*pictures)

    others = {where: loss for where, loss in alone.items() if where not in found}
    shares = {kind: patched["heads"][kind] / lost for kind in ("measured", "estimated")}
    stream = {kind: float(patched["stream"][kind][:n].mean() / lost)
              for kind in ("measured", "estimated")}
    ranked = sorted(attributions, key=lambda piece: -attributions[piece])
    found_pieces = [f"blocks.{layer}.attn.result.{head}" for layer, head in induction_heads]
    return {
        "vocab": VOCAB, "width": WIDTH, "heads": HEADS, "layers": LAYERS,
        "shortest_span": SPANS[0], "longest_span": SPANS[1], "batch": BATCH,
        "learning_rate": LEARNING_RATE, "steps": settings["steps"],
        "eval_every": settings["eval_every"], "threshold": THRESHOLD,
        "guess_loss": float(np.log(VOCAB)), "chance_induction_score": chance_induction_score(),
        "training_seconds": seconds, "evaluations": len(history["steps"]),
        "induction_scores": induction.tolist(), "previous_token_scores": previous.tolist(),
        "first_layer_induction_score_ever": float(history["induction"][:, 0].max()),
        "phase_change_step": phase, "fall_begins": fall_begins, "fall_ends": fall_ends,
        "induction_step": induction_step,
        "previous_token_step": previous_step,
        "repeated_loss_start": history["repeated"][0], "first_loss_final": trained_first,
        "repeated_loss_final": trained_repeated,
        "induction_heads": [head_name(*where) for where in induction_heads],
        "previous_token_heads": [head_name(*where) for where in previous_heads],
        "induction_heads_shown": shown_heads(induction_heads, induction),
        "previous_token_heads_shown": shown_heads(previous_heads, previous),
        "best_first_layer_induction_score": float(induction[0].max()),
        "best_second_layer_previous_token_score": float(previous[1].max()),
        "ablated_induction_loss": ablations["induction"],
        "ablated_previous_token_loss": ablations["previous"],
        "ablated_both_loss": ablations["both"],
        "ablated_alone_losses": [[alone[layer, head] for head in range(HEADS)]
                                 for layer in range(LAYERS)],
        "ablated_others": (f"any other head alone leaves it between {min(others.values()):.2f} "
                           f"and {max(others.values()):.2f}" if others else
                           "and there is no other head"),
        "patching_span": n, "clean_metric": clean_value, "corrupted_metric": corrupted_value,
        "patched_heads_measured": patched["heads"]["measured"].tolist(),
        "patched_heads_estimated": patched["heads"]["estimated"].tolist(),
        "patched_stream_measured": patched["stream"]["measured"].tolist(),
        "patched_stream_estimated": patched["stream"]["estimated"].tolist(),
        "patching_induction_heads": patching_sentence(induction_heads, shares),
        "patching_previous_token_heads": patching_sentence(previous_heads, shares),
        "previous_token_note": previous_token_note(previous_heads, shares["measured"]),
        "induction_heads_largest_gap": max((abs(shares["estimated"][where]
                                                - shares["measured"][where])
                                            for where in induction_heads), default=None),
        "stream_restored": stream["measured"], "stream_estimated": stream["estimated"],
        "stream_verdict": stream_verdict(stream["measured"], stream["estimated"]),
        **circuit_numbers(circuit, steps, copying, history["copying"][0], induction_heads),
        "attributions": attributions, "attribution_ranking": ranked,
        "attribution_induction_heads": [attributions[piece] for piece in found_pieces],
        "attribution_largest_other": max((abs(value) for piece, value in attributions.items()
                                          if piece not in found_pieces), default=None),
        "attribution_top": attribution_sentence(ranked[:max(len(found_pieces), 1)],
                                                attributions),
    }


def circuit_numbers(circuit, steps, copying, copying_before, induction_heads):
    """The numbers of `read_circuit` that the entry and the tests read (None where no heads of a
    kind were found)."""
    pairs, others = circuit["pairs"], circuit["others"]
    found = pairs is not None and circuit["copying"] is not None
    return {
        "random_composition": 1 / np.sqrt(WIDTH), "chance_copying": 1 / VOCAB,
        "k_composition_start": float(pairs[0, 1]) if found else None,
        "k_composition_end": float(pairs[-1, 1]) if found else None,
        "q_composition_end": float(pairs[-1, 0]) if found else None,
        "v_composition_end": float(pairs[-1, 2]) if found else None,
        "k_composition_others_end": float(others[-1, 1]) if found and others is not None
        else None,
        "k_composition_rise_step": step_of_fall(steps, -pairs[:, 1], 0.5) if found else None,
        "copying_shares": copying.tolist(),
        "copying_induction_heads": ", ".join(f"{head_name(*where)} {copying[where]:.0%}"
                                             for where in induction_heads) or "none found",
        "copying_first_layer_most": float(copying[0].max()),
        "copying_first_layer_most_ever": float(circuit["first_layer_copying"].max()),
        "copying_before_training_most": float(copying_before.max()),
        "copying_rise_step": step_of_fall(steps, -circuit["copying"], 0.5) if found else None,
    }


# %% [markdown]
# Plumbing, what the experiment needs but is not about: head names, what it prints, the
# pictures, and the entry on docs/demos.md.

# %%
def head_name(layer, head):
    """"1.2": head 2 of the second layer (both counted from 0, as in demo 14)."""
    return f"{layer}.{head}"


def shown_heads(found, scores):
    """"1.2 (0.88), 1.0 (0.45)", or "none"."""
    return ", ".join(f"{head_name(*where)} ({scores[where]:.2f})" for where in found) or "none"


def patching_sentence(heads, shares):
    """"1.0 +30% (estimated +26%), 1.1 ...": what patching each head's output brings back, as a
    share of what the corruption cost, measured and estimated."""
    return ", ".join(f"{head_name(*where)} {shares['measured'][where]:+.0%} (estimated "
                     f"{shares['estimated'][where]:+.0%})" for where in heads) or "none found"


def previous_token_note(heads, measured):
    """Why patching a previous-token head alone makes things worse, when it does."""
    if heads and all(measured[where] < 0 for where in heads):
        return (": worse, since the clean keys now send the induction heads to positions whose "
                "tokens are corrupted, and they copy those")
    return ""


def stream_verdict(measured, estimated):
    """What attribution patching makes of the stream's positions, in words from the numbers."""
    estimated = round(estimated, 3) + 0.0              # no "-0.0%" for a tiny negative number
    if abs(estimated - measured) <= 0.25 * abs(measured):
        return f"attribution patching estimates {estimated:.1%}, close to it"
    if abs(estimated) < abs(measured):
        return (f"attribution patching estimates only {estimated:.1%}: there a clean token is a "
                f"key that an induction head's query finds, its softmax jumps to it, and the "
                f"slope at the corrupted run does not see the jump")
    return f"attribution patching estimates {estimated:.1%}, more than patching measures"


def print_progress(step, first, repeated, induction, previous, seconds):
    best = lambda scores, layer: f"{scores[layer].max():.2f} ({int(scores[layer].argmax())})"
    if step == 0:
        print(f"{'step':>6}  {'first half':>10}  {'repeated half':>13}  "
              f"{'best induction score, layer 0 / 1 (head)':>41}  "
              f"{'best previous-token score, layer 0 / 1':>38}")
    print(f"{step:>6}  {first:>10.3f}  {repeated:>13.3f}  "
          f"{best(induction, 0) + ' / ' + best(induction, 1):>41}  "
          f"{best(previous, 0) + ' / ' + best(previous, 1):>38}   {seconds:5.1f} s", flush=True)


def print_phase_change(phase, induction_step, previous_step, induction_heads, previous_heads,
                       induction, previous, history, seconds):
    print(f"\nTrained in {seconds:.1f} s (evaluations aside). The repeated-half loss fell from "
          f"{history['repeated'][0]:.2f} to {history['repeated'][-1]:.2f} (the first half: "
          f"{history['first'][-1]:.2f}); it had made half its fall at step {phase}.")
    print(f"First step with an induction head above {THRESHOLD} in the second layer: "
          f"{induction_step}; with a previous-token head above {THRESHOLD} in the first: "
          f"{previous_step}.")
    print(f"After training: induction heads {shown_heads(induction_heads, induction)}; "
          f"previous-token heads {shown_heads(previous_heads, previous)} (layer.head).")
    demo_tools.print_table(
        ["head", "induction score", "previous-token score"],
        [[head_name(layer, head), f"{induction[layer, head]:.3f}",
          f"{previous[layer, head]:.3f}"] for layer in range(LAYERS) for head in range(HEADS)],
        "Each head's scores after training:")


def print_circuit(circuit, steps, phase, copying, copying_before, copying_ever, attributions):
    pairs, others = circuit["pairs"], circuit["others"]
    if pairs is not None and circuit["copying"] is not None:
        kinds = ", ".join(f"{kind} {pairs[-1, index]:.3f}" for index, kind in enumerate("QKV"))
        print(f"\nRead from the weights: the composition of the induction heads with the "
              f"previous-token heads went from K {pairs[0, 1]:.3f} (weights in random directions "
              f"score 1/sqrt({WIDTH}) = {1 / np.sqrt(WIDTH):.3f}) to {kinds}; every other pair "
              f"ends at K {others[-1, 1]:.3f}. K-composition made half its rise by step "
              f"{step_of_fall(steps, -pairs[:, 1], 0.5)}; the induction heads' copying half its "
              f"rise by step {step_of_fall(steps, -circuit['copying'], 0.5)} (the loss half its "
              f"fall by step {phase}).")
    demo_tools.print_table(
        ["head", "copying share after training", "before training", "most during training"],
        [[head_name(layer, head), f"{copying[layer, head]:.1%}",
          f"{copying_before[layer, head]:.1%}", f"{copying_ever[layer, head]:.1%}"]
         for layer in range(LAYERS) for head in range(HEADS)],
        f"Each head's OV circuit: the share of the {VOCAB} tokens whose own logit it pushes most "
        f"(chance: {1 / VOCAB:.1%}):")
    demo_tools.print_table(
        ["piece of the residual stream", "mean direct logit attribution"],
        [[piece, f"{value:+.3f}"] for piece, value in
         sorted(attributions.items(), key=lambda item: -item[1])],
        "Direct logit attribution to the right token on the repeated half, held out:")


def attribution_sentence(pieces, attributions):
    """"1.0 (+1.41), 1.2 (+1.31)": the pieces, as heads where they are heads."""
    def shown(piece):
        parts = piece.split(".")
        return f"{parts[1]}.{parts[4]}" if piece.startswith("blocks.") and len(parts) == 5 \
            else piece
    return ", ".join(f"{shown(piece)} ({attributions[piece]:+.2f})" for piece in pieces)


def print_ablations(trained, ablations, alone, induction_heads, previous_heads):
    names = lambda heads: ", ".join(head_name(*where) for where in heads) or "none"
    rows = [["none", f"{trained:.3f}"],
            [f"induction heads ({names(induction_heads)})", f"{ablations['induction']:.3f}"],
            [f"previous-token heads ({names(previous_heads)})", f"{ablations['previous']:.3f}"],
            ["both", f"{ablations['both']:.3f}"]]
    rows += [[f"head {head_name(*where)} alone", f"{loss:.3f}"] for where, loss in alone.items()]
    demo_tools.print_table(["heads zero-ablated", "repeated-half loss"], rows,
                           "Zero-ablation through hooks (each head's output set to 0), held out:")


def print_patching(clean_value, corrupted_value, patched, n):
    lost = clean_value - corrupted_value
    print(f"\nPatching, on {HELD_OUT_BATCH} held-out spans of {n} tokens: the repeated half's "
          f"mean log-probability is {clean_value:.3f} clean and {corrupted_value:.3f} with the "
          f"first copy corrupted. What patching from the clean run brings back, as a share of "
          f"the {lost:.3f} lost:")
    heads = patched["heads"]
    demo_tools.print_table(
        ["head's output", "activation patching", "attribution patching"],
        [[head_name(layer, head), f"{heads['measured'][layer, head] / lost:+.1%}",
          f"{heads['estimated'][layer, head] / lost:+.1%}"]
         for layer in range(LAYERS) for head in range(HEADS)])
    stream = patched["stream"]
    demo_tools.print_table(
        ["stream read by layer 1, at position", "activation patching", "attribution patching"],
        [[f"{position} ({'first' if position < n else 'second'} copy)",
          f"{stream['measured'][position] / lost:+.1%}",
          f"{stream['estimated'][position] / lost:+.1%}"] for position in range(2 * n)])


def save_pictures(folder, history, patched, lost, ids, weights, induction, previous, circuit,
                  attributions):
    """The curves, the circuit's readings and patching (matplotlib), the attention on one
    sequence (matplotlib and viz.attention_view's page); the paths, None for a picture not
    drawn."""
    tokens = [str(token) for token in ids]
    page = ta.viz.attention_view(tokens, weights, title="induction heads: attention after "
                                                        "training").save(
        folder / "induction_heads_attention.html")
    plt = demo_tools.pyplot()
    if plt is None:
        return None, None, page
    return (plot_training(plt, history, patched, lost, circuit, attributions,
                          folder / "induction_heads.png"),
            plot_attention(plt, ids, weights, induction, previous,
                           folder / "induction_heads_attention.png"), page)


def plot_training(plt, history, patched, lost, circuit, attributions, path):
    figure, axes = plt.subplot_mosaic([["loss", "induction", "previous"],
                                       ["composition", "copying", "attribution"],
                                       ["heads", "stream", "stream"]], figsize=(15, 11.5))
    steps = history["steps"]
    axes["loss"].plot(steps, history["first"], label="first half (random)")
    axes["loss"].plot(steps, history["repeated"], label="repeated half")
    axes["loss"].axhline(np.log(VOCAB), color="gray", linestyle=":", label=f"a guess, log {VOCAB}")
    axes["loss"].set(xlabel="training step", ylabel="held-out loss (nats per token)",
                     title="loss on each half")
    for key, scores, title in (("induction", history["induction"], "induction score"),
                               ("previous", history["previous"], "previous-token score")):
        for layer in range(LAYERS):
            for head in range(HEADS):
                axes[key].plot(steps, scores[:, layer, head], color=f"C{head}",
                               linestyle="--" if layer == 0 else "-",
                               label=f"head {head_name(layer, head)}")
        axes[key].axhline(THRESHOLD, color="gray", linestyle=":")
        axes[key].set(xlabel="training step", ylim=(0, 1),
                      title=f"{title} (dashed: layer 0, solid: layer 1)")
    for key, labels in (("heads", [head_name(layer, head) for layer in range(LAYERS)
                                   for head in range(HEADS)]),
                        ("stream", [str(position) for position in
                                    range(len(patched["stream"]["measured"]))])):
        where = np.arange(len(labels))
        axes[key].bar(where - 0.2, patched[key]["measured"].ravel() / lost, 0.4,
                      label="activation patching (measured)")
        axes[key].bar(where + 0.2, patched[key]["estimated"].ravel() / lost, 0.4,
                      label="attribution patching (estimated)")
        axes[key].set_xticks(where, labels)
        axes[key].axhline(0, color="black", linewidth=0.8)
    plot_circuit(axes, steps, history, circuit, attributions)
    axes["heads"].set(xlabel="head whose output is patched (layer.head)",
                      ylabel="share of the metric brought back", title="patching each head")
    axes["stream"].set(xlabel="position of the stream layer 1 reads (first copy, then second)",
                       title="patching the residual stream, one position at a time")
    return demo_tools.save_chart(figure, path, axes["loss"], axes["induction"], axes["heads"],
                                 axes["stream"])


def plot_circuit(axes, steps, history, circuit, attributions):
    """The composition and copying over training, and the attribution after it."""
    if circuit["pairs"] is not None:
        for index, kind in enumerate("QKV"):
            axes["composition"].plot(steps, circuit["pairs"][:, index], color=f"C{index}",
                                     label=f"{kind}-composition")
            if circuit["others"] is not None:
                axes["composition"].plot(steps, circuit["others"][:, index], color=f"C{index}",
                                         linestyle=":")
    axes["composition"].axhline(1 / np.sqrt(WIDTH), color="gray", linestyle="--",
                                label=f"1/sqrt({WIDTH}), random directions")
    highest = max(np.max(line.get_ydata()) for line in axes["composition"].get_lines())
    axes["composition"].set(xlabel="training step", ylabel="composition score",
                            ylim=(0, 1.6 * highest),      # room for the legend above the lines
                            title="induction x previous-token heads (dotted: other pairs)")
    axes["composition"].legend(fontsize=7, ncol=2, loc="upper left")
    axes["composition"].grid(alpha=0.3)
    for layer in range(LAYERS):
        for head in range(HEADS):
            axes["copying"].plot(steps, history["copying"][:, layer, head], color=f"C{head}",
                                 linestyle="--" if layer == 0 else "-",
                                 label=f"head {head_name(layer, head)}")
    axes["copying"].axhline(1 / VOCAB, color="gray", linestyle=":")
    axes["copying"].set(xlabel="training step", ylim=(0, 1),
                        title="OV circuit: share of tokens it copies (dashed: layer 0)")
    pieces = sorted(attributions, key=lambda piece: -attributions[piece])
    axes["attribution"].barh(np.arange(len(pieces)), [attributions[p] for p in pieces])
    axes["attribution"].set_yticks(np.arange(len(pieces)), pieces, fontsize=7)
    axes["attribution"].invert_yaxis()
    axes["attribution"].axvline(0, color="black", linewidth=0.8)
    axes["attribution"].set(xlabel="mean direct logit attribution to the right token",
                            title="who pushes the right token (repeated half)")


def plot_attention(plt, ids, weights, induction, previous, path):
    figure, axes = plt.subplots(LAYERS, HEADS, figsize=(3 * HEADS, 3.1 * LAYERS))
    for layer in range(LAYERS):
        for head in range(HEADS):
            panel = axes[layer, head]
            panel.imshow(weights[layer][0, head], cmap="Blues", vmin=0, vmax=1)
            panel.set_title(f"head {head_name(layer, head)}: induction "
                            f"{induction[layer, head]:.2f}, previous "
                            f"{previous[layer, head]:.2f}", fontsize=8)
            panel.set_xticks([])
            panel.set_yticks([])
    figure.suptitle(f"attention after training on one held-out sequence ({len(ids) // 2} tokens "
                    f"written twice): rows are queries, columns keys", fontsize=9)
    figure.tight_layout()
    return demo_tools.save_figure(figure, path, dpi=90)


PAGE_ENTRY = """\
15. [`15_induction_heads.py`](../demos/15_induction_heads.py) — induction heads form: a
    {layers}-layer attention-only transformer ({heads} heads a layer, width {width}, RoPE) trained
    by tinyattn for {steps:,} steps on spans of {shortest_span} to {longest_span} random tokens
    (out of {vocab}) written twice. The loss on the repeated half falls from
    {repeated_loss_start:.2f} (a guess scores {guess_loss:.2f}) to {repeated_loss_final:.2f},
    while the first half (random) ends at {first_loss_final:.2f}: 10% of the fall is made by
    step {fall_begins}, half by step {phase_change_step}, 90% by step {fall_ends}. The first
    induction head above {threshold} appears in the second layer at step
    {induction_step}, the first previous-token head above {threshold} in the first layer at step
    {previous_token_step}: Olsson et al. 2022's phase change (held-out measures every {eval_every}
    steps). After training: induction heads
    {induction_heads_shown}, previous-token heads {previous_token_heads_shown} (layer.head,
    counted from 0); no first-layer head scores above {best_first_layer_induction_score:.2f} as
    an induction head (one that does not look scores {chance_induction_score:.2f}).

    Read from the weights alone (`tinyattn/circuits.py`): the K-composition of the induction
    heads with the previous-token heads rises from {k_composition_start:.3f} (weights in random
    directions score 1/sqrt({width}) = {random_composition:.3f}) to {k_composition_end:.3f}, half
    its rise made by step {k_composition_rise_step} (the loss's half fall: step
    {phase_change_step}), while their Q- and V-composition end at {q_composition_end:.3f} and
    {v_composition_end:.3f}, and every other pair's K-composition at
    {k_composition_others_end:.3f}. The induction heads' OV circuits copy: the share of the
    {vocab} tokens whose own logit each pushes most is {copying_induction_heads} (chance
    {chance_copying:.1%}; no head before training above {copying_before_training_most:.0%}), a
    share that made half its rise by step {copying_rise_step}; a first-layer head's reached
    {copying_first_layer_most_ever:.0%} during training, and ends at most at
    {copying_first_layer_most:.0%}. Direct logit attribution to the right token on the repeated
    half (the final LayerNorm's scale held at the run's) names the induction heads:
    {attribution_top} (layer.head); no other piece of the residual stream adds more than
    {attribution_largest_other:.3f}.

    Zero-ablated through `model.hooks`, the induction heads raise the repeated-half loss from
    {repeated_loss_final:.2f} to {ablated_induction_loss:.2f}, the previous-token heads to
    {ablated_previous_token_loss:.2f}, both to {ablated_both_loss:.2f}; {ablated_others}.
    Patching one head's output from a clean run into one whose first copy is corrupted brings
    back this share of the repeated half's lost log-probability, measured by activation patching
    and estimated by attribution patching (one backward pass for every head): induction heads
    {patching_induction_heads}; previous-token heads
    {patching_previous_token_heads}{previous_token_note}. Patching the stream the second layer
    reads, at one position of the first copy, brings back {stream_restored:.1%} on average;
    {stream_verdict}.

    ![losses, scores, composition, copying, attribution, patching](pictures/induction_heads.png)

    ![every head's attention after training](pictures/induction_heads_attention.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
