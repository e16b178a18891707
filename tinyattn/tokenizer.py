r"""Chapter 3. GPT-2's tokenizer: byte-level byte-pair encoding (BPE), written out in plain Python.

Read next to section 2.2, "Input Representation", of the GPT-2 paper (Radford et al. 2019,
"Language Models are Unsupervised Multitask Learners"). Text becomes token ids in four steps
(the paper explains bytes first; `encode` cuts the text into words first, then turns each word
into bytes, which gives the same symbols):

1. Pre-tokenising. A pattern (PATTERN) cuts the text into words before any merge, so that BPE
   never merges across kinds of characters: "dog." and "dog!" share the token "dog" instead of
   each taking a token of its own. The pieces are English contractions ('s 't 're 've 'm 'll 'd),
   runs of letters, runs of numbers, runs of other symbols, each with at most one space in front,
   and runs of whitespace (the last space of a run goes to the word after it, as its " " prefix).
2. Bytes. Each word is encoded as UTF-8, so any string is a sequence of the 256 byte values: no
   character is ever unknown. To keep working with strings, each byte is shown as one printable
   character (`bytes_to_unicode`: the printable bytes stand for themselves, the others, space
   included, for characters from U+0100 on: a space is "Ġ", a newline "Ċ").
3. Merges. Within each word, the pair of neighbouring symbols that comes first in the merges
   list (its rank) is joined into one symbol, everywhere in the word; then the next, until no
   neighbouring pair is in the list (`GPT2Tokenizer.bpe`, which finds them with a priority queue,
   so that a long word costs n log n steps, not n squared). The list is what training learned:
   the most frequent pair first.
4. Ids. Each symbol left is looked up in the vocabulary (vocab.json, or OpenAI's encoder.json):
   50,257 entries, the 256 bytes, 50,000 merges and the special token <|endoftext|> (50256).
   A word seen before is not merged again: its ids are looked up in a cache.

`decode` runs it backwards: ids to symbols, symbols to bytes, bytes to UTF-8 text.

The steps are one class, `ByteLevelBPE`, given its parts (a vocabulary, merges, a pattern, the
tokens no merge makes); `GPT2Tokenizer` is it given GPT-2's two files and pattern. Today's models
publish the same parts in one tokenizer.json, with another pattern: chapter 5 (tokenizer_json.py)
reads them into the same class, and `from_pretrained(folder)` below takes whichever file a model
folder holds.

The pattern. GPT-2 wrote it for the `regex` package, whose \p{L} (a letter, in any script) and
\p{N} (a number) Python's own `re` lacks: `unicode_ranges` spells them out as character classes
of every code point whose Unicode category begins with L or N, found with `unicodedata` (a
shortcut such as [^\W\d_] for letters is wrong for "²" and "½", which are numbers); \s is
spelled out as Unicode's White_Space characters (WHITESPACE), since Python's \s also matches
U+001C to U+001F, which are not. Building the classes walks all 1,114,112 code points, once
per process, on first use (`pre_tokenizer`); categories come from the Unicode version of this
Python's `unicodedata`, so a character assigned after it is neither a letter nor a number here.

Choices where GPT-2's own code is silent or differs:
- "<|endoftext|>" inside a text is ordinary text (seven tokens: "<", "|", "end", ...), as
  tiktoken encodes it with `disallowed_special=()`; `allowed_special={"<|endoftext|>"}` (or "all")
  makes it the one special id 50256, as tiktoken's `allowed_special` does. (OpenAI's original
  encoder always made it special.)
- A string that cannot be encoded as UTF-8 (one holding a lone surrogate, such as "\ud800") is
  encoded as tiktoken does: each lone surrogate becomes U+FFFD, "�", and a surrogate pair the
  character it stands for. For every other string, `decode(encode(text)) == text`.
- `decode` of ids whose bytes are not valid UTF-8 (a character cut between two tokens) puts
  U+FFFD in place of the invalid bytes, as OpenAI's encoder, Hugging Face and tiktoken do.
"""
import functools
import heapq
import itertools
import json
import numbers
import os
import re
import sys
import unicodedata

from tinyattn import tokenizer_checks
from tinyattn.arguments import door
from tinyattn.model_folders import model_folder


ENDOFTEXT = "<|endoftext|>"

# Unicode's White_Space property (PropList.txt), which `unicodedata` does not expose.
WHITESPACE = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"

# GPT-2's pattern as written for the `regex` package (openai/gpt-2, src/encoder.py):
#     's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
# and the same with each class spelled out, {L}, {N} and {S} standing for the ranges of letters,
# numbers and whitespace (\S, not whitespace, is [^{S}]):
PATTERN = (r"'s|'t|'re|'ve|'m|'ll|'d| ?[{L}]+| ?[{N}]+| ?[^{S}{L}{N}]+"
           r"|[{S}]+(?![^{S}])|[{S}]+")
CACHE_SIZE = 100_000        # words whose ids are remembered, before the cache starts again


def bytes_to_unicode():
    """{byte value: the printable character that stands for it}.

    The 188 bytes whose character is printable and not a space ("!" to "~", "¡" to "¬", "®" to
    "ÿ") stand for themselves; the other 68 (control characters, the space, U+00A0 and U+00AD)
    take the characters U+0100, U+0101, ... in order: the space, byte 32, becomes "Ġ" (U+0120).
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    others = [byte for byte in range(256) if byte not in printable]
    return {**{byte: chr(byte) for byte in printable},
            **{byte: chr(256 + n) for n, byte in enumerate(others)}}


def unicode_ranges(major_category):
    r"""The inside of a regex character class holding every code point whose Unicode general
    category begins with `major_category` ("L": Lu, Ll, Lt, Lm, Lo; "N": Nd, Nl, No), written as
    ranges: \U00000041-\U0000005a\U00000061-... for "L"."""
    return category_ranges()[major_category]


@functools.cache
def category_ranges():
    r"""{major category: its ranges, as unicode_ranges writes them}, for every category at once:
    one walk over the code points, each run of one major category a range. Built once per process
    (a third of a second: chapter 5's patterns ask for five categories)."""
    ranges, start = {}, 0
    categories = map(unicodedata.category, map(chr, range(sys.maxunicode + 1)))
    for major, run in itertools.groupby(categories, key=lambda category: category[0]):
        end = start + sum(1 for _ in run)                   # one past the run's last code point
        ranges.setdefault(major, []).append(rf"\U{start:08x}-\U{end - 1:08x}")
        start = end
    return {major: "".join(runs) for major, runs in ranges.items()}


@functools.cache
def pre_tokenizer():
    """PATTERN compiled with Python's `re`, once per process (walking every code point for the
    letter and number classes is what the first call costs)."""
    return re.compile(PATTERN.format(L=unicode_ranges("L"), N=unicode_ranges("N"), S=WHITESPACE))


class ByteLevelBPE:
    """A byte-level BPE: steps 2 to 4 of the module docstring on the words that a pre-tokenizer
    (step 1) cuts, and `decode`. It is given its parts: the vocabulary {symbol: id}, the merges
    [(first, second), ...] (first merged first), the pre-tokenizer (a compiled pattern, whose
    `findall` gives the words) and the added tokens {text: id} that are not made by merges
    (GPT-2's "<|endoftext|>"). `GPT2Tokenizer` below is it with GPT-2's files and pattern;
    chapter 5 (tokenizer_json.py) gives it those of today's models from their tokenizer.json."""

    def __init__(self, vocabulary, merges, pre_tokenizer, added_tokens):
        self.encoder = vocabulary                                            # symbol -> id
        self.added_tokens = added_tokens                                     # text -> id
        self.decoder = {token_id: symbol for symbol, token_id in
                        {**vocabulary, **added_tokens}.items()}              # id -> symbol
        self.ranks = {pair: rank for rank, pair in enumerate(merges)}
        self.pre_tokenizer = pre_tokenizer
        self.byte_encoder = bytes_to_unicode()
        self.byte_decoder = {character: byte for byte, character in self.byte_encoder.items()}
        self.cache = {}                                                      # word -> ids

    @property
    def vocab_size(self):
        """How many token ids there are, the added tokens included: 50,257 for GPT-2 (ids 0 to
        50256; its one added token, "<|endoftext|>", is in its vocabulary too)."""
        return len({**self.encoder, **self.added_tokens})

    def encode_ordinary(self, text):
        """The ids of a text with no added token in it: steps 1 to 4 (the name is tiktoken's)."""
        ids = []
        for word in self.pre_tokenizer.findall(text):
            word_ids = self.cache.get(word)
            if word_ids is None:
                word_ids = self.ids_of_word(word)
            ids.extend(word_ids)
        return ids

    def ids_of_word(self, word):
        """The ids of one pre-tokenised word (steps 2 to 4), remembered in the cache."""
        symbols = "".join(self.byte_encoder[byte] for byte in word.encode("utf-8"))
        word_ids = tuple(self.id_of(symbol) for symbol in self.bpe(symbols))
        if len(self.cache) >= CACHE_SIZE:
            self.cache.clear()
        self.cache[word] = word_ids
        return word_ids

    def bpe(self, word):
        """The symbols of one pre-tokenised word (a string of byte characters) after the merges:
        a tuple of strings, e.g. ("Ġhel", "lo") for "Ġhello".

        The rule is GPT-2's (src/encoder.py), BPE as Sennrich et al. 2016 ("Neural Machine
        Translation of Rare Words with Subword Units") apply it: while some neighbouring pair is
        in the merges list, join every occurrence of the pair of lowest rank, left to right.
        Written as it reads, each kind of merge rescans the word: up to n kinds of merge times n
        symbols, n squared steps for a word of n characters (a long number, a run of symbols).
        Here the same merges are found in O(n log n), as Hugging Face tokenizers
        (`Word::merge_all`) and tiktoken (`_byte_pair_merge_large`) find them:

        1. The symbols are a doubly linked list over the word's positions: symbols[i] is the
           symbol that begins at character i (None once joined to its left neighbour), and
           following[i], preceding[i] are where its neighbours begin (`end`, -1: none). A merge
           changes a few links; the rest of the word does not move.
        2. A priority queue (heapq) holds the candidate merges, (rank, where the pair begins):
           it gives the lowest rank first and, among occurrences of one pair, the leftmost first.
        3. A candidate taken from the queue is stale if one of its two symbols was joined to
           another since it was queued: the pair now at its place is then not the pair of its
           rank, which one lookup tells. Otherwise the two symbols are joined, and the two pairs
           the new symbol makes with its neighbours are queued.

        The order is the rule's: a pair that holds a new symbol ranks after the merge that made
        it (training makes a symbol before any merge uses it), so nothing of lower rank appears
        while the occurrences of one pair are being joined. The word's n - 1 pairs, and two per
        merge, pass through the queue: O(n) candidates of O(log n) each.
        """
        symbols = list(word)
        end = len(word)
        following = list(range(1, end + 1))
        preceding = list(range(-1, end - 1))
        candidates = []

        def queue_the_pair_at(first):
            """Queue the pair of symbols[first] and the symbol after it, if it is a merge."""
            second = following[first]
            if second != end:
                rank = self.ranks.get((symbols[first], symbols[second]))
                if rank is not None:
                    heapq.heappush(candidates, (rank, first))

        for first in range(end):
            queue_the_pair_at(first)
        while candidates:
            rank, first = heapq.heappop(candidates)
            second = following[first]
            if second == end or self.ranks.get((symbols[first], symbols[second])) != rank:
                continue                            # stale (a joined symbol is None: no rank)
            symbols[first] += symbols[second]
            symbols[second] = None
            following[first] = following[second]
            if following[first] != end:
                preceding[following[first]] = first
            if preceding[first] != -1:
                queue_the_pair_at(preceding[first])
            queue_the_pair_at(first)
        return tuple(symbol for symbol in symbols if symbol is not None)

    def id_of(self, symbol):
        """The id of a symbol the merges made; an error if the vocabulary lacks it."""
        if symbol not in self.encoder:
            raise ValueError(f"encode: the merges made the symbol {symbol!r}, which the "
                             f"vocabulary does not have: are the two files of one tokenizer?")
        return self.encoder[symbol]

    def decode(self, ids):
        """The text of a sequence of token ids: their symbols turned back into bytes and joined,
        decoded as UTF-8 (invalid bytes become U+FFFD, "�"). An added token that is not made
        of byte characters ("<｜User｜>", say) stands for its own UTF-8 bytes, as in
        Hugging Face's byte-level decoder."""
        ids = list(ids)
        for position, token_id in enumerate(ids):
            if isinstance(token_id, bool) or not isinstance(token_id, numbers.Integral) \
                    or token_id not in self.decoder:
                raise ValueError(f"decode: ids[{position}] = {token_id!r} is not a token id "
                                 f"(0 to {max(self.decoder)})")
        return b"".join(self.bytes_of(self.decoder[int(token_id)]) for token_id in ids).decode(
            "utf-8", errors="replace")

    def bytes_of(self, symbol):
        """The bytes a symbol stands for: one byte per character, or its UTF-8 if a character
        of it is not one of the 256 byte characters."""
        if all(character in self.byte_decoder for character in symbol):
            return bytes(self.byte_decoder[character] for character in symbol)
        return symbol.encode("utf-8")


def without_lone_surrogates(text):
    """`text`, each lone surrogate ("\\ud800", which UTF-8 cannot encode) replaced by U+FFFD and
    each surrogate pair by the character it stands for, as tiktoken does."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    return text


class GPT2Tokenizer(ByteLevelBPE):
    """GPT-2's byte-level BPE from its two files: the vocabulary, {symbol: id} as JSON
    (Hugging Face's vocab.json, OpenAI's encoder.json), and the merges, one pair of symbols a
    line, first merged first (merges.txt, OpenAI's vocab.bpe), with GPT-2's pattern. The module
    docstring tells the steps; `encode` and `decode` are them."""

    folder_files = ("vocab.json", "encoder.json")      # what `from_pretrained` finds it by

    def __init__(self, vocab_file, merges_file):
        vocabulary = read_vocabulary(os.fspath(vocab_file))
        special_tokens = {ENDOFTEXT: vocabulary[ENDOFTEXT]} if ENDOFTEXT in vocabulary else {}
        super().__init__(vocabulary, read_merges(os.fspath(merges_file)), pre_tokenizer(),
                         special_tokens)
        self.special_tokens = special_tokens

    @classmethod
    def from_pretrained(cls, folder):
        """The tokenizer of a model folder: vocab.json and merges.txt (Hugging Face's names), or
        encoder.json and vocab.bpe (OpenAI's names for the same two files). `folder` may be the
        name of a downloaded model ("gpt2", tinyattn/model_folders.py)."""
        folder = model_folder(folder)
        for vocab_name, merges_name in (("vocab.json", "merges.txt"),
                                        ("encoder.json", "vocab.bpe")):
            vocab_file, merges_file = (os.path.join(folder, vocab_name),
                                       os.path.join(folder, merges_name))
            if os.path.isfile(vocab_file) and os.path.isfile(merges_file):
                return cls(vocab_file, merges_file)
        raise FileNotFoundError(f"GPT2Tokenizer.from_pretrained: the folder {folder!r} holds "
                                f"neither vocab.json and merges.txt nor encoder.json and "
                                f"vocab.bpe")

    @door(tokenizer_checks.special_tokens_fit)
    def encode(self, text, allowed_special=frozenset()):
        """The token ids of `text`: a list of ints.

        `allowed_special`: the special tokens ("<|endoftext|>") to encode as their single id where
        they appear in the text, or "all"; by default none is, and "<|endoftext|>" is encoded as
        ordinary text (see the module docstring, with what happens to lone surrogates).
        """
        special = set(self.special_tokens if allowed_special == "all" else allowed_special)
        text = without_lone_surrogates(text)
        chunks = re.split(f"({'|'.join(map(re.escape, special))})", text) if special else [text]
        ids = []
        for chunk in chunks:
            if chunk in special:
                ids.append(self.special_tokens[chunk])
            else:
                ids.extend(self.encode_ordinary(chunk))
        return ids


def from_pretrained(folder):
    """The tokenizer of a model folder (or of a downloaded model's name, "gpt2"), read by the
    first tokenizer class whose file the folder holds.

    The classes are ByteLevelBPE's subclasses that name the file they read a folder by
    (`folder_file`), the latest defined first: here GPT2Tokenizer (vocab.json, or encoder.json);
    a later chapter's subclass, such as chapter 5's TokenizerJSON (tokenizer.json), is found the
    same way and comes before it, so that a folder holding both files is read by its newer one.
    Nothing is registered: defining the subclass is all a later chapter does."""
    folder = model_folder(folder)
    readers = [(name, tokenizer_class) for tokenizer_class in reversed(subclasses(ByteLevelBPE))
               for name in getattr(tokenizer_class, "folder_files", ())]
    for file_name, tokenizer_class in readers:
        if os.path.isfile(os.path.join(folder, file_name)):
            return tokenizer_class.from_pretrained(folder)
    raise FileNotFoundError(f"from_pretrained: the folder {folder!r} holds no tokenizer: none of "
                            f"{', '.join(name for name, _ in readers)}")


def subclasses(cls):
    """Every subclass of `cls`, its subclasses' too, in the order they were defined."""
    found = []
    for subclass in cls.__subclasses__():
        found += [subclass] + subclasses(subclass)
    return list(dict.fromkeys(found))              # a class of two bases, once


def read_vocabulary(path):
    """{symbol: id} from a JSON file, or an error naming the file and what is wrong."""
    try:
        with open(path, encoding="utf-8") as file:
            vocabulary = json.load(file)
    except FileNotFoundError:
        raise FileNotFoundError(f"GPT2Tokenizer: there is no vocabulary file {path!r}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"GPT2Tokenizer: the vocabulary {path!r} is not JSON ({error})") from None
    if not isinstance(vocabulary, dict) or not all(
            type(token_id) is int for token_id in vocabulary.values()):
        raise ValueError(f"GPT2Tokenizer: the vocabulary {path!r} must be a JSON object of "
                         f"symbols to integer ids")
    if len(set(vocabulary.values())) != len(vocabulary):
        raise ValueError(f"GPT2Tokenizer: the vocabulary {path!r} gives one id to two symbols")
    return vocabulary


def read_merges(path):
    """[(first, second), ...] from a merges file: an optional "#version" line, then one pair a
    line, the two symbols separated by one space (no symbol holds a space: a space is "Ġ")."""
    try:
        with open(path, encoding="utf-8") as file:
            lines = file.read().split("\n")
    except FileNotFoundError:
        raise FileNotFoundError(f"GPT2Tokenizer: there is no merges file {path!r}") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"GPT2Tokenizer: the merges file {path!r} is not UTF-8 "
                         f"({error})") from None
    merges = []
    for number, line in enumerate(lines, start=1):
        if not line or number == 1 and line.startswith("#version"):
            continue
        pair = tuple(line.split(" "))
        if len(pair) != 2 or not all(pair):
            raise ValueError(f"GPT2Tokenizer: line {number} of the merges file {path!r} is not "
                             f"two symbols separated by a space: {line!r}")
        merges.append(pair)
    return merges
