"""The views' screenshots for the docs, and how long their pages take to open, measured in a real
headless Chromium (the one the tests drive: tests/browser.py).

    python dev/views.py [--runs 5]

It writes
  docs/pictures/graph_view.png      `python -m tinyattn view graph`'s page (a TransformerBlock,
                                    folded), stepped into its attention's softmax
  docs/pictures/attention_view.png  demo 6's trained model on one example (its quick run),
                                    layer 2, a query token hovered
  docs/views.json                   the pages' sizes and opening times, which docs/views.md quotes
                                    (tests/test_views.py checks that it quotes them right)

Opening time: from navigation start to the "tinyattn-ready" mark the page's script sets after its
first drawing (Performance API), the median of --runs loads of the saved file, for two pages of
GPT-2 small's size: the graph view of one TransformerBlock of GPT-2 small's width (768, 12 heads)
over 64 tokens, every op checked, and the attention view of a model of GPT-2 small's shape (12
layers x 12 heads, width 768, vocabulary 50,257; random weights: nothing is downloaded) on 64
tokens, with dL/dA.
"""
import argparse
import contextlib
import importlib
import io
import json
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "demos")]

import browser                                          # noqa: E402  (tests/browser.py)
import tinyattn as ta                                   # noqa: E402
import tinyattn.functional as F                         # noqa: E402
import tinyattn.nn as nn                                # noqa: E402
import tinyattn.viz as viz                              # noqa: E402
from tinyattn_tools.views import cli                    # noqa: E402

PICTURES = ROOT / "docs" / "pictures"
TOKENS = 64


def gpt2_small_block_graph():
    """graph_view of one TransformerBlock(768, 12) over 64 tokens, loss mean(y^2), checked."""
    ta.manual_seed(0)
    block = nn.TransformerBlock(768, 12)
    x = ta.tensor(np.random.default_rng(0).standard_normal((1, TOKENS, 768)), requires_grad=True)
    with viz.recording(block):
        loss = (block(x) ** 2).mean()
    return viz.graph_view(loss, check=True), len(viz.nodes(loss))


def gpt2_small_attention():
    """attention_view of GPT-2 small's shape, random weights, on 64 random tokens, with dL/dA."""
    ta.manual_seed(0)
    model = nn.CausalTransformer(50257, 768, 12, 12, max_len=1024, positional="learned",
                                 tied_head=True, dtype=np.float32)
    ids = np.random.default_rng(0).integers(0, 50257, (1, TOKENS))
    logits, weights = model(ids, return_weights=True)           # [(1, 12, 64, 64)] x 12
    for layer_weights in weights:
        layer_weights.retain_grad()
    F.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
    return viz.attention_view([f"t{i}" for i in ids[0]], weights,
                              grads=[w.grad for w in weights])


def measured(chromium, view, path, runs):
    """{"bytes", "build_seconds", "ready_ms"}: the median opening time over `runs` loads."""
    view.save(path)
    times = []
    for _ in range(runs):
        chromium.open(path)
        assert chromium.requests() == [chromium.url] and chromium.errors() == []
        times.append(chromium.ready_milliseconds())
    return {"bytes": path.stat().st_size, "ready_ms": round(statistics.median(times), 1),
            "ready_ms_each": [round(t, 1) for t in times]}


def graph_screenshot(chromium, folder):
    """The folded TransformerBlock, stepped until the sweep reaches attention's softmax."""
    view = cli.block_graph_view()
    page = json.loads(view.html.split('id="data">', 1)[1].split("</script>", 1)[0])
    softmax = next(node["step"] for node in page["nodes"] if node["label"] == "softmax")
    chromium.open(view.save(folder / "graph.html"))
    for _ in range(softmax):
        chromium.press("ARROW_RIGHT")
    chromium.screenshot(PICTURES / "graph_view.png")


def attention_screenshot(chromium, folder):
    """Demo 6's quick run's page: layer 2, head 1, the query of the separator's next row."""
    demo = importlib.import_module("06_attention_heatmap")
    with contextlib.redirect_stdout(io.StringIO()):
        demo.main([str(folder), "--quick"])
    chromium.open(folder / "attention_view.html")
    chromium.find('[data-layer="1"]').click()
    chromium.hover(chromium.find('.token[data-side="query"][data-i="10"]'))
    chromium.screenshot(PICTURES / "attention_view.png")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    chromium = browser.start()
    try:
        with tempfile.TemporaryDirectory() as folder:
            folder = pathlib.Path(folder)
            graph_screenshot(chromium, folder)
            attention_screenshot(chromium, folder)
            results = {}
            for name, build in (("graph", gpt2_small_block_graph),
                                ("attention", lambda: (gpt2_small_attention(), None))):
                start = time.perf_counter()
                view, nodes = build()
                seconds = time.perf_counter() - start
                results[name] = measured(chromium, view, folder / f"{name}.html", args.runs)
                results[name]["build_seconds"] = round(seconds, 1)
                if nodes is not None:
                    results[name]["nodes"] = nodes
    finally:
        chromium.quit()
    results["chromium"] = subprocess.run([browser.find("chromium", "chromium-browser"),
                                          "--version"], capture_output=True, text=True
                                         ).stdout.strip()
    results["runs"] = args.runs
    (ROOT / "docs" / "views.json").write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
