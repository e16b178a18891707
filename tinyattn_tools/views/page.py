"""One self-contained HTML page: the view's data as JSON, its script and its style, all inline.

A page fetches nothing: no CDN, no font, no image, no request of any kind. So it opens offline,
from a file, in any browser, and in any notebook. The script is plain JavaScript that reads the
data from a `<script type="application/json">` element and draws SVG.
"""
import base64
import html
import json
import pathlib
import uuid

import numpy as np

ASSETS = pathlib.Path(__file__).resolve().parent
NOTEBOOK_HEIGHT = 640        # pixels: the frame's height until the page has said its own
UNTRUSTED = ("The tinyattn view \u201c{title}\u201d is not shown: this notebook is not trusted, "
             "so its front-end removed the view. Run the cell again, or trust the notebook "
             "(JupyterLab: File \u203a Trust Notebook), to see it.")
# The notebook's side of the frame: its height set to what the page says it needs, and the
# keyboard taken back from the frame after a click, so that the notebook's own keys (Ctrl+S)
# still reach it. It stops listening once the frame has left the notebook's page. A notebook may
# run this script after the page in the frame has told its first height (JupyterLab and Notebook
# 7 do, now and then, when they open a notebook whose outputs are saved): so it asks the page for
# its height once it listens, and again when the page has loaded, whichever comes last.
HOST_SCRIPT = """(function () {
  var frame = document.getElementById("%s");
  function heard(event) {
    if (!frame.isConnected) {
      window.removeEventListener("message", heard);
      return;
    }
    if (event.source !== frame.contentWindow || !event.data || !event.data.tinyattn) return;
    if (event.data.height) frame.style.height = event.data.height + "px";
    if (event.data.release && document.activeElement === frame) frame.blur();
  }
  function ask() {
    if (frame.contentWindow) frame.contentWindow.postMessage({ tinyattn: "height?" }, "*");
  }
  window.addEventListener("message", heard);
  frame.addEventListener("load", ask);
  ask();
})();"""


class View:
    """A view: `.html` is the whole page, `.save(path)` writes it, and a notebook shows it.

    In a notebook (Jupyter, JupyterLab, VS Code, Colab) `_repr_html_` gives an iframe whose
    `srcdoc` holds the page. Notebooks differ in what they let an output's scripts do: JupyterLab
    and VS Code insert output HTML into their own page, where a view's CSS and element ids could
    clash with the notebook's and with another view's; Colab already sandboxes each output. An
    iframe runs the page alone in every one of them, the same way it runs from a file, and needs
    no require.js or extension. It is sandboxed to scripts only: the page needs no more.

    Three more things make it behave in a notebook's output:
      * a line of plain text lies under the frame, hidden by it: an untrusted notebook (one
        received with its outputs, or run by nbclient) has its outputs' frames and scripts
        removed by the front-end's sanitizer, and the line, which says how to see the view,
        is what is left;
      * the page posts its height to the notebook (`postMessage`) and a small script beside the
        frame sets the frame's height to it, so that nothing is cut and no space is wasted (the
        frame says box-sizing: content-box, so that its height is the page's whatever the
        notebook's style sheet says: nbclassic's makes every box border-box, which cut 2 px);
      * after a click in the page, the same script takes the keyboard back from the frame, so
        that the notebook's shortcuts (Ctrl+S, Shift+Enter) keep working.
    """

    def __init__(self, title, html_text):
        self.title = title
        self.html = html_text

    def save(self, path):
        """Write the page to `path` (a missing folder is created) and return the path."""
        path = pathlib.Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.html, encoding="utf-8")
        return path

    def _repr_html_(self):
        frame = f"tinyattn-view-{uuid.uuid4().hex}"
        hint = html.escape(UNTRUSTED.format(title=self.title))
        # one grid cell holds both: the frame, white and above, covers the line while it exists
        return (f'<div class="tinyattn-view" style="display: grid">'
                f'<p style="grid-area: 1 / 1; margin: 0; padding: 8px 12px">{hint}</p>'
                f'<iframe id="{frame}" srcdoc="{html.escape(self.html, quote=True)}" title="'
                f'{html.escape(self.title, quote=True)}" sandbox="allow-scripts" '
                f'style="grid-area: 1 / 1; z-index: 1; width: 100%; height: {NOTEBOOK_HEIGHT}px; '
                f'box-sizing: content-box; border: 1px solid #ddd; background: #fff"></iframe>'
                f"<script>{HOST_SCRIPT % frame}</script></div>")

    def __repr__(self):
        return f"<tinyattn view: {self.title} ({len(self.html):,} characters of HTML)>"


def page(title, script, data):
    """The HTML of a page titled `title` running `script` (a .js file beside this one, after
    common.js) on `data` (anything `json.dumps` takes)."""
    # "</" inside the JSON would end the <script> element that holds it: "<\/" is the same JSON.
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{html.escape(title)}</title>
<style>
{(ASSETS / "views.css").read_text(encoding="utf-8")}
</style>
</head>
<body>
<script type="application/json" id="data">{payload}</script>
<script>
{(ASSETS / "common.js").read_text(encoding="utf-8")}
{(ASSETS / script).read_text(encoding="utf-8")}
</script>
</body>
</html>
"""


def float32_base64(array):
    """An array as the base64 text of its float32 bytes, little-endian: a quarter of the size of
    JSON numbers, read by the page with `Float32Array`."""
    return base64.b64encode(np.ascontiguousarray(array, dtype="<f4").tobytes()).decode("ascii")


def summary(array, count=8):
    """What a page shows of an array: its shape, its first `count` numbers and its norm, the
    numbers written with 4 significant digits."""
    array = np.asarray(array)
    return {"shape": list(array.shape),
            "numbers": [f"{x:.4g}" for x in array.reshape(-1)[:count].tolist()],
            "size": int(array.size),
            "norm": f"{np.linalg.norm(array.astype(np.float64)):.4g}"}
