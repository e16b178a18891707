"""The views in real notebook front-ends: JupyterLab 4, Notebook 7 and nbclassic (one Jupyter
server, three front-ends), and nbconvert's HTML export, opened in the headless Chromium the tests
drive (tests/browser.py).

    pip install jupyterlab notebook nbclassic   # this script alone needs them: not in dev
    python dev/notebook_frontends.py

The test suite checks the views in a host page that does what a notebook does
(tests/test_views_browser.py: an iframe in srcdoc, a sanitizer that removes it); this script
checks the same four things in the front-ends themselves, and prints one line each:

  untrusted   a notebook executed by nbclient and opened as received: its outputs are not trusted,
              the front-end removes the view's frame, and the one line saying how to see it shows
  run again   the cell run again in that notebook: the view draws (its page says it is ready)
              and its frame has the height of its page, to the pixel (not the default 640)
  trusted     the same notebook after `jupyter trust`: the views draw as it opens, each
              frame the height of its page
  keyboard    after a click in a view, the keyboard is the notebook's again (the frame is not the
              focused element), so its shortcuts reach it

and that no request left the machine: every URL the browser asked for is the server's own (or
the browser's own: data:, blob:, about:, chrome:, chrome-untrusted:). Then the notebook exported
by nbconvert to one HTML file, opened from disk: both views draw in it.
"""
import contextlib
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests")]
import browser                                          # noqa: E402  (tests/browser.py)
from tinyattn_tools.views.page import NOTEBOOK_HEIGHT    # noqa: E402  (the unsized frame's)

CELLS = [
    """import numpy as np
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.viz as viz
x = ta.tensor(np.random.default_rng(0).standard_normal((3, 4)), requires_grad=True)
loss = F.softmax(x @ x.T, axis=-1).sum()
loss.backward()
viz.graph_view(loss)""",
    """weights = F.softmax(ta.tensor(np.random.default_rng(1).standard_normal((2, 5, 5))), axis=-1)
viz.attention_view(["the", "cat", "sat", "on", "it"], weights)""",
]
# {front-end: (the notebook's path on the server, an output's selector, a code cell's editor's)}
FRONT_ENDS = {
    "JupyterLab": ("lab/tree/views.ipynb", ".jp-OutputArea-output",
                   ".jp-CodeCell .jp-InputArea-editor"),
    "Notebook 7": ("notebooks/views.ipynb", ".jp-OutputArea-output",
                   ".jp-CodeCell .jp-InputArea-editor"),
    "nbclassic": ("nbclassic/notebooks/views.ipynb", ".output_subarea", ".code_cell .CodeMirror"),
}


def executed_notebook(folder):
    """views.ipynb in `folder`, run by nbclient: outputs that no one has trusted."""
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in CELLS])
    NotebookClient(notebook, kernel_name="python3", timeout=120).execute()
    path = folder / "views.ipynb"
    nbformat.write(notebook, path)
    return path


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def jupyter_server(folder):
    """A Jupyter server on 127.0.0.1 serving `folder`, without a token; yields its URL."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", "--IdentityProvider.token=", "--ServerApp.password=",
         f"--ServerApp.root_dir={folder}", "--ServerApp.disable_check_xsrf=True"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        for _ in range(120):
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the Jupyter server did not start on port {port} in 60 s")
        yield url
    finally:
        server.terminate()
        server.wait(30)


def view_frames(chromium, outputs):
    return chromium.find_all(f"{outputs} iframe[title]")


def hints(chromium, outputs):
    return [p.text for p in chromium.find_all(f"{outputs} p")
            if "not trusted" in p.text and p.is_displayed()]


def open_notebook(chromium, url, outputs):
    chromium.driver.get(url)
    chromium.wait_until(f"return document.querySelectorAll('{outputs}').length >= 2", 60)
    time.sleep(2)                      # the outputs are rendered, and sanitized, after they exist


def drawn(chromium, frame):
    """(whether the view in `frame` drew within 20 s, whether the frame fits its page): the
    frame's inner height, a second after the page drew, is the height the page has (and
    posted), to the pixel, so nothing is cut and nothing wasted. A page taller than the frame
    lets it be, scrolling inside (the attention view's heatmaps scroll within 100vh - 150 px)."""
    from selenium.common.exceptions import TimeoutException
    chromium.driver.switch_to.frame(frame)
    try:
        chromium.wait_until("return document.body && document.body.dataset.ready === 'true'")
        time.sleep(1)                               # the page posts its height once drawn
        page = chromium.run("return Math.ceil("
                            "document.documentElement.getBoundingClientRect().height)")
    except TimeoutException:
        return False, False
    finally:
        chromium.driver.switch_to.default_content()
    inner = chromium.run("return arguments[0].clientHeight", frame)
    return True, abs(inner - page) <= 1


def heights(frames):
    return [frame.size["height"] for frame in frames]


def run_first_cell_again(chromium, outputs, editor):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    chromium.find_all(editor)[0].click()
    ActionChains(chromium.driver).key_down(Keys.CONTROL).send_keys(Keys.ENTER) \
        .key_up(Keys.CONTROL).perform()
    chromium.wait_until(f"return document.querySelectorAll('{outputs} iframe[title]').length "
                        f">= 1", 90)


def check(front_end, server, notebook, chromium):
    passed = []
    off_machine = []

    def note(what, ok, detail):
        passed.append(ok)
        print(f"{front_end:<11} {what:<10} {'pass' if ok else 'FAIL'}  {detail}")

    def collect_off_machine_requests():
        off_machine.extend(url for url in chromium.requests() if not url.startswith(
            (server, server.replace("http", "ws", 1), "data:", "about:", "blob:", "chrome")))

    path, outputs, editor = FRONT_ENDS[front_end]
    open_notebook(chromium, server + path, outputs)
    frames, shown = view_frames(chromium, outputs), hints(chromium, outputs)
    note("untrusted", not frames and len(shown) == 2,
         f"{len(frames)} view frames, {len(shown)} hint lines: {(shown or [''])[0][:60]}...")
    run_first_cell_again(chromium, outputs, editor)
    frames = view_frames(chromium, outputs)
    ready, fits = drawn(chromium, frames[0]) if frames else (False, False)
    note("run again", ready and fits, f"the graph view drew, its frame {heights(frames[:1])} px "
                                      f"high, fitting its page: {fits} (unsized: "
                                      f"{NOTEBOOK_HEIGHT} + 2)")
    collect_off_machine_requests()
    subprocess.run([sys.executable, "-m", "jupyter", "trust", str(notebook)], check=True,
                   capture_output=True)
    open_notebook(chromium, server + path, outputs)
    frames = view_frames(chromium, outputs)
    states = [drawn(chromium, frame) for frame in frames]
    note("trusted", len(frames) == 2 and all(ready and fits for ready, fits in states),
         f"{sum(ready for ready, _ in states)} views drew, frames {heights(frames)} px high, "
         f"fitting their pages: {[fits for _, fits in states]}")
    if frames:
        frames[-1].click()
        time.sleep(0.5)
    focused = chromium.run("return document.activeElement && document.activeElement.tagName")
    note("keyboard", bool(frames) and focused != "IFRAME",
         f"after a click in a view, the focus is on {focused}")
    collect_off_machine_requests()
    note("requests", not off_machine, f"{len(off_machine)} requests off the machine "
                                      f"{off_machine[:3]}")
    return all(passed)


def check_nbconvert(notebook, chromium):
    """The notebook exported by `jupyter nbconvert --to html` (a page with no server and no
    trust): both views draw in it, sized. The page's own template asks a CDN for MathJax and
    require.js, which the views do not need; the requests are listed by host, and none may come
    from the views' frames (their pages ask for nothing but data: URLs)."""
    subprocess.run([sys.executable, "-m", "jupyter", "nbconvert", "--to", "html",
                    str(notebook)], check=True, capture_output=True)
    page = notebook.with_suffix(".html")
    chromium.driver.get(page.as_uri())
    chromium.wait_until("return document.readyState === 'complete'", 60)
    frames = chromium.find_all("iframe[title]")
    states = [drawn(chromium, frame) for frame in frames]
    ok = len(frames) == 2 and all(ready and fits for ready, fits in states)
    hosts = sorted({url.split("/")[2] for url in chromium.requests() if url.startswith("http")})
    print(f"{'nbconvert':<11} {'html':<10} {'pass' if ok else 'FAIL'}  "
          f"{sum(ready for ready, _ in states)} views drew, frames {heights(frames)} px high, "
          f"fitting their pages: {[fits for _, fits in states]}; the template's own requests "
          f"went to {hosts or 'no host'}")
    return ok


def main():
    results = []
    for front_end in FRONT_ENDS:
        with tempfile.TemporaryDirectory() as folder:
            notebook = executed_notebook(pathlib.Path(folder))
            chromium = browser.start()
            try:
                with jupyter_server(folder) as server:
                    results.append(check(front_end, server, notebook, chromium))
                if front_end == "JupyterLab":
                    results.append(check_nbconvert(notebook, chromium))
            finally:
                chromium.quit()
    versions = subprocess.run([sys.executable, "-m", "jupyter", "--version"], capture_output=True,
                              text=True).stdout.split("\n")
    print("; ".join(line.strip() for line in versions
                    if line.split(":")[0].strip() in ("jupyterlab", "notebook", "nbclassic",
                                                      "nbconvert")))
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
