"""Chapter 3. What makes an argument of GPT-2's tokenizer (tokenizer.py) bad: a text that is not a
str, special tokens the vocabulary does not have."""


def special_tokens_fit(self, text, allowed_special=frozenset()):
    """text a str; allowed_special "all" or a set of the vocabulary's special tokens."""
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}")
    if allowed_special == "all":
        return
    if not isinstance(allowed_special, (set, frozenset, list, tuple)) or not all(
            isinstance(token, str) for token in allowed_special):
        raise TypeError(f"allowed_special must be 'all' or a set of special tokens, got "
                        f"{allowed_special!r}")
    unknown = sorted(set(allowed_special) - self.special_tokens.keys())
    if unknown:
        raise ValueError(f"allowed_special names {unknown}, which the vocabulary does not have as "
                         f"special tokens (it has {sorted(self.special_tokens)})")
