"""Generation with and without the key/value cache: tokens per second of writing a sequence of a
given length, one token at a time, from a one-token prompt.

Without the cache (`generate(..., use_cache=False)`) every step runs the model on the whole
prefix, as nanoGPT's `generate` does; with it (`CausalTransformer.generate`) every step runs the
newest token alone, against the keys and values cached by the earlier steps. Both must give the
same tokens (checked before anything is timed). The model is the size of nanoGPT's CPU recipe:
4 layers, 4 heads, width 128, a vocabulary of ~100 characters, learned positions, float32.
"""
import statistics

import numpy as np

import tinyattn as ta
from tinyattn_tools.bench.timing import interleaved, median_ratio

GPT_SIZES = dict(vocab_size=96, embed_dim=128, num_heads=4, num_layers=4, max_len=256)
LENGTHS = (32, 64, 128, 256)


def gpt_model(seed=0, dtype=np.float32, **sizes):
    ta.manual_seed(seed)
    return ta.nn.CausalTransformer(**{**GPT_SIZES, **sizes}, dtype=dtype,
                                   positional="learned").eval()


def seeded(generate, model):
    """A generating function drawing from a freshly seeded generator, so that two of them draw
    alike."""
    def run(ids, max_new_tokens):
        ta.manual_seed(1)
        return generate(model, ids, max_new_tokens)
    return run


def cached(model, ids, max_new_tokens):
    return model.generate(ids, max_new_tokens)


def uncached(model, ids, max_new_tokens):
    return model.generate(ids, max_new_tokens, use_cache=False)


def bench_generation(rounds, lengths=LENGTHS):
    """Print tokens per second with and without the cache at each length, and the speed-up (the
    median over rounds of the per-round ratio); returns {length: speed-up}."""
    model = gpt_model()
    implementations = {"cached": seeded(cached, model),
                       "uncached": seeded(uncached, model)}
    prompt = np.zeros((1, 1), dtype=np.int64)
    model_size = ("{num_layers} layers, {num_heads} heads, width {embed_dim}, vocabulary "
                  "{vocab_size}, learned positions, float32".format(**GPT_SIZES))
    print(f"Generation: one sequence written from a 1-token prompt, {rounds} interleaved "
          f"rounds\n   ({model_size})")
    print(f"   {'length':>6}  {'cached tokens/s':>15}  {'uncached tokens/s':>17}  {'speed-up':>8}")
    speedups = {}
    for length in lengths:
        inputs = (prompt, length - 1)
        tokens = {name: fn(*inputs) for name, fn in implementations.items()}
        if not np.array_equal(tokens["cached"], tokens["uncached"]):
            raise AssertionError("bench: generation with the cache gave other tokens")
        times = interleaved(implementations, inputs, rounds)
        rates = {name: (length - 1) / statistics.median(times[name]) for name in times}
        speedups[length] = median_ratio(times, "uncached", "cached")
        print(f"   {length:>6}  {rates['cached']:>15.0f}  {rates['uncached']:>17.0f}  "
              f"{speedups[length]:>7.1f}x")
    return speedups
