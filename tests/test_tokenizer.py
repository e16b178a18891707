"""GPT-2's tokenizer against two independent implementations on GPT-2's own files: tiktoken's
`gpt2` encoding (built offline from the same files, with GPT-2's pattern and <|endoftext|> =
50256) and Hugging Face `tokenizers`' byte-level BPE; the letter, number and whitespace classes
against the `regex` package. All three are test references in the dev extra, never imported by
tinyattn."""
import hashlib
import json
import pathlib
import random
import re
import shutil
import sys
import time
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings, strategies

from tinyattn import tokenizer as tokenizer_module
from tinyattn.tokenizer import GPT2Tokenizer, bytes_to_unicode, unicode_ranges, WHITESPACE
from tokenizer_corpus import EDGE_CASES, long_words, python_documentation, random_strings

FOLDER = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"
# SHA-256 of OpenAI's encoder.json and vocab.bpe for GPT-2, as tiktoken pins them
VOCAB_SHA256 = "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"
MERGES_SHA256 = "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"


@pytest.fixture(scope="module")
def ours():
    return GPT2Tokenizer.from_pretrained(FOLDER)


@pytest.fixture(scope="module")
def tiktoken_gpt2():
    """tiktoken's gpt2 encoding, built from the files in FOLDER instead of downloaded."""
    tiktoken = pytest.importorskip("tiktoken", reason="a test-only reference")
    import tiktoken.load
    from tiktoken_ext.openai_public import r50k_pat_str
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TIKTOKEN_CACHE_DIR", "")          # read the files, cache nothing
        ranks = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
            str(FOLDER / "merges.txt"), str(FOLDER / "vocab.json"),
            vocab_bpe_hash=MERGES_SHA256, encoder_json_hash=VOCAB_SHA256)
    return tiktoken.Encoding("gpt2-offline", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": 50256}, explicit_n_vocab=50257)


@pytest.fixture(scope="module")
def hugging_face():
    """Hugging Face's byte-level BPE (models.BPE + the ByteLevel pre-tokenizer and decoder,
    add_prefix_space=False) on the files in FOLDER."""
    tokenizers = pytest.importorskip("tokenizers", reason="a test-only reference")
    return tokenizers.ByteLevelBPETokenizer(str(FOLDER / "vocab.json"),
                                            str(FOLDER / "merges.txt"))


def assert_same_ids_and_round_trip(texts, ours, tiktoken_gpt2, hugging_face):
    for text in texts:
        ids = ours.encode(text)
        assert ids == tiktoken_gpt2.encode(text, disallowed_special=()), ascii(text)
        assert ids == hugging_face.encode(text).ids, ascii(text)
        assert ours.decode(ids) == text, ascii(text)


def test_the_vocabulary_files_are_gpt2s(ours):
    assert hashlib.sha256((FOLDER / "vocab.json").read_bytes()).hexdigest() == VOCAB_SHA256
    assert hashlib.sha256((FOLDER / "merges.txt").read_bytes()).hexdigest() == MERGES_SHA256
    assert ours.vocab_size == 50257 and len(ours.ranks) == 50000
    assert ours.special_tokens == {"<|endoftext|>": 50256}


def test_tiktoken_pins_the_same_hashes():
    pytest.importorskip("tiktoken", reason="a test-only reference")
    import inspect
    import tiktoken_ext.openai_public
    source = inspect.getsource(tiktoken_ext.openai_public.gpt2)
    assert VOCAB_SHA256 in source and MERGES_SHA256 in source


def test_bytes_to_unicode_gives_each_byte_a_printable_character_of_its_own():
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256)) and len(set(table.values())) == 256
    assert all(character.isprintable() and not character.isspace()
               for character in table.values())
    assert table[ord("A")] == "A" and table[ord(" ")] == "Ġ" and table[ord("\n")] == "Ċ"
    assert sum(table[byte] == chr(byte) for byte in range(256)) == 188


def test_the_unicode_classes_and_whitespace_are_the_regex_packages():
    """Letters, numbers (chapter 3), punctuation, symbols and marks (chapter 5's DeepSeek-V3), and
    whitespace, over every code point this Python's unicodedata has assigned (the `regex`
    package may know a newer Unicode version, whose new characters this Python does not
    classify)."""
    regex = pytest.importorskip("regex", reason="a test-only reference")
    assigned = "".join(chr(code) for code in range(sys.maxunicode + 1)
                       if unicodedata.category(chr(code)) not in ("Cn", "Cs"))
    for ours, theirs in [(unicode_ranges("L"), r"\p{L}"), (unicode_ranges("N"), r"\p{N}"),
                         (unicode_ranges("P"), r"\p{P}"), (unicode_ranges("S"), r"\p{S}"),
                         (unicode_ranges("M"), r"\p{M}"),             # chapter 5's DeepSeek-V3
                         (WHITESPACE, r"\s")]:
        assert re.findall(f"[{ours}]", assigned) == regex.findall(theirs, assigned), theirs


def test_shortcuts_for_the_classes_would_be_wrong():
    letters = re.compile(f"[{unicode_ranges('L')}]")
    numbers = re.compile(f"[{unicode_ranges('N')}]")
    for number in "²½Ⅷ":              # No, No, Nl: numbers that are not decimal digits
        assert numbers.match(number) and not letters.match(number)
        assert re.match(r"[^\W\d_]", number)                # the shortcut calls it a letter
    for separator in "\x1c\x1d\x1e\x1f":
        assert re.match(r"\s", separator) and not re.match(f"[{WHITESPACE}]", separator)


def test_the_pre_tokenizer_cuts_text_as_gpt2s_pattern_does():
    assert tokenizer_module.pre_tokenizer().findall("Hello world's  end!!\n\n x  ") == \
        ["Hello", " world", "'s", " ", " end", "!!", "\n\n", " x", "  "]
    regex = pytest.importorskip("regex", reason="a test-only reference")
    original = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+"""
                             r"""|\s+(?!\S)|\s+""")
    text = python_documentation() + "".join(EDGE_CASES)
    assert tokenizer_module.pre_tokenizer().findall(text) == original.findall(text)


def test_known_ids(ours):
    assert ours.encode("Hello world") == [15496, 995]
    assert ours.encode(" the") == [262] and ours.encode("") == [] and ours.decode([]) == ""
    assert ours.bpe("Ġhello") == ("Ġhello",) and ours.bpe("Ġtokenizer") == ("Ġtoken", "izer")


def test_the_same_ids_on_all_of_pythons_documentation(ours, tiktoken_gpt2, hugging_face):
    text = python_documentation()
    assert len(text) > 400_000
    assert_same_ids_and_round_trip([text], ours, tiktoken_gpt2, hugging_face)


@pytest.mark.parametrize("text", EDGE_CASES, ids=ascii)
def test_the_same_ids_on_edge_cases(ours, tiktoken_gpt2, hugging_face, text):
    assert_same_ids_and_round_trip([text], ours, tiktoken_gpt2, hugging_face)


def test_the_same_ids_on_random_strings_from_every_plane(ours, tiktoken_gpt2, hugging_face):
    texts = random_strings(2000)
    assert sum(map(len, texts)) > 25_000
    assert_same_ids_and_round_trip(texts, ours, tiktoken_gpt2, hugging_face)


@settings(max_examples=300, deadline=None)
@given(text=strategies.text(max_size=40))
def test_the_same_ids_on_strings_hypothesis_draws(ours, tiktoken_gpt2, hugging_face, text):
    assert_same_ids_and_round_trip([text], ours, tiktoken_gpt2, hugging_face)


def test_lone_surrogates_become_the_replacement_character_as_in_tiktoken(ours, tiktoken_gpt2):
    for text in ["\ud800", "a\udfffb", "\udfff\ud800x", "pair \ud83d\ude00 joined", "\ud83d"]:
        ids = ours.encode(text)
        assert ids == tiktoken_gpt2.encode(text), ascii(text)
        assert ours.decode(ids) == text.encode("utf-16", "surrogatepass").decode("utf-16",
                                                                                  "replace")
    assert ours.decode(ours.encode("a\ud800b")) == "a\ufffdb"


def test_endoftext_is_ordinary_text_unless_allowed(ours, tiktoken_gpt2):
    text = "one<|endoftext|>two <|endoftext|>"
    plain = ours.encode(text)
    assert 50256 not in plain and plain == tiktoken_gpt2.encode(text, disallowed_special=())
    assert ours.decode(plain) == text
    for allowed in ({"<|endoftext|>"}, "all"):
        ids = ours.encode(text, allowed_special=allowed)
        assert ids == tiktoken_gpt2.encode(text, allowed_special=allowed)
        assert ids.count(50256) == 2 and ours.decode(ids) == text
    assert ours.encode("<|endoftext|>", allowed_special="all") == [50256]


@pytest.mark.parametrize("allowed, error, message", [
    ({"<|startoftext|>"}, ValueError, r"encode: allowed_special names \['<\|startoftext\|>'\], "
                                      r"which the vocabulary does not have"),
    ("<|endoftext|>", TypeError, "encode: allowed_special must be 'all' or a set"),
    ({1}, TypeError, "encode: allowed_special must be 'all' or a set"),
    (None, TypeError, "encode: allowed_special must be 'all' or a set"),
])
def test_a_wrong_allowed_special_is_named(ours, allowed, error, message):
    with pytest.raises(error, match=message):
        ours.encode("text", allowed_special=allowed)
    with pytest.raises(TypeError, match="encode: expected a str, got bytes"):
        ours.encode(b"text")


def test_decoding_ids_that_cut_a_character_gives_replacement_characters(ours, tiktoken_gpt2,
                                                                       hugging_face):
    smile = ours.encode("😀")
    assert len(smile) == 2 and ours.decode(smile[:1]) == "\ufffd"     # 3 of the emoji's 4 bytes
    generator = np.random.default_rng(0)
    for _ in range(300):
        ids = generator.integers(0, 50257, generator.integers(1, 8)).tolist()
        text = ours.decode(ids)
        assert text == tiktoken_gpt2.decode(ids) == hugging_face.decode(ids), ids


def test_decode_names_what_is_not_a_token_id(ours):
    assert ours.decode(np.array([15496, 995])) == "Hello world"        # NumPy integers too
    for position, bad in [(1, 50257), (0, -1), (1, 1.0), (0, True), (0, "a")]:
        ids = [15496, 15496]
        ids[position] = bad
        with pytest.raises(ValueError, match=rf"decode: ids\[{position}\] = "
                                             rf"{re.escape(repr(bad))} is not a token id "
                                             rf"\(0 to 50256\)"):
            ours.decode(ids)


def test_openais_file_names_and_a_folder_without_the_files(ours, tmp_path):
    shutil.copy(FOLDER / "vocab.json", tmp_path / "encoder.json")
    shutil.copy(FOLDER / "merges.txt", tmp_path / "vocab.bpe")
    openai = GPT2Tokenizer.from_pretrained(tmp_path)
    assert openai.encode(EDGE_CASES[0]) == ours.encode(EDGE_CASES[0])
    (tmp_path / "vocab.bpe").unlink()
    with pytest.raises(FileNotFoundError, match=r"from_pretrained: the folder '.*' holds neither "
                                                r"vocab.json and merges.txt nor encoder.json"):
        GPT2Tokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize("vocab, merges, error, message", [
    (None, "a b\n", FileNotFoundError, "there is no vocabulary file '.*vocab.json'"),
    ("[1, 2]", "a b\n", ValueError, "the vocabulary '.*' must be a JSON object of symbols to"),
    ('{"a": "0"}', "a b\n", ValueError, ".* must be a JSON object of symbols to integer ids"),
    ('{"a": 0, "b": 0}', "a b\n", ValueError, "the vocabulary '.*' gives one id to two symbols"),
    ("{not json", "a b\n", ValueError, "the vocabulary '.*' is not JSON"),
    ('{"a": 0}', None, FileNotFoundError, "there is no merges file '.*merges.txt'"),
    ('{"a": 0}', "#version: 0.2\na b\nab\n", ValueError,
     r"line 3 of the merges file '.*merges.txt' is not two symbols separated by a space: 'ab'"),
    ('{"a": 0}', "a  b\n", ValueError, "line 1 of the merges file"),
    ('{"a": 0}', b"\xff\xfe", ValueError, "the merges file '.*' is not UTF-8"),
])
def test_malformed_files_are_named(tmp_path, vocab, merges, error, message):
    for name, content in [("vocab.json", vocab), ("merges.txt", merges)]:
        if content is not None:
            path = tmp_path / name
            path.write_bytes(content) if isinstance(content, bytes) else path.write_text(content)
    with pytest.raises(error, match=f"GPT2Tokenizer: {message}"):
        GPT2Tokenizer(tmp_path / "vocab.json", tmp_path / "merges.txt")


def test_files_of_two_different_tokenizers_are_named_at_encode(tmp_path):
    (tmp_path / "vocab.json").write_text('{"a": 0, "b": 1}')
    (tmp_path / "merges.txt").write_text("#version: 0.2\na b\n")
    with pytest.raises(ValueError, match="encode: the merges made the symbol 'ab', which the "
                                         "vocabulary does not have"):
        GPT2Tokenizer.from_pretrained(tmp_path).encode("ab")


def test_the_cache_remembers_words_and_starts_again_when_full(monkeypatch):
    tokenizer = GPT2Tokenizer.from_pretrained(FOLDER)
    ids = tokenizer.encode("the cat and the hat")
    assert tokenizer.cache == {"the": (1169,), " cat": (3797,), " and": (290,), " the": (262,),
                               " hat": (6877,)}
    tokenizer.cache[" cat"] = (6877,)                   # a wrong entry shows the cache is read
    assert tokenizer.encode(" cat") == tokenizer.encode(" hat")
    monkeypatch.setattr(tokenizer_module, "CACHE_SIZE", 3)
    tokenizer.cache.clear()
    assert tokenizer.encode("the cat and the hat") == ids and len(tokenizer.cache) <= 3


@pytest.mark.parametrize("kind", long_words(1))
def test_the_same_ids_on_long_and_adversarial_words(ours, tiktoken_gpt2, hugging_face, kind):
    word = long_words(20_000)[kind]
    assert_same_ids_and_round_trip([word, word[:3000] + " " + word[:77]], ours, tiktoken_gpt2,
                                   hugging_face)


class CountingDict(dict):
    """A dict that counts its lookups (get, [] and in)."""
    lookups = 0

    def get(self, key, default=None):
        self.lookups += 1
        return super().get(key, default)

    def __getitem__(self, key):
        self.lookups += 1
        return super().__getitem__(key)

    def __contains__(self, key):
        self.lookups += 1
        return super().__contains__(key)


def glued_vocabulary(length, seed=0):
    """One word of `length` letters: GPT-2's lowercase tokens of 4 letters or more, shuffled and
    glued together, so that the merges a long word needs are many and different (the worst case
    for a merge loop that rescans the word once per kind of pair)."""
    vocabulary = json.loads((FOLDER / "vocab.json").read_text(encoding="utf-8"))
    tokens = sorted(token for token in vocabulary
                    if token.isascii() and token.isalpha() and token.islower() and len(token) >= 4)
    random.Random(seed).shuffle(tokens)
    return "".join(tokens)[:length]


@pytest.mark.parametrize("word", [glued_vocabulary, lambda length: long_words(length)[
    "random digits"]], ids=["glued vocabulary", "random digits"])
def test_a_long_word_takes_n_log_n_steps_not_n_squared(word):
    """The merges of a word of n characters look up at most 6n pairs in the merges table (n - 1
    first pairs, at most two new pairs per merge, one lookup per candidate taken from the queue):
    4 times the characters, 4 times the lookups, counted. Rescanning the word after each kind of
    merge, as GPT-2's rule is written, takes up to n lookups per kind of merge."""
    tokenizer = GPT2Tokenizer.from_pretrained(FOLDER)
    tokenizer.ranks = CountingDict(tokenizer.ranks)
    lookups = {}
    for length in (4_000, 16_000):
        tokenizer.ranks.lookups = 0
        tokenizer.encode(word(length))
        lookups[length] = tokenizer.ranks.lookups
    assert lookups[16_000] <= 6 * 16_000
    assert lookups[16_000] / lookups[4_000] < 4.5, lookups


def test_a_long_word_takes_about_as_long_as_its_letters_cut_into_short_words():
    """Time, the other measure of it: 16,000 letters in one word against 16,000 letters cut into
    words of 7 (which a quadratic merge loop does in a blink, and an n log n one too). A few times
    as long is n log n (the log, and the cost of a queue, against none); rescanning the word took
    about two hundred times as long. Timed in this run, each the fastest of three (this machine
    may be shared); every word is new, so no time is the cache's."""
    tokenizer = GPT2Tokenizer.from_pretrained(FOLDER)

    def seconds(text):
        start = time.perf_counter()
        tokenizer.encode(text)
        return time.perf_counter() - start
    words = [glued_vocabulary(16_000, seed) for seed in range(6)]
    one_word = min(seconds(word) for word in words[:3])
    short_words = min(seconds(" ".join(word[i:i + 7] for i in range(0, len(word), 7)))
                      for word in words[3:])
    assert one_word / short_words < 8, f"one word took {one_word / short_words:.1f} times as long"
