"""Demo 26: a translator trained in the engine, English number words into German ones.

What it shows: chapter 6's T5 (nn/t5.py) learning a real mapping from scratch. num2words writes
every number from 0 to 9,999 in English and in German; German reorders the last two words
("three hundred and eighty-seven" is "dreihundertsiebenundachtzig", three-hundred-seven-and-
eighty) and has irregular forms ("sieben" but "siebzig", "eins" but "einundzwanzig"). The English
is cut into words (and the hyphens and commas), the German into characters; one table embeds both,
as T5's does. A small T5 is trained with teacher forcing and AdamW on the numbers whose German is
at most 30 characters long, a random tenth of them held out; then:

1. exact-match accuracy on the held-out numbers, with greedy search and with beam search of 4
   (tinyattn/beam_search.py, what transformers' `generate` does);
2. the cross-attention of the last decoder block, averaged over its heads, for a held-out number
   where the languages reorder: which English word each German character reads; drawn as a
   heatmap when matplotlib is installed;
3. positions that extrapolate or not: the same model with T5's relative position buckets replaced
   by the sinusoids of "Attention Is All You Need" added to the embeddings (Marian's table,
   nothing learned: the two differ only by the buckets' table, 2 x 16 x 4 numbers), trained alike,
   and both scored on numbers whose German is 31 to 34 characters long, longer than any seen.

    python demos/26_translation.py [output folder] [--quick]

Summarising with t5-small is not in this demo: T5's tokenizer is SentencePiece's Unigram model,
which tinyattn does not implement; the demo says so in one line.

`--quick` trains for a few steps on a few numbers (what the tests run). The figures of the full
run are on docs/demos.md, filled in by `dev/regenerate.py 26` from what `main` returns, with its
run time; BLAS on one thread.
"""
import re
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.nn.bart import SinusoidalPositions
from tinyattn.nn.t5 import T5, T5Cache, T5Settings

try:
    from num2words import num2words
except ImportError:
    num2words = None
MISSING = "num2words is not installed, so there are no number words to translate: " \
          "`pip install num2words` (or the demos extra: `pip install -e .[demos]`)"

# %% [markdown]
# The data: every number 0 ... 9,999 in both languages. The English as words (hyphens and commas
# are tokens of their own), the German as characters; the vocabulary is pad (also the decoder's
# first input, as in T5), end-of-sequence, the English words, then the German characters.

# %%
SEED = 0
NUMBERS = 10_000
SHORT = 30                      # training and held-out numbers: German of at most 30 characters
LONG = (31, 34)                 # lengths never seen: the positions' test
PAD, EOS = 0, 1


def english_words(n):
    return re.findall(r"[a-z]+|[-,]", num2words(n))


def german(n):
    return num2words(n, lang="de")


def vocabulary(numbers):
    """The tokens: pad, end, the English words, the German characters marked with "#" (so that
    German's "s" is not English's: sorted, each once)."""
    words = sorted({word for n in numbers for word in english_words(n)})
    characters = sorted({character for n in numbers for character in german(n)})
    return ["<pad>", "</s>", *words, *("#" + character for character in characters)]


def encode(numbers, index):
    """(source ids (B, S), source mask (B, S), target ids (B, T)): the English words and the
    German characters of each number, then end-of-sequence, padded with PAD."""
    sources = [[index[word] for word in english_words(n)] + [EOS] for n in numbers]
    targets = [[index["#" + character] for character in german(n)] + [EOS] for n in numbers]
    return padded(sources), padded(sources) != PAD, padded(targets)


def padded(rows):
    out = np.full((len(rows), max(map(len, rows))), PAD, dtype=np.int64)
    for i, row in enumerate(rows):
        out[i, :len(row)] = row
    return out


def split(random):
    """(training numbers, held-out numbers, longer numbers): the numbers whose German is at most
    SHORT characters, a tenth of them held out at random; those of LONG characters."""
    lengths = np.array([len(german(n)) for n in range(NUMBERS)])
    short = np.flatnonzero(lengths <= SHORT)
    held_out = np.sort(random.choice(short, len(short) // 10, replace=False))
    training = np.setdiff1d(short, held_out)
    longer = np.flatnonzero((lengths >= LONG[0]) & (lengths <= LONG[1]))
    return training, held_out, longer


# %% [markdown]
# The models: T5 with small settings (T5Settings names t5-small's sizes: d_model 512, 8 heads,
# 6 + 6 blocks), and the same model with sinusoidal positions. SinusoidalT5 overrides exactly
# where positions act: the embeddings get the sinusoids of their positions (the decoder's from
# where its cache ends), and no attention gets a bias.

# %%
SIZES = dict(d_model=64, d_kv=16, d_ff=256, num_layers=2, num_decoder_layers=2, num_heads=4,
             relative_attention_num_buckets=16, relative_attention_max_distance=32)
MAX_POSITIONS = 64


def t5_settings(vocab_size):
    return T5Settings(vocab_size=vocab_size, **SIZES, decoder_start_token_id=PAD,
                      pad_token_id=PAD, eos_token_id=EOS)


class SinusoidalT5(T5):
    """T5 whose positions are the 2017 paper's sinusoids added to the token embeddings (Marian's
    table, SinusoidalPositions) instead of the relative position buckets; all else is T5's."""

    def __init__(self, settings, dtype=None):
        super().__init__(settings, dtype)
        del self.encoder_positions, self.decoder_positions
        self.positions = SinusoidalPositions(MAX_POSITIONS, settings.d_model, dtype)

    def start(self, input_ids, attention_mask=None):
        ids = np.asarray(input_ids)                                     # (B, S)
        allowed = None if attention_mask is None else \
            (np.asarray(attention_mask) != 0)[:, None, None, :]         # (B, 1, 1, S)
        x = self.positions(self.shared(ids), 0)                         # (B, S, E)
        for block in self.encoder:
            x = block(x, None, allowed)                                 # (B, S, E)
        encoded = self.encoder_norm(x)                                  # (B, S, E)
        cross = [block.cross_attn.keys_values(encoded) for block in self.decoder]  # (B, H, S, D)
        return T5Cache(cross, allowed)

    def decode(self, decoder_input_ids, cache):
        ids = np.asarray(decoder_input_ids)                             # (B, T)
        T, start = ids.shape[1], cache.length
        x = self.positions(self.shared(ids), start)                     # (B, T, E)
        causal = causal_mask(T, start + T, offset=start)                # (T, start + T)
        for block, layer, (keys, values) in zip(self.decoder, cache.layers, cache.cross):
            x = block(x, None, causal, layer, keys, values, cache.source_allowed)   # (B, T, E)
        cache.length += T
        x = self.decoder_norm(x)                                        # (B, T, E)
        if self.settings.scale_decoder_outputs:
            x = x * self.settings.d_model ** -0.5                       # a Python float: no upcast
        return self.head(x)                                             # (B, T, vocab)


MODELS = {"relative buckets (T5)": T5, "sinusoids (2017, Marian)": SinusoidalT5}


def build(kind, vocab_size):
    ta.manual_seed(SEED)
    return MODELS[kind](t5_settings(vocab_size), dtype=np.float32)


# %% [markdown]
# Training: teacher forcing. The decoder reads the German shifted right by one (pad first) and
# predicts every next character at once; the loss is the mean cross-entropy over the characters
# and the end, padding left out.

# %%
ADAMW = dict(lr=3e-3, weight_decay=0.01)
BATCH = 64
FULL = dict(steps=600, warmup=50, evaluated=None, print_every=100)
QUICK = dict(steps=20, warmup=5, evaluated=32, print_every=10)


def loss_of(model, sources, mask, targets):
    decoder_inputs = np.concatenate([np.full((len(targets), 1), PAD), targets[:, :-1]], axis=1)
    logits = model(sources, decoder_inputs, mask)                       # (B, T, vocab)
    labels = np.where(targets == PAD, -100, targets)                    # padding: no answer
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), -100)


def train(model, label, numbers, index, steps, warmup, print_every):
    """AdamW with a warm-up and a cosine decay on `steps` random batches of `numbers`; returns
    the batch losses."""
    optimizer = ta.optim.AdamW(model.parameters(), **ADAMW)
    random = np.random.default_rng(SEED)
    losses, start = [], time.perf_counter()
    for step in range(steps):
        optimizer.lr = ta.optim.warmup_cosine_lr(step, ADAMW["lr"], warmup, steps,
                                                 ADAMW["lr"] / 10)
        loss = loss_of(model, *encode(random.choice(numbers, BATCH), index))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % print_every == 0 or step + 1 == steps:
            print(f"  {label:<25} step {step + 1:>5}/{steps}   batch loss {loss.item():6.3f}   "
                  f"{time.perf_counter() - start:5.1f} s", flush=True)
    return losses


# %% [markdown]
# Scoring: the model writes the German with greedy search or beam search (`model.generate`, the
# encoder run once per number), and a number counts only when every character is right.

# %%
def translations(model, numbers, index, tokens, num_beams):
    """The German the model writes for each number, cut at its end-of-sequence token."""
    written = []
    for first in range(0, len(numbers), 128):
        sources, mask, targets = encode(numbers[first:first + 128], index)
        ids = model.generate(sources, targets.shape[1] + 2, num_beams=num_beams,
                             attention_mask=mask)
        for row in ids[:, 1:]:
            end = np.flatnonzero(row == EOS)
            written.append("".join(tokens[i][1:] for i in row[:end[0] if len(end) else None]
                                   if i != PAD))
    return written


def accuracy(model, numbers, index, tokens, num_beams):
    written = translations(model, numbers, index, tokens, num_beams)
    return float(np.mean([text == german(n) for text, n in zip(written, numbers)]))


# %% [markdown]
# The alignment: with the model's own translation as the decoder's input, `run_with_cache` keeps
# the cross-attention weights of the last decoder block (B, H, T, S); averaged over the heads,
# row t says which English tokens German character t read.

# %%
def reordering_number(held_out):
    """The first held-out number from 100 to 999 whose last two digits are 21 ... 99, not a
    multiple of ten: German says the units before the tens there."""
    return int(next(n for n in held_out if 100 <= n < 1000 and n % 100 > 20 and n % 10))


def alignment(model, n, index, tokens):
    """(English tokens, German characters written, weights (characters + end, English + end))."""
    sources, mask, _ = encode([n], index)
    written = translations(model, [n], index, tokens, 1)[0]
    target = [index["#" + character] for character in written] + [EOS]
    decoder_inputs = np.array([[PAD] + target[:-1]])
    name = f"decoder.{len(model.decoder) - 1}.cross_attn.weights"
    with ta.no_grad():
        _, cache = model.run_with_cache(sources, decoder_inputs, mask, names=[name])
    return english_words(n), written, cache[name][0].mean(axis=0)      # (T, S)


def read_words(english, written, weights):
    """The German cut where the English word each character reads most changes: [(German piece,
    English word)], in the German order."""
    words = [english[i] if i < len(english) else "</s>" for i in weights.argmax(axis=1)]
    pieces = []
    for character, word in zip(written, words):
        if pieces and pieces[-1][1] == word:
            pieces[-1] = (pieces[-1][0] + character, word)
        else:
            pieces.append((character, word))
    return pieces


# %% [markdown]
# `main` runs the parts in order and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    if num2words is None:
        print(MISSING)
        return {"missing": "num2words"}
    settings = QUICK if args.quick else FULL
    tokens = vocabulary(range(NUMBERS))
    index = {token: i for i, token in enumerate(tokens)}
    training, held_out, longer = split(np.random.default_rng(SEED))
    evaluated = settings["evaluated"]
    held_out_scored, longer_scored = held_out[:evaluated], longer[:evaluated]
    print(f"The data: the numbers 0 ... {NUMBERS - 1:,} in English words and German characters "
          f"(num2words); {len(tokens)} tokens. Training on {len(training):,} numbers whose German "
          f"is at most {SHORT} characters, {len(held_out):,} held out; {len(longer):,} numbers "
          f"of {LONG[0]} to {LONG[1]} characters for the positions' test")
    print("(Summarising with t5-small is not part of this demo: T5's tokenizer is SentencePiece's "
          "Unigram model, which tinyattn does not implement.)")
    numbers = {"numbers": NUMBERS, "short": SHORT, "long_from": LONG[0], "long_to": LONG[1],
               "training_numbers": len(training), "held_out_numbers": len(held_out),
               "held_out_scored": len(held_out_scored), "longer_scored": len(longer_scored),
               "vocabulary_size": len(tokens), "steps": settings["steps"], "batch": BATCH}
    models = {}
    for key, kind in zip(("relative", "sinusoidal"), MODELS):
        model = models[key] = build(kind, len(tokens))
        print(f"\nTraining T5 with {kind}: "
              f"{sum(p.size for p in model.parameters()):,} parameters, {settings['steps']} "
              f"steps of {BATCH} numbers", flush=True)
        processor_start = time.process_time()
        losses = train(model, kind, training, index, settings["steps"], settings["warmup"],
                       settings["print_every"])
        model.eval()
        numbers[f"{key}_parameters"] = sum(p.size for p in model.parameters())
        numbers[f"{key}_first_loss"], numbers[f"{key}_last_loss"] = losses[0], losses[-1]
        numbers[f"{key}_training_seconds"] = time.process_time() - processor_start
        for name, beams in (("greedy", 1), ("beam", 4)):
            numbers[f"{key}_{name}"] = accuracy(model, held_out_scored, index, tokens, beams)
        numbers[f"{key}_longer"] = accuracy(model, longer_scored, index, tokens, 1)
        print(f"  held out, exact match: greedy {numbers[key + '_greedy']:.1%}, beam of 4 "
              f"{numbers[key + '_beam']:.1%}; {LONG[0]} to {LONG[1]} characters (never seen), "
              f"greedy: {numbers[key + '_longer']:.1%}", flush=True)

    n = numbers["aligned_number"] = reordering_number(held_out)
    english, written, weights = alignment(models["relative"], n, index, tokens)
    pieces = read_words(english, written, weights)
    numbers["aligned_english"], numbers["aligned_german"] = " ".join(english), written
    numbers["aligned_pieces"] = " ".join(f"{piece}<-{word}" for piece, word in pieces)
    print(f"\nThe cross-attention of the last decoder block (heads averaged) for {n} (held out): "
          f"{' '.join(english)!r} -> {written!r} (right: {german(n)!r}); each German piece and "
          f"the English word its characters read most:\n  {numbers['aligned_pieces']}")
    demo_tools.print_table(
        ["positions", "greedy", "beam of 4", f"{LONG[0]}-{LONG[1]} characters"],
        [[kind, f"{numbers[key + '_greedy']:.1%}", f"{numbers[key + '_beam']:.1%}",
          f"{numbers[key + '_longer']:.1%}"] for key, kind in zip(models, MODELS)],
        title=f"Exact-match accuracy: {len(held_out_scored):,} held-out numbers (at most {SHORT} "
              f"characters, as trained) and {len(longer_scored):,} longer ones (greedy)")
    demo_tools.print_pictures(plot(english, written, weights, n, args.output))
    return numbers


# %% [markdown]
# Plumbing: the heatmap, and the entry on docs/demos.md.

# %%
def plot(english, written, weights, n, folder):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(6, 7), layout="constrained")
    axes.imshow(weights, cmap="Blues", aspect="auto", vmin=0)
    axes.set_xticks(range(len(english) + 1), [*english, "</s>"], rotation=45, ha="right")
    axes.set_yticks(range(len(written) + 1), [*written, "</s>"])
    axes.set(xlabel="English (encoder)", ylabel="German written (decoder)",
             title=f"{n}: cross-attention of the last decoder block, heads averaged")
    return demo_tools.save_figure(figure, folder / "translation_alignment.png", dpi=110)


PAGE_ENTRY = """\
26. [`26_translation.py`](../demos/26_translation.py) — a small T5 ({relative_parameters:,}
    parameters: 2 + 2 blocks of 4 heads, width 64) trained in the engine with AdamW for {steps:,}
    steps of {batch} numbers to write English number words (num2words) in German, one character
    at a time, on the {training_numbers:,} numbers below {numbers:,} whose German has at most
    {short} characters. On {held_out_scored:,} held-out numbers, exact match {relative_greedy:.1%}
    with greedy search and {relative_beam:.1%} with beam search of 4. For {aligned_number}
    ("{aligned_english}" -> "{aligned_german}"), the pieces of the German and the English word
    each reads most: `{aligned_pieces}`. Positions: on {longer_scored:,} numbers of {long_from} to
    {long_to} characters, longer than any it trained on, T5's relative buckets get
    {relative_longer:.1%} right, the same model with sinusoids added to its embeddings
    {sinusoidal_longer:.1%} (held out: {sinusoidal_greedy:.1%} greedy, {sinusoidal_beam:.1%} beam).

    ![the cross-attention of the last decoder block](pictures/translation_alignment.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
