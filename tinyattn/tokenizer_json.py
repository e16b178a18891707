r"""Chapter 5. Today's tokenizers: a tokenizer.json, read as chapter 3's four steps.

GPT-2 published its tokenizer as two files, vocab.json and merges.txt (chapter 3). The models
since publish one file, tokenizer.json, in Hugging Face `tokenizers`' format, and most of them
(Qwen2, Qwen2.5, Qwen3, Llama 3, SmolLM, DeepSeek-V3) are byte-level BPE as GPT-2 is. A
byte-level BPE uses these parts of the file, each one of chapter 3's steps or a step before them:

    "added_tokens"    [{"id", "content", "normalized", ...}]: step 0, new here. Tokens that no
                      merge makes (<|im_start|>, <|eot_id|>, Qwen's <think>) are found in the text
                      first, the longest where two begin at one place, and each is its own id;
                      only the text between them goes on to the steps below. (GPT-2's
                      "<|endoftext|>" is one, which chapter 3 matched only when allowed.)
    "normalizer"      null (or an empty Sequence, DeepSeek-V3's), or {"type": "NFC"} (Qwen): the
                      text between added tokens is put in Unicode's composed form first ("e" +
                      U+0301, an accent, becomes "é").
    "pre_tokenizer"   steps 1 and 2. {"type": "ByteLevel", "use_regex": true} is GPT-2's pattern,
                      then the bytes as characters; a "Sequence" of {"type": "Split", "pattern":
                      {"Regex": ...}, "behavior": "Isolated"} and {"type": "ByteLevel",
                      "use_regex": false} is another pattern (split_patterns.py: Llama 3's, Qwen's),
                      then the bytes, and several Splits are patterns run in turn (DeepSeek-V3's
                      three); a Sequence of {"type": "Digits", "individual_digits": true} and
                      GPT-2's ByteLevel is SmolLM's, every digit a word of its own first.
    "model"           steps 3 and 4: {"type": "BPE", "vocab": {symbol: id}, "merges": ["Ġ t", ...]
                      (or [["Ġ", "t"], ...])}: vocab.json and merges.txt in one file, and
                      "ignore_merges": true, which takes a word the vocabulary has as its one id
                      before trying any merge (as tiktoken does).
    "decoder"         {"type": "ByteLevel"}: decode, as chapter 3's.
    "post_processor"  what `tokenizers` puts around the ids when asked to add special tokens
                      (Llama 3's <|begin_of_text|> in front). Not used: `encode` gives the text's
                      own ids (add_special_tokens=False), and a chat template writes such tokens.

So `TokenizerJSON` is chapter 3's `ByteLevelBPE` given these parts; `encode` is step 0, the
normalizer, then chapter 3's `encode_ordinary`. The ids equal `tokenizers`' on Qwen's, Llama 3.2's,
DeepSeek-V3's and GPT-2's files (tests/test_tokenizer_json.py). A file of another kind is refused
when it is read, in one line naming what it is: Unigram (SentencePiece's unigram model: T5,
ALBERT), WordPiece (BERT), BPE with byte fallback (SentencePiece BPE: Llama 2, Gemma), a pattern
not in split_patterns.py, or a setting that would change the ids.

A model folder also holds tokenizer_config.json: the names of its special tokens (bos_token,
eos_token, ...) and its chat template (or chat_template.jinja beside it), which
`apply_chat_template` renders (chat_template.py).

`tinyattn.tokenizer.from_pretrained(folder)` reads tokenizer.json when the folder has one: it
asks ByteLevelBPE's subclasses for the file each reads a folder by (`folder_files`), the latest
defined first, and TokenizerJSON, defined here, is one (the index, tinyattn/__init__.py, imports
this file). Nothing of chapter 3 is changed by importing it.
"""
import json
import os
import re
import unicodedata

from tinyattn import chat_template, tokenizer, tokenizer_json_checks
from tinyattn.arguments import door
from tinyattn.model_folders import model_folder
from tinyattn.split_patterns import PRE_TOKENIZERS, SingleDigitsThen
from tinyattn.tokenizer import ByteLevelBPE, without_lone_surrogates

# The kinds of tokenizer.json model that are not a byte-level BPE, by what the file calls them.
OTHER_KINDS = {
    "Unigram": "SentencePiece's unigram model, as T5's and ALBERT's",
    "WordPiece": "BERT's",
    "WordLevel": "a whole-word vocabulary",
}
# the pre-tokenizer step that makes each digit a word (SmolLM's, before GPT-2's pattern)
SINGLE_DIGITS = {"type": "Digits", "individual_digits": True}
# transformers' names of the special tokens that a chat template may use ({{ bos_token }})
SPECIAL_TOKEN_NAMES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                       "cls_token", "mask_token")


class TokenizerJSON(ByteLevelBPE):
    """The byte-level BPE of a tokenizer.json (the module docstring tells its parts), with the
    chat template and the special tokens' names of its folder when they are given."""

    folder_files = ("tokenizer.json",)         # tokenizer.from_pretrained finds it by this

    def __init__(self, tokenizer_file, chat_template=None, special_tokens_map=None):
        path = os.fspath(tokenizer_file)
        parts = read_tokenizer_json(path)
        # an added token that the vocabulary has keeps the vocabulary's id, as in `tokenizers`
        added = {token["content"]: parts["vocab"].get(token["content"], token["id"])
                 for token in parts["added_tokens"]}
        super().__init__(parts["vocab"], parts["merges"], parts["pre_tokenizer"], added)
        self.normal_form = parts["normal_form"]                              # "NFC" or None
        self.ignore_merges = parts["ignore_merges"]
        # the added tokens matched in the text as given, and those matched after normalizing it
        self.raw_tokens_pattern = tokens_pattern(
            token["content"] for token in parts["added_tokens"] if not token["normalized"])
        self.normalized_tokens = {self.normalized(token["content"]): added[token["content"]]
                                  for token in parts["added_tokens"] if token["normalized"]}
        self.normalized_tokens_pattern = tokens_pattern(self.normalized_tokens)
        self.chat_template = chat_template
        self.special_tokens_map = special_tokens_map or {}

    @classmethod
    def from_pretrained(cls, folder):
        """The tokenizer of a model folder holding tokenizer.json (and perhaps
        tokenizer_config.json and chat_template.jinja); `folder` may be a downloaded model's
        name (tinyattn/model_folders.py)."""
        folder = model_folder(folder)
        config = read_json(os.path.join(folder, "tokenizer_config.json"), missing={})
        special_tokens_map = {name: token.get("content") if isinstance(token, dict) else token
                              for name in SPECIAL_TOKEN_NAMES
                              if (token := config.get(name)) is not None}
        return cls(os.path.join(folder, "tokenizer.json"), chat_template_of(folder, config),
                   special_tokens_map)

    def normalized(self, text):
        """The normalizer: `text` in Unicode's composed form (NFC) if the file says so."""
        return unicodedata.normalize(self.normal_form, text) if self.normal_form else text

    @door(tokenizer_json_checks.a_str)
    def encode(self, text):
        """The token ids of `text`, a list of ints: its added tokens found first (step 0), the
        text between them normalized, then chapter 3's steps 1 to 4. As `tokenizers`'
        `encode(text, add_special_tokens=False).ids`; a lone surrogate, which `tokenizers` does
        not take, becomes U+FFFD as in chapter 3."""
        ids = []
        for piece, token_id in cut(without_lone_surrogates(text), self.raw_tokens_pattern,
                                   self.added_tokens):
            if token_id is not None:
                ids.append(token_id)
                continue
            for inner, inner_id in cut(self.normalized(piece), self.normalized_tokens_pattern,
                                       self.normalized_tokens):
                ids.extend([inner_id] if inner_id is not None else self.encode_ordinary(inner))
        return ids

    def ids_of_word(self, word):
        """Chapter 3's, but with "ignore_merges" a word the vocabulary has is its one id."""
        if self.ignore_merges:
            symbols = "".join(self.byte_encoder[byte] for byte in word.encode("utf-8"))
            if symbols in self.encoder:
                return (self.encoder[symbols],)
        return super().ids_of_word(word)

    @door(tokenizer_json_checks.messages_fit)
    def apply_chat_template(self, messages, add_generation_prompt=False, variables=None):
        """The text of a conversation as the model was trained on it: the folder's chat template
        rendered with `messages` ([{"role": ..., "content": ...}, ...]) as transformers'
        `apply_chat_template(messages, tokenize=False, add_generation_prompt=...)` renders it
        (chat_template.py). `add_generation_prompt` ends the text with the header of the
        assistant's turn, so that the model writes the answer. `variables` ({name: value}) are
        more names for the template, as transformers passes its keyword arguments: Qwen3's
        {"enable_thinking": False}, Llama 3's {"date_string": "26 Jul 2024"}."""
        return chat_template.render(self.chat_template, messages, add_generation_prompt,
                                    **{**self.special_tokens_map, **(variables or {})})


def tokens_pattern(tokens):
    """A pattern that finds any of `tokens` (strings), the longest first where two begin at one
    place (`tokenizers`' leftmost-longest match), in a group so that `split` keeps it; or None."""
    tokens = sorted(tokens, key=len, reverse=True)
    return re.compile(f"({'|'.join(map(re.escape, tokens))})") if tokens else None


def cut(text, pattern, ids):
    """[(piece, id)]: `text` cut before and after each added token that `pattern` finds, with the
    token's id from `ids`, or None for the text between tokens (empty pieces left out)."""
    if pattern is None:
        return [(text, None)] if text else []
    parts = pattern.split(text)           # text, token, text, token, ..., text
    return [(part, ids[part] if index % 2 else None) for index, part in enumerate(parts) if part]


def chat_template_of(folder, config):
    """The folder's chat template: chat_template.jinja, or tokenizer_config.json's
    "chat_template" (one template, or a list of named ones, of which "default"), as transformers
    reads them; None if there is none."""
    template_file = os.path.join(folder, "chat_template.jinja")
    if os.path.isfile(template_file):
        with open(template_file, encoding="utf-8") as file:
            return file.read()
    template = config.get("chat_template")
    if isinstance(template, list):
        named = {entry["name"]: entry["template"] for entry in template}
        return named.get("default")
    return template


def read_json(path, missing=None):
    """The JSON object in a file (`missing` if there is no such file), or an error naming it."""
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except FileNotFoundError:
        if missing is not None:
            return missing
        raise FileNotFoundError(f"TokenizerJSON: there is no file {path!r}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"TokenizerJSON: {path!r} is not JSON ({error})") from None


def read_tokenizer_json(path):
    """The parts of a byte-level BPE's tokenizer.json (the module docstring), or a ValueError of
    one line that names what the file is instead."""
    file = read_json(path)

    def refuse(what):
        raise ValueError(f"TokenizerJSON: {path!r} is {what}, which tinyattn does not implement "
                         f"(it reads the byte-level BPE of GPT-2, Qwen2/3, Llama 3, SmolLM, "
                         f"DeepSeek-V3)")
    if not isinstance(file, dict):
        refuse(f"a JSON {type(file).__name__}, not a tokenizer's object")
    model = file.get("model") or {}
    kind = model.get("type")
    if kind in OTHER_KINDS:
        refuse(f"a {kind} tokenizer ({OTHER_KINDS[kind]})")
    if kind != "BPE":
        refuse(f"a tokenizer whose model is {kind!r}")
    if model.get("byte_fallback"):
        refuse("a SentencePiece BPE with byte fallback (as Llama 2's and Gemma's)")
    for setting in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(setting):
            refuse(f"a BPE with {setting} = {model[setting]!r}")
    if (file.get("decoder") or {}).get("type") != "ByteLevel":
        refuse(f"a BPE whose decoder is {described(file.get('decoder'))}, not ByteLevel")
    for token in file.get("added_tokens", []):
        for setting in ("lstrip", "rstrip", "single_word"):
            if token.get(setting):
                refuse(f"a tokenizer whose added token {token['content']!r} has {setting}")
    normalizer = file.get("normalizer")
    if normalizer == {"type": "Sequence", "normalizers": []}:          # nothing to do
        normalizer = None
    if normalizer is not None and normalizer.get("type") != "NFC":
        refuse(f"a tokenizer whose normalizer is {described(normalizer)}")
    merges = [tuple(merge.split(" ")) if isinstance(merge, str) else tuple(merge)
              for merge in model.get("merges", [])]
    # an added token is matched after normalizing unless it says otherwise (by default, if it is
    # not special), as in `tokenizers`
    added_tokens = [{"id": token["id"], "content": token["content"],
                     "normalized": token.get("normalized", not token.get("special", False))}
                    for token in file.get("added_tokens", [])]
    return {"vocab": model.get("vocab", {}), "merges": merges,
            "ignore_merges": bool(model.get("ignore_merges")),
            "pre_tokenizer": pre_tokenizer_of(file.get("pre_tokenizer"), refuse),
            "added_tokens": added_tokens, "normal_form": normalizer and normalizer["type"]}


def pre_tokenizer_of(pre_tokenizer, refuse):
    """Steps 1 and 2 of a tokenizer.json: GPT-2's ByteLevel pre-tokenizer, after single digits
    (SmolLM's: split_patterns.SingleDigitsThen) or not, or Splits by patterns of
    split_patterns.py (one, or several in turn) followed by a ByteLevel without its own pattern."""
    steps = (pre_tokenizer or {}).get("pretokenizers", [pre_tokenizer])
    byte_level = steps[-1] or {}
    if byte_level.get("type") != "ByteLevel" or byte_level.get("add_prefix_space"):
        refuse(f"a tokenizer whose pre-tokenizer is {described(pre_tokenizer)}, not byte-level "
               f"(without add_prefix_space)")
    if len(steps) == 1 and byte_level.get("use_regex", True):
        return tokenizer.pre_tokenizer()
    if steps[:-1] == [SINGLE_DIGITS] and byte_level.get("use_regex", True):
        return SingleDigitsThen(tokenizer.pre_tokenizer())
    splits = steps[:-1] if not byte_level.get("use_regex", True) else []
    patterns = tuple((split.get("pattern") or {}).get("Regex") for split in splits)
    key = patterns[0] if len(patterns) == 1 else patterns      # one pattern, or several in turn
    if not splits or key not in PRE_TOKENIZERS or any(
            split.get("type") != "Split" or split.get("behavior") != "Isolated"
            or split.get("invert") for split in splits):
        refuse(f"a byte-level BPE whose pre-tokenizer is {described(pre_tokenizer)}, with a "
               f"split pattern not written out in split_patterns.py")
    return PRE_TOKENIZERS[key]()


def described(part):
    """A part of a tokenizer.json in a few words: its type, its steps', a Split's pattern."""
    if not isinstance(part, dict):
        return repr(part)
    steps = part.get("pretokenizers") or part.get("normalizers") or part.get("decoders")
    inner = f" [{', '.join(map(described, steps))}]" if steps else ""
    pattern = (part.get("pattern") or {}).get("Regex")
    return f"{part.get('type')}{inner}" + (f' "{pattern}"' if pattern else "")
