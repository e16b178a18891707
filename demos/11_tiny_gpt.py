"""Demo 11: a tiny GPT learns to write like Python's documentation, one character at a time.

What it shows: the whole library at work on real text. A character-level language model, built
from tinyattn's layers (embeddings, positions, causal attention blocks, LayerNorm, cross-entropy)
and trained as nanoGPT trains its own, learns `pydoc_data.topics`, the pages `help("for")` shows,
which every Python installation carries (no download; they differ a little between Python
versions, and so do the counts printed at the start, the baselines and the losses). It is scored
against two counting models (the baselines to beat), writes before and after training, is timed
writing with and without the key/value cache, draws its loss curves and saves a checkpoint that
`--sample` reads.

    python demos/11_tiny_gpt.py [output folder] [--quick] [--positional sinusoidal]
    python demos/11_tiny_gpt.py --sample tinyattn-demos/tiny_gpt.npz --prompt "The " [--length N]

Positions: sinusoidal (the fixed table of "Attention Is All You Need"), where nanoGPT learns them;
`--positional learned` (or alibi, rope) trains with another, and prints its validation loss to
compare. Learned positions start as N(0, 1) noise, to be learned in 2,000 steps. A RoPE model can
reach a low loss and still write badly: `generate` keeps a window of the last 64 characters only
for a table of positions (sinusoidal, learned), as nanoGPT does, so past 64 characters a RoPE
model sees its queries and keys rotated by distances it never saw in training; ALiBi, made to
extrapolate, degrades more gently, and a table of positions always writes in the setting it was
trained in.

`--quick` trains for 15 steps (what the tests run). The full run's time, as `dev/regenerate.py`
measured it, ends the demo's entry on docs/demos.md.
"""
import json
import math
import sys
import time

import numpy as np
from pydoc_data.topics import topics

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.nn.checkpoints import read_checkpoint, write_checkpoint

# %% [markdown]
# The data: the text as numbers (each character's index in the sorted list of the distinct ones),
# the first 90% to train on, the rest to validate; an example is a window and the same window one
# character later.

# %%
SEED = 0                    # of the weights and the batches; the held-out windows use SEED + 1
CONTEXT, BATCH = 64, 12     # windows of 64 characters, 12 of them a step


def documentation_text():
    """Python's documentation topics in the sorted order of their names, a blank line between."""
    return "\n".join(topics[name] for name in sorted(topics))


def encode(text, vocabulary):
    """The indices of the characters of `text` in `vocabulary` (distinct characters), int64."""
    index = {character: i for i, character in enumerate(vocabulary)}
    return np.array([index[character] for character in text], dtype=np.int64)


def decode(ids, vocabulary):
    return "".join(vocabulary[i] for i in ids)


def split(data):
    """(training part, validation part): the first 90% of the text, and the rest."""
    return data[:int(0.9 * len(data))], data[int(0.9 * len(data)):]


def windows(data, starts):
    """(ids, targets), both (len(starts), CONTEXT): the windows of `data` at `starts`, and the
    same windows one character later (at every position, the character that comes next)."""
    rows = data[starts[:, None] + np.arange(CONTEXT + 1)]                # (N, CONTEXT + 1)
    return rows[:, :-1], rows[:, 1:]


def random_windows(data, random, count):
    return windows(data, random.integers(0, len(data) - CONTEXT, count))


# %% [markdown]
# The settings: nanoGPT's recipe for a laptop CPU (`train_shakespeare_char` with the sizes of its
# README's CPU command), on `nn.CausalTransformer`; the quick run (the tests, a notebook) keeps the
# model and shortens the rest. Unlike nanoGPT's model, the output layer is not tied to the token
# embedding, the Linear layers have biases and the weights start as PyTorch initialises them (the
# embedding from N(0, 1)); and `ta.optim.warmup_cosine_lr` rises as lr * (step + 1) / 100, reaching
# 1e-3 at step 99, where nanoGPT's `get_lr` rises as lr * (step + 1) / 101, reaching it at step 100
# (every warm-up rate 1% lower); from step 100 on the two schedules are the same.

# %%
SIZES = dict(embed_dim=128, num_heads=4, num_layers=4, max_len=CONTEXT)     # dropout 0: the default
POSITIONAL = "sinusoidal"
ADAMW = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
MIN_LR, CLIP = 1e-4, 1.0            # where the cosine decay ends, the largest gradient norm
PROMPT, SAMPLING = "The ", dict(temperature=0.8, top_k=20)
FULL = dict(steps=2000, warmup_steps=100, eval_every=250,
            eval_batches=20,                        # nanoGPT's eval_iters
            final_characters=None,                  # None: all of the validation part
            sample_length=500,
            speed_length=CONTEXT - len(PROMPT))     # all within the context: the cache fully used
QUICK = dict(steps=15, warmup_steps=3, eval_every=5, eval_batches=2, final_characters=1000,
             sample_length=40, speed_length=8)


def build_model(vocab_size, positional, **sizes):
    return nn.CausalTransformer(vocab_size, **sizes, positional=positional, dtype=np.float32)


# %% [markdown]
# Training: at each step BATCH random windows, the mean cross-entropy of the next-character
# predictions, backward, the gradient norm clipped, AdamW; every `eval_every` steps, the loss on
# fixed held-out windows of both parts, a row of the table.

# %%
def loss_of(model, ids, targets):
    """Mean cross-entropy of the next-character predictions, a tensor."""
    logits = model(ids)                                                  # (B, T, V)
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@ta.no_grad()
def held_out_loss(model, batches):
    """Mean loss over every prediction in a list of (ids, targets) batches, in eval mode."""
    model.eval()
    total = sum(loss_of(model, ids, targets).item() * targets.size for ids, targets in batches)
    model.train()
    return total / sum(targets.size for _, targets in batches)


def held_out_batches(train_data, val_data, count):
    """{"train": batches, "val": batches}: `count` batches of BATCH windows of each part, drawn
    once by a generator of their own, so every evaluation (and every run) scores the same ones."""
    random = np.random.default_rng(SEED + 1)
    return {part: [random_windows(data, random, BATCH) for _ in range(count)]
            for part, data in (("train", train_data), ("val", val_data))}


def adamw_groups(model):
    """nanoGPT's two groups: the matrices (Linear weights, embeddings) decay, the vectors (biases,
    LayerNorm weights) do not; one AdamW each, stepped together."""
    matrices = [p for p in model.parameters() if p.ndim >= 2]
    vectors = [p for p in model.parameters() if p.ndim < 2]
    return [ta.optim.AdamW(matrices, **ADAMW),
            ta.optim.AdamW(vectors, **{**ADAMW, "weight_decay": 0.0})]


def train(model, train_data, held_out, settings):
    """Train with the settings, printing a row of losses at each evaluation; returns the history."""
    steps = settings["steps"]
    optimizers, parameters = adamw_groups(model), model.parameters()
    random = np.random.default_rng(SEED)
    history = {"eval_steps": [], "train_losses": [], "val_losses": [], "batch_losses": [],
               "step_seconds": 0.0}                                     # evaluations aside
    start, processor_start = time.perf_counter(), time.process_time()

    def evaluate(step):
        history["eval_steps"].append(step)
        history["train_losses"].append(held_out_loss(model, held_out["train"]))
        history["val_losses"].append(held_out_loss(model, held_out["val"]))
        print_row(step, history, time.perf_counter() - start)

    evaluate(0)
    progress = demo_tools.Progress()
    for step in range(steps):
        step_start = time.perf_counter()
        lr = ta.optim.warmup_cosine_lr(step, ADAMW["lr"], settings["warmup_steps"], steps, MIN_LR)
        ids, targets = random_windows(train_data, random, BATCH)          # (B, T) each
        loss = loss_of(model, ids, targets)
        for optimizer in optimizers:
            optimizer.zero_grad()
            optimizer.lr = lr
        loss.backward()
        ta.optim.clip_grad_norm(parameters, CLIP)
        for optimizer in optimizers:
            optimizer.step()
        history["batch_losses"].append(loss.item())
        history["step_seconds"] += time.perf_counter() - step_start
        progress(f"  step {step + 1}/{steps}  batch loss {loss.item():.3f}  lr {lr:.1e}")
        if (step + 1) % settings["eval_every"] == 0 or step + 1 == steps:
            evaluate(step + 1)
    history["seconds"] = time.perf_counter() - start
    history["processor_seconds"] = time.process_time() - processor_start
    return history


# %% [markdown]
# The baselines to beat, two models that count: how often each character comes (unigram), and how
# often after the one before it (bigram). A model that beats the bigram uses more than the last
# character.

# %%
def baselines(train, val, vocab_size):
    """Mean -log p (nats per character) over the validation characters after the first, of a
    unigram and a bigram model counted on the training part, one added to every count."""
    V = vocab_size
    counts = np.bincount(train, minlength=V) + 1.0                       # (V,)
    unigram = -np.log(counts[val[1:]] / counts.sum()).mean()
    pairs = np.bincount(train[:-1] * V + train[1:], minlength=V * V).reshape(V, V) + 1.0
    after = pairs / pairs.sum(axis=1, keepdims=True)                     # (V, V): p(next | char)
    bigram = -np.log(after[val[:-1], val[1:]]).mean()
    return float(unigram), float(bigram)


def consecutive_batches(data, count=48):
    """`data` cut into consecutive windows (the characters after the last whole window left out),
    in batches of up to `count` windows: every character of it predicted once."""
    starts = np.arange(0, len(data) - CONTEXT, CONTEXT)
    return [windows(data, starts[i:i + count]) for i in range(0, len(starts), count)]


# %% [markdown]
# Writing: the model continues the prompt one character at a time, seeded alike before and after
# training, so that the two samples differ only by what it learned.

# %%
def write(model, vocabulary, prompt, length):
    """`length` characters after `prompt`, drawn with SAMPLING from a generator seeded with SEED."""
    ta.manual_seed(SEED)
    ids = model.generate(encode(prompt, vocabulary)[None], length, **SAMPLING)
    return decode(ids[0, len(prompt):], vocabulary)


# %% [markdown]
# `main` runs the parts in order and returns the numbers; last, the cache's speed. As the model sees
# at most 64 characters, the key/value cache saves work for the first 64 only (then the window
# slides and `generate` rebuilds the cache at every step), so its speed is measured within the
# first 64. At this size a step of writing is some 160 small ops whose cost is mostly the engine's
# own per-op work: the cache's savings are modest.

# %%
def main(argv=None):
    args = command_line(argv)
    if args.sample is not None:
        return sample_from_checkpoint(args)
    settings = QUICK if args.quick else FULL
    text = documentation_text()
    vocabulary = "".join(sorted(set(text)))
    train_data, val_data = split(encode(text, vocabulary))
    unigram, bigram = baselines(train_data, val_data, len(vocabulary))
    ta.manual_seed(SEED)
    model = build_model(len(vocabulary), args.positional, **SIZES)
    parameters = sum(p.size for p in model.parameters())
    print_the_setup(text, vocabulary, val_data, unigram, bigram, parameters, args, settings)

    before = write(model, vocabulary, PROMPT, settings["sample_length"])
    print(f"\nBefore training, the model writes (prompt {PROMPT!r}, temperature "
          f"{SAMPLING['temperature']}, top-k {SAMPLING['top_k']}, seed {SEED}):\n"
          f"{PROMPT + before}\n")
    held_out = held_out_batches(train_data, val_data, settings["eval_batches"])
    history = train(model, train_data, held_out, settings)
    tokens_per_second = settings["steps"] * BATCH * CONTEXT / history["step_seconds"]
    print(f"Trained in {history['seconds']:.1f} s ({history['processor_seconds']:.1f} s of "
          f"processor time; {tokens_per_second:,.0f} tokens/s in the steps, evaluations aside)")

    whole = consecutive_batches(val_data[:settings["final_characters"]])
    val_loss_all = held_out_loss(model, whole)
    scored = sum(targets.size for _, targets in whole)
    model.eval()
    after = write(model, vocabulary, PROMPT, settings["sample_length"])
    print(f"\nAfter training, the model writes (the same prompt, sampling and seed):\n"
          f"{PROMPT + after}\n")
    speed = demo_tools.generation_speed(model, encode(PROMPT, vocabulary)[None],
                                        settings["speed_length"], SAMPLING, SEED,
                                        rounds=1 if args.quick else 3)
    print_the_results(val_loss_all, scored, len(val_data), bigram, speed, settings, args.quick)

    save_outputs(args.output, model, vocabulary, history, val_loss_all, unigram, bigram)
    return {"python_version": sys.version.split()[0], "characters": len(text),
            "vocabulary_size": len(vocabulary), "positional": args.positional,
            "parameters": parameters, "steps": settings["steps"], "unigram": unigram,
            "bigram": bigram, "eval_steps": history["eval_steps"],
            "train_losses": history["train_losses"], "val_losses": history["val_losses"],
            "first_batch_loss": history["batch_losses"][0],
            "last_batch_loss": history["batch_losses"][-1], "val_loss": history["val_losses"][-1],
            "val_loss_all": val_loss_all, "val_characters_scored": scored,
            "train_loss": history["train_losses"][-1], "training_seconds": history["seconds"],
            "training_processor_seconds": history["processor_seconds"],
            "tokens_per_second": tokens_per_second, "sample_before": before, "sample": after,
            "sample_shown": first_lines(PROMPT + after, SHOWN),
            "prompt": PROMPT, "seed": SEED, **SAMPLING,
            "cached_characters_per_second": speed["cached"],
            "recomputed_characters_per_second": speed["recomputed"]}


# %% [markdown]
# Plumbing, what the experiment needs but is not about: the command line, what it prints, the
# checkpoint and `--sample`, the plot, and the entry on docs/demos.md.

# %%
def command_line(argv):
    """The arguments every demo has and this one's; BLAS on one thread."""
    parser = demo_tools.argument_parser(__doc__)
    parser.add_argument("--positional", default=POSITIONAL, choices=nn.causal_transformer.POSITIONAL,
                        help=f"how the model knows positions (default: {POSITIONAL})")
    parser.add_argument("--sample", metavar="CHECKPOINT",
                        help="write text with the model of this checkpoint instead of training")
    parser.add_argument("--prompt", default=PROMPT, help=f"with --sample (default {PROMPT!r})")
    parser.add_argument("--length", type=int, default=FULL["sample_length"],
                        help="with --sample: how many characters to write")
    args = parser.parse_args(argv)
    demo_tools.one_blas_thread()
    return args


def print_the_setup(text, vocabulary, val_data, unigram, bigram, parameters, args, settings):
    print(f"The text: Python {sys.version.split()[0]}'s documentation topics "
          f"(pydoc_data.topics, {len(topics)} topics): {len(text):,} characters, "
          f"{len(vocabulary)} distinct; training part {len(text) - len(val_data):,}, validation "
          f"part {len(val_data):,}")
    print(f"Baselines on the validation part (nats per character): unigram {unigram:.4f}, "
          f"bigram {bigram:.4f}; a uniform guess over the {len(vocabulary)} characters "
          f"{math.log(len(vocabulary)):.4f}")
    print(f"Training: {parameters:,} parameters ({args.positional} positions), "
          f"{settings['steps']:,} steps of {BATCH} windows; losses in nats per character on "
          f"{settings['eval_batches'] * BATCH} fixed windows of each part")


def print_row(step, history, elapsed):
    """A row of the training table (its head before the first): the losses on the fixed windows,
    the tokens per second of the steps so far, the time since the start."""
    if step == 0:
        print(f"{'step':>5}  {'train loss':>10}  {'val loss':>8}  {'tokens/s':>8}  {'elapsed':>7}")
    speed = f"{step * BATCH * CONTEXT / history['step_seconds']:8,.0f}" if step else " " * 8
    print("\r" + " " * 60 + "\r" if sys.stdout.isatty() else "", end="")   # the progress line
    print(f"{step:>5}  {history['train_losses'][-1]:>10.4f}  {history['val_losses'][-1]:>8.4f}  "
          f"{speed}  {elapsed:>6.1f}s", flush=True)


def print_the_results(val_loss_all, scored, val_characters, bigram, speed, settings, quick):
    limit, length = settings["final_characters"], settings["speed_length"]
    extent = "all of it" if limit is None else f"its first {limit:,} only, in quick mode"
    print(f"Validation loss over {scored:,} of the {val_characters:,} characters of the validation "
          f"part ({extent}, cut into consecutive windows of {CONTEXT}): {val_loss_all:.4f} nats "
          f"per character (bigram {bigram:.4f})")
    if quick:
        print(f"Writing {length} characters after the prompt with the key/value cache gives "
              f"those of recomputing every prefix (quick mode does not time so few)")
    else:
        print(f"Writing {length} characters after the prompt: {speed['cached']:,.0f} "
              f"characters/s with the key/value cache, {speed['recomputed']:,.0f} recomputing "
              f"every prefix ({speed['cached'] / speed['recomputed']:.1f}x)")


CHECKPOINT = "tiny_gpt.npz"


def save_outputs(folder, model, vocabulary, history, val_loss_all, unigram, bigram):
    """The checkpoint and the loss curves, in `folder`, and where they are."""
    folder.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model, vocabulary, folder / CHECKPOINT)
    print(f"checkpoint: {folder / CHECKPOINT}   (python demos/11_tiny_gpt.py --sample "
          f"{folder / CHECKPOINT} --prompt \"...\")")
    picture = plot(history, val_loss_all, unigram, bigram, folder / "tiny_gpt_loss.png")
    if picture is not None:
        print(f"loss curves: {picture}")


def save_checkpoint(model, vocabulary, path):
    """One NumPy .npz archive, written whole or not at all: the parameters (named as in
    `state_dict()`), the vocabulary, and the settings that rebuild the model (a JSON string)."""
    settings = {"embed_dim": model.embed.embedding_dim, "num_heads": model.num_heads,
                "num_layers": len(model.blocks), "max_len": model.max_len,
                "positional": model.positional}
    write_checkpoint(path, {**model.state_dict(), "vocabulary": np.array(list(vocabulary)),
                            "settings": np.array(json.dumps(settings))})


def load_checkpoint(path):
    """(model in eval mode, vocabulary) from a file save_checkpoint wrote; a file that is not one
    raises FileNotFoundError or ValueError saying why."""
    arrays = read_checkpoint(str(path))
    if "vocabulary" not in arrays or "settings" not in arrays:
        raise ValueError(f"load: {str(path)!r} is a tinyattn checkpoint but not one of this demo: "
                         "it holds no vocabulary and settings")
    try:
        vocabulary = "".join(arrays.pop("vocabulary").tolist())
        model = build_model(len(vocabulary), **json.loads(str(arrays.pop("settings"))))
        model.load_state_dict(arrays)
    except (TypeError, ValueError) as error:
        raise ValueError(f"load: the checkpoint {str(path)!r} cannot rebuild its model: "
                         f"{error}") from None
    return model.eval(), vocabulary


def sample_from_checkpoint(args):
    """--sample: the checkpoint's model continues the prompt. A missing or damaged file, an empty
    prompt or one with a character the model never saw ends the program with the reason (no
    traceback), as a bad command-line argument does."""
    try:
        model, vocabulary = load_checkpoint(args.sample)
        check_prompt(args.prompt, vocabulary)
        text = write(model, vocabulary, args.prompt, args.length)
    except (OSError, ValueError) as error:
        raise SystemExit(f"11_tiny_gpt.py: {error}") from None
    print(args.prompt + text)
    return {"text": text}


def check_prompt(prompt, vocabulary):
    if not prompt:
        raise ValueError("the prompt is empty: the model needs at least one character to continue")
    unknown = sorted(set(prompt) - set(vocabulary), key=prompt.index)
    if unknown:
        shown = ", ".join(f"{character!r} (U+{ord(character):04X})" for character in unknown)
        raise ValueError(f"the prompt holds {'a character' if len(unknown) == 1 else 'characters'} "
                         f"outside the model's vocabulary: {shown}; the vocabulary is the "
                         f"{len(vocabulary)} characters of the text it was trained on")


def plot(history, val_loss_all, unigram, bigram, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(8, 4.8), layout="constrained")
    steps = np.arange(1, len(history["batch_losses"]) + 1)
    axes.plot(steps, history["batch_losses"], color="tab:blue", alpha=0.25, linewidth=0.8,
              label="training batch (each step)")
    axes.plot(history["eval_steps"], history["train_losses"], "o-", color="tab:blue",
              label="training part (fixed windows)")
    axes.plot(history["eval_steps"], history["val_losses"], "o-", color="tab:orange",
              label="validation part (fixed windows)")
    axes.plot(steps[-1], val_loss_all, "*", color="tab:red", markersize=12,
              label=f"the whole validation part, at the end: {val_loss_all:.2f}")
    for loss, name, style in ((unigram, "unigram", ":"), (bigram, "bigram", "--")):
        axes.axhline(loss, color="gray", linestyle=style, linewidth=1)
        axes.annotate(f"{name} model {loss:.2f}", (steps[-1], loss), xytext=(0, 3),
                      textcoords="offset points", ha="right", va="bottom", color="gray")
    axes.set(xlabel="training step", ylabel="cross-entropy (nats per character)",
             ylim=(1.0, max(history["train_losses"][0], unigram) + 0.3),
             title=f"A tiny GPT on Python's documentation, {steps[-1]:,} steps")
    axes.legend(loc="upper center")
    return demo_tools.save_figure(figure, path, dpi=110)


def first_lines(text, limit):
    """The whole lines at the start of `text` that fit in `limit` characters (or its first `limit`
    characters, when the first line is longer), line breaks shown as ↵: a sample for docs/demos.md,
    where it sits in a paragraph."""
    end = text.rfind("\n", 0, limit)
    return text[:end if end > 0 else limit].replace("\n", "↵")


SHOWN = 300                         # at most this many characters of the sample on docs/demos.md
PAGE_ENTRY = """\
11. [`11_tiny_gpt.py`](../demos/11_tiny_gpt.py) — a character-level GPT ({parameters:,} parameters:
    4 layers, 4 heads, width 128, context 64, {positional} positions) trained with AdamW for
    {steps:,} steps of 12 windows on the {characters:,} characters of Python's documentation
    topics (`pydoc_data.topics`, Python {python_version}): validation loss {val_loss_all:.2f} nats
    per character over the {val_characters_scored:,} characters of the validation part, where a
    bigram model scores {bigram:.2f} and a unigram model {unigram:.2f}. It trained in
    {training_seconds:.0f} s ({training_processor_seconds:.0f} s of processor time,
    {tokens_per_second:,.0f} characters per second in the steps, one BLAS thread). What it wrote
    after training, as it came out (the first lines; temperature {temperature}, top-k {top_k},
    seed {seed}, prompt "{prompt}"; ↵ marks a line break): `{sample_shown}`

    ![loss curves against the unigram and bigram baselines](pictures/tiny_gpt_loss.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
