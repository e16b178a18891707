"""Demo 21: attention sinks (StreamingLLM, Xiao et al. 2023). A cache of the newest tokens only,
far past its window, with and without the first tokens kept, against the full cache; and where
a trained model's spare attention lands.

What it shows: a model trained here (chapter 5's decoder with grouped-query attention, demo 11's
shape and data: windows of 64 characters of Python's documentation) reads long stretches of the
validation part, STREAMS of them, each LENGTH characters (16 times the window), one character at
a time, with four caches:

    full        every token kept: the cache grows, and past 64 positions the model meets
                distances it never trained on
    window      the WINDOW newest tokens only (the new one included), the oldest evicted:
                constant memory (nn.SinkCache with sinks=0)
    sinks       the first SINKS tokens and the WINDOW newest: StreamingLLM (nn.SinkCache)
    recomputed  at every position the model is run afresh on the WINDOW newest tokens: what a
                window can do at best, at WINDOW times the work (StreamingLLM's baseline)

For each: the loss at each position (the mean over the streams, then over bins of positions),
drawn as StreamingLLM's figure draws perplexity, and the cache's bytes (`cache.nbytes`) as the
text grows. Then where the attention goes, with chapter 4's `run_with_cache`: on held-out windows
of 64, for each layer and head, the share of their attention that queries past position 16 give
to the first token, and to the first SINKS, against the share an even spread would give them.

    python demos/21_attention_sinks.py [output folder] [--quick]

`--quick` trains for 6 steps and reads 2 short streams (what the tests run). The full run's
time, as `dev/regenerate.py` measured it, ends its entry on docs/demos.md. One model, one seed.
The collapse needs a sink: a head that gives the first token far more than an even share of its
attention. Whether this model grew one is measured (a head giving the first token more than
SINK_FACTOR times an even share counts as one), and the entry says which, with the figures; a
small model trained for minutes on characters need not have one (the paper's models are LLMs
trained on billions of tokens), and then evicting the first tokens costs nothing, and what shows
is the rest of StreamingLLM's figure: the full cache failing past the length it trained on, the
windows' memory constant.
"""
import importlib

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn

tiny_gpt = importlib.import_module("11_tiny_gpt")

# %% [markdown]
# The model: demo 11's shape as chapter 5's decoder, with 2 key/value heads, trained with demo
# 11's loop on its data.

# %%
SEED = 0
SETTINGS = dict(hidden_size=128, intermediate_size=344, num_layers=4, num_heads=4,
                num_kv_heads=2, head_dim=32)
WINDOW, SINKS = 32, 4
FULL = dict(steps=800, warmup_steps=80, eval_every=200, eval_batches=10, streams=16, length=512,
            bin=32, windows=32)
QUICK = dict(steps=6, warmup_steps=2, eval_every=3, eval_batches=1, streams=2, length=80,
             bin=16, windows=4)
CACHES = ("full", "window", "sinks", "recomputed")


def trained_model(vocab_size, train_data, val_data, settings):
    ta.manual_seed(SEED)
    model = nn.Llama(nn.DecoderSettings(vocab_size=vocab_size, **SETTINGS), dtype=np.float32)
    held_out = tiny_gpt.held_out_batches(train_data, val_data, settings["eval_batches"])
    history = tiny_gpt.train(model, train_data, held_out, settings)
    return model.eval(), history


# %% [markdown]
# Reading a long text one token at a time with each cache: the loss of every next-character
# prediction, and the cache's bytes after every step.

# %%
def empty(model, kind):
    if kind == "full":
        return model.empty_cache()
    return nn.SinkCache(model, WINDOW, SINKS if kind == "sinks" else 0)


@ta.no_grad()
def streamed(model, ids, kind, progress):
    """(losses (B, T - 1), cache bytes after each step (T - 1,)) of reading ids (B, T) one token
    at a time with the cache `kind`; "recomputed" runs the WINDOW newest tokens afresh.
    `progress`: a demo_tools.Progress, told the position reached."""
    B, T = ids.shape
    losses, sizes = [], []
    cache = None if kind == "recomputed" else empty(model, kind)
    for t in range(T - 1):
        if cache is None:
            logits = model(ids[:, max(0, t + 1 - WINDOW):t + 1], last_only=True)
        else:
            logits = model(ids[:, t:t + 1], cache=cache)
            sizes.append(cache.nbytes)
        losses.append(next_character_loss(logits.data[:, -1], ids[:, t + 1]))
        progress(f"  reading with the {kind} cache: position {t + 1}/{T - 1}")
    return np.stack(losses, axis=1), np.array(sizes or [0] * (T - 1))


def next_character_loss(logits, targets):
    """-log softmax(logits)[target] for each row: logits (B, V) -> (B,)."""
    logits = logits.astype(np.float64)
    shifted = logits - logits.max(axis=-1, keepdims=True)
    log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
    return -log_probs[np.arange(len(targets)), targets]


def streams(val_data, count, length, seed=SEED + 2):
    """`count` stretches of `length` characters of the validation part, at random places."""
    starts = np.random.default_rng(seed).integers(0, len(val_data) - length, count)
    return val_data[starts[:, None] + np.arange(length)]


# %% [markdown]
# Where the attention goes: chapter 4's `run_with_cache` on held-out windows gives each layer's
# weights (B, H, T, T); the share that queries past position 16 give to the first keys.

# %%
FIRST_QUERY = 16
SINK_FACTOR = 4          # a head giving the first token 4 times an even share of attention: a sink


def attention_to_the_first(model, ids, first=1):
    """(share (layers, H), even share): the mean attention weight that queries at positions
    FIRST_QUERY ... T - 1 give to keys 0 ... first - 1, and what an even spread over the keys
    each sees would give them."""
    with ta.no_grad():
        _, cache = model.run_with_cache(ids)
    T = ids.shape[1]
    queries = np.arange(FIRST_QUERY, T)
    shares = np.stack([cache[f"blocks.{i}.attn.weights"][:, :, FIRST_QUERY:, :first]
                       .sum(axis=-1).mean(axis=(0, 2)) for i in range(len(model.blocks))])
    return shares, float((first / (queries + 1)).mean())


# %% [markdown]
# `main` trains the model, reads the streams with every cache, and looks at the attention.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    text = tiny_gpt.documentation_text()
    vocabulary = "".join(sorted(set(text)))
    train_data, val_data = tiny_gpt.split(tiny_gpt.encode(text, vocabulary))
    print(f"Training chapter 5's decoder ({SETTINGS['num_layers']} layers, "
          f"{SETTINGS['num_heads']} heads on {SETTINGS['num_kv_heads']} key/value heads, width "
          f"{SETTINGS['hidden_size']}) on windows of {tiny_gpt.CONTEXT} characters:")
    model, history = trained_model(len(vocabulary), train_data, val_data, settings)

    ids = streams(val_data, settings["streams"], settings["length"])
    progress = demo_tools.Progress()            # one for the four readings: a line every 10 s
    results = {kind: streamed(model, ids, kind, progress) for kind in CACHES}
    windows = tiny_gpt.random_windows(val_data, np.random.default_rng(SEED + 3),
                                      settings["windows"])[0]
    first, even_first = attention_to_the_first(model, windows)
    sinks, even_sinks = attention_to_the_first(model, windows, SINKS)
    numbers = collected(results, settings, history, first, even_first, sinks, even_sinks)
    print_the_results(numbers, first, sinks, settings)
    demo_tools.print_pictures(plot(results, numbers, first, settings,
                                   args.output / "attention_sinks.png"))
    return numbers


def binned(losses, bin_size):
    """The mean loss of each bin of positions: losses (B, T) -> (T // bin_size,)."""
    per_position = losses.mean(axis=0)
    bins = len(per_position) // bin_size
    return per_position[:bins * bin_size].reshape(bins, bin_size).mean(axis=1)


def collected(results, settings, history, first, even_first, sinks, even_sinks):
    bin_size = settings["bin"]
    numbers = {"steps": settings["steps"], "streams": settings["streams"],
               "length": settings["length"], "window": WINDOW, "sinks": SINKS,
               "context": tiny_gpt.CONTEXT, "bin": bin_size,
               "val_loss": history["val_losses"][-1], "first_query": FIRST_QUERY,
               "even_share_first": even_first, "even_share_sinks": even_sinks,
               "share_first": first.tolist(), "share_sinks": sinks.tolist(),
               "largest_share_first": float(first.max()),
               "sink_heads": int((first > SINK_FACTOR * even_first).sum()),
               "sink_factor": SINK_FACTOR, "heads": int(first.size)}
    numbers["sink_verdict"] = (
        f"{numbers['sink_heads']} of its {numbers['heads']} heads give it more than "
        f"{SINK_FACTOR} times that: sinks" if numbers["sink_heads"] else
        f"no head gives it {SINK_FACTOR} times that: this model has no sink to lose")
    past = slice(2 * WINDOW, None)              # the positions past twice the window
    numbers["length_past"] = 2 * WINDOW
    numbers["bytes_after"] = [p for p in (WINDOW, 2 * WINDOW, 4 * WINDOW, 8 * WINDOW,
                                          settings["length"] - 2) if p < settings["length"] - 1]
    for kind, (losses, sizes) in results.items():
        numbers[f"{kind}_binned"] = binned(losses, bin_size).tolist()
        numbers[f"{kind}_loss_past"] = float(losses[:, past].mean())
        numbers[f"{kind}_loss_within"] = float(losses[:, :WINDOW].mean())
        numbers[f"{kind}_bytes_after"] = [int(sizes[p]) for p in numbers["bytes_after"]]
        numbers[f"{kind}_bytes_end"] = int(sizes[-1])
    numbers["window_bytes_constant"] = bool(
        len(set(results["window"][1][WINDOW:].tolist())) == 1
        and len(set(results["sinks"][1][WINDOW + SINKS:].tolist())) == 1)
    return numbers


# %% [markdown]
# Plumbing: what it prints, the picture and the entry on docs/demos.md.

# %%
def print_the_results(numbers, first, sinks, settings):
    bin_size = settings["bin"]
    bins = len(numbers["full_binned"])
    demo_tools.print_table(
        ["positions"] + list(CACHES),
        [[f"{i * bin_size}-{(i + 1) * bin_size - 1}"]
         + [f"{numbers[f'{kind}_binned'][i]:.3f}" for kind in CACHES] for i in range(bins)],
        f"Loss per character (nats) at each position of {numbers['streams']} streams of "
        f"{numbers['length']} characters, read one at a time (window {WINDOW}, sinks {SINKS};"
        f"\nthe model trained on windows of {numbers['context']}):")
    print(f"\nPast position {2 * WINDOW}: " + ", ".join(
        f"{kind} {numbers[f'{kind}_loss_past']:.3f}" for kind in CACHES))
    demo_tools.print_table(
        ["cache"] + [f"after {p + 1}" for p in numbers["bytes_after"]],
        [[kind] + [f"{size:,}" for size in numbers[f"{kind}_bytes_after"]]
         for kind in ("full", "window", "sinks")],
        "The cache's bytes (cache.nbytes, all layers) after reading so many characters:")
    heads = [f"head {h}" for h in range(first.shape[1])]
    demo_tools.print_table(
        ["layer"] + heads,
        [[str(layer)] + [f"{a:.2f} ({b:.2f})" for a, b in zip(first[layer], sinks[layer])]
         for layer in range(len(first))],
        f"Attention that queries past position {FIRST_QUERY} give to the first token (and to the "
        f"first {SINKS}), on {settings['windows']} held-out\nwindows of {numbers['context']}; an "
        f"even spread would give {numbers['even_share_first']:.3f} "
        f"({numbers['even_share_sinks']:.3f}):")
    print(f"\nThe largest share on the first token is {numbers['largest_share_first']:.3f}, an "
          f"even spread's {numbers['even_share_first']:.3f}; {numbers['sink_verdict']}.")


COLOURS = {"full": "tab:gray", "window": "tab:red", "sinks": "tab:green",
           "recomputed": "tab:blue"}


STYLES = {"full": "o-", "window": "s--", "sinks": "^:", "recomputed": "-"}


def plot(results, numbers, first, settings, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    from matplotlib.ticker import PercentFormatter
    figure, (losses, attention) = plt.subplots(1, 2, figsize=(11, 4.2),
                                               gridspec_kw={"width_ratios": [2, 1]})
    bin_size = settings["bin"]
    for kind in CACHES:
        values = numbers[f"{kind}_binned"]
        centres = np.arange(len(values)) * bin_size + bin_size / 2
        label = {"full": "full cache", "window": f"window of {WINDOW}",
                 "sinks": f"{SINKS} sinks + window of {WINDOW}",
                 "recomputed": f"window of {WINDOW}, recomputed"}[kind]
        losses.plot(centres, values, STYLES[kind], color=COLOURS[kind], label=label,
                    markersize=4, linewidth=1.2)
    for x, text, align in ((WINDOW, "window", "right"), (numbers["context"], "trained length",
                                                          "left")):
        losses.axvline(x, color="black", linestyle=":", linewidth=1)
        losses.annotate(text, (x, 1), xycoords=("data", "axes fraction"),
                        xytext=(-3 if align == "right" else 3, -12), textcoords="offset points",
                        fontsize=8, ha=align)
    losses.set(xlabel="position in the text", ylabel="loss per character (nats)",
               title="Reading far past the window, one character at a time")
    top = max(SINK_FACTOR * numbers["even_share_first"], float(first.max()))
    image = attention.imshow(first, cmap="viridis", vmin=0, vmax=top)
    for (layer, head), share in np.ndenumerate(first):
        attention.text(head, layer, f"{share:.1%}", ha="center", va="center", fontsize=8,
                       color="white" if share < top / 2 else "black")
    attention.set(xlabel="head", ylabel="layer", xticks=range(first.shape[1]),
                  yticks=range(first.shape[0]),
                  title=f"attention to the first token\n(queries past {FIRST_QUERY}; even: "
                        f"{numbers['even_share_first']:.1%})")
    figure.colorbar(image, ax=attention, shrink=0.8, label="share of the attention",
                    format=PercentFormatter(xmax=1))         # in percent, as the cells are
    losses.legend(fontsize=8)
    losses.grid(alpha=0.3)
    figure.tight_layout()
    return demo_tools.save_figure(figure, path, dpi=120)


PAGE_ENTRY = """\
21. [`21_attention_sinks.py`](../demos/21_attention_sinks.py) — StreamingLLM's attention sinks,
    tried on a model trained here ({steps} steps on windows of {context} characters; chapter 5's
    decoder with grouped-query attention) reading {streams} stretches of {length} characters
    one at a time. Queries past position {first_query} give the first token at most
    {largest_share_first:.1%} of their attention, where an even spread would give it
    {even_share_first:.1%}; {sink_verdict}. Loss per character past position {length_past}:
    a window of the {window} newest tokens {window_loss_past:.3f}, the same with the first
    {sinks} tokens kept (StreamingLLM) {sinks_loss_past:.3f}, the window recomputed from scratch
    at every position {recomputed_loss_past:.3f}, and the full cache {full_loss_past:.3f}: past
    the {context} positions it trained on, its queries meet distances they never saw. The two
    windows hold {window_bytes_end:,} and {sinks_bytes_end:,} bytes to the end, where the full
    cache has grown to {full_bytes_end:,}.

    ![loss per position, each cache; attention to the first token](pictures/attention_sinks.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
