"""How fast GPT2Tokenizer.encode is, against an earlier version of it and against tiktoken.

    python dev/measure_tokenizer.py [REVISION]

REVISION (a git revision of this repository, default HEAD) gives the tokenizer.py to compare with
the one in the working tree. In one run, each text encoded by a fresh tokenizer (an empty cache),
the fastest of three runs, before and after taking turns so that a busy machine slows both:

  * a number of 100,000 random digits: one word for the pre-tokenizer, so all of it is merges;
  * 100,000 nines: one word too, but of one kind of pair, which a loop that rescans the word
    once per kind of merge does in a few passes (its best case);
  * 1 MB of ordinary text: Python's documentation topics (pydoc_data), then the docstrings of
    the standard library's modules, cut at 1,000,000 UTF-8 bytes;

and tiktoken's `gpt2` encoding on the same texts, built from the same files (tests/fixtures).
The figures are this machine's, today; the ratios are what carries over.
"""
import ast
import os
import pathlib
import random
import subprocess
import sys
import sysconfig
import time
import types

ROOT = pathlib.Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "fixtures" / "gpt2-tiny"
sys.path.insert(0, str(ROOT))


def tokenizer_module_at(revision):
    """tinyattn/tokenizer.py as it was at `revision`, loaded as a module of its own."""
    source = subprocess.run(["git", "show", f"{revision}:tinyattn/tokenizer.py"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType(f"tokenizer_at_{revision}")
    exec(compile(source, f"{revision}:tinyattn/tokenizer.py", "exec"), module.__dict__)
    return module


def ordinary_text(size=1_000_000):
    """Python's documentation topics, then the standard library's docstrings: `size` bytes."""
    from pydoc_data.topics import topics
    parts = [topics[name] for name in sorted(topics)]
    for path in sorted(pathlib.Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        parts += [ast.get_docstring(node) or "" for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef))]
    return "\n".join(parts).encode("utf-8")[:size].decode("utf-8", errors="ignore")


def tiktoken_gpt2():
    """tiktoken's gpt2 encoding from the fixture's files, as tests/test_tokenizer.py builds it."""
    import tiktoken
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str
    os.environ["TIKTOKEN_CACHE_DIR"] = ""
    ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(str(FIXTURE / "merges.txt"),
                                                          str(FIXTURE / "vocab.json"))
    return tiktoken.Encoding("gpt2-offline", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


def main(argv):
    revision = argv[0] if argv else "HEAD"
    from tinyattn import tokenizer as after
    before = tokenizer_module_at(revision)
    tiktoken = tiktoken_gpt2()
    digits = random.Random(0).choices("0123456789", k=100_000)
    texts = {"100,000 random digits": "".join(digits), "100,000 nines": "9" * 100_000,
             "1 MB of ordinary text": ordinary_text()}
    encoders = {f"before ({revision})": lambda text: before.GPT2Tokenizer.from_pretrained(
                    FIXTURE).encode(text),
                "after (working tree)": lambda text: after.GPT2Tokenizer.from_pretrained(
                    FIXTURE).encode(text),
                "tiktoken": tiktoken.encode_ordinary}
    before.pre_tokenizer(), after.pre_tokenizer()            # built once per process, not timed
    for name, text in texts.items():
        seconds = {encoder: [] for encoder in encoders}
        ids = {}
        for _ in range(3):
            for encoder, encode in encoders.items():
                start = time.perf_counter()
                ids[encoder] = encode(text)
                seconds[encoder].append(time.perf_counter() - start)
        best = {encoder: min(times) for encoder, times in seconds.items()}
        same = len({tuple(token_ids) for token_ids in ids.values()}) == 1
        print(f"{name} ({len(text.encode('utf-8')):,} bytes, {len(ids['tiktoken']):,} tokens; "
              f"the same ids from all three: {same})")
        for encoder, time_taken in best.items():
            print(f"  {encoder:22} {time_taken:8.3f} s   "
                  f"{time_taken / best['tiktoken']:7.1f} x tiktoken's time")
        before_time, after_time = best[f"before ({revision})"], best["after (working tree)"]
        print(f"  after / before: {after_time / before_time:.3f} "
              f"({before_time / after_time:.1f} times as fast)")


if __name__ == "__main__":
    main(sys.argv[1:])
