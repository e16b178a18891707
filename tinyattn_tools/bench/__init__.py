"""`python -m tinyattn bench`: what the engine costs on top of the NumPy it calls (and against
PyTorch), and what the attention variants and the key/value cache save.

Each part runs the computations it compares interleaved (A B C A B C ...), so that a noisy
neighbour on a shared machine slows all of them alike: parts 1-3 the same computation written with
tinyattn, by hand in NumPy (forward and backward written out) or in PyTorch when it happens to be
installed; part 4 flash, block-sparse, sliding-window and linear attention against plain attention;
part 5 generation with and without the cache; part 6 generation on GPT-2 small's shape against
Hugging Face transformers, when it is installed; part 7 the training step of part 3 with and
without chapter 4's hooks; part 8 encoding 1 MB of text with chapter 5's Qwen tokenizer
(tokenizer.json) and chapter 3's GPT-2 tokenizer, and with `tokenizers` and tiktoken when they are
installed; part 9 generation on Qwen3-0.6B's shape against transformers, and against the bound that
the machine's memory bandwidth sets; part 10 the key/value cache's bytes per token and a step of
generation for multi-head, grouped-query, multi-query and latent attention; part 11 a forward pass
of ViT-B/16's shape against transformers; part 13 transcribing 30 seconds of audio with
whisper-tiny's shape against transformers. What is reported is
the median over rounds of the per-round ratio, never a lone absolute time. BLAS runs on one
thread, so that the ratios compare the work done, not how it was spread over cores.

    overhead.py        1. a chain of 2,000 tiny ops: the engine's cost per op
    multi_head.py      2. multi-head self-attention, forward and backward
    training.py        3. one training step of a small GPT (forward, loss, backward, AdamW)
    long_attention.py  4. attention at long lengths: flash, block-sparse, sliding-window and
                          causal linear attention against plain causal attention, time and peak
                          memory; block-sparse against flash (the full causal layout)
    generation.py      5. writing text with and without the key/value cache
    gpt2_generation.py 6. writing text with GPT-2 small's shape, against transformers' generate
    hooks.py           7. part 3's training step with and without chapter 4's hooks
    tokenizer_speed.py 8. encoding 1 MB of English and code: Qwen's tokenizer.json against
                          chapter 3's GPT-2 tokenizer (and tokenizers, tiktoken)
    open_generation.py 9. writing text with Qwen3-0.6B's shape (chapter 5), against
                          transformers' generate and the memory-bandwidth bound
    cache_table.py    10. the key/value cache per token (cache.nbytes and its formula) and the
                          time of a step on a long cache: multi-head, grouped-query, multi-query
                          and latent attention; DeepSeek-V2's own table
    vit_forward.py    11. classifying a batch of images with ViT-B/16's shape (chapter 6),
                          against transformers' ViTForImageClassification
    whisper_generation.py
                      13. encoding 30 s of audio and writing 32 tokens greedily with
                          whisper-tiny's shape (chapter 6), against transformers' Whisper

`python -m tinyattn bench 3 5` runs only those parts.
"""
import argparse
import os
import sys

import numpy as np

from tinyattn_tools.bench.cache_table import bench_cache_table
from tinyattn_tools.bench.multi_head import bench_attention
from tinyattn_tools.bench.generation import bench_generation
from tinyattn_tools.bench.gpt2_generation import bench_gpt2_generation
from tinyattn_tools.bench.hooks import bench_hooks
from tinyattn_tools.bench.long_attention import bench_long_attention
from tinyattn_tools.bench.open_generation import bench_open_generation
from tinyattn_tools.bench.overhead import bench_chain
from tinyattn_tools.bench.tokenizer_speed import bench_tokenizers
from tinyattn_tools.bench.training import bench_training_step
from tinyattn_tools.bench.vit_forward import bench_vit
from tinyattn_tools.bench.whisper_generation import bench_whisper

BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
PARTS = {   # number: (what it measures, in a few words; the function that runs it)
    1: ("per-op cost", bench_chain),
    2: ("attention", bench_attention),
    3: ("a training step", bench_training_step),
    4: ("attention at long lengths", bench_long_attention),
    5: ("generation with and without the cache", lambda rounds, torch: bench_generation(rounds)),
    6: ("generation on GPT-2 small's shape", bench_gpt2_generation),
    7: ("a training step with and without chapter 4's hooks", bench_hooks),
    8: ("tokenizers on 1 MB of text", bench_tokenizers),
    9: ("generation on Qwen3-0.6B's shape and the memory-bandwidth bound", bench_open_generation),
    10: ("the key/value cache per token for each kind of attention", bench_cache_table),
    11: ("ViT-B/16's forward", bench_vit),
    13: ("Whisper-tiny's shape: 30 s of audio transcribed", bench_whisper),
}


def parts_listed():
    """'1 per-op cost, 2 attention, ...': the parts as the help lists them."""
    return ", ".join(f"{number} {title}" for number, (title, _) in PARTS.items())


def run_with_one_blas_thread(argv):
    """Start this command again with BLAS limited to one thread, unless it already is.

    The limit must be set before NumPy loads its BLAS, and `import tinyattn` has loaded it by now.
    """
    if all(os.environ.get(name) == "1" for name in BLAS_THREAD_VARIABLES):
        return
    env = dict(os.environ, **{name: "1" for name in BLAS_THREAD_VARIABLES})
    os.execve(sys.executable, [sys.executable, "-m", "tinyattn", *argv], env)


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def part_number(text):
    if not text.isdigit() or int(text) not in PARTS:
        raise argparse.ArgumentTypeError(f"no part {text!r}: the parts are {min(PARTS)} to "
                                         f"{max(PARTS)} ({parts_listed()})")
    return int(text)


def parse(argv):
    parser = argparse.ArgumentParser(prog="python -m tinyattn bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("parts", nargs="*", type=part_number, metavar="PART",
                        help="run only these parts (default: all)")
    parser.add_argument("--rounds", type=positive_int, default=30,
                        help="interleaved rounds (default 30)")
    args = parser.parse_args(argv)
    args.parts = args.parts or list(PARTS)
    return args


def main(argv):
    args = parse(argv)
    try:
        import torch
        torch.set_num_threads(1)
        print(f"PyTorch {torch.__version__} found: it is measured too.")
    except ImportError:
        torch = None
        print("PyTorch is not installed: comparing with NumPy only.")
    print(f"NumPy {np.__version__}, BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}")
    for number in args.parts:
        print(f"\n{number}. ", end="")
        _, run = PARTS[number]
        run(args.rounds, torch)
