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
    DEEPSEEK_V3  three patterns in turn: \p{N}{1,3}, then CJK and kana runs, then
             [!-/:-@[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*
             |\s*[\r\n]+|\s+(?!\S)|\s+          (\p{P} punctuation, \p{S} symbols, \p{M} marks;
             [!-/:-@[-`{-~] is the file's list of ASCII's 32 punctuation characters, as ranges)

Two tokenizers run patterns in turn, each on the pieces the one before left (`InTurn`, below
the patterns): SmolLM's (SmolLM2) splits digits first, each one a word, and runs GPT-2's pattern
on the text between them (`SingleDigitsThen`: its docstring shows the words); DeepSeek-V3's runs
three patterns (`deepseek_v3_pre_tokenizer`, at the end of this file).

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
    other = none_of(r"\r\n", L, N)       # [^\r\n{L}{N}], in a form `re` checks faster (below)
    return re.compile(
        rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)"    # a contraction, in either case
        rf"|{other}?[{L}]+"                 # letters, after at most one other character
        rf"|[{N}]"                          # one digit
        rf"| ?[^{S}{L}{N}]+[\r\n]*"         # symbols, and the line breaks after them
        rf"|[{S}]*[\r\n]+"                  # whitespace that ends in line breaks
        rf"|[{S}]+(?![^{S}])"               # whitespace, but the last space if a word follows
        rf"|[{S}]+")                        # whitespace (the last space before a word)


# DeepSeek-V3's three patterns, run in turn (its tokenizer.json's Sequence of three Splits)
DEEPSEEK_V3 = (r"\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
               r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""
               "|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*"
               "|\\s*[\r\n]+|\\s+(?!\\S)|\\s+")


class InTurn:
    r"""Patterns run in turn, each on the pieces the one before left: `tokenizers`' Sequence of
    Split pre-tokenizers with "Isolated" behaviour. A pattern cuts a piece into its matches and
    the stretches between them, each a piece of its own (a Split loses nothing, matched or not),
    and the next pattern cuts each of those.

    >>> digits_then_letters = InTurn(re.compile("[0-9]{1,3}"), re.compile("[a-z]+"))
    >>> digits_then_letters.findall("ab12345cd ef")
    ['ab', '123', '45', 'cd', ' ', 'ef']
    """

    def __init__(self, *patterns):
        self.patterns = patterns

    def findall(self, text):
        pieces = [text]
        for pattern in self.patterns:
            pieces = [cut for piece in pieces for cut in isolated(pattern, piece)]
        return pieces


def isolated(pattern, text):
    """`text` cut by `pattern` into its matches and the stretches between them, in order."""
    pieces, end = [], 0
    for match in pattern.finditer(text):
        if match.start() > end:
            pieces.append(text[end:match.start()])              # a stretch no match took
        pieces.append(match.group())
        end = match.end()
    return pieces + ([text[end:]] if end < len(text) else [])


class SingleDigitsThen(InTurn):
    r"""Every number character a word of its own, and `pattern` (a compiled pattern) on each
    stretch of text between them: `tokenizers`' Digits pre-tokenizer with individual_digits,
    followed by a pattern, which is two patterns in turn (InTurn), a single digit the first.
    SmolLM's tokenizer is this before GPT-2's pattern, which the tokenizer.json writes as a
    Sequence of {"type": "Digits", "individual_digits": true} and a ByteLevel with use_regex.

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
        super().__init__(re.compile(f"[{unicode_ranges('N')}]"), pattern)   # a digit, then it


@functools.cache
def deepseek_v3_pre_tokenizer():
    r"""DEEPSEEK_V3 for Python's `re`: DeepSeek-V3's words, three patterns in turn (InTurn).

        1. \p{N}{1,3}             numbers in groups of up to three digits, as Llama 3's
        2. [U+4E00-U+9FA5 U+3040-U+309F U+30A0-U+30FF]+
                                  a run of CJK ideographs, hiragana or katakana
        3. a Llama-3-like pattern on the rest, with its own classes: {P} punctuation and {S}
           symbols (Unicode's P and S categories) where Llama 3 has "not a letter, number or
           space", and {M} marks counted with the letters

    What it does differently from Llama 3's pattern, on one text:

    >>> deepseek_v3_pre_tokenizer().findall("I'm x.y नमस्ते 漢字かな 12345!\n")
    ['I', "'m", ' x', '.y', ' नमस्ते', ' ', '漢字かな', ' ', '123', '45', '!\n']

    1. No contractions: "'m" is a symbol and letters, as ".y" is (`[!...~][A-Za-z]+`: one ASCII
       punctuation or symbol character, then ASCII letters).
    2. A word is letters and marks (`[{L}{M}]+`), so "नमस्ते", whose vowel signs and virama
       are marks, is one word (Llama 3's pattern cuts it at its marks: नमस, ्त, े); before
       it, at most one character that is no letter, punctuation, symbol or line break.
    3. The CJK run is cut out first, so the space before it is a word of its own, as the space
       before a number is.

    A character no pattern takes (a control character such as U+0000 with no letter after it)
    stays a piece of its own, as a Split keeps what it does not match.
    """
    L, P, Sy, M, N = (unicode_ranges(category) for category in "LPSMN")
    S = WHITESPACE
    return InTurn(
        re.compile(rf"[{N}]{{1,3}}"),                       # one to three digits
        re.compile("[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"),   # CJK, kana
        re.compile(
            r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+"""    # ASCII symbol, letters
            rf"|[^\r\n{L}{P}{Sy}]?[{L}{M}]+"             # letters and marks, after one other
            rf"| ?[{P}{Sy}]+[\r\n]*"                      # punctuation and symbols, line breaks
            rf"|[{S}]*[\r\n]+"                             # whitespace that ends in line breaks
            rf"|[{S}]+(?![^{S}])"                           # whitespace, but the last space
            rf"|[{S}]+"))                                   # whitespace


# ------------------------------------------------------------------------------------------------
# Speed: one class written for `re`

RANGE = re.compile(r"\\U([0-9a-f]{8})-\\U([0-9a-f]{8})")         # as unicode_ranges writes one


def none_of(*insides):
    r"""`[^...]` of the insides of character classes (`r"\r\n"`, unicode_ranges' ranges): a
    character in none of them, written as two classes, one per part of Unicode.

    Speed only: it matches what `[^\r\n{L}{N}]` matches. Python's `re` checks a character against
    the part of a class below U+10000 in one step (a bitmap), but against each range above it in
    turn: a character in no range of [\r\n{L}{N}] (a space) is checked against all ~300 of
    letters' and numbers' astral ranges, about 2 microseconds. Qwen's letters alternative asks
    that at the start of nearly every word, which made its pattern 1.4x as slow as GPT-2's
    (` ?[{L}]+`: a space is one literal). Written as

        (?:[^{the ranges below U+10000}\U00010000-\U0010ffff]|[^\x00-\uffff{the ranges above}])

    a character below U+10000 is settled by the first class's bitmap and one range; only an
    astral character reaches the second class's ranges.
    """
    inside = "".join(insides)
    low, high = [RANGE.sub("", inside)], []                   # \r\n, and the like: low
    for first, last in RANGE.findall(inside):
        first, last = int(first, 16), int(last, 16)
        if first <= 0xFFFF:
            low.append(rf"\U{first:08x}-\U{min(last, 0xFFFF):08x}")
        if last > 0xFFFF:
            high.append(rf"\U{max(first, 0x10000):08x}-\U{last:08x}")
    return rf"(?:[^{''.join(low)}\U00010000-\U0010ffff]|[^\x00-\uffff{''.join(high)}])"


# {a pattern, or a tuple of patterns run in turn, as tokenizer.json writes it: its pre-tokenizer
# for Python's `re`} (GPT-2's is chapter 3's, which a tokenizer.json names as a ByteLevel
# pre-tokenizer with use_regex)
PRE_TOKENIZERS = {GPT2: pre_tokenizer, LLAMA3: llama3_pre_tokenizer, QWEN2: qwen2_pre_tokenizer,
                  DEEPSEEK_V3: deepseek_v3_pre_tokenizer}
