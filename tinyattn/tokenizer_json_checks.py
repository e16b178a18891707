"""Chapter 5. What makes an argument of a tokenizer.json's tokenizer (tokenizer_json.py) bad: a
text that is not a str, a conversation that is not a list of messages, a folder without a chat
template."""


def a_str(self, text):
    """text a str."""
    if not isinstance(text, str):
        raise TypeError(f"expected a str, got {type(text).__name__}")


def messages_fit(self, messages, add_generation_prompt=False, variables=None):
    """messages a non-empty list of dicts, each with a "role"; add_generation_prompt a bool;
    variables None or a dict of names; and the tokenizer has a chat template."""
    if not isinstance(messages, (list, tuple)) or not messages or not all(
            isinstance(message, dict) and "role" in message for message in messages):
        raise TypeError(f"messages must be a non-empty list of dicts such as "
                        f"{{'role': 'user', 'content': 'Hello'}}, got {messages!r}")
    if not isinstance(add_generation_prompt, bool):
        raise TypeError(f"add_generation_prompt must be True or False, got "
                        f"{add_generation_prompt!r}")
    if variables is not None and not (isinstance(variables, dict) and all(
            isinstance(name, str) for name in variables)):
        raise TypeError(f"variables must be a dict of names for the template, got {variables!r}")
    if self.chat_template is None:
        raise ValueError("this tokenizer has no chat template: its folder has neither "
                         "chat_template.jinja nor a chat_template in tokenizer_config.json")
