"""Demo 20: what each token costs the key/value cache. Multi-head, grouped-query, multi-query and
latent attention trained against each other at equal parameter counts: held-out loss against
the bytes the cache keeps per token, and the time of a step of generation on a long cache.

What it shows: demo 11's tiny GPT (4 layers, 4 heads of 32, width 128, windows of 64 characters
of Python's documentation, 12 a step, AdamW with demo 11's schedule) built as chapter 5's decoder
(RMSNorm, SwiGLU, rotary positions: nn.Llama, nn.DeepseekV3) with four kinds of attention:

    multi-head      4 key/value heads, one per query head (chapter 1)
    grouped-query   2 key/value heads, each shared by 2 query heads (Llama 3, Qwen, Mistral)
    multi-query     1 key/value head for all 4 (Gemma 3 1B)
    latent          DeepSeek-V2's: one latent of r = 64 numbers per token and a shared rotary
                    key of 16, from which each head rebuilds its keys and values

Fewer key/value weights leave parameters over; each model's feed-forward is widened (or, for
latent attention, narrowed) until it has as many parameters as the multi-head one, within one
hidden unit's worth. All are trained from the same seed on the same batches for the same steps,
with multi-head trained a second time from another seed: how far two runs of one model land is
the scale against which the others' differences mean something. Then, for each model:

  * the held-out loss over the whole validation part (its first characters in quick mode), and
    how far each is from multi-head's on the same windows (the standard error of the mean
    difference over the windows: the noise of the evaluation, not of training);
  * the bytes its cache keeps per token, `cache.nbytes` over the tokens it holds, and the
    formula (2 K D per layer and token for K key/value heads of D numbers, r + d_R for latent
    attention), and the time of a step of greedy generation for 4 sequences on a cache of 1,024
    tokens (tinyattn_tools/bench/cache_table.py, the table `python -m tinyattn bench 10` prints
    for models of random weights);

drawn as held-out loss against bytes per token, beside the validation curves, in `kv_cache.png`.

    python demos/20_kv_cache.py [output folder] [--quick]

`--quick` trains each model for 6 steps (what the tests run). The full run's time, as
`dev/regenerate.py` measured it, ends its entry on docs/demos.md. One seed per kind, one learning
rate, a small model, few steps: what it measures at this scale is said in the entry.
"""
import importlib
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn
from tinyattn_tools.bench import cache_table

tiny_gpt = importlib.import_module("11_tiny_gpt")

# %% [markdown]
# The models: chapter 5's decoder at demo 11's shape, one per kind of attention (the bench's
# KINDS), each feed-forward sized so that every model has multi-head's parameter count.

# %%
SEED, SECOND_SEED = 0, 1
KINDS = list(cache_table.KINDS)                  # multi-head, grouped-query, multi-query, latent
FULL = dict(steps=480, warmup_steps=48, eval_every=80, eval_batches=10, final_characters=None,
            context=1024, batch=4, cache_steps=4, rounds=15)
QUICK = dict(steps=6, warmup_steps=2, eval_every=3, eval_batches=1, final_characters=1000,
             context=24, batch=2, cache_steps=1, rounds=1)


def settings_of(kind, vocab_size, intermediate_size=None):
    sizes = dict(vocab_size=vocab_size)
    if intermediate_size is not None:
        sizes["intermediate_size"] = intermediate_size
    return cache_table.settings_of(kind, **sizes)


def parameter_count(settings):
    ta.manual_seed(SEED)
    return sum(p.size for p in cache_table.model_of(settings, dtype=np.float32).parameters())


def matched_settings(kind, vocab_size):
    """The settings of `kind` whose feed-forward width gives the parameter count nearest to
    multi-head's: parameters grow by 3 E per hidden unit and layer (gate, up and down)."""
    settings = settings_of(kind, vocab_size)
    target = parameter_count(settings_of("multi-head", vocab_size))
    per_unit = 3 * settings.hidden_size * settings.num_layers
    width = settings.intermediate_size + round((target - parameter_count(settings)) / per_unit)
    return settings_of(kind, vocab_size, width)


def build(settings, seed):
    ta.manual_seed(seed)
    return cache_table.model_of(settings, dtype=np.float32)


# %% [markdown]
# Training: demo 11's loop (`tiny_gpt.train`: AdamW in two groups, warm-up then cosine, the
# gradient's norm clipped), whose batches come from a generator seeded alike for every model.
# Scoring: the whole validation part cut into consecutive windows, window by window, so that two
# models can be compared on the same windows.

# %%
@ta.no_grad()
def window_losses(model, batches):
    """The mean loss of each window of `batches` (consecutive windows), an array (windows,)."""
    model.eval()
    losses = []
    for ids, targets in batches:
        logits = model(ids).data.astype(np.float64)                    # (B, T, V)
        shifted = logits - logits.max(axis=-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        picked = np.take_along_axis(log_probs, targets[..., None], axis=-1)[..., 0]   # (B, T)
        losses.append(-picked.mean(axis=-1))
    model.train()
    return np.concatenate(losses)


def train_one(label, settings, seed, data, settings_of_run):
    train_data, held_out, final = data
    print(f"\n{label} (feed-forward width {settings.intermediate_size}):")
    model = build(settings, seed)
    start = time.process_time()
    history = tiny_gpt.train(model, train_data, held_out, settings_of_run)
    return dict(model=model, history=history, seconds=time.process_time() - start,
                windows=window_losses(model, final))


# %% [markdown]
# `main` builds, trains and scores the models, then measures their caches.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    run_settings = QUICK if args.quick else FULL
    text = tiny_gpt.documentation_text()
    vocabulary = "".join(sorted(set(text)))
    train_data, val_data = tiny_gpt.split(tiny_gpt.encode(text, vocabulary))
    held_out = tiny_gpt.held_out_batches(train_data, val_data, run_settings["eval_batches"])
    final = tiny_gpt.consecutive_batches(val_data[:run_settings["final_characters"]])
    data = (train_data, held_out, final)
    settings = {kind: matched_settings(kind, len(vocabulary)) for kind in KINDS}
    print_the_models(settings, run_settings)

    runs = {kind: train_one(kind, settings[kind], SEED, data, run_settings) for kind in KINDS}
    second = train_one(f"multi-head, seed {SECOND_SEED}", settings["multi-head"], SECOND_SEED,
                       data, run_settings)
    decoders = {kind: run["model"].eval() for kind, run in runs.items()}
    table = cache_table.measure(decoders, run_settings["rounds"], run_settings["context"],
                                run_settings["batch"], run_settings["cache_steps"])
    numbers = collected(runs, second, table, settings, run_settings, args.quick)
    print_the_results(numbers, table, decoders["multi-head"].settings, run_settings)
    demo_tools.print_pictures(plot(runs, second, numbers, args.output / "kv_cache.png"))
    return numbers


def collected(runs, second, table, settings, run_settings, quick):
    """The numbers the page and the tests read: per kind, its parameters, losses, the gap to
    multi-head and its standard error, the cache's bytes per token and time of a step."""
    baseline = runs["multi-head"]["windows"]
    numbers = {"steps": run_settings["steps"], "windows": len(baseline), "quick": quick,
               "context": run_settings["context"], "batch": run_settings["batch"],
               "kv_lora_rank": cache_table.LATENT.kv_lora_rank,
               "qk_rope_head_dim": cache_table.LATENT.qk_rope_head_dim,
               "seed_gap": float(second["windows"].mean() - baseline.mean()),
               "seed_gap_error": float((second["windows"] - baseline).std()
                                       / np.sqrt(len(baseline)))}
    for kind, run in runs.items():
        key = kind.replace("-", "_")
        difference = run["windows"] - baseline
        row = table[kind]
        numbers.update({
            f"{key}_parameters": parameter_count(settings[kind]),
            f"{key}_intermediate_size": settings[kind].intermediate_size,
            f"{key}_loss": float(run["windows"].mean()),
            f"{key}_val_losses": run["history"]["val_losses"],
            f"{key}_gap": float(difference.mean()),
            f"{key}_gap_error": float(difference.std() / np.sqrt(len(difference))),
            f"{key}_numbers": row["numbers"], f"{key}_formula": row["formula"],
            f"{key}_bytes_per_token": row["bytes_per_token"],
            f"{key}_formula_bytes": row["formula_bytes"],
            f"{key}_ms_per_step": 1000 * row["seconds_per_step"],
            f"{key}_vs_multi_head": row["vs_multi_head"],
            f"{key}_training_seconds": run["seconds"]})
    counts = [numbers[f"{kind.replace('-', '_')}_parameters"] for kind in runs]
    numbers["parameter_spread"] = max(counts) - min(counts)
    numbers["verdict"] = verdict(numbers)
    numbers["eval_steps"] = runs["multi-head"]["history"]["eval_steps"]
    numbers["multi_head_second_seed_loss"] = float(second["windows"].mean())
    return numbers


def verdict(numbers):
    """What the losses say against the seed gap (how far two runs of multi-head landed): each
    kind within it, or how many seed gaps behind (or ahead of) multi-head."""
    scale = abs(numbers["seed_gap"])
    gaps = {kind: numbers[kind.replace("-", "_") + "_gap"] / scale for kind in KINDS[1:]}
    within = [kind for kind, gap in gaps.items() if abs(gap) <= 1]
    apart = [f"{kind} {abs(gap):.1f} seed gaps {'behind' if gap > 0 else 'ahead'}"
             for kind, gap in gaps.items() if abs(gap) > 1]
    said = [f"{' and '.join(within)} within the seed gap of multi-head"] if within else []
    return "; ".join(said + apart)


# %% [markdown]
# Plumbing: what it prints, the picture and the entry on docs/demos.md.

# %%
def print_the_models(settings, run_settings):
    rows = []
    for kind, s in settings.items():
        formula, per_token = cache_table.numbers_per_token(s)
        rows.append([kind, f"{parameter_count(s):,}", str(s.intermediate_size),
                     f"{formula} = {per_token}"])
    demo_tools.print_table(
        ["attention", "parameters", "feed-forward width", "cached per token and layer"], rows,
        f"The models (demo 11's shape as chapter 5's decoder; {run_settings['steps']} steps of "
        f"{tiny_gpt.BATCH} windows of {tiny_gpt.CONTEXT}):")


def print_the_results(numbers, table, settings, run_settings):
    rows = []
    for kind in KINDS:
        key = kind.replace("-", "_")
        rows.append([kind, f"{numbers[f'{key}_loss']:.4f}",
                     f"{numbers[f'{key}_gap']:+.4f} ± {numbers[f'{key}_gap_error']:.4f}",
                     f"{numbers[f'{key}_bytes_per_token']:,.0f}"])
    demo_tools.print_table(
        ["attention", "held-out loss", "vs multi-head", "cache bytes per token"], rows,
        f"Held-out loss over the {numbers['windows']:,} windows of the validation part (nats per "
        f"character; ± the standard error\nof the mean difference over the windows), and the "
        f"cache per token (cache.nbytes / tokens):")
    second = numbers["multi_head_second_seed_loss"]
    print(f"\nMulti-head again from seed {SECOND_SEED}: {second:.4f}"
          f" ({numbers['seed_gap']:+.4f} ± {numbers['seed_gap_error']:.4f} from seed {SEED}): "
          f"two runs of one model differ by this much.\nAgainst it: {numbers['verdict']}.\n")
    cache_table.print_table(table, settings, run_settings["context"], run_settings["batch"],
                            run_settings["cache_steps"], run_settings["rounds"])


COLOURS = {"multi-head": "tab:blue", "grouped-query": "tab:green", "multi-query": "tab:red",
           "latent": "tab:purple"}


def plot(runs, second, numbers, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, (cost, curves) = plt.subplots(1, 2, figsize=(11, 4.4))
    for kind, run in runs.items():
        key = kind.replace("-", "_")
        cost.errorbar(numbers[f"{key}_bytes_per_token"], numbers[f"{key}_loss"],
                      yerr=numbers[f"{key}_gap_error"], fmt="o", color=COLOURS[kind],
                      label=kind, markersize=7)
        curves.plot(run["history"]["eval_steps"], run["history"]["val_losses"], "o-",
                    color=COLOURS[kind], label=kind, markersize=3)
    cost.plot(numbers["multi_head_bytes_per_token"], numbers["multi_head_second_seed_loss"], "x",
              color=COLOURS["multi-head"], markersize=8, label=f"multi-head, seed {SECOND_SEED}")
    curves.plot(second["history"]["eval_steps"], second["history"]["val_losses"], ":",
                color=COLOURS["multi-head"], label=f"multi-head, seed {SECOND_SEED}")
    cost.set(xlabel="cache bytes per token (all layers, float32)",
             ylabel="held-out loss (nats per character)",
             title="Loss against what each token costs the cache")
    shown = [loss for run in (*runs.values(), second) for loss in run["history"]["val_losses"]]
    curves.set(xlabel="training step", ylabel="loss on the fixed validation windows",
               title=f"Equal parameters, the same {numbers['steps']} steps",
               ylim=(min(shown) - 0.1, max(shown) + 0.1))       # every point inside the axes
    return demo_tools.save_chart(figure, path, cost, curves)


PAGE_ENTRY = """\
20. [`20_kv_cache.py`](../demos/20_kv_cache.py) — demo 11's tiny GPT as chapter 5's decoder with
    multi-head, grouped-query (2 key/value heads), multi-query and latent attention (r =
    {kv_lora_rank}, d_R = {qk_rope_head_dim}), {multi_head_parameters:,} parameters each (within
    {parameter_spread:,} of each other: the feed-forward makes up for the attention's weights),
    trained alike for {steps} steps. Held-out loss over the {windows:,} windows of the validation
    part, and the cache per token (`cache.nbytes`): multi-head {multi_head_loss:.3f}
    ({multi_head_bytes_per_token:,.0f} bytes), grouped-query {grouped_query_loss:.3f}
    ({grouped_query_bytes_per_token:,.0f}), multi-query {multi_query_loss:.3f}
    ({multi_query_bytes_per_token:,.0f}), latent {latent_loss:.3f}
    ({latent_bytes_per_token:,.0f}); multi-head trained again from another seed lands
    {seed_gap:+.3f} away, the scale of what one run can tell: {verdict}. A step of generation
    for {batch}
    sequences on a {context:,}-token cache takes {grouped_query_vs_multi_head:.2f}x multi-head's
    time with grouped-query attention, {multi_query_vs_multi_head:.2f}x with multi-query and
    {latent_vs_multi_head:.2f}x with latent attention.

    ![held-out loss against cache bytes per token; validation curves](pictures/kv_cache.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
