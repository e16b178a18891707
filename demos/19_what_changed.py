"""Demo 19: what changed since GPT-2, and what does each change buy?

What it shows: demo 11's tiny GPT changed one step at a time towards Qwen3, each model trained
the same steps on the same batches of Python's documentation, and each one measured four ways:
its held-out loss, the processor time of a training step (as a ratio to GPT-2's), its
parameters, and the bytes its key/value cache keeps per token when it writes (`cache.nbytes`).

    0 GPT-2      demo 11's model: LayerNorm, a GELU feed-forward of 4 E with biases, biases on
                 the attention's projections and the head, sinusoidal positions added to the
                 embeddings (GPT-2 learns that table: demo 11 explains its choice), 4 heads
    1 RMSNorm    every LayerNorm an RMSNorm: no mean taken out, no bias (Zhang & Sennrich 2019)
    2 SwiGLU     the feed-forward gated, down(silu(gate(x)) * up(x)) (Shazeer 2020), its hidden
                 width cut to keep its parameters; and no biases left anywhere, as in Llama and
                 Qwen3 (PaLM dropped them for stability at scale)
    3 rotary     rotary positions in the rotate-half layout, turning the queries and keys (Su
                 et al. 2021, RoFormer), instead of the table added to the embeddings
    4 GQA        grouped-query attention: 2 key/value heads shared by the 4 query heads (Ainslie
                 et al. 2023)
    5 QK-norm    each head's queries and keys RMS-normed before the rotation (Qwen3, Gemma 3)

How they are built, from the library's public pieces. Models 3 to 5 are chapter 5's pages:
model 3 is `nn.Llama` (tinyattn/nn/llama.py) with as many key/value heads as query heads, model
4 sets `num_kv_heads=2`, model 5 is `nn.Qwen3` (tinyattn/nn/qwen3.py: Llama's attention with
QK-norm, one override). GPT-2 is not a Llama (a Llama always
turns its queries and keys by their positions, and its norms and feed-forward are chapter 5's),
so models 0 to 2 are chapter 2's `nn.CausalTransformer` (demo 11's model), with chapter 5's
layers put in the place of chapter 1's by `set_submodule`: `nn.RMSNorm` for every LayerNorm,
then `nn.GatedFeedForward` for each block's feed-forward, and chapter 2's attention and a head
built without biases. Model 2 is then model 3 with the sinusoidal table in place of the
rotation, and nothing else: the tests check that model 3's weights, put in model 2 with the
rotation attached to its attention's queries and keys, give model 3's logits.

The recipe: demo 11's (AdamW, its two groups, the warm-up and cosine schedule, clipping) at half
demo 11's width (E = 64: 4 layers, 4 heads, windows of 64 characters, 12 a step), so that the
whole ladder trains with several seeds in a few minutes, and with a learning rate of 1e-2, ten
times demo 11's, which a short run of a small model can take. Every model of a seed starts from
that seed (`ta.manual_seed`) and sees the same batches in the same order; the models step in
turn, the order rotated at each step, so that the step times are measured interleaved, under the
same load. The held-out loss is over fixed windows of the validation part. With a few seeds each
change is read as a paired difference (the same seed, the model before it): it is called clear
when a paired t-test over the seeds finds it at 5%, within the noise otherwise.

Then QK-norm's claim, which is not about the loss at a good learning rate: models 4 and 5 trained
again at ten times the ladder's rate, and for every model the largest attention score q . k /
sqrt(D) on held-out windows and the share of attention rows that put over 99% of their weight on
one key (read through chapter 4's `run_with_cache`): the growth of the scores that QK-norm is
there to stop.

What the papers claim, and why the changes are used at scale (the entry on docs/demos.md says
what this run found):
- RMSNorm (Zhang & Sennrich 2019, "Root Mean Square Layer Normalization"): re-centering is
  dispensable; RMSNorm "achieves comparable performance against LayerNorm but reduces the
  running time by 7%~64%" in their models. It is cheaper, not better.
- SwiGLU (Shazeer 2020, "GLU Variants Improve Transformer"): in T5's feed-forward, at equal
  parameters and operations (the hidden width cut by a third), the GLU variants gave a better
  pre-training perplexity and better fine-tuned scores; the paper offers no explanation. PaLM
  and Llama took it up.
- Rotary positions (Su et al. 2021, "RoFormer"): absolute positions as rotations of queries and
  keys, so that a score depends on the distance between query and key only; no table of
  positions, any length. Its claims are those properties and better results on long-text
  classification. Llama, Qwen and Gemma all use it (with a larger base for long contexts: Qwen3's
  is 1,000,000; here the sequences are 64 long and the base is RoFormer's 10,000).
- Grouped-query attention (Ainslie et al. 2023, "GQA"): an interpolation between multi-head and
  multi-query attention (one key/value head, Shazeer 2019), whose decoding reads far fewer bytes
  of keys and values; models uptrained from multi-head checkpoints with 5% of their pre-training
  compute come close to multi-head quality at nearly multi-query speed. What it buys is the
  cache, at inference: fewer bytes per token to keep and read at every step, so longer contexts
  and larger batches. It does not claim a lower loss.
- QK-norm (Dehghani et al. 2023 for ViT-22B; Wortsman et al. 2023, "Small-scale proxies for
  large-scale Transformer training instabilities"): attention scores that grow without bound
  make training diverge at high learning rates, already in small models; normalizing queries and
  keys prevents it and makes the final loss less sensitive to the learning rate. Qwen3's report
  (2025) removes Qwen2's QKV biases and introduces QK-norm "to ensure stable training"; Gemma 3's
  (2025) replaces Gemma 2's soft-capping of the scores with it.
Small models, a few hundred steps: what this run saw, not a law of scale.

    python demos/19_what_changed.py [output folder] [--quick]

The picture is `what_changed.png` in the output folder (when matplotlib is installed). `--quick`
trains each model for 3 steps with 2 seeds (what the tests run; its numbers mean nothing). The
full run's time, as `dev/regenerate.py` measured it, ends the demo's entry on docs/demos.md.
"""
import importlib
import math
import textwrap
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn

tiny_gpt = importlib.import_module("11_tiny_gpt")

# %% [markdown]
# The settings: demo 11's model at half its width, the ladder's learning rate and QK-norm's high
# one, and how long each model trains in the full and the quick run.

# %%
EMBED_DIM, NUM_HEADS, NUM_LAYERS = 64, 4, 4         # demo 11's 128, 4, 4 at half the width
KV_HEADS = 2                                        # grouped-query attention: 2 of 4 heads
CONTEXT, BATCH = tiny_gpt.CONTEXT, tiny_gpt.BATCH   # windows of 64 characters, 12 a step
NORM_EPS = 1e-6                                     # DecoderSettings' (Qwen3's rms_norm_eps)
LEARNING_RATE = 1e-2                                # the ladder's; demo 11's is 1e-3
HIGH_LEARNING_RATE = 10 * LEARNING_RATE             # QK-norm's test
HELD_OUT_SEED = 1000                                # the training batches use the seeds 0, 1, ...
FULL = dict(seeds=(0, 1, 2), steps=200, warmup_steps=20, held_out_batches=20)
QUICK = dict(seeds=(0, 1), steps=3, warmup_steps=1, held_out_batches=1)
WIDTH = 100                                         # of the printed lines
T_95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}    # Student's t, two-sided 5%, by freedoms


def gated_hidden_dim(embed_dim):
    """The hidden width at which a gated feed-forward (three E x hidden matrices, no biases) has
    the parameters of chapter 1's (E x 4E and 4E x E, with biases: 8 E^2 + 5 E), the nearest."""
    return round((8 * embed_dim ** 2 + 5 * embed_dim) / (3 * embed_dim))


# %% [markdown]
# The models. 0 to 2: chapter 2's CausalTransformer (demo 11's model), chapter 5's layers put in
# the place of chapter 1's by `set_submodule`; 3 to 5: chapter 5's Llama and Qwen3, its
# settings, or its page, the change.

# %%
def gpt2(vocab_size, dtype, positional="sinusoidal"):
    """Model 0: demo 11's CausalTransformer, at this demo's sizes. (`positional="none"`, here
    and in models 1 and 2, leaves the table out: the tests put model 3's rotation in its place.)"""
    return nn.CausalTransformer(vocab_size, EMBED_DIM, NUM_HEADS, NUM_LAYERS, max_len=CONTEXT,
                                positional=positional, dtype=dtype)


def rms_norm(vocab_size, dtype, positional="sinusoidal"):
    """Model 1: model 0 with an RMSNorm in the place of each LayerNorm (two a block, the last)."""
    model = gpt2(vocab_size, dtype, positional)
    layer_norms = [name for name, layer in model.named_modules()
                   if isinstance(layer, nn.LayerNorm)]
    for name in layer_norms:
        model.set_submodule(name, nn.RMSNorm(EMBED_DIM, NORM_EPS, dtype=dtype))
    return model


def swiglu(vocab_size, dtype, positional="sinusoidal"):
    """Model 2: model 1 with each block's feed-forward gated (SwiGLU) at equal parameters, and no
    biases: each attention and the head rebuilt without them."""
    model = rms_norm(vocab_size, dtype, positional)
    for i in range(NUM_LAYERS):
        model.set_submodule(f"blocks.{i}.ff", nn.GatedFeedForward(
            EMBED_DIM, gated_hidden_dim(EMBED_DIM), "silu", dtype=dtype))
        model.set_submodule(f"blocks.{i}.attn", nn.MultiHeadAttention(
            EMBED_DIM, NUM_HEADS, bias=False, dtype=dtype))
    model.set_submodule("head", nn.Linear(EMBED_DIM, vocab_size, bias=False, dtype=dtype))
    return model


def decoder_settings(vocab_size, num_kv_heads=NUM_HEADS, qk_norm=False):
    """Models 3 to 5's DecoderSettings: Llama's (its defaults) at this demo's sizes, the rotary
    base RoFormer's; with QK-norm, Qwen3's."""
    return nn.DecoderSettings(vocab_size, EMBED_DIM, gated_hidden_dim(EMBED_DIM), NUM_LAYERS,
                              NUM_HEADS, num_kv_heads, EMBED_DIM // NUM_HEADS, norm_eps=NORM_EPS,
                              rope_theta=10000.0, qk_norm=qk_norm,
                              model_type="qwen3" if qk_norm else "llama")


def rotary(vocab_size, dtype):
    """Model 3: model 2 with rotary positions instead of the sinusoidal table: a Llama."""
    return nn.Llama(decoder_settings(vocab_size), dtype=dtype)


def grouped_query(vocab_size, dtype):
    """Model 4: model 3 with 2 key/value heads for its 4 query heads."""
    return nn.Llama(decoder_settings(vocab_size, KV_HEADS), dtype=dtype)


def qk_norm(vocab_size, dtype):
    """Model 5: model 4 with its queries and keys RMS-normed per head: a Qwen3."""
    return nn.Qwen3(decoder_settings(vocab_size, KV_HEADS, qk_norm=True), dtype=dtype)


LADDER = (("GPT-2", "GPT-2 (demo 11's model)", gpt2),
          ("RMSNorm", "RMSNorm for LayerNorm", rms_norm),
          ("SwiGLU", "SwiGLU, no biases", swiglu),
          ("rotary", "rotary for the table", rotary),
          ("GQA", f"{KV_HEADS} key/value heads of {NUM_HEADS}", grouped_query),
          ("QK-norm", "QK-norm", qk_norm))


# %% [markdown]
# What each model costs besides its loss: its parameters, and the bytes of keys and values its
# cache keeps per token of a sequence it writes (chapter 2's KVCache for models 0 to 2, chapter
# 5's DecoderCache for 3 to 5: both have `nbytes`).

# %%
def parameter_count(model):
    return sum(parameter.size for parameter in model.parameters())


@ta.no_grad()
def cache_bytes_per_token(model):
    """`cache.nbytes` after the model has read a window of CONTEXT tokens, per token."""
    cache = model.empty_cache()
    model(np.zeros((1, CONTEXT), dtype=np.int64), cache=cache)
    return cache.nbytes // CONTEXT


@ta.no_grad()
def attention_extremes(model, ids):
    """(the largest score q . k / sqrt(D) that any head gives a key it may see, the share of
    attention rows, after the first position's, that put over 99% of their weight on one key)
    over every layer, on ids (B, T), read from the queries, keys and weights that
    `run_with_cache` records (chapter 4). Scores that grow without bound are what QK-norm
    stops; the rows they make nearly one-hot are where the gradient through the softmax dies."""
    model.eval()
    _, cache = model.run_with_cache(ids)
    model.train()
    T = ids.shape[1]
    visible = np.tril(np.ones((T, T), dtype=bool))                      # (T, S): key j <= query i
    largest, saturated = 0.0, []
    for i in range(len(model.blocks)):
        q = cache[f"blocks.{i}.attn.q"]                                 # (B, H, T, D)
        k = cache[f"blocks.{i}.attn.k"]                                 # (B, K, T, D)
        k = np.repeat(k, q.shape[1] // k.shape[1], axis=1)              # (B, H, T, D): groups
        scores = q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])        # (B, H, T, S)
        largest = max(largest, float(np.abs(scores[..., visible]).max()))
        weights = cache[f"blocks.{i}.attn.weights"]                     # (B, H, T, S)
        saturated.append(float((weights[..., 1:, :].max(axis=-1) > 0.99).mean()))
    return largest, float(np.mean(saturated))


# %% [markdown]
# Training: the models of one seed side by side, each step the same batch for all, each model's
# step (forward, backward, clipping, AdamW) timed in processor seconds; demo 11's loss, optimizer
# groups and schedule.

# %%
def train_side_by_side(models, train_data, settings, seed, learning_rate):
    """Train `models` ({name: model}) for settings["steps"] steps on the batches a generator
    seeded with `seed` draws; returns {name: (batch losses, step processor seconds)}."""
    steps = settings["steps"]
    optimizers = {name: tiny_gpt.adamw_groups(model) for name, model in models.items()}
    random = np.random.default_rng(seed)
    losses = {name: [] for name in models}
    seconds = {name: [] for name in models}
    names = list(models)
    progress = demo_tools.Progress()
    for step in range(steps):
        lr = ta.optim.warmup_cosine_lr(step, learning_rate, settings["warmup_steps"], steps,
                                       learning_rate / 10)
        ids, targets = tiny_gpt.random_windows(train_data, random, BATCH)    # (B, T) each
        for name in names[step % len(names):] + names[:step % len(names)]:
            model = models[name]
            start = time.process_time()
            loss = tiny_gpt.loss_of(model, ids, targets)
            for optimizer in optimizers[name]:
                optimizer.zero_grad()
                optimizer.lr = lr
            loss.backward()
            ta.optim.clip_grad_norm(model.parameters(), tiny_gpt.CLIP)
            for optimizer in optimizers[name]:
                optimizer.step()
            seconds[name].append(time.process_time() - start)
            losses[name].append(loss.item())
        progress(f"  seed {seed}, lr {learning_rate:g}: step {step + 1}/{steps}",
                 last=step + 1 == steps)
    return {name: (losses[name], seconds[name]) for name in names}


def run_ladder(rungs, vocab_size, train_data, held_out, settings, learning_rate):
    """Every seed's models of `rungs` (a part of LADDER) trained side by side: {name: {"loss":
    held-out loss per seed, "batch_losses": per seed, "seconds": every step's, "largest_score"
    and "saturated": attention_extremes per seed, on the first held-out batch}}."""
    runs = {name: {"loss": [], "batch_losses": [], "seconds": [], "largest_score": [],
                   "saturated": []} for name, _, _ in rungs}
    for seed in settings["seeds"]:
        models = {}
        for name, _, build in rungs:
            ta.manual_seed(seed)
            models[name] = build(vocab_size, np.float32)
        trained = train_side_by_side(models, train_data, settings, seed, learning_rate)
        for name, model in models.items():
            runs[name]["loss"].append(tiny_gpt.held_out_loss(model, held_out))
            largest, saturated = attention_extremes(model, held_out[0][0])
            runs[name]["largest_score"].append(largest)
            runs[name]["saturated"].append(saturated)
            runs[name]["batch_losses"].append(trained[name][0])
            runs[name]["seconds"].extend(trained[name][1])
    return runs


# %% [markdown]
# Reading the seeds: a change is a paired difference, each seed's model against the same seed's
# model before it; it is clear when a t-test over the seeds finds it at 5%.

# %%
def paired_difference(after, before):
    """(the mean of the seeds' differences after - before, their spread as (lowest, highest),
    whether a paired t-test finds the mean at 5%)."""
    differences = np.array(after) - np.array(before)
    n = len(differences)
    spread = (float(differences.min()), float(differences.max()))
    deviation = float(differences.std(ddof=1)) if n > 1 else 0.0
    clear = n > 1 and abs(differences.mean()) > T_95[n - 1] * deviation / np.sqrt(n)
    return float(differences.mean()), spread, bool(clear)


def change_read(mean, clear):
    """How a paired difference of held-out loss reads."""
    if not clear:
        return "within the noise"
    return f"{'lower' if mean < 0 else 'higher'} by {abs(mean):.3f}"


# %% [markdown]
# `main` builds each model once to count it, trains the ladder, then models 4 and 5 at the high
# learning rate, and prints the table.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    settings = QUICK if args.quick else FULL
    text = tiny_gpt.documentation_text()
    vocabulary = "".join(sorted(set(text)))
    train_data, val_data = tiny_gpt.split(tiny_gpt.encode(text, vocabulary))
    random = np.random.default_rng(HELD_OUT_SEED)
    held_out = [tiny_gpt.random_windows(val_data, random, BATCH)
                for _ in range(settings["held_out_batches"])]
    seeds, steps = settings["seeds"], settings["steps"]
    print(f"Demo 11's tiny GPT at width {EMBED_DIM} ({NUM_LAYERS} layers, {NUM_HEADS} heads, "
          f"windows of {CONTEXT} characters, {BATCH} a step), changed one step at a time; each "
          f"model trained {steps} steps with AdamW (lr {LEARNING_RATE}) on the same batches, "
          f"seeds {list(seeds)}, float32; held-out loss over "
          f"{len(held_out) * BATCH * CONTEXT:,} characters of the validation part.")

    sizes, models = {}, {}
    for name, _, build in LADDER:
        models[name] = build(len(vocabulary), np.float32)
        sizes[name] = (parameter_count(models[name]), cache_bytes_per_token(models[name]))
    feed_forwards = [parameter_count(models[name].blocks[0].ff) for name in ("RMSNorm", "SwiGLU")]
    print(f"A block's feed-forward: {feed_forwards[0]:,} parameters with GELU (hidden "
          f"{4 * EMBED_DIM}, biases), {feed_forwards[1]:,} gated (hidden "
          f"{gated_hidden_dim(EMBED_DIM)}, three matrices, no biases).")
    ladder = run_ladder(LADDER, len(vocabulary), train_data, held_out, settings, LEARNING_RATE)
    high = run_ladder(LADDER[4:], len(vocabulary), train_data, held_out, settings,
                      HIGH_LEARNING_RATE)
    numbers = results(ladder, high, sizes, settings)
    numbers["feed_forward_parameters"] = feed_forwards
    print_results(numbers)
    picture = plot(numbers, ladder, args.output / "what_changed.png")
    demo_tools.print_pictures(picture)
    return numbers


def results(ladder, high, sizes, settings):
    """The numbers the table, the picture and the entry on docs/demos.md show, under names a
    template can use: for each model i, loss_i (mean over seeds), losses_i, change_i (the paired
    difference from model i - 1), clear_i, read_i, step_ratio_i, parameters_i, cache_bytes_i,
    largest_score_i and saturated_i (means over the seeds); high_...: models 4 and 5 at the high
    learning rate."""
    base_seconds = float(np.median(ladder["GPT-2"]["seconds"]))
    numbers = {"seeds": len(settings["seeds"]), "steps": settings["steps"],
               "embed_dim": EMBED_DIM, "learning_rate": LEARNING_RATE,
               "high_learning_rate": HIGH_LEARNING_RATE, "kv_heads": KV_HEADS,
               "num_heads": NUM_HEADS, "gated_hidden_dim": gated_hidden_dim(EMBED_DIM),
               "names": [name for name, _, _ in LADDER]}
    previous = None
    for i, (name, _, _) in enumerate(LADDER):
        run = ladder[name]
        numbers[f"loss_{i}"] = float(np.mean(run["loss"]))
        numbers[f"losses_{i}"] = run["loss"]
        numbers[f"step_ratio_{i}"] = float(np.median(run["seconds"])) / base_seconds
        numbers[f"parameters_{i}"], numbers[f"cache_bytes_{i}"] = sizes[name]
        numbers[f"largest_score_{i}"] = float(np.mean(run["largest_score"]))
        numbers[f"saturated_{i}"] = float(np.mean(run["saturated"]))
        if previous is not None:
            mean, spread, clear = paired_difference(run["loss"], previous)
            numbers.update({f"change_{i}": mean, f"change_spread_{i}": list(spread),
                            f"clear_{i}": clear, f"read_{i}": change_read(mean, clear)})
        previous = run["loss"]
    for i, name in ((4, "GQA"), (5, "QK-norm")):
        numbers[f"high_loss_{i}"] = float(np.mean(high[name]["loss"]))
        numbers[f"high_losses_{i}"] = high[name]["loss"]
        numbers[f"high_largest_score_{i}"] = float(np.mean(high[name]["largest_score"]))
        numbers[f"high_saturated_{i}"] = float(np.mean(high[name]["saturated"]))
    mean, spread, clear = paired_difference(high["QK-norm"]["loss"], high["GQA"]["loss"])
    numbers.update({"high_change": mean, "high_change_spread": list(spread),
                    "high_clear": clear, "high_read": change_read(mean, clear)})
    return numbers


# %% [markdown]
# Plumbing, what the experiment needs but is not about: what it prints, the picture, and the
# entry on docs/demos.md.

# %%
def signed(value):
    return f"{value:+.3f}"


def print_results(numbers):
    rows = []
    for i, (_, change, _) in enumerate(LADDER):
        spread = numbers.get(f"change_spread_{i}", (0.0, 0.0))
        against = ["", ""] if i == 0 else [
            f"{signed(numbers[f'change_{i}'])} ({signed(spread[0])} to {signed(spread[1])})",
            "clear" if numbers[f"clear_{i}"] else "noise"]
        rows.append([str(i), change, f"{numbers[f'loss_{i}']:.3f}", *against,
                     f"{numbers[f'step_ratio_{i}']:.2f}x", f"{numbers[f'parameters_{i}']:,}",
                     f"{numbers[f'cache_bytes_{i}']:,}", f"{numbers[f'largest_score_{i}']:.1f}"])
    demo_tools.print_table(
        ["model", "the change", "held-out loss", "against the one before", "t-test", "step time",
         "parameters", "cache B/token", "top score"], rows,
        title=f"Each model against the one before it. Held-out loss in nats per character (mean "
              f"of {numbers['seeds']} seeds); the paired difference (mean, lowest and highest "
              f"seed), clear\nif a t-test finds it at 5%; the median step's processor time "
              f"against GPT-2's; float32 cache bytes per token; the largest\nattention score "
              f"q.k/sqrt(D) on held-out windows (mean of the seeds):")
    print("\n" + textwrap.fill(
          f"QK-norm's test, models 4 and 5 trained again at lr {numbers['high_learning_rate']:g} "
          f"(the same seeds and batches): held-out loss {numbers['high_loss_4']:.3f} without, "
          f"{numbers['high_loss_5']:.3f} with QK-norm, a paired difference of "
          f"{signed(numbers['high_change'])} ({signed(numbers['high_change_spread'][0])} to "
          f"{signed(numbers['high_change_spread'][1])}): {numbers['high_read']}. At lr "
          f"{numbers['learning_rate']:g}: {numbers['loss_4']:.3f} and {numbers['loss_5']:.3f}.",
          WIDTH))
    demo_tools.print_table(
        ["lr", "model", "top score", "rows over 99% on one key"],
        [[f"{lr:g}", f"{i} {numbers['names'][i]}", f"{numbers[f'{prefix}largest_score_{i}']:.1f}",
          f"{numbers[f'{prefix}saturated_{i}']:.1%}"]
         for lr, prefix in ((numbers["learning_rate"], ""),
                            (numbers["high_learning_rate"], "high_"))
         for i in (4, 5)],
        title="Their attention on held-out windows (mean of the seeds): the largest score, and the "
              "share of rows\n(after the first position's) nearly one-hot:")


def plot(numbers, ladder, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    names, count = numbers["names"], len(LADDER)
    positions, labels = np.arange(count), [f"{i} {name}" for i, name in enumerate(numbers["names"])]
    high_lr = f"lr {numbers['high_learning_rate']:g}"
    figure, axes = plt.subplots(2, 3, figsize=(15, 7.5), layout="constrained")
    (losses, curves, scores), (times, caches, sizes) = axes
    for i in range(count):
        seed_losses = numbers[f"losses_{i}"]
        losses.bar(i, numbers[f"loss_{i}"], color="tab:blue", alpha=0.35)
        losses.plot([i] * len(seed_losses), seed_losses, "o", color="tab:blue", markersize=4)
    losses.plot([4, 5], [numbers["high_loss_4"], numbers["high_loss_5"]], "s--",
                color="tab:red", label=f"models 4 and 5 at {high_lr} (mean)")
    shown = [loss for i in range(count) for loss in numbers[f"losses_{i}"]]
    shown += [numbers["high_loss_4"], numbers["high_loss_5"]]
    losses.set(ylim=(min(shown) - 0.1, max(shown) + 0.1), ylabel="nats per character",
               title=f"Held-out loss after {numbers['steps']} steps at lr "
                     f"{numbers['learning_rate']:g}\n(bar: mean; dots: the seeds)")
    losses.legend(fontsize=8, loc="upper right")
    window = max(1, numbers["steps"] // 10)
    for i, name in reversed(list(enumerate(names))):   # model 0 last: on top of model 1's
        mean_curve = np.mean(ladder[name]["batch_losses"], axis=0)
        smoothed = np.convolve(mean_curve, np.ones(window) / window, mode="valid")
        curves.plot(np.arange(window, len(mean_curve) + 1), smoothed, color=f"C{i}",
                    linestyle="--" if i == 0 else "-", linewidth=2 if i == 0 else 1.2,
                    label=labels[i] + (" (dashed, on top)" if i == 0 else ""))
    curves.set(xlabel="training step", ylabel="nats per character",
               title=f"Training: each step's batch loss\n(mean of the seeds, {window}-step "
                     f"average)")
    handles, texts = curves.get_legend_handles_labels()
    curves.legend(handles[::-1], texts[::-1], fontsize=8)    # in the ladder's order
    scores.bar(positions, [numbers[f"largest_score_{i}"] for i in range(count)],
               color="tab:orange")
    scores.plot([4, 5], [numbers["high_largest_score_4"], numbers["high_largest_score_5"]], "s--",
                color="tab:red", label=f"models 4 and 5 at {high_lr}")
    scores.set_yscale("log")
    scores.minorticks_off()
    ticks = [tick for tick in (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
             if 0.5 * min(scores.get_ylim()) <= tick <= 2 * max(scores.get_ylim())]
    scores.set_yticks(ticks, [str(tick) for tick in ticks])
    scores.set(ylabel="q . k / sqrt(D)",
               title="The largest attention score on held-out windows\n(mean of the seeds)")
    scores.legend(fontsize=8, loc="upper left")
    times.bar(positions, [numbers[f"step_ratio_{i}"] for i in range(count)], color="tab:green")
    times.axhline(1.0, color="gray", linewidth=1)
    times.set(ylabel="against GPT-2's",
              title="Processor time of a training step\n(median; the models stepping in turn)")
    caches.bar(positions, [numbers[f"cache_bytes_{i}"] for i in range(count)],
               color="tab:purple")
    caches.set(ylabel="bytes per token", title="Key/value cache per token written\n(float32)")
    sizes.bar(positions, [numbers[f"parameters_{i}"] for i in range(count)], color="tab:gray")
    for i in range(count):
        sizes.annotate(f"{numbers[f'parameters_{i}']:,}", (i, numbers[f"parameters_{i}"]),
                       xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
    sizes.set(ylabel="parameters", ylim=(0, 1.15 * numbers["parameters_0"]), title="Parameters")
    for axes_ in (losses, scores, times, caches, sizes):
        axes_.set_xticks(positions, labels, fontsize=8, rotation=20)
    for axes_ in axes.ravel():
        axes_.grid(alpha=0.3)
    figure.suptitle("Demo 11's tiny GPT changed one step at a time towards Qwen3")
    return demo_tools.save_figure(figure, path, dpi=100)


PAGE_ENTRY = """\
19. [`19_what_changed.py`](../demos/19_what_changed.py) — **what changed since GPT-2, and what
    each change buys.** Demo 11's tiny GPT (at width {embed_dim}) changed one step at a time
    towards Qwen3, each of the six models trained {steps} steps on the same batches at lr
    {learning_rate:g}, {seeds} seeds; models 0 to 2 are chapter 2's model with chapter 5's layers
    set in, 3 to 5 chapter 5's `nn.Llama` and then `nn.Qwen3`.

    Held-out loss (nats per character, mean of the seeds), the change from the model before as a
    paired t-test reads it, and a training step's processor time against GPT-2's (the models
    stepping in turn): GPT-2 {loss_0:.3f}; RMSNorm {loss_1:.3f} ({read_1}), {step_ratio_1:.2f}x;
    SwiGLU at equal parameters ({gated_hidden_dim} hidden units), without biases, {loss_2:.3f}
    ({read_2}), {step_ratio_2:.2f}x; rotary positions {loss_3:.3f} ({read_3}),
    {step_ratio_3:.2f}x; grouped-query attention, {kv_heads} key/value heads for {num_heads},
    {loss_4:.3f} ({read_4}), {step_ratio_4:.2f}x, its cache {cache_bytes_4:,} bytes per token
    instead of {cache_bytes_3:,} and {parameters_4:,} parameters instead of {parameters_3:,};
    QK-norm {loss_5:.3f} ({read_5}), {step_ratio_5:.2f}x. At ten times the learning rate
    ({high_learning_rate:g}) the largest attention score on held-out windows grows to
    {high_largest_score_4:.0f} without QK-norm (from {largest_score_4:.0f} at
    {learning_rate:g}), and {high_saturated_4:.0%} of the attention rows put over 99% of their
    weight on one key; with QK-norm it reaches {high_largest_score_5:.0f} (from
    {largest_score_5:.0f}), with {high_saturated_5:.0%} of the rows so, and the loss is
    {high_loss_5:.3f} against {high_loss_4:.3f} ({high_read}). RMSNorm's paper claims the quality of LayerNorm at less
    time, grouped-query attention's close to multi-head quality with a smaller cache, QK-norm's
    stable training at high learning rates: time, memory and stability, not loss.

    ![held-out loss, training, attention scores, step time, cache and parameters of each
    model](pictures/what_changed.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
