"""`python -m tinyattn download NAME [FOLDER]`: a model's files from the Hugging Face hub, those
`nn.from_pretrained` and `tokenizer.from_pretrained` read.

    python -m tinyattn download gpt2              # into ~/.cache/tinyattn/gpt2 (default_folder)
    python -m tinyattn download qwen3-0.6b my/folder

    gpt2          GPT-2 small, 124M parameters (openai-community/gpt2): chapter 3
    qwen3-0.6b    Qwen3-0.6B, 0.6B parameters, bfloat16 (Qwen/Qwen3-0.6B): chapter 5
    smollm2-135m  SmolLM2-135M-Instruct, 135M parameters, bfloat16: chapter 5

Each comes from its repository at one fixed revision, so that what its files must be is known in
advance: MODELS gives each file's size and SHA-256, and every file is checked, size and SHA-256,
before it takes its name. Those are the hub's own figures for that revision, as stored copies of
its file listing record them in several independent projects that pin these files: the SHA-256 of a
file kept in Git LFS is its pointer's `oid` (model.safetensors, Qwen's tokenizer.json), and the
SHA-256 of the small files kept in Git are recorded beside the Git blob ids that the hub lists for
them. One was not: Qwen3-0.6B's config.json, for which the hub gives only its Git blob id (the
SHA-1 of "blob 726\\0" and its bytes). Its bytes are the config.json that the bench's part 9 builds
its shape from (tinyattn_tools/bench/open_generation.py), whose Git blob id is the hub's: their
SHA-256 is the one listed (tests/test_download.py checks both). GPT-2's vocab.json and merges.txt
are moreover byte for byte the files in tests/fixtures/gpt2-tiny/ (OpenAI's encoder.json and
vocab.bpe, whose SHA-256 tiktoken pins).

A chapter-5 model comes with its tokenizer's files: tokenizer.json (the vocabulary, merges and
added tokens), tokenizer_config.json (the special tokens' names, and the chat template:
Qwen3-0.6B's listing at its revision has no chat_template.jinja) and generation_config.json (the
ids that end a turn); Qwen's vocab.json and merges.txt, the same vocabulary again, are left out.
SmolLM2-135M is fetched in its instruct version: a chat model with a chat template, as Qwen3-0.6B
is (a post-trained model, which answers a question put as a conversation), so that demo 18 puts
each model card's question to both in the same way; the base model has the same architecture and
size, and continues text instead.

Each file is written whole or not at all: its bytes go to NAME.partial, which is renamed to NAME
only once it is complete and checked. A download cut short (no network, a dropped connection,
Ctrl-C) leaves NAME.partial with the bytes received, and the next run asks the server for the rest
only (an HTTP Range request) instead of starting again; a file already there and right is not
fetched again. An answer that announces another length than the bytes still expected (its
Content-Length) is not the file, whatever its status: an error page served with 200 OK by a proxy
or a captive portal, say. It is refused before a byte of it is written, since kept as NAME.partial
it would make the next run fetch the whole file after it, only to fail the checksum. Without a
network, or with a folder that cannot be made, it says so in one line and exits with status 1,
having written nothing but, if a transfer had begun, the resumable NAME.partial.

Python's urllib alone: no new dependency.
"""
import argparse
import dataclasses
import hashlib
import http.client
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from tinyattn.model_folders import downloads


def hub_url(repository, revision):
    """Where the hub serves a repository's files at a revision: the URL that a file's name ends."""
    return f"https://huggingface.co/{repository}/resolve/{revision}/"


@dataclasses.dataclass(frozen=True)
class Model:
    """A model the command fetches: `files` {name: (size in bytes, SHA-256)}, the small files
    first, from `base_url` (its repository at its fixed revision); `title` and `usage` are what
    the last line says: what it is, and how to use the folder FOLDER."""

    title: str
    repository: str
    revision: str
    files: dict
    usage: str
    base_url: str = None

    def __post_init__(self):
        if self.base_url is None:
            object.__setattr__(self, "base_url", hub_url(self.repository, self.revision))


# name: Model(title, repository, revision, {file: (size in bytes, SHA-256)}, usage)
MODELS = {
    "gpt2": Model(
        "GPT-2 small", "openai-community/gpt2", "607a30d783dfa663caf39e06633721c8d4cfcd7e", {
            "config.json":
                (665, "0daed7749b4f02b8f76240d5444551d7b08712dab4d0adb8239c56ba823bb7b4"),
            "vocab.json":
                (1042301, "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783"),
            "merges.txt":
                (456318, "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5"),
            "model.safetensors":
                (548105171, "248dfc3911869ec493c76e65bf2fcf7f615828b0254c12b473182f0f81d3a707"),
        },
        "CausalTransformer.from_pretrained({folder!r}), GPT2Tokenizer.from_pretrained({folder!r}), "
        "python demos/14_gpt2.py --weights {folder}"),
    "qwen3-0.6b": Model(
        "Qwen3-0.6B", "Qwen/Qwen3-0.6B", "c1899de289a04d12100db370d81485cdf75e47ca", {
            "config.json":
                (726, "660db3b73d788119c04535e48cf9be5f55bc3100841a718637ae695b442f27dd"),
            "generation_config.json":
                (239, "2325da0f15bb848e018c5ae071b7943332e9f871d6b60e2ed22ca97d4cb993d2"),
            "tokenizer_config.json":
                (9732, "d5d09f07b48c3086c508b30d1c9114bd1189145b74e982a265350c923acd8101"),
            "tokenizer.json":
                (11422654, "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"),
            "model.safetensors":
                (1503300328, "f47f71177f32bcd101b7573ec9171e6a57f4f4d31148d38e382306f42996874b"),
        },
        "nn.from_pretrained({folder!r}), tokenizer.from_pretrained({folder!r}), "
        "python demos/18_open_models.py --qwen3 {folder}"),
    "smollm2-135m": Model(
        "SmolLM2-135M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct",
        "12fd25f77366fa6b3b4b768ec3050bf629380bac", {
            "config.json":
                (861, "8eb740e8bbe4cff95ea7b4588d17a2432deb16e8075bc5828ff7ba9be94d982a"),
            "generation_config.json":
                (132, "87b916edaaab66b3899b9d0dd0752727dff6666686da0504d89ae0a6e055a013"),
            "tokenizer_config.json":
                (3764, "4ec77d44f62efeb38d7e044a1db318f6a939438425312dfa333b8382dbad98df"),
            "tokenizer.json":
                (2104556, "9ca9acddb6525a194ec8ac7a87f24fbba7232a9a15ffa1af0c1224fcd888e47c"),
            "model.safetensors":
                (269060552, "5af571cbf074e6d21a03528d2330792e532ca608f24ac70a143f6b369968ab8c"),
        },
        "nn.from_pretrained({folder!r}), tokenizer.from_pretrained({folder!r}), "
        "python demos/18_open_models.py --smollm2 {folder}"),
}

CHUNK = 2**20                       # bytes read, hashed and written at a time
TIMEOUT = 30                        # seconds without an answer before giving up


class DownloadError(Exception):
    """What went wrong, in one sentence for the command line."""


def default_folder(name="gpt2"):
    """~/.cache/tinyattn/NAME, or under $XDG_CACHE_HOME when it is set: where
    `from_pretrained(NAME)` looks for it (tinyattn/model_folders.py)."""
    return os.path.join(downloads(), name)


def sha256_of(path, digest=None):
    """The SHA-256 object of a file's bytes (continuing `digest` when given)."""
    digest = digest or hashlib.sha256()
    with open(path, "rb") as file:
        for block in iter(lambda: file.read(CHUNK), b""):
            digest.update(block)
    return digest


def is_complete(path, size, sha256):
    return (os.path.isfile(path) and os.path.getsize(path) == size
            and sha256_of(path).hexdigest() == sha256)


def download(folder, base_url, files, progress=None):
    """Fetch `files` ({name: (size, sha256)}, a Model's) from `base_url` (its URL) into
    `folder`; returns the names fetched now (those already there and right are skipped).
    Raises DownloadError."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise DownloadError(f"{folder} is a file, not a folder: name a folder to download into. "
                            f"Nothing was written.")
    progress = progress or Progress(sys.stderr)
    fetched = []
    for name, (size, sha256) in files.items():
        path = os.path.join(folder, name)
        if is_complete(path, size, sha256):
            continue
        fetch(base_url + name, path, size, sha256, progress)
        fetched.append(name)
    return fetched


def fetch(url, path, size, sha256, progress):
    """One file: what PATH.partial lacks (all of it, if there is none) from `url`, checked, then
    renamed to PATH."""
    partial = path + ".partial"
    have = os.path.getsize(partial) if os.path.isfile(partial) else 0
    if have > size:                             # not a beginning of this file
        os.remove(partial)
        have = 0
    if have < size:
        have, digest = receive(url, partial, have, size, progress)
    else:                                       # received whole by a run that stopped then
        digest = sha256_of(partial)
    progress.done(os.path.basename(path), have)
    if have != size or digest.hexdigest() != sha256:
        os.remove(partial)
        raise DownloadError(f"{url} gave {have:,} bytes of SHA-256 {digest.hexdigest()}, not the "
                            f"{size:,} bytes of SHA-256 {sha256} expected: deleted, nothing kept")
    os.replace(partial, path)


def receive(url, partial, have, size, progress):
    """Append the bytes of `url` from byte `have` on to `partial` (or write them all, if the
    server ignores the Range), showing progress towards `size`; returns (the length of
    `partial`, the SHA-256 object of its bytes)."""
    request = urllib.request.Request(url, headers={"Range": f"bytes={have}-"} if have else {})
    try:
        response = urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as error:
        raise DownloadError(f"{url} answered {error.code} {error.reason}. "
                            f"{left_behind(partial)}") from None
    except OSError as error:                    # URLError, a refused connection, a time-out
        reason = getattr(error, "reason", error)
        raise DownloadError(f"cannot reach {urllib.parse.urlparse(url).netloc} ({reason}): "
                            f"offline? {left_behind(partial)}") from None
    with response:
        if response.status != 206:              # the whole file, not the rest: start again
            have = 0
        refuse_the_wrong_length(url, response, have, size, partial)
        folder = os.path.dirname(os.path.abspath(partial))
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as error:                # a file in the way, no permission
            raise DownloadError(f"cannot make the folder {folder} ({error.strerror}). "
                                f"Nothing was written.") from None
        digest = sha256_of(partial) if have else hashlib.sha256()
        name = os.path.basename(partial).removesuffix(".partial")
        try:
            with open(partial, "ab" if have else "wb") as file:
                for block in iter(lambda: response.read(CHUNK), b""):
                    digest.update(block)
                    file.write(block)
                    have += len(block)
                    progress(name, have, size)
        except (OSError, http.client.HTTPException) as error:
            raise DownloadError(f"the transfer of {url} broke off ({error!r}). "
                                f"{left_behind(partial)}") from None
    if have < size:                             # the connection closed early
        raise DownloadError(f"the transfer of {url} broke off after {have:,} of {size:,} bytes. "
                            f"{left_behind(partial)}")
    return have, digest


def refuse_the_wrong_length(url, response, have, size, partial):
    """A DownloadError if the answer announces a body of another length than the `size - have`
    bytes still expected: not the file (or not its rest), but an error page or the like. An
    answer without a Content-Length is let through: the size and the SHA-256 are checked at the
    end anyway."""
    length = response.headers.get("Content-Length")
    if length is None or not length.isdigit() or int(length) == size - have:
        return
    expected = f"{size - have:,} bytes expected" + (f" from byte {have:,} on" if have else "")
    raise DownloadError(f"{url} answered {response.status} {response.reason} with "
                        f"{int(length):,} bytes, not the {expected} (an error page?): refused. "
                        f"{left_behind(partial)}")


def left_behind(partial):
    """The sentence that says what a failed fetch leaves on disk."""
    if not os.path.isfile(partial):
        return "Nothing was written."
    return (f"Kept {os.path.getsize(partial):,} bytes in {partial}: the next run resumes from "
            f"there.")


class Progress:
    """A progress line: the file, the bytes so far, the share and the speed, rewritten in place
    on a terminal (at most ten times a second), printed once per file otherwise."""

    def __init__(self, stream):
        self.stream, self.terminal = stream, stream.isatty()
        self.start = self.last = time.perf_counter()

    def __call__(self, name, have, size):
        now = time.perf_counter()
        if self.terminal and now - self.last > 0.1:
            self.last = now
            speed = have / max(now - self.start, 1e-9) / 1e6
            print(f"\r  {name}  {have / 1e6:,.1f} / {size / 1e6:,.1f} MB  {have / size:4.0%}  "
                  f"{speed:.1f} MB/s ", end="", file=self.stream, flush=True)

    def done(self, name, have):
        end = "\r" + " " * 70 + "\r" if self.terminal else ""
        print(f"{end}  {name}  {have:,} bytes", file=self.stream, flush=True)
        self.start = time.perf_counter()


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m tinyattn download",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("model", choices=list(MODELS), help=", ".join(
        f"{name}: {model.title}" for name, model in MODELS.items()))
    parser.add_argument("folder", nargs="?", default=None,
                        help=f"where to put it (default: {default_folder('NAME')})")
    args = parser.parse_args(argv)
    model = MODELS[args.model]
    args.folder = args.folder or default_folder(args.model)
    try:
        download(args.folder, model.base_url, model.files)
    except DownloadError as error:
        print(f"download: {error}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"\ndownload: interrupted; a .partial file in {args.folder} keeps what was "
              f"received, and the next run resumes from there", file=sys.stderr)
        return 130
    print(f"{model.title} ({model.repository} at revision {model.revision[:12]}) is in "
          f"{args.folder}, every file checked (size and SHA-256): "
          f"{model.usage.format(folder=args.folder)}")
    return 0
