"""Chapter 5. Chat templates: the text that a chat model was trained on, made from its messages.

An instruct model is a base model trained further on conversations written in one fixed way, for
Qwen (ChatML):

    <|im_start|>system
    You are a helpful assistant.<|im_end|>
    <|im_start|>user
    Hello<|im_end|>
    <|im_start|>assistant

and for Llama 3 with header tokens (<|start_header_id|>user<|end_header_id|>, each turn ended by
<|eot_id|>). Given a conversation in that form and a last header for the assistant (the
"generation prompt"), the model writes the answer; given plain text, it continues the text. The
way is in the model's folder as a Jinja template (tokenizer_config.json's "chat_template", or
chat_template.jinja), a loop over the messages, and it is rendered as transformers renders it
(`transformers.utils.chat_template_utils`), since that is how the model's makers render it:

* Jinja's sandbox, immutable (a template from the hub is code from someone else), with
  `trim_blocks` and `lstrip_blocks`: a `{% ... %}` tag alone on its line leaves no blank line nor
  indentation behind, so templates can be written one tag a line;
* the `loopcontrols` extension (`{% break %}`, `{% continue %}`) and the tag
  `{% generation %}...{% endgeneration %}` (which marks the assistant's text, rendered as is);
* `raise_exception(message)`, `strftime_now(format)` (today's date, as Llama 3's templates write
  it), `tojson` without escaping HTML and with `indent`, `separators`, `sort_keys`, a `dict()` and
  a `namespace()` that keeps no name beginning with "_";
* the variables `messages` (each message without its keys whose value is None), `tools` and
  `documents` (None here), `add_generation_prompt`, and the folder's special tokens by name
  (`bos_token`, `eos_token`, ...) with any variables given.

Jinja (the `jinja2` package) is the one dependency of tinyattn beyond NumPy that this needs,
optional: `pip install "tinyattn[chat]"`. Writing a template engine is not the lesson here.
"""
import datetime
import functools
import json


def render(template, messages, add_generation_prompt=False, **variables):
    """The text of `template` rendered for `messages`, as transformers renders it."""
    messages = [{key: value for key, value in message.items() if value is not None}
                for message in messages]
    return compiled(template).render(messages=messages, tools=None, documents=None,
                                     add_generation_prompt=add_generation_prompt, **variables)


@functools.cache
def compiled(template):
    """The template parsed once, in the environment transformers renders in."""
    return environment().from_string(template)


@functools.cache
def environment():
    """Jinja's immutable sandbox set up as transformers sets it up (the module docstring)."""
    try:
        import jinja2
        import jinja2.exceptions
        import jinja2.ext
        import jinja2.nodes
        import jinja2.sandbox
        import jinja2.utils
    except ImportError:
        raise ImportError("apply_chat_template: rendering a chat template needs the jinja2 "
                          "package: pip install \"tinyattn[chat]\" (or jinja2)") from None

    class Generation(jinja2.ext.Extension):
        """{% generation %}...{% endgeneration %}: its text, as is."""
        tags = {"generation"}

        def parse(self, parser):
            line = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("text"), [], [], body).set_lineno(line)

        def text(self, caller):
            return caller()

    class Namespace(jinja2.utils.Namespace):
        """namespace(...) that refuses names beginning with "_" (Python's insides)."""
        def __init__(*args, **kwargs):
            self, attributes = args[0], dict(*args[1:], **kwargs)
            for name in attributes:
                Namespace.check(name)
            jinja2.utils.Namespace.__init__(self, attributes)

        def __setitem__(self, name, value):
            Namespace.check(name)
            jinja2.utils.Namespace.__setitem__(self, name, value)

        @staticmethod
        def check(name):
            if isinstance(name, str) and name.startswith("_"):
                raise jinja2.exceptions.SecurityError(f"a chat template cannot keep {name!r} "
                                                      f"in a namespace")

    class Dict:
        """dict(...) and dict.fromkeys(...), and nothing else of the class."""
        def __call__(self, *args, **kwargs):
            return dict(*args, **kwargs)

        def fromkeys(self, *args, **kwargs):
            return dict.fromkeys(*args, **kwargs)

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def strftime_now(date_format):
        return datetime.datetime.now().strftime(date_format)

    jinja = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[Generation, jinja2.ext.loopcontrols])
    jinja.filters["tojson"] = tojson
    jinja.globals.update(raise_exception=raise_exception, strftime_now=strftime_now,
                         dict=Dict(), namespace=Namespace)
    return jinja
