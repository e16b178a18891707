"""The hard strings every tokenizer test runs on (tests/test_tokenizer.py, chapter 3's GPT-2;
tests/test_tokenizer_json.py, chapter 5's tokenizer.json files): Python's documentation, chapter
3's edge cases, the harder list of chapter 5 (scripts, emoji sequences, combining marks, digits of
every length, contractions in mixed case, code with tabs and CRLF, runs of spaces and newlines,
added tokens inside text, byte soup), random strings from every plane and long words."""
import random
import sys


def python_documentation():
    """The text of Python's own documentation topics (pydoc_data), all of it."""
    from pydoc_data.topics import topics
    return "\n".join(topics[name] for name in sorted(topics))


EDGE_CASES = [
    "I'm sure he's here, they've gone, we'll see, you'd know, it's 'tis",
    "SHE'S HERE, I'M, WE'LL, 'S 'T 'Re",                # uppercase: not contractions in GPT-2
    "a  b   c    d", "trailing spaces   ", "   leading", " ", "  ", "\n", "\n\n\n", "x\n \n y",
    "\ttabs\t\tand  \t mixed \n\t", "\r\n windows\r\n", "\x0b\x0c\x1c\x1d\x1e\x1f x",
    "\u3000ideographic\u00a0no-break\u2028line\u2029para\u0085next\u200bzero-width",
    "0 12 345 6789 1,000,000.50 3.14159 -42 1e10", "² ½ ¼ ⅷ Ⅻ ٣٤٥ ۱۲ १२३ 𝟙𝟚",
    "😀 👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 ❤️", "e\u0301 n\u0303 a\u030a\u0323 \u0301alone",
    "中文字符测试 日本語のテキスト 한국어 텍스트", "العربية עברית हिन्दी ไทย ελληνικά кириллица",
    "a\x00b\x00\x00 \x00", "\x7f\x80\x9f", "<|endoftext|>", "text<|endoftext|>more <|end",
    "'s's's ''s", "  'll", "!!!??? ... --- ***", "Ω≈ç√∫˜µ≤≥÷", "\U0010fffd\U000e0001\uffff",
    "Ġ Ċ ĠĠ",                                           # the byte characters themselves
]




def random_strings(count, seed=0):
    """Strings of 0 to 30 characters drawn from every plane (surrogates aside), mixed with the
    characters the pattern treats specially (space, newline, tab, apostrophe, digits)."""
    generator = random.Random(seed)
    special = " \n\t'sdl0 9."

    def character():
        if generator.random() < 0.4:
            return generator.choice(special)
        code = generator.choice([generator.randrange(0x80), generator.randrange(0x80, 0x3000),
                                 generator.randrange(0x3000, 0xd800),
                                 generator.randrange(0xe000, sys.maxunicode + 1)])
        return chr(code)
    return ["".join(character() for _ in range(generator.randrange(31))) for _ in range(count)]


def long_words(length, seed=0):
    """Words of `length` characters (each one word for the pre-tokenizer) that make many merges
    in a row: digits, one letter repeated, two letters alternating, random letters, punctuation,
    spaces, accented and CJK letters (several bytes each), and emoji."""
    generator = random.Random(seed)

    def drawn(alphabet):
        return "".join(generator.choice(alphabet) for _ in range(length))
    return {"random digits": drawn("0123456789"), "one digit": "9" * length,
            "one letter": "a" * length, "two letters": "ab" * (length // 2),
            "random letters": drawn("abcdefghijklmnopqrstuvwxyz"),
            "a space then letters": " " + drawn("etaoinshrdlu"), "punctuation": drawn("!?.,;:-*"),
            "spaces": " " * length, "accented": drawn("éèàçüöñ"), "CJK": drawn("中文字符测试日本"),
            "emoji": drawn("😀👍🏽❤")}


# Chapter 5's harder list, for the patterns of Llama 3 and Qwen and their added tokens.
HARD_STRINGS = [
    # contractions in every case, and the letters whose case folding is s, k or l
    "I'M HERE, YOU'RE, WE'LL, SHE'D, THEY'VE, IT'S, DON'T", "i'M yOu'Re wE'lL tHeY'vE",
    "'S'T'RE'VE'M'LL'D", "'ſ 'K 'İ", "x's y'S ''s '", "rock'n'roll o'clock",
    # digits of every length, and numbers that are not ASCII digits
    *["".join(str(n % 10) for n in range(1, length + 1)) for length in range(1, 14)],
    " 1 22 333 4444 55555 666666", "a1b22c333d4444", "3.14159265358979 -0.5e-10 1,234,567",
    "٠١٢٣٤٥٦٧٨٩ ۰۱۲ ०१२३ ໑໒໓ 𝟎𝟏𝟐𝟑𝟒 ²³¹ ½¾ ⅠⅡⅢ", "0x1F 0b1010 0o777 1_000_000",
    # scripts
    "Ελληνικά Русский Українська Српски Հայերեն ქართული", "עִבְרִית العَرَبِيَّة فارسی اردو",
    "हिन्दी বাংলা ਪੰਜਾਬੀ ગુજરાતી தமிழ் తెలుగు ಕನ್ನಡ മലയാളം සිංහල", "ไทย ລາວ မြန်မာ ខ្មែរ",
    "中文 繁體中文 日本語 ひらがな カタカナ 한국어 한글", "ᚠᚢᚦᚨᚱᚲ 𐌰𐌱𐌲 𓀀𓀁 ꦗꦮ ᠮᠣᠩᠭᠣᠯ",
    # emoji sequences: skin tones, ZWJ families, flags, keycaps, variation selectors
    "👍🏻👍🏼👍🏽👍🏾👍🏿", "👨‍👩‍👧‍👦 👩‍❤️‍💋‍👨 🧑🏽‍💻", "🇯🇵🇺🇸🇪🇺 🏴󠁧󠁢󠁳󠁣󠁴󠁿", "1️⃣ #️⃣ *️⃣", "☺︎ ☺️ ❤ ❤️",
    # combining marks, composed and not (Qwen's file normalizes to NFC)
    "e\u0301 é \u00e9 a\u0308 ä A\u030a Å", "\u1e9b\u0323 q\u0307\u0323 \u0958 \uac00 \u1100\u1161",
    "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a", "\u0301\u0301",
    "ﬁ ﬀ ﬃ Ǆ ǅ ǆ ẞ ß", "Å Ω K ﬀ",              # compatibility and singleton characters
    # code: tabs, CRLF, indentation, operators
    "def f(x):\n\tif x:\r\n\t\treturn x**2\r\n\treturn -1\n",
    "    for i in range(10):\n        print(i)  # comment\n\n\n",
    "int main() {\r\n    printf(\"%d\\n\", a[i]++);\r\n}\r\n", "x+=1;y-=2;z*=3;a&&b||!c",
    "<div class=\"a\">&nbsp;</div>", "SELECT * FROM t WHERE id=42;\n--",
    "λx.x ∀x∃y ≠≤≥ ⟨a|b⟩ →←↔", "$var @decorator #hash %mod ^xor ~not `tick`",
    # runs of spaces and newlines
    " " * 17, "\n" * 9, "\r\n" * 5, "\t" * 6, " \n \n  \n   x", "a \n\nb", "end.\n\n\n   \n",
    "  \u00a0 \u3000\u2003 x", "\n\r\n\r\r\n", "x\x0b\x0cy\x85z",
    # added tokens inside text, whole, cut and overlapping (each file has some of them)
    "<|endoftext|>", "a<|endoftext|>b", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|><|im_start|", "<<|im_end|>>", "<|im_sta rt|>", "<think>\n\n</think>",
    "<tool_call>{\"a\": 1}</tool_call>", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>"
    "\n\nHi<|eot_id|>", "<|eot_id|><|eot_id|>", "<|reserved_special_token_5|>",
    "<|fim_prefix|>def<|fim_suffix|>x<|fim_middle|>", "<|image|>", "< |eot_id|>",
]


def byte_soup(count, seed=0):
    """Strings of random bytes, read as UTF-8 (invalid bytes becoming U+FFFD) and as Latin-1."""
    generator = random.Random(seed)
    soups = [bytes(generator.randrange(256) for _ in range(generator.randrange(1, 40)))
             for _ in range(count)]
    return [soup.decode("utf-8", errors="replace") for soup in soups] + [
        soup.decode("latin-1") for soup in soups]
