"""Demo 14: GPT-2 small, OpenAI's weights in the engine of this repository.

What it shows: the model every earlier demo was a small version of, with real weights. GPT-2
small (124M parameters, 12 layers of 12 heads, width 768) is read into `nn.CausalTransformer` by
`from_pretrained` (tinyattn/nn/pretrained.py), its text cut into tokens by
`tinyattn.tokenizer.GPT2Tokenizer`; every op it runs is one whose gradient `python -m tinyattn
check` verifies. It prints:

1. the 5 likeliest next tokens, with their probabilities, after a few prompts;
2. a greedy and a sampled continuation of a prompt, written with the key/value cache;
3. tokens per second writing with the cache and recomputing every prefix;
4. the perplexity of the validation part of demo 11's text (Python's documentation topics, the
   last 10% of the characters, split as demo 11 splits them), in nats per character, the unit of
   demo 11's loss: what 124M parameters trained on web text, and a real tokenizer, buy against a
   tiny model trained on the other 90% of the same text. The text is cut into windows of the
   model's 1,024 positions, each starting half a window after the one before, and each token is
   scored once, in the first window where it has at least half a window of context before it
   (all tokens of the first window are scored there);
5. induction heads (Olsson et al. 2022, "In-context Learning and Induction Heads"): a head that,
   at a token seen before, attends to the token that followed it last time, so that the model can
   copy the sequence on. The test: sequences of RANDOM tokens, each written twice after GPT-2's
   <|endoftext|>. In the second copy, a token's previous occurrence is exactly REPEAT tokens back,
   and the induction score of a head is its attention weight from each token of the second copy
   to the token after that previous occurrence, averaged over the tokens and the sequences
   (Olsson et al.'s definition). A head scoring above INDUCTION_THRESHOLD is listed as one that
   copies. The loss on the first copy (random: nothing to predict) against the second (copyable)
   shows what they do. Olsson et al. argue an induction head needs a previous-token head in an
   earlier layer, so none can be in the first layer; in GPT-2 small, Wang et al. 2022 (the IOI
   paper) name heads 5.5 and 6.9 (layer.head, counted from 0) as induction heads: the demo says
   whether this run agrees. The picture draws every head's attention on one repeated sequence,
   titled with its score.

    python -m tinyattn download gpt2                          # once, 548 MB
    python demos/14_gpt2.py [output folder] [--weights FOLDER] [--quick]

The weights: FOLDER, or the folder `python -m tinyattn download gpt2` fills by default; without
them the demo says how to get them, and stops. `--quick` runs the whole pipeline on the small
GPT-2 of random weights in tests/fixtures/gpt2-tiny (what the tests run): its numbers mean
nothing, but every step runs. The picture is `gpt2_induction_heads.png` in the output folder.
"""
import importlib
import json
import os

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.tokenizer import GPT2Tokenizer
from tinyattn_tools import download

# %% [markdown]
# The settings (the prompts, sampling, the sizes of the full and the quick run), and docs/demos.md's
# entries for this demo, with the weights and without, the first of which `dev/regenerate.py`
# fills with the numbers `main` returns.

# %%
SEED = 0
PROMPTS = ["The capital of France is", "import numpy as", "Attention is all you",
           "for i in range("]
CONTINUED = "The key to understanding attention is"
SAMPLING = dict(temperature=0.8, top_k=40)
TOP = 5
ENDOFTEXT = 50256
INDUCTION_THRESHOLD = 0.4
KNOWN_INDUCTION_HEADS = ("5.5", "6.9")          # Wang et al. 2022, in GPT-2 small
FULL = dict(continuation_length=40, speed_length=64, validation_characters=None, repeat=50,
            sequences=8)
QUICK = dict(continuation_length=8, speed_length=8, validation_characters=3000, repeat=20,
             sequences=2)
FIXTURE = demo_tools.ROOT / "tests" / "fixtures" / "gpt2-tiny"    # a notebook has no __file__
RESULTS = demo_tools.ROOT / "docs" / "pictures" / "results.json"
FILES = ("config.json", "model.safetensors", "vocab.json", "merges.txt")

PAGE_ENTRY = """\
14. [`14_gpt2.py`](../demos/14_gpt2.py) — GPT-2 small ({parameters:,} parameters, OpenAI's weights
    read by `CausalTransformer.from_pretrained`, text cut by tinyattn's own GPT-2 tokenizer) in
    the engine of this repository. After "{prompt_0}" its likeliest next tokens are {top_0}; after
    "{prompt_2}", {top_2}. Greedy, it continues "{continued}" with `{greedy_shown}`. It writes
    {cached_tokens_per_second:.1f} tokens per second with the key/value cache and
    {recomputed_tokens_per_second:.1f} recomputing every prefix ({speed_length} tokens, one BLAS
    thread). On the validation part of demo 11's text ({validation_characters:,} characters,
    {validation_tokens:,} tokens) it scores {nats_per_character:.2f} nats per character
    ({nats_per_token:.2f} per token), where demo 11's tiny GPT, trained on the rest of that
    text, scores {tiny_gpt_nats_per_character:.2f}. Induction heads: on random tokens written
    twice, the loss falls from {first_copy_loss:.1f} nats per token on the first copy to
    {second_copy_loss:.1f} on the second; {induction_head_count} heads score above
    {threshold} (the best: {best_heads}), {agreement}.

    ![every head's attention on repeated random tokens](pictures/gpt2_induction_heads.png)"""

PAGE_ENTRY_WITHOUT_RESULTS = """\
14. [`14_gpt2.py`](../demos/14_gpt2.py) — GPT-2 small (124M parameters, OpenAI's weights read by
    `CausalTransformer.from_pretrained`, text cut by tinyattn's own GPT-2 tokenizer) in the engine
    of this repository. It needs the weights, `python -m tinyattn download gpt2` (548 MB), which
    the machine that wrote this list did not have: run it to see the likeliest next tokens after
    a few prompts with their probabilities, a greedy and a sampled continuation, the tokens per
    second with and without the key/value cache, GPT-2's nats per character on the validation
    part of demo 11's text next to demo 11's tiny GPT, and GPT-2's induction heads: each head's
    induction score on repeated random tokens, the heads that copy, whether they are those the
    literature names, and a picture of every head's attention. Its quick run (the tests) runs
    the same pipeline on a small GPT-2 of random weights. (`python dev/regenerate.py` puts
    the measured numbers here once the weights are there.)"""


# What the quick run says in place of conclusions: its weights are random.
QUICK_RUN_SAYS = ("Quick run: the weights are random (tests/fixtures/gpt2-tiny), so the numbers "
                  "below say nothing about GPT-2: its next tokens are arbitrary, its losses "
                  "those of no trained model, and no head has learned to copy. What it shows is "
                  "that every step of the pipeline runs: the tokenizer, the checkpoint read, "
                  "generation with the key/value cache, scoring in windows, every head's "
                  "attention weights. GPT-2's own numbers: `python -m tinyattn download gpt2`, "
                  "then `python demos/14_gpt2.py`.")
RANDOM_HEADS_SAY = ("random weights: no head was trained to copy, so these scores show that the "
                    "measurement runs, not which heads copy (the full run compares GPT-2's with "
                    "the literature's)")


# %% [markdown]
# Where the weights are: `--quick` takes the small GPT-2 of random weights in tests/fixtures, the
# full run the folder `python -m tinyattn download gpt2` fills, or the one `--weights` names.

# %%
def has_weights(folder):
    return folder is not None and all(os.path.isfile(os.path.join(folder, name))
                                      for name in FILES)


def can_run_in_full():
    """Whether the full run has its weights (regenerate includes the demo only then)."""
    return has_weights(download.default_folder())


def command_line(argv):
    parser = demo_tools.argument_parser(__doc__)
    parser.add_argument("--weights", metavar="FOLDER", default=None,
                        help=f"GPT-2's folder (default: {download.default_folder()})")
    args = parser.parse_args(argv)
    demo_tools.one_blas_thread()
    if args.quick:
        args.weights = str(FIXTURE)
    elif args.weights is None:
        args.weights = download.default_folder()
    if not has_weights(args.weights):
        missing = [name for name in FILES if not os.path.isfile(os.path.join(args.weights, name))]
        raise SystemExit(f"14_gpt2.py: GPT-2's weights are not in {args.weights} (no "
                         f"{', '.join(missing)}). Get them with `python -m tinyattn download "
                         f"gpt2` (548 MB, into {download.default_folder()}), or name a folder "
                         f"holding {', '.join(FILES)} with --weights; `--quick` runs the demo "
                         f"on a small GPT-2 of random weights.")
    return args


# %% [markdown]
# 1-3. The likeliest tokens after a prompt, and a continuation written with the key/value cache
# (`main` times it with the cache and without).

# %%
def likeliest_next_tokens(model, tokenizer, prompt):
    """[(token, probability)] of the TOP likeliest tokens after `prompt`."""
    with ta.no_grad():
        logits = model(np.array([tokenizer.encode(prompt)]), last_only=True)   # (1, 1, vocab)
        probabilities = F.softmax(logits[0, 0]).data                           # (vocab,)
    best = np.argsort(probabilities)[::-1][:TOP]
    return [(tokenizer.decode([token]), float(probabilities[token])) for token in best]


def shown(table):
    """"' Paris' (13%), ' the' (5%), ...": a table of next tokens in a sentence."""
    return ", ".join(f"{token!r} ({probability:.0%})" for token, probability in table)


def continuation(model, tokenizer, prompt, length, **sampling):
    """`length` tokens after `prompt`, as text, drawn from a generator seeded with SEED."""
    prompt_ids = np.array([tokenizer.encode(prompt)])
    ta.manual_seed(SEED)
    ids = model.generate(prompt_ids, length, **sampling)
    return tokenizer.decode(ids[0, prompt_ids.shape[1]:].tolist())


# %% [markdown]
# 4. Perplexity on demo 11's validation text, read in overlapping windows of the model's positions,
# each token scored once.

# %%
def validation_text(characters=None):
    """The validation part of demo 11's text (its first `characters` characters, if given)."""
    tiny_gpt = importlib.import_module("11_tiny_gpt")
    _, validation = tiny_gpt.split(tiny_gpt.documentation_text())
    return validation[:characters]


def scoring_windows(count, window):
    """(begin, end, first) for each window over `count` tokens: the model reads tokens
    begin ... end - 1 (at most `window` of them) and the tokens first ... end - 1 are scored
    there. Windows start every window // 2 tokens, so every token after the first is scored
    once, with at least window // 2 tokens before it, except in the first window."""
    windows, scored_up_to = [], 1                   # token 0 has nothing before it to predict it
    for begin in range(0, count, window // 2):
        end = min(begin + window, count)
        windows.append((begin, end, scored_up_to))
        scored_up_to = end
        if end == count:
            break
    return windows


def nats(model, ids, window):
    """The sum of -log p(token | the tokens before it in its window) over ids[1:], and how many
    tokens that is."""
    total = 0.0
    for begin, end, first in scoring_windows(len(ids), window):
        with ta.no_grad():
            log_probabilities = F.log_softmax(model(ids[None, begin:end])).data[0]  # (T, vocab)
        predicted = np.arange(first, end)                       # positions of scored tokens
        total -= log_probabilities[predicted - 1 - begin, ids[predicted]].astype(float).sum()
    return total, len(ids) - 1


def tiny_gpt_loss():
    """Demo 11's validation loss (nats per character) as regenerate recorded it, or None."""
    try:
        return json.loads(RESULTS.read_text())["11_tiny_gpt"]["val_loss_all"]
    except (OSError, KeyError, ValueError):
        return None


# %% [markdown]
# 5. Induction heads: random tokens written twice, each head's induction score, and the loss on
# each copy.

# %%
def repeated_random_tokens(sequences, repeat):
    """(sequences, 1 + 2 * repeat) ids: <|endoftext|>, then `repeat` random tokens, twice."""
    tokens = np.random.default_rng(SEED).integers(0, ENDOFTEXT, (sequences, repeat))
    start = np.full((sequences, 1), ENDOFTEXT)
    return np.concatenate([start, tokens, tokens], axis=1)


def induction_scores(weights, repeat):
    """Each head's induction score, (layers, heads), from attention weights (N, layers, heads,
    T, T) on repeated_random_tokens: the weight from each token of the second copy (positions
    1 + repeat ... 2 * repeat) to the token after its previous occurrence, `repeat` - 1 positions
    back, averaged over those tokens and the N sequences."""
    queries = np.arange(1 + repeat, 1 + 2 * repeat)             # (repeat,) the second copy
    keys = queries - repeat + 1                                 # after the previous occurrence
    return weights[..., queries, keys].mean(axis=(0, -1))       # (N, L, H, repeat) -> (L, H)


def copy_losses(logits, ids, repeat):
    """(mean loss on the first copy, on the second), nats per token: the predictions made
    within each copy (the first token of a copy is predicted from what comes before it)."""
    log_probabilities = F.log_softmax(logits).data                      # (N, T, vocab)
    targets = ids[:, 1:, None]                                          # (N, T - 1, 1)
    losses = -np.take_along_axis(log_probabilities[:, :-1], targets, axis=-1)[..., 0]
    return float(losses[:, 1:repeat].mean()), float(losses[:, repeat + 1:2 * repeat].mean())


def induction_heads(model, sequences, repeat):
    """The scores (layers, heads), the losses on both copies, and the attention weights of the
    first sequence (layers, heads, T, T)."""
    ids = repeated_random_tokens(sequences, repeat)
    with ta.no_grad():
        logits, weights = model(ids, return_weights=True)
    weights = np.stack([layer.data for layer in weights], axis=1)      # (N, L, H, T, T)
    return induction_scores(weights, repeat), copy_losses(logits, ids, repeat), weights[0]


# %% [markdown]
# What this run says next to the literature: Olsson et al.'s first layer and Wang et al.'s heads.

# %%
def head_name(layer, head):
    return f"{layer}.{head}"


def agreement(scores):
    """What this run says next to the literature: no induction head in the first layer (Olsson
    et al.), and Wang et al.'s heads among those that copy."""
    copying = {head_name(*where) for where in zip(*np.nonzero(scores > INDUCTION_THRESHOLD))}
    in_first_layer = sorted(name for name in copying if name.startswith("0."))
    layers, heads = scores.shape
    known = [name for name in KNOWN_INDUCTION_HEADS
             if int(name.split(".")[0]) < layers and int(name.split(".")[1]) < heads]
    first = ("none in the first layer, as Olsson et al. 2022 expect" if not in_first_layer else
             f"{', '.join(in_first_layer)} in the first layer, where Olsson et al. 2022 expect "
             f"none")
    if not known:
        return f"{first}; this model has no heads {' and '.join(KNOWN_INDUCTION_HEADS)} to " \
               f"compare with Wang et al. 2022's", None
    found = [name for name in known if name in copying]
    agrees = not in_first_layer and len(found) == len(known)
    named = " and ".join(known)
    return (f"{first}; {'both' if len(found) == len(known) else len(found)} of the heads Wang et "
            f"al. 2022 name, {named}, among them: this run "
            f"{'agrees' if agrees else 'does not agree'}"), agrees


# %% [markdown]
# The picture: every head's attention on one repeated sequence, titled with its score.

# %%
def plot(weights, scores, path):
    """Every head's attention on one repeated sequence, titled with its induction score; a red
    frame around the heads above INDUCTION_THRESHOLD."""
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    layers, heads = scores.shape
    figure, grid = plt.subplots(layers, heads, figsize=(1.25 * heads + 1, 1.35 * layers + 1),
                                squeeze=False, layout="constrained")
    for layer in range(layers):
        for head in range(heads):
            axes = grid[layer, head]
            axes.imshow(weights[layer, head], cmap="Blues", vmin=0, vmax=1)
            axes.set_xticks([])
            axes.set_yticks([])
            copies = scores[layer, head] > INDUCTION_THRESHOLD
            axes.set_title(f"{head_name(layer, head)}: {scores[layer, head]:.2f}", fontsize=8,
                           color="tab:red" if copies else "black")
            for spine in axes.spines.values():
                spine.set(color="tab:red" if copies else "gray", linewidth=2 if copies else 0.5)
    figure.suptitle(f"Every head's attention (layer.head) on <|endoftext|> and "
                    f"{(weights.shape[-1] - 1) // 2} random tokens\nwritten twice (rows: queries, "
                    f"columns: keys). Titles: the induction score;\nred: above "
                    f"{INDUCTION_THRESHOLD}, a head that copies (the stripe below the diagonal)",
                    fontsize=9)
    return demo_tools.save_figure(figure, path, dpi=80)


# %% [markdown]
# `main` loads the model and the tokenizer, runs the five parts in order, and returns the numbers.

# %%
def main(argv=None):
    args = command_line(argv)
    settings = QUICK if args.quick else FULL
    model = nn.CausalTransformer.from_pretrained(args.weights)
    tokenizer = GPT2Tokenizer.from_pretrained(args.weights)
    parameters = sum(p.size for p in model.parameters())
    layers, heads = len(model.blocks), model.num_heads
    print(f"GPT-2 from {args.weights}: {parameters:,} parameters, {layers} layers of {heads} "
          f"heads, width {model.embed.embedding_dim}, {model.max_len} positions, float32\n")
    if args.quick:
        print(QUICK_RUN_SAYS + "\n")

    numbers = {"parameters": parameters, "quick": args.quick}
    print(f"1. The {TOP} likeliest next tokens:")
    for number, prompt in enumerate(PROMPTS):
        table = likeliest_next_tokens(model, tokenizer, prompt)
        print(f"   {prompt!r:<28} {shown(table)}")
        numbers.update({f"prompt_{number}": prompt, f"top_{number}": shown(table),
                        f"top_tokens_{number}": [token for token, _ in table],
                        f"top_probabilities_{number}": [p for _, p in table]})

    length = settings["continuation_length"]
    greedy = continuation(model, tokenizer, CONTINUED, length, temperature=0)
    sampled = continuation(model, tokenizer, CONTINUED, length, **SAMPLING)
    print(f"\n2. {length} tokens after {CONTINUED!r}, with the key/value cache:\n"
          f"   greedy:  {greedy!r}\n   sampled (temperature {SAMPLING['temperature']}, top-k "
          f"{SAMPLING['top_k']}, seed {SEED}):  {sampled!r}")
    tiny_gpt = importlib.import_module("11_tiny_gpt")
    numbers.update(continued=CONTINUED, greedy=greedy, sampled=sampled, **SAMPLING,
                   greedy_shown=tiny_gpt.first_lines(greedy, 200).replace("`", "'"))

    prompt_ids = np.array([tokenizer.encode(CONTINUED)])
    speed = demo_tools.generation_speed(model, prompt_ids, settings["speed_length"], SAMPLING,
                                        SEED)
    print(f"\n3. Writing {settings['speed_length']} tokens: {speed['cached']:.1f} tokens/s with "
          f"the cache, {speed['recomputed']:.1f} recomputing every prefix "
          f"({speed['cached'] / speed['recomputed']:.1f}x)")
    numbers.update(speed_length=settings["speed_length"], cached_tokens_per_second=speed["cached"],
                   recomputed_tokens_per_second=speed["recomputed"])

    text = validation_text(settings["validation_characters"])
    ids = np.array(tokenizer.encode(text))
    total, scored = nats(model, ids, model.max_len)
    characters = len(text) - len(tokenizer.decode(ids[:1].tolist()))
    tiny_gpt_nats = None if args.quick else tiny_gpt_loss()
    if args.quick:
        compared = " (random weights: no comparison with demo 11's tiny GPT)"
    else:
        compared = f" (demo 11's tiny GPT: {tiny_gpt_nats:.3f})" if tiny_gpt_nats else ""
    print(f"\n4. The validation part of demo 11's text: {len(text):,} characters, {len(ids):,} "
          f"tokens ({len(text) / len(ids):.2f} characters per token); in windows of "
          f"{model.max_len} tokens, half a window apart:\n   {total / scored:.3f} nats per token, "
          f"{total / characters:.3f} nats per character{compared}")
    numbers.update(validation_characters=len(text), validation_tokens=len(ids),
                   nats_per_token=total / scored, nats_per_character=total / characters,
                   tiny_gpt_nats_per_character=tiny_gpt_nats)

    repeat = settings["repeat"]
    scores, (first_loss, second_loss), weights = induction_heads(model, settings["sequences"],
                                                                 repeat)
    ranked = sorted(np.ndindex(*scores.shape), key=lambda where: -scores[where])
    copying = [head_name(*where) for where in ranked if scores[where] > INDUCTION_THRESHOLD]
    said, agrees = (RANDOM_HEADS_SAY, None) if args.quick else agreement(scores)
    best = ", ".join(f"{head_name(*where)} ({scores[where]:.2f})" for where in ranked[:5])
    print(f"\n5. Induction heads, on {settings['sequences']} sequences of {repeat} random tokens "
          f"written twice: the loss is {first_loss:.2f} nats per token on the first copy, "
          f"{second_loss:.2f} on the second.\n   Heads above {INDUCTION_THRESHOLD}: "
          f"{', '.join(copying) or 'none'}; the best: {best}\n   {said}")
    numbers.update(repeat=repeat, first_copy_loss=first_loss, second_copy_loss=second_loss,
                   induction_scores=scores.tolist(), induction_heads=copying,
                   induction_head_count=len(copying), best_heads=best,
                   threshold=INDUCTION_THRESHOLD, agreement=said, agrees=agrees)
    picture = plot(weights, scores, args.output / "gpt2_induction_heads.png")
    if picture is not None:
        print(f"   picture: {picture}")
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
