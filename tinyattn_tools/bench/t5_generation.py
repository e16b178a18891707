"""Beam search on t5-small's shape: the time of chapter 6's T5.generate (nn/t5.py with
tinyattn/beam_search.py) against Hugging Face transformers' T5ForConditionalGeneration.generate,
when transformers and PyTorch are installed.

The model is built from T5Settings' defaults, t5-small's config (vocabulary 32128, d_model 512,
6 + 6 blocks of 8 heads of 64, feed-forward 2048, ReLU, tied head: 60,506,624 parameters), with
random float32 weights: no download, and speed does not depend on what the weights are.
`save_pretrained` writes them and transformers reads them back, so both run the same model, and
both must write the same tokens before anything is timed. A translation's shape: one input of
128 tokens, the encoder run once, then beam search of 4 beams for 32 new tokens
(`num_beams=4, length_penalty=1.0, early_stopping=False`, no sampling); each step runs the
decoder on the 4 beams' newest tokens with their caches, reordered as the beams are chosen.
Timed in processor seconds, interleaved: a round runs each once; the ratio is the median of
per-round ratios.
"""
import statistics
import tempfile
import time

import numpy as np

import tinyattn as ta
from tinyattn.nn.t5 import T5, T5Settings
from tinyattn_tools.bench.gpt2_generation import transformers_found
from tinyattn_tools.bench.open_generation import said
from tinyattn_tools.bench.timing import interleaved, median_ratio

INPUT_LENGTH, NEW_TOKENS, BEAMS = 128, 32, 4
T5_ROUNDS = 5                   # at most: a round is two beam searches of 32 steps through 60M


def t5_model(seed=0, **sizes):
    """A T5 of t5-small's sizes (or with `sizes` changed), random float32 weights, eval mode."""
    ta.manual_seed(seed)
    return T5(T5Settings(**sizes), dtype=np.float32).eval()


def transformers_model(model, folder):
    """The same model in transformers: written by save_pretrained into `folder`, read back."""
    import torch
    import transformers
    transformers.utils.logging.disable_progress_bar()
    model.save_pretrained(folder)
    return transformers.T5ForConditionalGeneration.from_pretrained(
        folder, dtype=torch.float32).eval()


def tinyattn_generate(model):
    def run(input_ids, new_tokens, beams):
        return model.generate(input_ids, new_tokens, num_beams=beams)  # (B, 1 + new_tokens)
    return run


def transformers_generate(torch, theirs):
    def run(input_ids, new_tokens, beams):
        with torch.no_grad():
            ids = torch.from_numpy(input_ids)
            return theirs.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                   max_new_tokens=new_tokens, num_beams=beams,
                                   length_penalty=1.0, early_stopping=False).numpy()
    return run


def check_same_tokens(implementations, inputs):
    """Every implementation writes tinyattn's tokens, or an AssertionError."""
    written = {name: generate(*inputs) for name, generate in implementations.items()}
    for name, tokens in written.items():
        if not np.array_equal(tokens, written["tinyattn"]):
            raise AssertionError(f"bench: {name} wrote other tokens than tinyattn")


def bench_t5_generation(rounds, torch=None, input_length=INPUT_LENGTH, new_tokens=NEW_TOKENS,
                        beams=BEAMS, **sizes):
    """Part 12, with at most T5_ROUNDS rounds: prints the time of a beam search of each and the
    ratio; returns {"tinyattn": seconds, "transformers": seconds, "ratio": tinyattn's speed /
    transformers'} (without transformers' entries when it was not measured)."""
    rounds = min(rounds, T5_ROUNDS)
    model = t5_model(**sizes)
    s = model.settings
    said(f"Beam search on t5-small's shape (vocabulary {s.vocab_size}, d_model {s.d_model}, "
         f"{s.num_layers} + {s.num_decoder_layers} blocks of {s.num_heads} heads, feed-forward "
         f"{s.d_ff}: {sum(p.size for p in model.parameters()):,} parameters), random float32 "
         f"weights: {beams} beams for {new_tokens} tokens after a {input_length}-token input; "
         f"{rounds} interleaved rounds (at most {T5_ROUNDS}), processor time", indent="")
    input_ids = np.random.default_rng(0).integers(2, s.vocab_size, (1, input_length))
    inputs = (input_ids, new_tokens, beams)
    implementations = {"tinyattn": tinyattn_generate(model)}
    missing = [name for name, found in (("torch", torch), ("transformers", transformers_found()))
               if not found]
    with tempfile.TemporaryDirectory() as folder:
        if missing:
            print(f"   ({' and '.join(missing)} not installed: tinyattn is measured alone)")
        else:
            implementations["transformers"] = transformers_generate(
                torch, transformers_model(model, folder))
            check_same_tokens(implementations, inputs)
            said("the same tokens as transformers, checked first")
        times = interleaved(implementations, inputs, rounds, clock=time.process_time)
    figures = {name: statistics.median(seconds) for name, seconds in times.items()}
    for name, seconds in figures.items():
        print(f"   {name:<13} {seconds:7.3f} s a beam search, {new_tokens / seconds:7.1f} "
              f"tokens/s")
    if "transformers" in figures:
        figures["ratio"] = median_ratio(times, "transformers", "tinyattn")
        said(f"tinyattn writes {figures['ratio']:.2f}x as many tokens per second as "
             f"transformers (median over rounds of the per-round ratio)")
    return figures
