"""Demo 17: the logit lens — what each layer of a language model would predict.

What it shows: where in a model the prediction is made. A pre-LN transformer adds every block's
output to one residual stream and reads its prediction off the end, logits = head(ln(x)). The
logit lens (nostalgebraist 2020, "interpreting GPT: the logit lens") reads it off earlier: the
stream after each block, and the embeddings before any block, through the same final LayerNorm
and head (`tinyattn.interpretability.logit_lens`, built on chapter 4's `run_with_cache`). Each
row of the lens is then scored as the model is, by the cross-entropy of the next token, and by
how often its likeliest next token is the model's own final choice.

1. Demo 11's tiny GPT (character level, Python's documentation), retrained here with demo 11's
   recipe for fewer steps (its schedule fitted to them), so that every run reads the same model;
   `--checkpoint` reads a model demo 11 saved instead (`tinyattn-demos/tiny_gpt.npz`). The
   embeddings' row can only guess from the current character (nothing else reaches it), so it is
   set beside a bigram model counted on the training part. For a line of text, the picture
   shows row by row the likeliest next character and the probability of the right one.
2. GPT-2 small, when its weights are on the machine (`python -m tinyattn download gpt2`): the
   same scores on the start of demo 11's validation text, and each row's likeliest next token
   after a prompt. Without them, the demo says so and reads only the tiny GPT. `--quick` reads
   the small GPT-2 of random weights in tests/fixtures/gpt2-tiny instead (its numbers mean
   nothing: the pipeline runs) and retrains the tiny GPT for a few steps (what the tests run).

    python demos/17_logit_lens.py [output folder] [--quick] [--checkpoint FILE] [--weights DIR]

The picture is `logit_lens.png` in the output folder. The full run's time, as
`dev/regenerate.py` measured it, ends the demo's entry on docs/demos.md.
"""
import importlib
import os

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.interpretability import logit_lens
from tinyattn.tokenizer import GPT2Tokenizer
from tinyattn_tools import download

tiny_gpt = importlib.import_module("11_tiny_gpt")
gpt2_demo = importlib.import_module("14_gpt2")

# %% [markdown]
# The settings: how long the tiny GPT is retrained and on how much of the validation part the
# rows are scored; the line of text the picture reads; GPT-2's prompt and how many tokens of
# text it reads (its vocabulary makes every position 50,257 numbers per row, so the lens reads
# them CHUNK positions at a time).

# %%
FULL = dict(steps=600, warmup_steps=60, eval_every=200, eval_batches=4,
            lens_characters=48 * 4 * tiny_gpt.CONTEXT, gpt2_tokens=512)
QUICK = dict(steps=20, warmup_steps=3, eval_every=10, eval_batches=1,
             lens_characters=8 * tiny_gpt.CONTEXT, gpt2_tokens=64)
EXAMPLE = "Return the number of items in the sequence."
GPT2_PROMPT = "The capital of France is the city of"
CHUNK = 64


# %% [markdown]
# The lens's scores, row by row: the mean cross-entropy of the next token (nats per token), the
# share of tokens it guesses right, and the share where its guess is the model's final one.

# %%
def lens_scores(model, batches, chunk=None):
    """(cross-entropy, accuracy, agreement with the last row), each (num_layers + 1,), over the
    (ids, targets) batches; the lens reads `chunk` positions at a time (all at once for None)."""
    rows = len(model.blocks) + 1
    nats, right, agree, count = np.zeros(rows), np.zeros(rows), np.zeros(rows), 0
    for ids, targets in batches:
        step = chunk or ids.shape[1]
        for start in range(0, ids.shape[1], step):
            read = slice(start, start + step)
            lens = logit_lens(model, ids, positions=read)                   # (rows, B, t, V)
            log_probabilities = F.log_softmax(ta.tensor(lens)).data         # (rows, B, t, V)
            target = targets[:, read]                                       # (B, t)
            chosen = np.take_along_axis(log_probabilities, target[None, ..., None], axis=-1)
            nats -= chosen[..., 0].sum(axis=(1, 2), dtype=np.float64)
            guess = lens.argmax(axis=-1)                                    # (rows, B, t)
            right += (guess == target).sum(axis=(1, 2))
            agree += (guess == guess[-1]).sum(axis=(1, 2))
            count += target.size
    return nats / count, right / count, agree / count


def example_reading(model, vocabulary, text):
    """Row by row, for each character of `text` but the last: the lens's likeliest next
    character (rows, T - 1) and its probability of the right one (rows, T - 1)."""
    ids = tiny_gpt.encode(text, vocabulary)
    lens = logit_lens(model, ids[None, :-1])[:, 0]                          # (rows, T - 1, V)
    probabilities = F.softmax(ta.tensor(lens)).data                         # (rows, T - 1, V)
    guesses = np.vectorize(lambda i: vocabulary[i])(lens.argmax(axis=-1))
    right = np.take_along_axis(probabilities, ids[None, 1:, None], axis=-1)[..., 0]
    return guesses, right


# %% [markdown]
# 1. The tiny GPT: retrained (or read from demo 11's checkpoint), then read row by row.

# %%
def tiny_gpt_model(settings, checkpoint, vocabulary, train_data, val_data):
    """(the model in eval mode, the validation loss demo 11's training printed or None)."""
    if checkpoint is not None:
        model, saved_vocabulary = tiny_gpt.load_checkpoint(checkpoint)
        if saved_vocabulary != vocabulary:
            raise SystemExit(f"17_logit_lens.py: the checkpoint {checkpoint} was trained on "
                             f"another text (another vocabulary) than this Python's "
                             f"documentation")
        return model, None
    ta.manual_seed(tiny_gpt.SEED)
    model = tiny_gpt.build_model(len(vocabulary), tiny_gpt.POSITIONAL, **tiny_gpt.SIZES)
    held_out = tiny_gpt.held_out_batches(train_data, val_data, settings["eval_batches"])
    history = tiny_gpt.train(model, train_data, held_out, settings)
    return model.eval(), history["val_losses"][-1]


# %% [markdown]
# 2. GPT-2: the start of demo 11's validation text as GPT-2's tokens, scored row by row, and
# each row's likeliest next token after a prompt.

# %%
def gpt2_reading(folder, tokens):
    """GPT-2's lens: the scores on `tokens` tokens of the validation text (at most its context),
    each row's likeliest token after GPT2_PROMPT, and the model's size."""
    model = nn.CausalTransformer.from_pretrained(folder).eval()
    tokenizer = GPT2Tokenizer.from_pretrained(folder)
    count = min(tokens, model.max_len) + 1
    ids = np.array(tokenizer.encode(gpt2_demo.validation_text(20 * count)))[:count]
    scores = lens_scores(model, [(ids[None, :-1], ids[None, 1:])], chunk=CHUNK)
    prompt = np.array([tokenizer.encode(GPT2_PROMPT)])
    last = logit_lens(model, prompt, positions=-1)[:, 0]                    # (rows, V)
    guesses = [tokenizer.decode([int(token)]) for token in last.argmax(axis=-1)]
    return scores, guesses, count - 1, len(model.blocks)


def gpt2_folder(args):
    """The GPT-2 folder to read: the fixture in quick mode, --weights, or the downloaded one;
    None when the weights are not there."""
    if args.quick:
        return str(gpt2_demo.FIXTURE)
    folder = args.weights or download.default_folder()
    return folder if gpt2_demo.has_weights(folder) else None


# %% [markdown]
# `main` reads both models and returns the numbers.

# %%
def main(argv=None):
    args = command_line(argv)
    settings = QUICK if args.quick else FULL
    text = tiny_gpt.documentation_text()
    vocabulary = "".join(sorted(set(text)))
    train_data, val_data = tiny_gpt.split(tiny_gpt.encode(text, vocabulary))
    unigram, bigram = tiny_gpt.baselines(train_data, val_data, len(vocabulary))
    source = (f"read from {args.checkpoint}" if args.checkpoint else
              f"retrained for {settings['steps']} steps")
    print(f"1. Demo 11's tiny GPT ({source}):")
    model, trained_loss = tiny_gpt_model(settings, args.checkpoint, vocabulary, train_data,
                                         val_data)
    batches = tiny_gpt.consecutive_batches(val_data[:settings["lens_characters"]])
    scored = sum(targets.size for _, targets in batches)
    cross_entropy, accuracy, agreement = lens_scores(model, batches)
    rows = ["embeddings"] + [f"after block {i}" for i in range(len(model.blocks))]
    print_lens(rows, cross_entropy, accuracy, agreement,
               f"\nThe lens over {scored:,} characters of the validation part (bigram model "
               f"{bigram:.3f}, unigram {unigram:.3f} nats per character):")
    tiny_gpt.check_prompt(EXAMPLE, vocabulary)
    guesses, right = example_reading(model, vocabulary, EXAMPLE)
    print(f"\nRow by row, the likeliest next character after each character of {EXAMPLE!r}:")
    for row, line in zip(rows, guesses):
        print(f"   {row:>15}: {''.join(line)!r}")
    numbers = {"steps": settings["steps"], "checkpoint": bool(args.checkpoint),
               "parameters": sum(p.size for p in model.parameters()),
               "trained_loss": trained_loss, "bigram": bigram, "unigram": unigram,
               "characters_scored": scored, "cross_entropy": cross_entropy.tolist(),
               "accuracy": accuracy.tolist(), "agreement": agreement.tolist(),
               "rows": len(rows), "example": EXAMPLE,
               "example_guesses": ["".join(line) for line in guesses],
               "embeddings_loss": float(cross_entropy[0]),
               "cross_entropy_shown": shown(cross_entropy, "{:.2f}"),
               "agreement_shown": shown(agreement, "{:.0%}"),
               "first_block_guess": visible("".join(guesses[1])),
               "final_guess": visible("".join(guesses[-1]))}

    folder = gpt2_folder(args)
    if folder is None:
        print(f"\n2. GPT-2's weights are not in {args.weights or download.default_folder()}: "
              f"`python -m tinyattn download gpt2` (548 MB) gets them; the tiny GPT alone here.")
        numbers.update(gpt2=None, gpt2_sentence=(
            "GPT-2 small's weights were not on the machine that ran this list; with them "
            "(`python -m tinyattn download gpt2`) the demo reads GPT-2's rows the same way."))
        gpt2 = None
    else:
        gpt2 = gpt2_reading(folder, settings["gpt2_tokens"])
        (gpt2_entropy, _, gpt2_agreement), gpt2_guesses, tokens, layers = gpt2
        gpt2_rows = ["embeddings"] + [f"after block {i}" for i in range(layers)]
        print_lens(gpt2_rows, *gpt2[0], f"\n2. GPT-2 from {folder}"
                   f"{' (random weights: the numbers mean nothing)' if args.quick else ''}, "
                   f"the lens over {tokens} tokens of the same validation text (nats per token):")
        print(f"\nRow by row, the likeliest next token after {GPT2_PROMPT!r}: "
              f"{', '.join(map(repr, gpt2_guesses))}")
        numbers.update(gpt2=True, gpt2_tokens=tokens, gpt2_cross_entropy=gpt2_entropy.tolist(),
                       gpt2_agreement=gpt2_agreement.tolist(), gpt2_guesses=gpt2_guesses,
                       gpt2_sentence=gpt2_sentence(gpt2_entropy, gpt2_agreement, gpt2_guesses,
                                                   tokens, args.quick))
    picture = plot(rows, cross_entropy, agreement, bigram, unigram, guesses, right, gpt2,
                   args.output / "logit_lens.png")
    demo_tools.print_pictures(picture)
    return numbers


# %% [markdown]
# Plumbing, what the experiment needs but is not about: the command line, what it prints, the
# picture, and the entry on docs/demos.md.

# %%
def command_line(argv):
    parser = demo_tools.argument_parser(__doc__)
    parser.add_argument("--checkpoint", metavar="FILE", default=None,
                        help="read the tiny GPT from a checkpoint demo 11 saved, not retrain it")
    parser.add_argument("--weights", metavar="DIR", default=None,
                        help=f"GPT-2's folder (default: {download.default_folder()})")
    args = parser.parse_args(argv)
    demo_tools.one_blas_thread()
    if args.checkpoint is not None and not os.path.isfile(args.checkpoint):
        raise SystemExit(f"17_logit_lens.py: there is no checkpoint {args.checkpoint} (demo 11 "
                         f"saves one as tinyattn-demos/{tiny_gpt.CHECKPOINT})")
    return args


def visible(text):
    """Characters as docs/demos.md can show them in a line of code: a space as ·, a line break as
    ↵, a backquote as '."""
    return text.replace(" ", "·").replace("\n", "↵").replace("`", "'")


def shown(values, form):
    """"4.10, 2.90, ...": values in a sentence."""
    return ", ".join(form.format(value) for value in values)


def gpt2_sentence(entropy, agreement, guesses, tokens, quick):
    """The entry's sentence on GPT-2, from its numbers."""
    what = ("the small GPT-2 of random weights (quick mode: the numbers mean nothing)" if quick
            else "GPT-2 small")
    return (f"On {what}, over {tokens} tokens of the same validation text, the rows' "
            f"cross-entropies are {shown(entropy, '{:.2f}')} nats per token and their agreement "
            f"with the final guess {shown(agreement, '{:.0%}')}; after \"{GPT2_PROMPT}\" the "
            f"rows' likeliest next tokens are {', '.join(map(repr, guesses))}.")


def print_lens(rows, cross_entropy, accuracy, agreement, title):
    demo_tools.print_table(["row", "cross-entropy", "right", "as the final guess"],
                           [[row, f"{entropy:.3f}", f"{right:.1%}", f"{agree:.1%}"]
                            for row, entropy, right, agree in zip(rows, cross_entropy, accuracy,
                                                                  agreement)], title)


def plot(rows, cross_entropy, agreement, bigram, unigram, guesses, right, gpt2, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    panels = 2 if gpt2 is None else 3
    figure, axes = plt.subplots(1, panels, figsize=(6 * panels + 4, 4.2),
                                width_ratios=(1,) * (panels - 1) + (2.6,))
    lines = [(axes[0], "tiny GPT", "nats per character", cross_entropy, agreement)]
    if gpt2 is not None:
        (entropy, _, gpt2_agreement), _, tokens, _ = gpt2
        lines.append((axes[1], f"GPT-2, {tokens} tokens", "nats per token", entropy,
                      gpt2_agreement))
    for panel, name, unit, entropy, agree in lines:
        where = np.arange(len(entropy))
        panel.plot(where, entropy, "o-", label=f"cross-entropy ({unit})")
        panel.plot(where, agree, "s--", label="share as the final guess")
        panel.set_xticks(where, ["emb."] + [str(i) for i in range(len(entropy) - 1)])
        panel.set(xlabel="row of the lens (embeddings, then after block i)",
                  title=f"the logit lens: {name}")
    axes[0].axhline(bigram, color="gray", linestyle="--", linewidth=1, label="bigram model")
    axes[0].axhline(unigram, color="gray", linestyle=":", linewidth=1, label="unigram model")
    heatmap = axes[-1]
    image = heatmap.imshow(right, aspect="auto", cmap="Greens", vmin=0, vmax=1)
    for row in range(right.shape[0]):
        for column in range(right.shape[1]):
            heatmap.text(column, row, repr(str(guesses[row, column]))[1:-1], ha="center",
                         va="center", fontsize=7)
    heatmap.set_xticks(np.arange(right.shape[1]), list(EXAMPLE[:-1]), fontsize=7)
    heatmap.set_yticks(np.arange(len(rows)), rows)
    heatmap.set_title("tiny GPT: the likeliest next character after each one, row by row "
                      "(colour: the probability of the right one)", fontsize=9)
    figure.colorbar(image, ax=heatmap, fraction=0.02)
    return demo_tools.save_chart(figure, path, *[panel for panel, *_ in lines])


PAGE_ENTRY = """\
17. [`17_logit_lens.py`](../demos/17_logit_lens.py) — the logit lens (nostalgebraist 2020): what
    each layer of a language model would predict, read by putting its residual stream through the
    final LayerNorm and head (`tinyattn.interpretability.logit_lens`). On demo 11's tiny GPT
    ({parameters:,} parameters), retrained here for {steps} steps, the rows (the embeddings, then
    after each block) score {cross_entropy_shown} nats per character over {characters_scored:,}
    characters of the validation part, and their likeliest next character is the model's final
    one for {agreement_shown} of them. The embeddings' row sees only the current character: it
    scores {embeddings_loss:.2f} where a bigram model counted on the training part scores
    {bigram:.2f}. After each character of "{example}", the first block's row guesses
    `{first_block_guess}` and the last row `{final_guess}` (· is a space). {gpt2_sentence}

    ![each row's cross-entropy, and its guesses on one line of text](pictures/logit_lens.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
