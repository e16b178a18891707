"""Demo 9: cross-attention draws the alignment between a sentence and its translation.

What it shows: an encoder-decoder transformer (`nn.EncoderDecoder`, 2 layers of 2 heads) learns to
translate a toy language pair whose word order differs, so that the alignment (which source word
each target word translates) crosses over itself instead of running down the diagonal; then where
each attention head of its decoder looks.

    python demos/09_cross_attention.py [output folder] [--quick]

`--quick` trains for 40 steps, enough to learn part of the task. Its full run's time, as
`dev/regenerate.py` measured it, ends its entry on docs/demos.md.

The language pair. English-like sources, `[adjective] noun verb [adjective] noun`, each adjective
there or not; targets in a made-up language with French-looking words, where every adjective
follows its noun and the verb comes last:

    big cat sees small dog      ->   chat grand chien petit voit
    0   1   2    3     4             1    0     4     3     2       (the source word translated)

Self-attention and cross-attention are the same layer; they differ in their inputs. The decoder's
self-attention takes queries, keys and values from the target written so far, under the causal
mask; its cross-attention takes queries from the target and keys and values from the encoder's
output, with no mask but the source's padding. So only the cross-attention can show where in the
source each target word comes from: a head that puts its largest weight on the source word being
translated, for most target words, has learned the alignment, crossings included. The
self-attention has only the target written so far to look at; the table shows where its heads
look instead (the start token, the word itself, the one before). Training feeds the reference
target behind a start token (teacher forcing); the held-out sentences, never trained on, are
translated greedily, one word at a time from the start token.
"""
import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn

# %% [markdown]
# The language pair: the dictionary, the two word orders, and sentences as batches of ids.

# %%
SEED = 0
ADJECTIVES = {"big": "grand", "small": "petit", "red": "rouge", "old": "vieux", "happy": "content",
              "quiet": "calme"}
NOUNS = {"cat": "chat", "dog": "chien", "bird": "oiseau", "fish": "poisson", "horse": "cheval",
         "mouse": "souris", "frog": "grenouille", "bear": "ours"}
VERBS = {"sees": "voit", "likes": "aime", "chases": "chasse", "follows": "suit", "hears": "entend",
         "bites": "mord"}
DICTIONARY = {**ADJECTIVES, **NOUNS, **VERBS}
SOURCE_ORDER = ("adjective 1", "noun 1", "verb", "adjective 2", "noun 2")   # big cat sees small dog
TARGET_ORDER = ("noun 1", "adjective 1", "noun 2", "adjective 2", "verb")   # chat grand chien ...
PAD, START, END = "<pad>", "<s>", "</s>"
SOURCE_WORDS = [PAD, *DICTIONARY]
TARGET_WORDS = [PAD, START, END, *DICTIONARY.values()]
SOURCE_ID = {word: i for i, word in enumerate(SOURCE_WORDS)}
TARGET_ID = {word: i for i, word in enumerate(TARGET_WORDS)}
IGNORE = -100                                  # F.cross_entropy's ignore_index: target padding
MAX_SOURCE, MAX_TARGET = len(SOURCE_ORDER), len(TARGET_ORDER) + 1           # 5 words; 5 and </s>


def sentence_pair(words):
    """{slot: English word, or None for a missing adjective} -> (source words, target words,
    alignment): alignment[i] is the position in the source of the word target word i translates."""
    source_slots = [slot for slot in SOURCE_ORDER if words[slot]]
    target_slots = [slot for slot in TARGET_ORDER if words[slot]]
    source = [words[slot] for slot in source_slots]
    target = [DICTIONARY[words[slot]] for slot in target_slots]
    return source, target, [source_slots.index(slot) for slot in target_slots]


def random_words(random):
    """One sentence's words: each adjective present with probability 1/2."""
    def maybe_adjective():
        return str(random.choice(list(ADJECTIVES))) if random.random() < 0.5 else None
    return {"adjective 1": maybe_adjective(), "noun 1": str(random.choice(list(NOUNS))),
            "verb": str(random.choice(list(VERBS))), "adjective 2": maybe_adjective(),
            "noun 2": str(random.choice(list(NOUNS)))}


def encode(pairs):
    """A batch from (source, target, alignment) triples: source ids (B, 5) and their mask, the
    decoder's input `<s> target` (B, 6), what it must predict `target </s>` (B, 6), and the
    alignment (B, 6), -1 where there is none (the end token, padding)."""
    size = len(pairs)
    src = np.zeros((size, MAX_SOURCE), dtype=np.int64)
    tgt_in = np.zeros((size, MAX_TARGET), dtype=np.int64)
    tgt_out = np.full((size, MAX_TARGET), IGNORE)
    alignment = np.full((size, MAX_TARGET), -1)
    for row, (source, target, aligned) in enumerate(pairs):
        src[row, :len(source)] = [SOURCE_ID[word] for word in source]
        ids = [TARGET_ID[word] for word in target]
        tgt_in[row, :len(ids) + 1] = [TARGET_ID[START], *ids]
        tgt_out[row, :len(ids) + 1] = [*ids, TARGET_ID[END]]
        alignment[row, :len(aligned)] = aligned
    return {"src": src, "src_mask": src != SOURCE_ID[PAD], "tgt_in": tgt_in, "tgt_out": tgt_out,
            "alignment": alignment}


def held_out_set(random, size):
    """`size` different sentences, never trained on, as a batch; and the set of their words."""
    chosen = {}
    while len(chosen) < size:
        words = random_words(random)
        chosen[tuple(words.values())] = words
    return encode([sentence_pair(words) for words in chosen.values()]), set(chosen)


def training_batches(held_out_keys):
    """make_batch(random, size) for demo_tools.train: random sentences, held-out ones skipped."""
    def make_batch(random, size):
        pairs = []
        while len(pairs) < size:
            words = random_words(random)
            if tuple(words.values()) not in held_out_keys:
                pairs.append(sentence_pair(words))
        return encode(pairs)
    return make_batch


# %% [markdown]
# Training and translating: the loss is the cross-entropy of the next target word under teacher
# forcing; held-out sentences are translated greedily.

# %%
EMBED_DIM, NUM_HEADS, NUM_LAYERS = 32, 2, 2
BATCH, HELD_OUT, LEARNING_RATE = 64, 500, 3e-3
FULL = {"steps": 500, "eval_every": 50, "print_every": 100}
QUICK = {"steps": 40, "eval_every": 20, "print_every": 20}


def translation_score(model, batch):
    """(cross-entropy of the next target word, teacher-forced, as a tensor; the share of target
    words the model ranks first)."""
    logits = model(batch["src"], batch["tgt_in"], batch["src_mask"])    # (B, T, vocab)
    scored = batch["tgt_out"] != IGNORE
    accuracy = float((logits.data.argmax(axis=-1) == batch["tgt_out"])[scored].mean())
    loss = F.cross_entropy(logits.reshape(-1, len(TARGET_WORDS)), batch["tgt_out"].reshape(-1))
    return loss, accuracy


def greedy_accuracy(model, batch):
    """Greedy translation from the start token: (share of sentences right to the end token, share
    of reference words, end token included, written right at their position), and the output."""
    written = model.greedy_decode(batch["src"], MAX_TARGET, TARGET_ID[START],
                                  batch["src_mask"])[:, 1:]             # (B, 6)
    scored = batch["tgt_out"] != IGNORE
    right = (written == batch["tgt_out"]) | ~scored
    return float(right.all(axis=1).mean()), float(right[scored].mean()), written


# %% [markdown]
# Where the heads look: for each target word, where each head's largest weight falls; and what the
# masks promise, measured on the weights.

# %%
HEADS = [f"L{layer + 1}H{head + 1}" for layer in range(NUM_LAYERS) for head in range(NUM_HEADS)]
SELF_KINDS = ("start_token", "itself", "previous", "elsewhere")   # where self-attention rows look


def where_heads_look(weights, alignment):
    """For each head "L1H1", ..., the share of the target words whose cross-attention puts its
    largest weight on the source word they translate; and of those whose self-attention puts it on
    the start token, on the word itself, on the one before, or elsewhere (the first that fits)."""
    aligned = alignment >= 0                                            # (B, T)
    queries = np.arange(alignment.shape[1])                             # (T,)
    cross_attention, self_attention = {}, {}
    for layer, (self_weights, cross_weights) in enumerate(zip(weights["self"], weights["cross"])):
        for head in range(NUM_HEADS):
            name = f"L{layer + 1}H{head + 1}"
            top_source = cross_weights[:, head].argmax(axis=-1)       # (B, T)
            cross_attention[name] = float((top_source == alignment)[aligned].mean())
            top_target = self_weights[:, head].argmax(axis=-1)        # (B, T)
            self_attention[name] = demo_tools.first_fit_shares(
                {"start_token": top_target == 0, "itself": top_target == queries,
                 "previous": top_target == queries - 1}, counted=aligned, rest="elsewhere")
    return cross_attention, self_attention


def mask_checks(weights, src_mask):
    """What the masks promise, measured on the weights: the largest self-attention weight on a
    later target position (causal mask), the largest cross-attention weight on source padding,
    and the largest distance of a cross-attention row's sum from 1."""
    padding = ~src_mask[:, None, None, :]                              # (B, 1, 1, S)
    return {"largest_weight_on_a_later_word": max(float(np.triu(layer, k=1).max())
                                                  for layer in weights["self"]),
            "largest_weight_on_padding": max(float(np.where(padding, layer, 0.0).max())
                                             for layer in weights["cross"]),
            "largest_row_sum_error": max(float(np.abs(layer.sum(axis=-1) - 1).max())
                                         for layer in weights["cross"])}


# %% [markdown]
# `main` trains the model, translates the held-out sentences, reads the attention weights, prints
# the tables, draws the picture and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    held_out, held_out_keys = held_out_set(np.random.default_rng(SEED + 1), HELD_OUT)
    ta.manual_seed(SEED)
    model = nn.EncoderDecoder(len(SOURCE_WORDS), len(TARGET_WORDS), EMBED_DIM, NUM_HEADS,
                              NUM_LAYERS, max_len=MAX_TARGET + 1, dtype=np.float32)
    print(f"Toy translation, {len(SOURCE_WORDS) - 1} source and {len(TARGET_WORDS) - 3} target "
          f"words: an encoder-decoder ({NUM_LAYERS} + {NUM_LAYERS} layers x {NUM_HEADS} heads, "
          f"embed_dim {EMBED_DIM}), Adam (lr {LEARNING_RATE}), batches of {BATCH}, "
          f"{settings['steps']} steps; {HELD_OUT} held-out sentences.\n")
    curves = demo_tools.train(model, training_batches(held_out_keys), translation_score, held_out,
                              "translation", LEARNING_RATE, BATCH, SEED, **settings)
    exact, per_word, written = greedy_accuracy(model, held_out)
    with ta.no_grad():
        _, weights = model(held_out["src"], held_out["tgt_in"], held_out["src_mask"],
                           return_weights=True)
    weights = {kind: [layer.data for layer in layers] for kind, layers in weights.items()}
    cross_attention, self_attention = where_heads_look(weights, held_out["alignment"])
    checks = mask_checks(weights, held_out["src_mask"])
    numbers = {"held_out": HELD_OUT, "steps": settings["steps"], "exact_match": exact,
               "per_word": per_word, "teacher_forced_per_word": curves["held_out_accuracy"][-1],
               "held_out_loss_start": curves["held_out_loss"][0],
               "held_out_loss": curves["held_out_loss"][-1], **checks,
               **{f"cross_{head}": share for head, share in cross_attention.items()},
               **{f"self_{head}_{kind}": shares[kind] for head, shares in self_attention.items()
                  for kind in SELF_KINDS}}
    example = int(np.argmax(held_out["src_mask"].all(axis=1)))     # one with both adjectives
    print_results(numbers, held_out, example, written[example], weights)
    demo_tools.print_pictures(plot(held_out, example, weights, cross_attention,
                                   args.output / "cross_attention.png"))
    return numbers


# %% [markdown]
# Plumbing, kept out of the experiment's way: the tables, the picture, and the entry on docs/demos.md for
# this demo, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
PAGE_ENTRY = """\
9. [`09_cross_attention.py`](../demos/09_cross_attention.py) — an encoder-decoder learns a toy
   translation whose word order differs (adjectives after nouns, the verb last), so the alignment
   crosses itself. Greedy translation of {held_out} held-out sentences gets {exact_match:.1%} of
   them right to the end token ({per_word:.1%} of the words). The second layer's cross-attention
   heads put their largest weight on the source word being translated for {cross_L2H1:.0%} and
   {cross_L2H2:.0%} of the target words, the first layer's for {cross_L1H1:.0%} and
   {cross_L1H2:.0%}. The heatmaps show each decoder layer's causal self-attention next to its
   cross-attention, on one held-out sentence.

   ![decoder self- and cross-attention per layer and head](pictures/cross_attention.png)"""


def print_results(numbers, batch, example, written, weights):
    demo_tools.print_table(["sentences right", "words right", "teacher-forced words right"],
                           [[f"{numbers['exact_match']:.1%}", f"{numbers['per_word']:.1%}",
                             f"{numbers['teacher_forced_per_word']:.1%}"]],
                           "Held-out accuracy, greedy translation:")
    source = [SOURCE_WORDS[i] for i in batch["src"][example] if i != SOURCE_ID[PAD]]
    rows = []          # each target word, the source word it translates, where each head looks
    for position, (target_id, aligned) in enumerate(zip(batch["tgt_out"][example],
                                                        batch["alignment"][example])):
        if target_id == IGNORE:
            break
        row = [TARGET_WORDS[target_id], TARGET_WORDS[written[position]],
               source[aligned] if aligned >= 0 else "-"]
        for layer in weights["cross"]:
            for head_weights in layer[example]:                       # (T, S)
                top = int(head_weights[position].argmax())
                row.append(source[top] + (" *" if top == aligned else "  "))
        rows.append(row)
    demo_tools.print_table(["target word", "wrote", "translates"]
                           + [f"{head} looks at" for head in HEADS], rows,
                           f"One held-out sentence: {' '.join(source)}")
    demo_tools.print_table(
        ["head", "cross: on the aligned word"]
        + [f"self: {kind.replace('_', ' ')}" for kind in SELF_KINDS],
        [[head, f"{numbers[f'cross_{head}']:.0%}"]
         + [f"{numbers[f'self_{head}_{kind}']:.0%}" for kind in SELF_KINDS] for head in HEADS],
        f"Over the {HELD_OUT} held-out sentences (teacher-forced), where each head's largest "
        "weight falls, per target word:")
    print("\nThe masks, checked on these weights: the largest self-attention weight on a later "
          f"word {numbers['largest_weight_on_a_later_word']:.1e}, the largest cross-attention\n"
          f"weight on padding {numbers['largest_weight_on_padding']:.1e}, the largest distance of "
          f"a cross-attention row's sum from 1 {numbers['largest_row_sum_error']:.1e}.")


def plot(batch, example, weights, cross_attention, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    length = int((batch["tgt_out"][example] != IGNORE).sum())          # target words and </s>
    source = [SOURCE_WORDS[i] for i in batch["src"][example] if i != SOURCE_ID[PAD]]
    inputs = [TARGET_WORDS[i] for i in batch["tgt_in"][example, :length]]
    writing = ["-> " + TARGET_WORDS[i] for i in batch["tgt_out"][example, :length]]
    aligned = [(s, t) for t, s in enumerate(batch["alignment"][example, :length]) if s >= 0]
    figure, grid = plt.subplots(NUM_LAYERS, 2 * NUM_HEADS, squeeze=False, layout="constrained",
                                figsize=(4.2 * 2 * NUM_HEADS, 3.9 * NUM_LAYERS))
    for layer in range(NUM_LAYERS):
        for head in range(NUM_HEADS):
            panels = {"self": (grid[layer, head], inputs, "Greens", "target input", "(causal)"),
                      "cross": (grid[layer, NUM_HEADS + head], source, "Blues", "source word",
                                f"(largest on the aligned word: "
                                f"{cross_attention[f'L{layer + 1}H{head + 1}']:.0%} held out)")}
            for kind, (axes, keys, colors, key_name, note) in panels.items():
                image = axes.imshow(weights[kind][layer][example, head, :length, :len(keys)],
                                    cmap=colors, vmin=0, vmax=1)
                axes.set_xticks(range(len(keys)), keys, rotation=45)
                axes.set_yticks(range(length), writing)
                axes.set(xlabel=f"key: {key_name}",
                         title=f"layer {layer + 1}, head {head + 1}: {kind}-attention\n{note}")
            axes.scatter(*zip(*aligned), s=80, facecolors="none", edgecolors="tab:red")
    figure.colorbar(image, ax=grid, shrink=0.6, label="attention weight")
    figure.suptitle("Decoder attention on one held-out sentence (rows: the word being written; "
                    "red circles: the source word it translates)")
    return demo_tools.save_figure(figure, path, dpi=110)


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
