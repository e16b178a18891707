"""Generation on Qwen3-0.6B's shape: tokens per second of chapter 5's `Qwen3.generate` (with
its key/value cache) against Hugging Face transformers' `generate`, when transformers and PyTorch
are installed, and the share of the memory-bandwidth bound that each reaches.

The model is built from QWEN3_0_6B_CONFIG (nn/qwen3.py), Qwen3-0.6B's own config.json (28 layers,
width 1024, 16 query heads on 8 key/value heads of 128, feed-forward 3072, vocabulary 151,936, the
head tied to the embedding: 596,049,920 parameters), read as `nn.from_pretrained` reads it, with
random float32 weights (tinyattn's initialisation): no download, and speed does not depend on what
the weights are. `save_pretrained` writes them and transformers reads them back, so both run the
same model: before anything is timed, their logits for 8 random tokens must agree within chapter
5's float32 tolerance, 1e-4 * max(1, max |logit|), and their greedy tokens must be the same (with
random weights the greedy tokens soon repeat one token, so the logits are the finer check).

The bound. Writing one token multiplies the new token's vector by every weight matrix once, the 196
of the blocks and the head's (the tied embedding, all of its 151,936 rows): every parameter read
once, 2.38 GB of float32 for 1.2 billion multiply-adds, one multiply-add per four bytes. A core
multiplies and adds far faster than memory delivers four bytes, so a step waits on memory: no
implementation writes a token in less than (bytes of the weights) / (the machine's read bandwidth).
That bandwidth is measured in the same run, at the start of every round: 512 MiB of float32 (far
more than any cache holds) read by np.dot of the array with itself, which BLAS does as fast as
memory delivers the bytes, three times, the fastest kept (as the STREAM benchmark keeps the best of
its runs). Each one's share of the bound is (bytes / its time per token) / bandwidth; the key/value
cache's own bytes (under 1% here) are left out. What stands in the way is measured as well: NumPy's
matrix-vector products alone, x @ W.T on every weight matrix of the model for one row x, the time
BLAS itself takes with no engine around it.

The prompt is one token, so that every step, the first included, writes one token: a prompt of T
tokens makes the first step's products matrix-matrix ones, whose time says how BLAS handles a few
rows at once rather than how close a step comes to the bound. Timed in processor seconds
(`time.process_time`), interleaved, as part 6: a round runs each implementation once (the
bandwidth, NumPy's products, tinyattn, transformers), so that a busy machine slows them alike; the
figures are medians over rounds, the ratios medians of per-round ratios.
"""
import statistics
import tempfile
import textwrap
import time

import numpy as np

import tinyattn as ta
from tinyattn.nn.open_checkpoints import settings_from_config
from tinyattn.nn.qwen3 import QWEN3_0_6B_CONFIG
from tinyattn_tools.bench.gpt2_generation import (tinyattn_generate, transformers_found,
                                                  transformers_generate)
from tinyattn_tools.bench.timing import interleaved, median_ratio

PROMPT_LENGTH, NEW_TOKENS = 1, 32
CHECKED_LENGTH = 8              # the tokens whose logits are compared first
OPEN_ROUNDS = 5                 # at most: a round writes 2 x 32 tokens of a 0.6B-parameter model
BANDWIDTH_BYTES = 2**29         # the array read to measure the bandwidth: 512 MiB
PRODUCT_STEPS = 8               # steps of the products alone timed in a round


def qwen3_model(seed=0, **sizes):
    """A Qwen3 (nn/qwen3.py) of Qwen3-0.6B's config (or with `sizes`, config.json's keys,
    changed), its weights random, float32, in eval mode."""
    settings = settings_from_config({**QWEN3_0_6B_CONFIG, **sizes}, "Qwen3-0.6B's config.json")
    ta.manual_seed(seed)
    return ta.nn.Qwen3(settings, dtype=np.float32).eval()


def transformers_model(model, folder):
    """The same model in transformers: written by save_pretrained into `folder`, read back."""
    import torch
    import transformers
    transformers.utils.logging.disable_progress_bar()
    model.save_pretrained(folder)
    return transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def weight_bytes(model):
    """The bytes of every parameter, each once (a tied head is the embedding): what writing a
    token reads."""
    return sum(parameter.data.nbytes for parameter in model.parameters())


def read_bandwidth(array, reads=3):
    """Bytes read per processor second: `array`'s bytes over the fastest of `reads` reads of it,
    np.dot of it with itself (which streams through memory once, each element multiplied by
    itself where it was just read). The fastest, as the STREAM benchmark reports the best of its
    runs: the bound is what the memory can give, and a slower read says that something else
    got in the way."""
    fastest = float("inf")
    for _ in range(reads):
        start = time.process_time()
        np.dot(array, array)
        fastest = min(fastest, time.process_time() - start)
    return array.nbytes / fastest


def weight_matrices(model):
    """The weight (out, in) of every Linear layer of `model`, in the order they run: per block
    q, k, v, out, gate, up, down, then the head (the tied embedding)."""
    return [module.weight.data for _, module in model.named_modules()
            if isinstance(module, ta.nn.Linear)]


def matrix_vector_products(model, seed=0, steps=PRODUCT_STEPS):
    """`steps` steps of NumPy's products alone: one random row times each weight matrix of
    `model`, as the Linear op computes it (x @ W^T), every matrix once a step. (Several steps a
    round, as generation makes several tokens: the first product after other work is slower.)"""
    matrices = weight_matrices(model)
    random = np.random.default_rng(seed)
    rows = {width: random.standard_normal((1, width)).astype(np.float32)
            for width in {matrix.shape[1] for matrix in matrices}}

    def run():
        for _ in range(steps):
            for matrix in matrices:
                rows[matrix.shape[1]] @ matrix.T                    # (1, in) @ (in, out)
    return run


def check_same_model(torch, model, theirs, ids, prompt, new_tokens):
    """tinyattn's and transformers' logits for `ids` within 1e-4 * max(1, max |logit|), and the
    same greedy tokens after `prompt`, or an AssertionError."""
    with ta.no_grad():
        ours = model(ids).data                                       # (1, T, vocab)
    with torch.no_grad():
        reference = theirs(torch.from_numpy(ids)).logits.numpy()     # (1, T, vocab)
    tolerance = 1e-4 * max(1.0, float(np.abs(reference).max()))
    if not np.allclose(ours, reference, rtol=0, atol=tolerance):
        raise AssertionError(f"bench: transformers computes other logits than tinyattn (by up "
                             f"to {np.abs(ours - reference).max():.2g})")
    tokens = [generate(prompt, new_tokens) for generate in
              (tinyattn_generate(model), transformers_generate(torch, theirs))]
    if not np.array_equal(*tokens):
        raise AssertionError("bench: transformers wrote other tokens than tinyattn")


def bench_open_generation(rounds, torch=None, new_tokens=NEW_TOKENS,
                          bandwidth_bytes=BANDWIDTH_BYTES, **sizes):
    """Part 9, with at most OPEN_ROUNDS rounds: prints tokens per second and the share of the
    bound of tinyattn (and transformers), NumPy's products alone, and the ratio; returns
    {"tinyattn": tokens per second, "transformers": ..., "ratio": tinyattn's speed /
    transformers', "bandwidth": bytes per second, "share": {name: share of the bound}} (without
    transformers' entries when it was not measured)."""
    rounds = min(rounds, OPEN_ROUNDS)
    config = {**QWEN3_0_6B_CONFIG, **sizes}
    model = qwen3_model(**sizes)
    nbytes = weight_bytes(model)
    said(f"Generation on Qwen3-0.6B's shape (its config.json: {config['num_hidden_layers']} "
         f"layers, width {config['hidden_size']}, {config['num_attention_heads']} query / "
         f"{config['num_key_value_heads']} key-value heads of {config['head_dim']}, "
         f"feed-forward {config['intermediate_size']}, vocabulary {config['vocab_size']:,}, "
         f"tied head: {sum(p.size for p in model.parameters()):,} parameters, "
         f"{nbytes / 1e9:.2f} GB in float32), random weights: {new_tokens} tokens after a "
         f"{PROMPT_LENGTH}-token prompt, greedy, with the key/value cache; {rounds} "
         f"interleaved rounds (at most {OPEN_ROUNDS}), processor time", indent="")
    random = np.random.default_rng(0)
    prompt = random.integers(0, config["vocab_size"], (1, PROMPT_LENGTH))
    checked = random.integers(0, config["vocab_size"], (1, CHECKED_LENGTH))
    array = np.ones(bandwidth_bytes // 4, dtype=np.float32)
    steps = {"NumPy's products": matrix_vector_products(model)}
    generators = {"tinyattn": tinyattn_generate(model)}
    missing = [name for name, found in (("torch", torch), ("transformers", transformers_found()))
               if not found]
    with tempfile.TemporaryDirectory() as folder:
        if missing:
            print(f"   ({' and '.join(missing)} not installed: tinyattn is measured alone)")
        else:
            theirs = transformers_model(model, folder)
            check_same_model(torch, model, theirs, checked, prompt, new_tokens)
            generators["transformers"] = transformers_generate(torch, theirs)
            said(f"the same logits (within 1e-4 x max |logit|, {CHECKED_LENGTH} tokens) and the "
                 f"same {new_tokens} greedy tokens as transformers, checked first")
        steps.update({name: (lambda generate=generate: generate(prompt, new_tokens))
                      for name, generate in generators.items()})
        bandwidths, times = [], {name: [] for name in steps}
        for _ in range(rounds):
            bandwidths.append(read_bandwidth(array))
            for name, seconds in interleaved(steps, (), 1, clock=time.process_time).items():
                times[name] += seconds
    return report(times, bandwidths, list(generators), nbytes, new_tokens)


def report(times, bandwidths, generators, nbytes, new_tokens):
    """Print and return part 9's figures from the seconds of each step in each round and each
    round's bandwidth (see bench_open_generation)."""
    bandwidth = statistics.median(bandwidths)

    def share(name, per_call_bytes):
        """The median over rounds of (bytes read per second) / (that round's bandwidth)."""
        return statistics.median(per_call_bytes / seconds / read
                                 for seconds, read in zip(times[name], bandwidths))

    figures = {name: new_tokens / statistics.median(times[name]) for name in generators}
    figures.update(bandwidth=bandwidth, share={name: share(name, nbytes * new_tokens)
                                               for name in generators})
    for name in generators:
        read = nbytes * figures[name] / 1e9
        print(f"   {name:<13} {figures[name]:6.2f} tokens/s, reading the weights at {read:5.1f} "
              f"GB/s: {figures['share'][name]:4.0%} of the bound")
    products = share("NumPy's products", nbytes * PRODUCT_STEPS)
    said(f"the bound: {nbytes / bandwidth:.2f} s per token, {bandwidth / nbytes:.2f} tokens/s "
         f"(memory read at {bandwidth / 1e9:.1f} GB/s, the fastest of 3 np.dot of an array with "
         f"itself, median over rounds); NumPy's matrix-vector products alone, every weight "
         f"once: {products:.0%} of it")
    figures["share"]["NumPy's products"] = products
    if "transformers" in generators:
        figures["ratio"] = median_ratio(times, "transformers", "tinyattn")
        said(f"tinyattn writes {figures['ratio']:.2f}x as many tokens per second as transformers "
             f"(median over rounds of the per-round ratio)")
    return figures


def said(text, indent="   "):
    """Print `text` in lines of at most 100 characters, each after the first indented (the
    first follows the part's number)."""
    print(textwrap.fill(text, 97, initial_indent=indent, subsequent_indent="   "))
