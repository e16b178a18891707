"""`python -m tinyattn download NAME` (tinyattn_tools/download.py) against a server on this
machine (127.0.0.1): files checked and renamed only when whole, a cut transfer resumed with an
HTTP Range request, a server that ignores the Range, a file of the wrong bytes refused, an answer
of the wrong length (an error page) refused before any byte is kept, a folder that cannot be one,
and the offline path: one line, exit status 1, nothing half-written. Then the table of models:
GPT-2, Qwen3-0.6B and SmolLM2-135M-Instruct, each with its tokenizer's files, and a chapter-5
model downloaded by name found by `nn.from_pretrained` and `tokenizer.from_pretrained`."""
import dataclasses
import hashlib
import http.server
import io
import json
import pathlib
import re
import subprocess
import sys
import threading

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import tokenizer
from tinyattn_tools import cli, download, tokenizer_files
from tinyattn.nn import qwen3

CONTENTS = {"config.json": b'{"n_layer": 12}\n', "model.safetensors": bytes(range(256)) * 40}


def listing(contents=CONTENTS):
    return {name: (len(data), hashlib.sha256(data).hexdigest()) for name, data in contents.items()}


class Server:
    """An HTTP server on 127.0.0.1 serving `contents`, honouring Range requests unless told not
    to, and able to close the connection after `cut_after` bytes of a body, or to answer every
    request with `error_page` and the status `error_status`, as a proxy or a captive portal may;
    it records the Range header of every request."""

    def __init__(self, contents=CONTENTS):
        self.contents, self.cut_after, self.honour_range, self.ranges = contents, None, True, []
        self.error_page, self.error_status = None, 200
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                data = server.contents.get(self.path.lstrip("/"))
                if data is None:
                    self.send_error(404)
                    return
                asked = self.headers.get("Range")
                server.ranges.append(asked)
                if server.error_page is not None:
                    self.send_response(server.error_status)
                    self.send_header("Content-Length", str(len(server.error_page)))
                    self.end_headers()
                    self.wfile.write(server.error_page)
                    return
                start = int(asked[len("bytes="):-1]) if asked and server.honour_range else 0
                self.send_response(206 if start else 200)
                self.send_header("Content-Length", str(len(data) - start))
                self.end_headers()
                body = data[start:]
                self.wfile.write(body if server.cut_after is None else body[:server.cut_after])
                self.close_connection = True

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *_):
        self.httpd.shutdown()
        self.httpd.server_close()


def fetch_all(folder, server, files=None):
    progress = download.Progress(io.StringIO())
    return download.download(folder, server.url, files or listing(), progress)


def served(monkeypatch, server, name="gpt2", contents=CONTENTS):
    """Make `python -m tinyattn download NAME` fetch `contents` from `server` (a URL, or a Server)
    instead of the hub."""
    url = getattr(server, "url", server)
    model = dataclasses.replace(download.MODELS[name], base_url=url, files=listing(contents))
    monkeypatch.setitem(download.MODELS, name, model)


def test_every_file_arrives_whole_and_checked_and_is_not_fetched_twice(tmp_path):
    with Server() as server:
        assert fetch_all(tmp_path / "gpt2", server) == ["config.json", "model.safetensors"]
        assert fetch_all(tmp_path / "gpt2", server) == []               # already there
    assert sorted(p.name for p in (tmp_path / "gpt2").iterdir()) == sorted(CONTENTS)
    for name, data in CONTENTS.items():
        assert (tmp_path / "gpt2" / name).read_bytes() == data
    assert server.ranges == [None, None]


def test_a_cut_transfer_keeps_a_partial_file_and_the_next_run_asks_for_the_rest(tmp_path):
    model = tmp_path / "model.safetensors"
    with Server() as server:
        server.cut_after = 4000
        with pytest.raises(download.DownloadError, match=r"the transfer of .*model.safetensors "
                                                         r"broke off after 4,000 of 10,240 bytes. "
                                                         r"Kept 4,000 bytes in .*model.safetensors"
                                                         r".partial: the next run resumes"):
            fetch_all(tmp_path, server)
        assert (tmp_path / "config.json").is_file() and not model.exists()
        assert (tmp_path / "model.safetensors.partial").read_bytes() == \
            CONTENTS["model.safetensors"][:4000]
        with pytest.raises(download.DownloadError, match="broke off after 8,000 of 10,240"):
            fetch_all(tmp_path, server)                                 # 4,000 more
        server.cut_after = None
        assert fetch_all(tmp_path, server) == ["model.safetensors"]
    assert server.ranges == [None, None, "bytes=4000-", "bytes=8000-"]
    assert model.read_bytes() == CONTENTS["model.safetensors"]
    assert not (tmp_path / "model.safetensors.partial").exists()


def test_a_server_that_ignores_the_range_sends_it_all_again(tmp_path):
    (tmp_path / "model.safetensors.partial").write_bytes(CONTENTS["model.safetensors"][:100])
    with Server() as server:
        server.honour_range = False
        fetch_all(tmp_path, server)
    assert server.ranges[-1] == "bytes=100-"
    assert (tmp_path / "model.safetensors").read_bytes() == CONTENTS["model.safetensors"]


def test_a_complete_partial_file_is_checked_and_renamed_without_asking(tmp_path):
    for name, data in CONTENTS.items():
        (tmp_path / f"{name}.partial").write_bytes(data)
    with Server() as server:
        assert fetch_all(tmp_path, server) == list(CONTENTS)
    assert server.ranges == []
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(CONTENTS)


@pytest.mark.parametrize("wrong, message", [
    (b"x" * 10240, r"model.safetensors gave 10,240 bytes of SHA-256 [0-9a-f]{64}, not the 10,240 "
                   r"bytes .* expected: deleted, nothing kept"),
    (b"x" * 10241, r"model.safetensors answered 200 OK with 10,241 bytes, not the 10,240 bytes "
                   r"expected \(an error page\?\): refused. Nothing was written."),
])
def test_bytes_that_are_not_the_expected_file_are_refused_and_deleted(tmp_path, wrong, message):
    """Of the right size and the wrong SHA-256 (found at the end), or longer than the file (said
    by the Content-Length, before any byte is written): no file takes the name, and no partial is
    kept (resuming it would only append to wrong bytes)."""
    with Server({**CONTENTS, "model.safetensors": wrong}) as server:
        with pytest.raises(download.DownloadError, match=message):
            fetch_all(tmp_path, server, listing())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


ERROR_PAGE = b"<html><body>Sign in to this network to continue</body></html>"


def test_an_error_page_served_as_the_file_is_refused_at_once_and_nothing_is_kept(tmp_path):
    """An answer of status 200 whose Content-Length is not the file's size is not the file: it
    is refused before any byte is written, so no .partial is left for the next run to resume
    (which would fetch the whole file after it, only to fail its checksum)."""
    (tmp_path / "config.json").write_bytes(CONTENTS["config.json"])
    with Server() as server:
        server.error_page = ERROR_PAGE
        says = (rf"^{server.url}model.safetensors answered 200 OK with {len(ERROR_PAGE)} bytes, "
                rf"not the 10,240 bytes expected \(an error page\?\): refused. Nothing was "
                rf"written.$")
        with pytest.raises(download.DownloadError, match=says):
            fetch_all(tmp_path, server)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json"]


@pytest.mark.parametrize("status, expected", [(200, "10,240 bytes expected"),
                                              (206, "10,140 bytes expected from byte 100 on")])
def test_an_answer_of_the_wrong_length_leaves_the_partial_file_as_it_was(tmp_path, status,
                                                                        expected):
    """Whether the server ignored the Range (200) or not (206), bytes of the wrong length do not
    take the place of the good ones received before: these stay for the next run."""
    partial = tmp_path / "model.safetensors.partial"
    partial.write_bytes(CONTENTS["model.safetensors"][:100])
    with Server({"model.safetensors": CONTENTS["model.safetensors"]}) as server:
        server.error_page, server.error_status = ERROR_PAGE, status
        with pytest.raises(download.DownloadError, match=rf"answered {status} .* with "
                                                         rf"{len(ERROR_PAGE)} bytes, not the "
                                                         rf"{expected} \(an error page\?\): "
                                                         rf"refused. Kept 100 bytes in "
                                                         rf".*model.safetensors.partial: the "
                                                         rf"next run resumes from there.$"):
            fetch_all(tmp_path, server, listing({"model.safetensors":
                                                 CONTENTS["model.safetensors"]}))
    assert server.ranges == ["bytes=100-"]
    assert partial.read_bytes() == CONTENTS["model.safetensors"][:100]


@pytest.mark.parametrize("where, message", [
    ("a file", r"download: .*a file is a file, not a folder: name a folder to download into. "
               r"Nothing was written.\n$"),
    ("a file/gpt2", r"download: cannot make the folder .*a file/gpt2 \(Not a directory\). "
                    r"Nothing was written.\n$"),
])
def test_a_folder_that_cannot_be_one_is_said_in_one_line(tmp_path, monkeypatch, capsys, where,
                                                         message):
    (tmp_path / "a file").write_text("not a folder")
    with Server() as server:
        served(monkeypatch, server)
        assert cli.main(["download", "gpt2", str(tmp_path / where)]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert re.match(message, captured.err), captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a file"]


def test_a_file_already_there_but_wrong_is_fetched_again(tmp_path):
    (tmp_path / "config.json").write_bytes(b"{}")
    with Server() as server:
        assert fetch_all(tmp_path, server) == ["config.json", "model.safetensors"]
    assert (tmp_path / "config.json").read_bytes() == CONTENTS["config.json"]


def test_a_missing_file_on_the_server_is_named(tmp_path):
    with Server({"config.json": CONTENTS["config.json"]}) as server:
        with pytest.raises(download.DownloadError, match=r"model.safetensors answered 404 Not "
                                                         r"Found. Nothing was written"):
            fetch_all(tmp_path, server)


def closed_port():
    """The URL of a port on this machine where nothing listens."""
    with Server() as server:
        url = server.url
    return url


def test_offline_it_says_so_in_one_line_and_writes_nothing(tmp_path, monkeypatch, capsys):
    served(monkeypatch, closed_port())
    assert cli.main(["download", "gpt2", str(tmp_path / "gpt2")]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("download: cannot reach 127.0.0.1:")
    assert captured.err.endswith("offline? Nothing was written.\n")
    assert not (tmp_path / "gpt2").exists()


def test_offline_a_partial_file_is_kept_and_said(tmp_path, monkeypatch, capsys):
    (tmp_path / "config.json").write_bytes(CONTENTS["config.json"])
    (tmp_path / "model.safetensors.partial").write_bytes(b"\0" * 300)
    served(monkeypatch, closed_port())
    assert cli.main(["download", "gpt2", str(tmp_path)]) == 1
    assert capsys.readouterr().err.endswith(
        f"Kept 300 bytes in {tmp_path / 'model.safetensors.partial'}: the next run resumes from "
        f"there.\n")


def test_the_command_line_downloads_into_the_folder_it_is_given(tmp_path, monkeypatch, capsys):
    with Server() as server:
        served(monkeypatch, server)
        assert cli.main(["download", "gpt2", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"GPT-2 small (openai-community/gpt2 at revision 607a30d783df) is in "
                          f"{tmp_path}, every file checked (size and SHA-256): "
                          f"CausalTransformer.from_pretrained('{tmp_path}')")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(CONTENTS)


def test_the_default_folder_is_a_per_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert download.default_folder() == str(tmp_path / "tinyattn" / "gpt2")
    assert download.default_folder("qwen3-0.6b") == str(tmp_path / "tinyattn" / "qwen3-0.6b")
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert download.default_folder() == str(tmp_path / ".cache" / "tinyattn" / "gpt2")


def test_three_models_are_offered_and_no_other():
    done = subprocess.run([sys.executable, "-m", "tinyattn", "download", "gpt3"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert re.search(r"invalid choice: 'gpt3' \(choose from '?gpt2'?, '?qwen3-0.6b'?, "
                     r"'?smollm2-135m'?\)", done.stderr), done.stderr      # quoted from 3.11 on


FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures"


def test_the_listing_is_gpt2s_tokenizer_files_of_the_fixture():
    """vocab.json and merges.txt of GPT-2 are the fixture's (OpenAI's own files): their listed
    sizes and SHA-256 are checked here against the bytes."""
    for name in ("vocab.json", "merges.txt"):
        data = (FIXTURES / "gpt2-tiny" / name).read_bytes()
        assert download.MODELS["gpt2"].files[name] == (len(data),
                                                       hashlib.sha256(data).hexdigest())


@pytest.mark.parametrize("name, repository", [("qwen3-0.6b", "Qwen/Qwen3-0.6B"),
                                              ("smollm2-135m",
                                               "HuggingFaceTB/SmolLM2-135M-Instruct")])
def test_a_chapter_5_model_comes_with_its_tokenizers_files_at_a_fixed_revision(name, repository):
    model = download.MODELS[name]
    assert model.repository == repository and re.fullmatch("[0-9a-f]{40}", model.revision)
    assert model.base_url == f"https://huggingface.co/{repository}/resolve/{model.revision}/"
    assert list(model.files) == ["config.json", "generation_config.json",
                                 "tokenizer_config.json", "tokenizer.json", "model.safetensors"]
    for size, sha256 in model.files.values():
        assert size > 100 and re.fullmatch("[0-9a-f]{64}", sha256)


def test_qwen3s_config_is_the_benchs_byte_for_byte():
    """The hub lists Qwen3-0.6B's config.json by its Git blob id (the SHA-1 of "blob <size>\\0"
    and the bytes); the config the bench builds its shape from, written as transformers writes a
    config.json, has that id, so its SHA-256 is the file's."""
    data = json.dumps(qwen3.QWEN3_0_6B_CONFIG, indent=2).encode("utf-8")
    blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
    assert blob == "f5c3703b78ae2a478ae15b247e9f855e0ce2107b"
    assert download.MODELS["qwen3-0.6b"].files["config.json"] == (
        len(data), hashlib.sha256(data).hexdigest())


def test_a_model_downloaded_by_name_is_found_by_from_pretrained(tmp_path, monkeypatch, capsys):
    """`python -m tinyattn download qwen3-0.6b` into the default folder (the per-user cache),
    served here the qwen3-tiny fixture and GPT-2's tokenizer.json: `nn.from_pretrained` and
    `tokenizer.from_pretrained` then take the name alone."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    tokenizer_files.write_gpt2_tokenizer_json(tmp_path, FIXTURES / "gpt2-tiny" / "vocab.json",
                                              FIXTURES / "gpt2-tiny" / "merges.txt")
    contents = {name: (FIXTURES / "qwen3-tiny" / name).read_bytes()
                for name in ("config.json", "generation_config.json", "model.safetensors")}
    contents["tokenizer.json"] = (tmp_path / "tokenizer.json").read_bytes()
    with Server(contents) as server:
        served(monkeypatch, server, "qwen3-0.6b", contents)
        assert cli.main(["download", "qwen3-0.6b"]) == 0
    folder = tmp_path / "cache" / "tinyattn" / "qwen3-0.6b"
    assert capsys.readouterr().out.startswith(
        f"Qwen3-0.6B (Qwen/Qwen3-0.6B at revision c1899de289a0) is in {folder}, every file "
        f"checked (size and SHA-256): nn.from_pretrained('{folder}')")
    model = ta.nn.from_pretrained("qwen3-0.6b")
    reference = ta.load_safetensors(FIXTURES / "qwen3-tiny" / "reference.safetensors")
    with ta.no_grad():
        logits = model(reference["input_ids"]).data
    np.testing.assert_allclose(logits, reference["logits_float32"], atol=1e-4 * max(
        1.0, float(np.abs(reference["logits_float32"]).max())))
    assert tokenizer.from_pretrained("qwen3-0.6b").encode("Hello world") == [15496, 995]
