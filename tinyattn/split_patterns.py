r"""Chapter 5. The split patterns of today's byte-level BPEs (step 1, pre-tokenising), written out.

Chapter 3 cut GPT-2's text into words with GPT-2's pattern. The models since keep the other steps
and change the pattern: Llama 3 took Meta's own, which Qwen2 (and so Qwen2.5 and Qwen3) took with
one change. A tokenizer.json names its pattern as the `regex` package (and Hugging Face
`tokenizers`) writes it; each function below is one of them written for Python's `re`, the
classes spelled out as chapter 3 spells them ({L} letters, {N} numbers, {S} whitespace, from
`unicodedata`: `tokenizer.unicode_ranges`, `tokenizer.WHITESPACE`), one alternative a line:

    GPT2     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    LLAMA3   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
             | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
    QWEN2    LLAMA3 with \p{N} for \p{N}{1,3}

SmolLM's tokenizer (SmolLM2) splits digits first, each one a word, and runs GPT-2's pattern on the
text between them (`SingleDigitsThen`, at the end of this file: its docstring shows the words).

Where they differ, shown on one text (`words` is `pre_tokenizer.findall`):

>>> from tinyattn.tokenizer import pre_tokenizer as gpt2_pre_tokenizer
>>> text = "I'M 12345 $x+=1;\n\tif a.b:\r\n    c"
>>> gpt2_pre_tokenizer().findall(text)
['I', "'", 'M', ' 12345', ' $', 'x', '+=', '1', ';', '\n', '\t', 'if', ' a', '.', 'b', ':', '\r\n   ', ' c']
>>> llama3_pre_tokenizer().findall(text)
['I', "'M", ' ', '123', '45', ' $', 'x', '+=', '1', ';\n', '\tif', ' a', '.b', ':\r\n', '   ', ' c']
>>> qwen2_pre_tokenizer().findall(text)
['I', "'M", ' ', '1', '2', '3', '4', '5', ' $', 'x', '+=', '1', ';\n', '\tif', ' a', '.b', ':\r\n', '   ', ' c']

1. Contractions in either case: "'M" is one word for Llama 3 and Qwen, three pieces for GPT-2.
2. Numbers: GPT-2 keeps a run of digits whole, with the space before it (" 12345"); Llama 3 cuts
   it into groups of up to three digits from the left ("123", "45"), Qwen into single digits, so
   that a number's tokens line up with its digits; the space before a number is a word of its own.
3. Before a word, any one character that is neither a letter, a number nor a line break, not only
   a space: "\tif" and ".b" are words ("." and "b" for GPT-2).
4. Line breaks: a run of symbols keeps the line breaks after it (";\n", ":\r\n"), and a run of
   whitespace that ends in line breaks is one word (`\s*[\r\n]+`), so code's line ends and
   indentation become few tokens.

Each pattern covers every character (the last alternative, `\s+`, takes what the others leave:
whitespace), so `findall` loses nothing and the words joined are the text; `tokenizers`' Split
pre-tokenizer with "Isolated" behaviour cuts the same words. `(?i:...)` is case-insensitive as in
`regex`: "'S" and "'ſ" (U+017F, a long s, whose case folding is "s") are contractions in both.
"""
import functools
import re

from tinyattn.tokenizer import WHITESPACE, pre_tokenizer, unicode_ranges

GPT2 = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
          r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
         r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


@functools.cache
def llama3_pre_tokenizer():
    """LLAMA3 for Python's `re`: Llama 3's words."""
    L, N, S = unicode_ranges("L"), unicode_ranges("N"), WHITESPACE
    return re.compile(
        rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)"    # a contraction, in either case
        rf"|[^\r\n{L}{N}]?[{L}]+"           # letters, after at most one other character
        rf"|[{N}]{{1,3}}"                   # one to three digits ({{1,3}}: braces of an rf-string)
        rf"| ?[^{S}{L}{N}]+[\r\n]*"         # symbols, and the line breaks after them
        rf"|[{S}]*[\r\n]+"                  # whitespace that ends in line breaks
        rf"|[{S}]+(?![^{S}])"               # whitespace, but the last space if a word follows
        rf"|[{S}]+")                        # whitespace (the last space before a word)


@functools.cache
def qwen2_pre_tokenizer():
    """QWEN2 for Python's `re`: Qwen2's (Qwen2.5's, Qwen3's) words, Llama 3's but for digits."""
    L, N, S = unicode_ranges("L"), unicode_ranges("N"), WHITESPACE
    return re.compile(
        rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)"    # a contraction, in either case
        rf"|[^\r\n{L}{N}]?[{L}]+"           # letters, after at most one other character
        rf"|[{N}]"                          # one digit
        rf"| ?[^{S}{L}{N}]+[\r\n]*"         # symbols, and the line breaks after them
        rf"|[{S}]*[\r\n]+"                  # whitespace that ends in line breaks
        rf"|[{S}]+(?![^{S}])"               # whitespace, but the last space if a word follows
        rf"|[{S}]+")                        # whitespace (the last space before a word)


# {a pattern as tokenizer.json writes it: its pre-tokenizer for Python's `re`} (GPT-2's is
# chapter 3's, which a tokenizer.json names as a ByteLevel pre-tokenizer with use_regex)
PRE_TOKENIZERS = {GPT2: pre_tokenizer, LLAMA3: llama3_pre_tokenizer, QWEN2: qwen2_pre_tokenizer}


class SingleDigitsThen:
    r"""Every number character a word of its own, and `pattern` (a compiled pattern) on each
    stretch of text between them: `tokenizers`' Digits pre-tokenizer with individual_digits,
    followed by a pattern. SmolLM's tokenizer is this before GPT-2's pattern, which the
    tokenizer.json writes as a Sequence of {"type": "Digits", "individual_digits": true} and
    a ByteLevel with use_regex.

    The pattern runs on each stretch alone, so a digit ends a stretch as the end of the text
    does: the space before a number is a word of its own (GPT-2 keeps " 12" whole), and so is
    a run of spaces, which GPT-2 cuts before its last space when a word follows:

    >>> text = "x  12 ab3"
    >>> pre_tokenizer().findall(text)                  # GPT-2's, chapter 3's
    ['x', ' ', ' 12', ' ab', '3']
    >>> SingleDigitsThen(pre_tokenizer()).findall(text)
    ['x', '  ', '1', '2', ' ab', '3']

    A number character is one of Unicode's N categories, as `tokenizers`' (Rust's
    `char::is_numeric`), from this Python's Unicode version, which may be older than Rust's.
    """

    def __init__(self, pattern):
        self.pattern = pattern
        self.digit = re.compile(f"([{unicode_ranges('N')}])")      # kept by split: (...)

    def findall(self, text):
        words = []
        for i, piece in enumerate(self.digit.split(text)):          # stretch, digit, stretch, ...
            words.extend([piece] if i % 2 else self.pattern.findall(piece))
        return words
