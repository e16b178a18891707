"""The key/value cache table: for multi-head, grouped-query, multi-query and latent attention at
one width, the bytes the cache holds per token (`cache.nbytes`, checked against its formula) and
the time a step of generation takes on a long cache; then DeepSeek-V2's own table, its formulas
at its sizes.

The models are chapter 5's Llama (DeepseekV3 without experts for latent attention) with random
float32 weights, each of the four kinds of attention (`KINDS`), the rest alike: the shape of demo
11's tiny GPT (width 128, 4 layers, 4 heads of 32), as demo 20 trains them. Each model first reads a
prompt of `context` tokens for `batch` sequences (in chunks, so that no score matrix is larger than
a chunk's), then writes greedily; a round times `steps` steps of each model, the models interleaved,
so that the cache grows alike for all. The time is processor time (`time.process_time`): on a shared
machine the time spent waiting for a core is left out alike.

What a step costs. Each step reads every weight once and every cached number once (and copies
the cache, which grows by concatenation), and runs some 150 small ops whose cost per op in
tinyattn is about the same for all four. The table prints the bytes of the weights and of each
cache at the prompt's end: where the cache is most of what is read, a smaller one is a faster
step; latent attention runs a few more ops a step (its queries times W_UK, the mixed latents
times W_UV) for its smaller cache.
"""
import time

import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn_tools.bench.timing import interleaved, median_ratio

WIDTH = dict(vocab_size=96, hidden_size=128, intermediate_size=344, num_layers=4, num_heads=4,
             head_dim=32)
LATENT = nn.LatentSettings(kv_lora_rank=64, qk_rope_head_dim=16, qk_nope_head_dim=32,
                           v_head_dim=32)
KINDS = {"multi-head": dict(num_kv_heads=4), "grouped-query": dict(num_kv_heads=2),
         "multi-query": dict(num_kv_heads=1),
         "latent": dict(num_kv_heads=4, latent=LATENT, model_type="deepseek_v3",
                        head_dim=LATENT.qk_nope_head_dim + LATENT.qk_rope_head_dim)}
CONTEXT, BATCH, STEPS, CHUNK = 1024, 4, 4, 128
# DeepSeek-V2 (Table 1 of the paper, and its sizes): heads, head_dim, layers, d_c, d_R; groups
DEEPSEEK_V2 = dict(n_h=128, d_h=128, l=60, d_c=512, d_R=64, n_g=8)


def settings_of(kind, **sizes):
    return nn.DecoderSettings(**{**WIDTH, **KINDS[kind], **sizes})


def model_of(settings, dtype=None):
    """The model of the settings' family (nn.open_checkpoints.MODELS)."""
    return nn.open_checkpoints.MODELS[settings.model_type](settings, dtype=dtype)


def numbers_per_token(settings):
    """(formula, numbers the cache holds per token and layer) of a decoder's attention."""
    if settings.latent is not None:
        latent = settings.latent
        return "r + d_R", latent.kv_lora_rank + latent.qk_rope_head_dim
    K, D = settings.num_kv_heads, settings.head_dim
    formula = "2 H D" if K == settings.num_heads else "2 D" if K == 1 else "2 K D"
    return formula, 2 * K * D


def models(seed=0, **sizes):
    """{kind: a float32 model of random weights}, one per kind of attention: a Llama, or a
    DeepseekV3 without experts for latent attention."""
    built = {}
    for kind in KINDS:
        ta.manual_seed(seed)
        built[kind] = model_of(settings_of(kind, **sizes), dtype=np.float32).eval()
    return built


def prefilled(model, prompt, chunk=CHUNK):
    """(cache, the next tokens (B, 1)) after `model` read `prompt` (B, T), chunk by chunk."""
    cache = model.empty_cache()
    with ta.no_grad():
        for start in range(0, prompt.shape[1], chunk):
            logits = model(prompt[:, start:start + chunk], cache=cache, last_only=True)
    return cache, logits.data.argmax(axis=-1)


def writer(model, cache, tokens):
    """A function `write(steps)` that runs `tokens` (B, 1) and then each token it chose on
    `cache`, `steps` times, choosing greedily; it returns the tokens it chose (B, steps)."""
    state = {"tokens": tokens}

    def write(steps):
        chosen = []
        with ta.no_grad():
            for _ in range(steps):
                logits = model(state["tokens"], cache=cache, last_only=True)
                state["tokens"] = logits.data.argmax(axis=-1)           # (B, 1)
                chosen.append(state["tokens"])
        return np.concatenate(chosen, axis=1)
    return write


def measure(decoders, rounds, context=CONTEXT, batch=BATCH, steps=STEPS, seed=0):
    """{kind: {"formula", "numbers", "bytes_per_token", "formula_bytes", "seconds_per_step",
    "vs_multi_head"}} for decoders {kind: model}: the cache's bytes per token after the
    prompt (nbytes / (batch * context)), and the median seconds of a step over `rounds`
    interleaved rounds of `steps` steps."""
    vocab = next(iter(decoders.values())).settings.vocab_size
    prompt = np.random.default_rng(seed).integers(0, vocab, (batch, context))
    table, writers = {}, {}
    for kind, model in decoders.items():
        cache, tokens = prefilled(model, prompt)
        formula, numbers = numbers_per_token(model.settings)
        itemsize = np.dtype(model.dtype).itemsize
        table[kind] = dict(formula=formula, numbers=numbers,
                           bytes_per_token=cache.nbytes / (batch * context),
                           formula_bytes=model.settings.num_layers * numbers * itemsize,
                           cache_bytes=cache.nbytes,
                           weight_bytes=sum(p.data.nbytes for p in model.parameters()))
        writers[kind] = writer(model, cache, tokens)
    times = interleaved(writers, (steps,), rounds, clock=time.process_time)
    baseline = "multi-head" if "multi-head" in times else next(iter(times))
    for kind, row in table.items():
        row["seconds_per_step"] = float(np.median(times[kind])) / steps
        row["vs_multi_head"] = median_ratio(times, kind, baseline)
    return table


def deepseek_v2_table(n_h, d_h, l, d_c, d_R, n_g):  # noqa: E741  (the paper's l, the layers)
    """{kind: (formula, elements per token)}: Table 1 of DeepSeek-V2 at its own sizes."""
    return {"multi-head": ("2 n_h d_h l", 2 * n_h * d_h * l),
            "grouped-query": (f"2 n_g d_h l (n_g = {n_g})", 2 * n_g * d_h * l),
            "multi-query": ("2 d_h l", 2 * d_h * l),
            "latent": ("(d_c + d_R) l", (d_c + d_R) * l)}


def print_table(table, settings, context, batch, steps, rounds):
    E, H, D, L = settings.hidden_size, settings.num_heads, settings.head_dim, settings.num_layers
    print(f"The key/value cache per token, and a step of generation on it\n   (width {E}, {H} "
          f"heads of {D}, {L} layers, float32; latent: r = {LATENT.kv_lora_rank}, d_R = "
          f"{LATENT.qk_rope_head_dim};\n   a step: {batch} sequences after a {context:,}-token "
          f"prompt; {rounds} interleaved rounds of {steps} steps, processor time)")
    print(f"   {'attention':<14} {'per token and layer':>20} {'bytes/token':>11} "
          f"{'cache MB':>8} {'ms/step':>8} {'vs MHA':>7}")
    for kind, row in table.items():
        cached = f"{row['formula']} = {row['numbers']}"
        print(f"   {kind:<14} {cached:>20} {row['bytes_per_token']:>11,.0f} "
              f"{row['cache_bytes'] / 1e6:>8.1f} {1000 * row['seconds_per_step']:>8.2f} "
              f"{row['vs_multi_head']:>6.2f}x")
    print("   (bytes/token: cache.nbytes / tokens, which is layers x numbers x 4 bytes; the "
          "weights:\n   " + ", ".join(f"{row['weight_bytes'] / 1e6:.1f} MB ({kind})"
                                      for kind, row in table.items()) + ")")
    sizes = DEEPSEEK_V2
    print(f"   DeepSeek-V2's Table 1, elements per token at its sizes ({sizes['n_h']} heads of "
          f"{sizes['d_h']}, {sizes['l']} layers,\n   d_c = {sizes['d_c']}, d_R = {sizes['d_R']})")
    for kind, (formula, elements) in deepseek_v2_table(**sizes).items():
        print(f"   {kind:<14} {formula:>24} = {elements:>9,} "
              f"({elements / (sizes['d_h'] * sizes['l']):g} d_h l)")


def bench_cache_table(rounds, torch=None, context=CONTEXT, batch=BATCH, steps=STEPS, **sizes):
    """Part 10: prints the table; returns it ({kind: row}, see `measure`)."""
    decoders = models(**sizes)
    table = measure(decoders, rounds, context, batch, steps)
    for kind, row in table.items():
        if row["bytes_per_token"] != row["formula_bytes"]:
            raise AssertionError(f"bench: the {kind} cache holds {row['bytes_per_token']} bytes "
                                 f"per token, its formula says {row['formula_bytes']}")
    print_table(table, decoders["multi-head"].settings, context, batch, steps, rounds)
    return table
