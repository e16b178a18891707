"""Chapter 3. Where a model's files are: a folder, or a name that `python -m tinyattn download`
filled in tinyattn's cache, so that `from_pretrained("gpt2")` (or chapter 5's
`nn.from_pretrained("qwen3-0.6b")`) finds what the download fetched; and a folder's config.json,
read."""
import json
import os


def downloads():
    """The folder that `python -m tinyattn download NAME` fills, one folder per NAME:
    ~/.cache/tinyattn (under $XDG_CACHE_HOME instead of ~/.cache when that is set)."""
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "tinyattn")


def model_folder(folder):
    """The folder of a model: `folder` itself if there is one by that name; else, for a bare name
    such as "gpt2", the folder `python -m tinyattn download gpt2` wrote (as transformers finds a
    model in its cache by its name). A FileNotFoundError names the places looked in, each once."""
    folder = os.fspath(folder)
    if os.path.isdir(folder):
        return folder
    if os.sep in folder:                  # a path, not a name: only that folder was looked for
        raise FileNotFoundError(f"there is no folder {folder!r}")
    downloaded = os.path.join(downloads(), folder)
    if os.path.isdir(downloaded):
        return downloaded
    raise FileNotFoundError(f"there is no folder {folder!r}, nor a downloaded model of that name "
                            f"in {downloaded!r} (`python -m tinyattn download NAME` puts one "
                            f"there, for NAME gpt2, qwen3-0.6b or smollm2-135m)")


def read_config(folder, kind="model", hint=""):
    """config.json of a `kind` folder ("model", "GPT-2") as a dict; a FileNotFoundError or
    ValueError naming the folder when it has none, or one that is not a JSON object. `hint` ends
    the message of a missing file (how to get one)."""
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"the folder {folder!r} has no config.json: a {kind} folder in "
                                f"Hugging Face's layout holds config.json and "
                                f"model.safetensors{hint}")
    try:
        with open(path, encoding="utf-8") as file:
            config = json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"the folder {folder!r}: config.json is not valid JSON ({error})") \
            from None
    if not isinstance(config, dict):
        raise ValueError(f"the folder {folder!r}: config.json holds a JSON "
                         f"{type(config).__name__}, not an object")
    return config
