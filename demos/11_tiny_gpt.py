"""Demo 11: a tiny GPT learns to write like Python's documentation, one character at a time.

What it shows: the whole library at work on real text. A character-level language model, built
from tinyattn's layers (embeddings, positions, causal attention blocks, LayerNorm, cross-entropy)
and trained with AdamW, learns the documentation topics every Python installation carries (no
download), then writes some. It prints a table of losses as it trains, the losses two simple
models get on the same text (the baselines to beat), samples before and after training, and how
fast it writes with and without the key/value cache; it draws the loss curves and saves the
trained model in a checkpoint that `--sample` reads back.

    python demos/11_tiny_gpt.py [output folder] [--quick] [--positional sinusoidal]
    python demos/11_tiny_gpt.py --sample tinyattn-demos/tiny_gpt.npz --prompt "The "

The text: `pydoc_data.topics`, the pages `help("for")` shows. Its 79 topics are joined in the
sorted order of their names with a newline between two of them (each ends with one, so a blank
line separates them): 465,048 characters, 103 of them distinct, in Python 3.11.7. The exact text
differs a little between Python versions, and so do the counts (printed at the start), the
baselines and the losses. The first 90% is for training, the last 10% for validation.

The recipe is nanoGPT's for a laptop CPU (`train_shakespeare_char` with the sizes of its README's
CPU command), on tinyattn's `nn.CausalTransformer`:
- 4 layers, 4 heads, width 128, context 64 characters, batch 12 windows, dropout 0, float32;
- 2,000 steps of AdamW: learning rate 1e-3 after 100 warm-up steps, cosine decay to 1e-4, betas
  (0.9, 0.99), weight decay 0.1 on the matrices only (the Linear weights and the embedding), not
  on the biases and LayerNorm weights, as nanoGPT groups them; gradient norm clipped at 1.0;
- each step trains on 12 windows of 64 characters drawn at random places in the training part;
  every 250 steps the loss is measured on fixed held-out windows (20 batches of 12, drawn once:
  nanoGPT's `eval_iters=20`) of the training part and of the validation part; at the end, on
  the whole validation part, cut into consecutive windows.
Unlike nanoGPT's model, the output layer is not tied to the token embedding, the Linear layers
have biases and the weights start as PyTorch initialises them (the embedding from N(0, 1)). The
warm-up differs a little too: `ta.optim.warmup_cosine_lr` rises as lr * (step + 1) / 100 and
reaches 1e-3 at step 99, where nanoGPT's `get_lr` rises as lr * (step + 1) / 101 and reaches it
at step 100 (every warm-up rate 1% lower); from step 100 on the two schedules are the same.

Positions: sinusoidal (the fixed table of "Attention Is All You Need"), where nanoGPT learns them.
`--positional` trains with the others. Their loss on the whole validation part, with the seeds
(of the weights, the batches and the held-out windows) 0, 1 and 2:

    learned      1.38  1.40            the bar: 1.40
    sinusoidal   1.30  1.33  1.32
    alibi        1.33
    rope         1.26  1.28

Learned positions start as random N(0, 1) vectors (PyTorch's init for an Embedding) and must be
learned in 2,000 steps: they reach the bar only just. RoPE learns best but writes worst: `generate`
gives RoPE and ALiBi no window (they have no table of positions), so past the 64 characters it was
trained on, a RoPE model sees its queries and keys rotated by distances it never saw, and its
sample turns to gibberish after a line or two. ALiBi, made to extrapolate, keeps writing.
Sinusoidal positions are a table: `generate` keeps the last 64 characters (as nanoGPT does), so
the model always writes in the setting it was trained in, and it clears the bar with a margin.

The baselines: a unigram model (each character's frequency in the training part) and a bigram
model (the frequency of each character after the one before it), both counted on the training
part with one added to every count, scored on every character of the validation part. A model
that beats the bigram has learned to use more than the last character.

The samples: 500 characters written from the prompt "The " by `model.generate` (temperature 0.8,
the 20 likeliest characters; the generator seeded with 0), printed as they come out. Since the
model sees at most 64 characters, the cache saves work for the first 64 only: from then on the
window slides and `generate` rebuilds the cache at every step. The speeds are measured within the
first 64. At this size, a step of writing is some 160 small ops whose cost is mostly the engine's
own per-op work, so the cache's savings are modest.

The checkpoint, `tiny_gpt.npz` in the output folder, is one NumPy .npz archive: the parameters
(named as in `state_dict()`), the vocabulary and the settings that rebuild the model (a JSON
string), written under a temporary name and then renamed, so a failed save leaves no half-written
file. `--sample CHECKPOINT --prompt TEXT [--length N]` loads it and writes with the cache; a
missing or damaged file, or a prompt with a character the model never saw, ends the program with
an error saying so.

Time: its entry in the README gives the full run's measured time (processor and wall seconds,
and the machine's load), as `python demos/regenerate.py` measured it. `keep_freed_memory`
(demo_tools) matters here: without it, glibc gives the memory of every step back to the system
and takes it again, page fault by page fault, which makes every step slower.
`--quick` trains for 15 steps (what the tests run).
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
from tinyattn.nn.module import read_checkpoint, write_checkpoint

SEED = 0
SIZES = dict(embed_dim=128, num_heads=4, num_layers=4, max_len=64)   # max_len: the context
CONTEXT, BATCH = SIZES["max_len"], 12
POSITIONAL = "sinusoidal"
ADAMW = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)
MIN_LR, CLIP = 1e-4, 1.0
PROMPT = "The "
FULL = dict(steps=2000, warmup_steps=100, eval_every=250, eval_batches=20,
            final_characters=None,                  # None: all of the validation part
            sample_length=500,
            speed_length=CONTEXT - len(PROMPT))     # all within the context: the cache fully used
QUICK = dict(steps=15, warmup_steps=3, eval_every=5, eval_batches=2, final_characters=1000,
             sample_length=40, speed_length=8)
SAMPLING = dict(temperature=0.8, top_k=20)
SHOWN = 300                         # at most this many characters of the sample in the README
CHECKPOINT = "tiny_gpt.npz"
EXTRAS = ("vocabulary", "settings")   # what a checkpoint holds besides the parameters

README_ENTRY = """\
11. [`11_tiny_gpt.py`](demos/11_tiny_gpt.py) — a character-level GPT ({parameters:,} parameters:
    4 layers, 4 heads, width 128, context 64, {positional} positions) trained with AdamW for
    {steps:,} steps of 12 windows on the {characters:,} characters of Python's documentation
    topics (`pydoc_data.topics`, Python {python_version}): validation loss {val_loss_all:.2f} nats
    per character over the {val_characters_scored:,} characters of the validation part, where a
    bigram model scores {bigram:.2f} and a unigram model {unigram:.2f}. It trained in
    {training_seconds:.0f} s ({training_processor_seconds:.0f} s of processor time,
    {tokens_per_second:,.0f} characters per second in the steps, one BLAS thread). What it wrote
    after training, as it came out (the first lines; temperature {temperature}, top-k {top_k},
    seed {seed}, prompt "{prompt}"; ↵ marks a line break): `{sample_shown}`

    ![loss curves against the unigram and bigram baselines](docs/pictures/tiny_gpt_loss.png)"""


# ------------------------------------------------------------------------------------------------
# The text, as numbers

def documentation_text():
    """Python's documentation topics, joined in the sorted order of their names with a blank line
    between two topics."""
    return "\n".join(topics[name] for name in sorted(topics))


def encode(text, vocabulary, what="the text"):
    """The characters of `text` as their indices in `vocabulary` (a string of distinct characters),
    an int64 array; a character outside it is an error that names it."""
    index = {character: i for i, character in enumerate(vocabulary)}
    unknown = sorted(set(text) - index.keys(), key=text.index)
    if unknown:
        shown = ", ".join(f"{character!r} (U+{ord(character):04X})" for character in unknown)
        raise ValueError(f"{what} holds {'a character' if len(unknown) == 1 else 'characters'} "
                         f"outside the model's vocabulary: {shown}; the vocabulary is the "
                         f"{len(vocabulary)} characters of the text it was trained on")
    return np.array([index[character] for character in text], dtype=np.int64)


def decode(ids, vocabulary):
    return "".join(vocabulary[i] for i in ids)


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


def windows(data, starts):
    """(ids, targets), both (len(starts), CONTEXT): the windows of `data` at `starts`, and the
    same windows one character later (at every position, the character that comes next)."""
    rows = data[starts[:, None] + np.arange(CONTEXT + 1)]                # (N, CONTEXT + 1)
    return rows[:, :-1], rows[:, 1:]


def random_windows(data, random, count):
    return windows(data, random.integers(0, len(data) - CONTEXT, count))


def consecutive_batches(data, count=48):
    """`data` cut into consecutive windows (the characters after the last whole window left out),
    in batches of up to `count` windows: every character of it predicted once."""
    starts = np.arange(0, len(data) - CONTEXT, CONTEXT)
    return [windows(data, starts[i:i + count]) for i in range(0, len(starts), count)]


def split(data):
    """(training part, validation part): the first 90% of the text, and the rest."""
    return data[:int(0.9 * len(data))], data[int(0.9 * len(data)):]


def held_out_batches(train_data, val_data, count):
    """{"train": batches, "val": batches}: `count` batches of BATCH windows of each part, drawn
    once from a generator of their own, so every evaluation (and every run) uses the same ones;
    the model never trains on them (its batches come from another generator)."""
    random = np.random.default_rng(SEED + 1)
    return {part: [random_windows(data, random, BATCH) for _ in range(count)]
            for part, data in (("train", train_data), ("val", val_data))}


# ------------------------------------------------------------------------------------------------
# The model, its training, its checkpoint

def build_model(vocab_size, positional, **sizes):
    return nn.CausalTransformer(vocab_size, **sizes, positional=positional, dtype=np.float32)


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


def adamw_groups(model):
    """nanoGPT's two groups: the matrices (Linear weights, embeddings) decay, the vectors (biases,
    LayerNorm weights) do not; one AdamW each, stepped together."""
    parameters = model.parameters()
    matrices = [p for p in parameters if p.ndim >= 2]
    vectors = [p for p in parameters if p.ndim < 2]
    return [ta.optim.AdamW(matrices, **ADAMW),
            ta.optim.AdamW(vectors, **{**ADAMW, "weight_decay": 0.0})]


def train(model, train_data, held_out, settings):
    """Train with the recipe of the docstring; print a row of the table at step 0 and every
    eval_every steps, and a progress line in between (on a terminal). Returns the history."""
    steps, warmup_steps = settings["steps"], settings["warmup_steps"]
    optimizers, parameters = adamw_groups(model), model.parameters()
    random = np.random.default_rng(SEED)
    history = {"eval_steps": [], "train_losses": [], "val_losses": [], "batch_losses": [],
               "step_seconds": 0.0}
    progress = sys.stdout.isatty()
    model.train()
    start, processor_start = time.perf_counter(), time.process_time()
    since_row = {"tokens": 0, "seconds": 0.0}
    print(f"{'step':>5}  {'train loss':>10}  {'val loss':>8}  {'tokens/s':>8}  {'elapsed':>7}")

    def table_row(step):
        history["eval_steps"].append(step)
        history["train_losses"].append(held_out_loss(model, held_out["train"]))
        history["val_losses"].append(held_out_loss(model, held_out["val"]))
        speed = f"{since_row['tokens'] / since_row['seconds']:8,.0f}" if step else f"{'':>8}"
        since_row.update(tokens=0, seconds=0.0)
        print("\r" + " " * 60 + "\r" if progress else "", end="")     # clear the progress line
        print(f"{step:>5}  {history['train_losses'][-1]:>10.4f}  {history['val_losses'][-1]:>8.4f}"
              f"  {speed}  {time.perf_counter() - start:>6.1f}s", flush=True)

    table_row(0)
    for step in range(steps):
        step_start = time.perf_counter()
        lr = ta.optim.warmup_cosine_lr(step, ADAMW["lr"], warmup_steps, steps, MIN_LR)
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
        seconds = time.perf_counter() - step_start
        history["step_seconds"] += seconds
        since_row["tokens"] += ids.size
        since_row["seconds"] += seconds
        if progress:
            print(f"\r  step {step + 1}/{steps}  batch loss {loss.item():.3f}  lr {lr:.1e}",
                  end="", flush=True)
        if (step + 1) % settings["eval_every"] == 0 or step + 1 == steps:
            table_row(step + 1)
    history["seconds"] = time.perf_counter() - start
    history["processor_seconds"] = time.process_time() - processor_start
    return history


def save_checkpoint(model, vocabulary, path):
    """One .npz archive: the parameters, the vocabulary, and the settings that rebuild the model."""
    settings = {"embed_dim": model.embed.embedding_dim, "num_heads": model.num_heads,
                "num_layers": len(model.blocks), "max_len": model.max_len,
                "positional": model.positional}
    write_checkpoint(path, {**model.state_dict(), "vocabulary": np.array(list(vocabulary)),
                            "settings": np.array(json.dumps(settings))})


def load_checkpoint(path):
    """(model in eval mode, vocabulary) from a file save_checkpoint wrote; a file that is not one
    raises FileNotFoundError or ValueError saying why."""
    arrays = read_checkpoint(str(path))
    if not all(name in arrays for name in EXTRAS):
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


# ------------------------------------------------------------------------------------------------
# Writing

def write(model, vocabulary, prompt, length):
    """`length` characters after `prompt`, drawn with SAMPLING from a generator seeded with SEED."""
    if not prompt:
        raise ValueError("the prompt is empty: the model needs at least one character to continue")
    ta.manual_seed(SEED)
    ids = model.generate(encode(prompt, vocabulary, "the prompt")[None], length, **SAMPLING)
    return decode(ids[0, len(prompt):], vocabulary)


def first_lines(text, limit):
    """The whole lines at the start of `text` that fit in `limit` characters (or its first `limit`
    characters, when the first line is longer), line breaks shown as ↵: a sample for the README,
    where it sits in a paragraph."""
    end = text.rfind("\n", 0, limit)
    return text[:end if end > 0 else limit].replace("\n", "↵")


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


# ------------------------------------------------------------------------------------------------

def command_line(argv):
    parser = demo_tools.argument_parser(__doc__)
    parser.add_argument("--positional", default=POSITIONAL, choices=nn.transformer.POSITIONAL,
                        help=f"how the model knows positions (default: {POSITIONAL})")
    parser.add_argument("--sample", metavar="CHECKPOINT",
                        help="write text with the model of this checkpoint instead of training")
    parser.add_argument("--prompt", default=PROMPT, help=f"with --sample (default {PROMPT!r})")
    parser.add_argument("--length", type=int, default=FULL["sample_length"],
                        help=f"with --sample: how many characters to write (default "
                             f"{FULL['sample_length']})")
    args = parser.parse_args(argv)
    demo_tools.one_blas_thread()
    demo_tools.keep_freed_memory()
    return args


def sample_from_checkpoint(args):
    """--sample: the checkpoint's model continues the prompt. A bad file or prompt ends the
    program with the reason (no traceback), as a bad command-line argument does."""
    try:
        model, vocabulary = load_checkpoint(args.sample)
        text = write(model, vocabulary, args.prompt, args.length)
    except (OSError, ValueError) as error:
        raise SystemExit(f"11_tiny_gpt.py: {error}") from None
    print(args.prompt + text)
    return {"text": text}


def main(argv=None):
    args = command_line(argv)
    if args.sample is not None:
        return sample_from_checkpoint(args)
    settings = QUICK if args.quick else FULL
    text = documentation_text()
    vocabulary = "".join(sorted(set(text)))
    data = encode(text, vocabulary)
    train_data, val_data = split(data)
    print(f"The text: Python {sys.version.split()[0]}'s documentation topics "
          f"(pydoc_data.topics, {len(topics)} topics): {len(text):,} characters, "
          f"{len(vocabulary)} distinct; training part {len(train_data):,}, validation part "
          f"{len(val_data):,}")
    unigram, bigram = baselines(train_data, val_data, len(vocabulary))
    print(f"Baselines on the validation part (nats per character): unigram {unigram:.4f}, "
          f"bigram {bigram:.4f}; a uniform guess over the {len(vocabulary)} characters "
          f"{math.log(len(vocabulary)):.4f}")

    ta.manual_seed(SEED)
    model = build_model(len(vocabulary), args.positional, **SIZES)
    parameters = sum(p.size for p in model.parameters())
    held_out = held_out_batches(train_data, val_data, settings["eval_batches"])
    before = write(model, vocabulary, PROMPT, settings["sample_length"])
    print(f"\nBefore training, the model writes (prompt {PROMPT!r}, temperature "
          f"{SAMPLING['temperature']}, top-k {SAMPLING['top_k']}, seed {SEED}):\n"
          f"{PROMPT + before}\n")

    print(f"Training: {parameters:,} parameters ({SIZES['num_layers']} layers, "
          f"{SIZES['num_heads']} heads, width {SIZES['embed_dim']}, context {CONTEXT}, "
          f"{args.positional} positions, float32), {settings['steps']:,} steps of {BATCH} "
          f"windows; losses in nats per character on {settings['eval_batches'] * BATCH} fixed "
          f"windows of each part")
    history = train(model, train_data, held_out, settings)
    tokens_per_second = settings["steps"] * BATCH * CONTEXT / history["step_seconds"]
    print(f"Trained in {history['seconds']:.1f} s ({history['processor_seconds']:.1f} s of "
          f"processor time; {tokens_per_second:,.0f} tokens/s in the steps, evaluations aside)")

    limit = settings["final_characters"]                # None: all of the validation part
    part = val_data[:limit]
    whole = consecutive_batches(part)
    val_loss_all = held_out_loss(model, whole)
    scored = sum(targets.size for _, targets in whole)
    extent = (f"all of it that fills consecutive windows of {CONTEXT}" if limit is None
              else f"its first {len(part):,} only, in quick mode, cut into consecutive windows "
                   f"of {CONTEXT}")
    print(f"Validation loss over {scored:,} of the {len(val_data):,} characters of the validation "
          f"part ({extent}): {val_loss_all:.4f} nats per character (bigram {bigram:.4f})")

    model.eval()
    after = write(model, vocabulary, PROMPT, settings["sample_length"])
    print(f"\nAfter training, the model writes (the same prompt, sampling and seed):\n"
          f"{PROMPT + after}\n")
    speed_length = settings["speed_length"]
    speed = demo_tools.generation_speed(model, encode(PROMPT, vocabulary)[None], speed_length,
                                        SAMPLING, SEED, rounds=1 if args.quick else 3)
    if args.quick:
        print(f"Writing {speed_length} characters after the prompt with the key/value cache "
              f"gives those of recomputing every prefix (quick mode does not time so few)")
    else:
        print(f"Writing {speed_length} characters after the prompt: {speed['cached']:,.0f} "
              f"characters/s with the key/value cache, {speed['recomputed']:,.0f} recomputing "
              f"every prefix ({speed['cached'] / speed['recomputed']:.1f}x)")

    checkpoint = args.output / CHECKPOINT
    args.output.mkdir(parents=True, exist_ok=True)
    save_checkpoint(model, vocabulary, checkpoint)
    print(f"checkpoint: {checkpoint}   (python demos/11_tiny_gpt.py --sample {checkpoint} "
          f"--prompt \"...\")")
    picture = plot(history, val_loss_all, unigram, bigram, args.output / "tiny_gpt_loss.png")
    if picture is not None:
        print(f"loss curves: {picture}")
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


if __name__ == "__main__":
    main()
