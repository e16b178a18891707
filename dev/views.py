"""The views' screenshots for the docs, and what their pages cost a browser, measured in a real
headless Chromium (the one the tests drive: tests/browser.py).

    python dev/views.py [--runs 5]

It writes
  docs/pictures/graph_view.png      `python -m tinyattn view graph`'s page (a TransformerBlock,
                                    folded), stepped into its attention's softmax
  docs/pictures/attention_view.png  demo 6's trained model on one example (its quick run),
                                    layer 2, a query token hovered
  docs/views.json                   the pages' sizes and times
  docs/views.md                     its tables of them, between `<!-- views:start -->` and
                                    `<!-- views:end -->`, rewritten from views.json by `tables`
                                    (tests/test_views.py checks that the page holds them)

Opening time: from navigation start to the "tinyattn-ready" mark the page's script sets after its
first drawing (Performance API). Head switch: from a click on another head's button to the next
frame the browser paints after drawing it. Each is the median of --runs loads (or clicks) of the
saved file. The pages measured:
  * two of GPT-2 small's size: the graph view of one TransformerBlock of GPT-2 small's width
    (768, 12 heads) over 64 tokens, every op checked, and the attention view of a model of GPT-2
    small's shape (12 layers x 12 heads, width 768, vocabulary 50,257; random weights: nothing is
    downloaded) on 64 tokens, with dL/dA;
  * attention views of causal weights (random scores, softmaxed) with dL/dA, to find what a
    browser draws at a usable speed: one layer of 2 heads of 64 to 256 tokens (a head's drawing
    grows with its L x S weights), and pages of 128 tokens and 12 heads a layer, up to twice
    attention_view's largest page (opening grows with the page's size). The sizes past
    attention_view's limits (attention.MAX_CELLS, MAX_PAGE_BYTES), which it refuses, are made by
    attention_page, the page it makes once it has checked its arguments.
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
import textwrap
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
from tinyattn_tools.views.attention import (            # noqa: E402
    MAX_CELLS, MAX_PAGE_BYTES, attention_page)

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


def causal_attention(layers, heads, tokens):
    """attention_page of random causal weights (layers, heads, tokens, tokens), float32, and a
    random dL/dA of the same shape."""
    random = np.random.default_rng(0)
    scores = random.standard_normal((layers, heads, tokens, tokens), dtype=np.float32)
    scores += np.triu(np.full((tokens, tokens), -np.inf, dtype=np.float32), 1)   # causal
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights /= weights.sum(axis=-1, keepdims=True)
    grads = random.standard_normal(weights.shape, dtype=np.float32)
    names = [f"t{i}" for i in range(tokens)]
    return attention_page(f"{layers} x {heads} heads over {tokens} tokens", names, names,
                          weights, grads)


# a click on head 2's button (the page opens on head 1), timed to the next frame painted after it
SWITCH = """const done = arguments[arguments.length - 1];
const start = performance.now();
document.querySelector('[data-head="1"]').click();
requestAnimationFrame(() => setTimeout(() => done(performance.now() - start), 0));"""


def measured(chromium, view, path, runs, switch=False):
    """{"bytes", "ready_ms", and with `switch` "switch_ms"}: the median times over `runs`."""
    view.save(path)
    times, switches = [], []
    for _ in range(runs):
        chromium.open(path)
        assert chromium.requests() == [chromium.url] and chromium.errors() == []
        times.append(chromium.ready_milliseconds())
        if switch:
            switches.append(chromium.driver.execute_async_script(SWITCH))
    found = {"bytes": path.stat().st_size, "ready_ms": round(statistics.median(times), 1),
             "ready_ms_each": [round(t, 1) for t in times]}
    if switch:
        found.update(switch_ms=round(statistics.median(switches), 1),
                     switch_ms_each=[round(t, 1) for t in switches])
    return found


def attention_limits(chromium, folder, runs):
    """{"heads": [...], "pages": [...], "max_cells", "max_page_bytes"}: the times of a head's
    drawing and of a page's opening, at attention_view's limits, below and beyond them."""
    side = int(MAX_CELLS ** 0.5)
    heads = []
    for tokens in (side // 2, side, side * 3 // 2, side * 2):
        heads.append({"tokens": tokens, **measured(chromium, causal_attention(1, 2, tokens),
                                                   folder / "heads.html", runs, switch=True)})
    per_layer = 2 * 4 * -(-4 * 12 * side * side // 3)      # base64 of float32, with dL/dA
    largest = MAX_PAGE_BYTES // per_layer
    pages = []
    for layers in (12, largest, 2 * largest):
        pages.append({"layers": layers, "heads": 12, "tokens": side,
                      **measured(chromium, causal_attention(layers, 12, side),
                                 folder / "page.html", runs)})
    return {"heads": heads, "pages": pages, "max_cells": MAX_CELLS,
            "max_page_bytes": MAX_PAGE_BYTES}


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


START, END = "<!-- views:start -->", "<!-- views:end -->"
WIDTH = 100                      # the page's line width


def tables(results):
    """The part of docs/views.md that quotes `results` (docs/views.json): markdown tables."""
    graph, attention, limits = results["graph"], results["attention"], results["limits"]
    side = int(limits["max_cells"] ** 0.5)
    browser_name = results["chromium"].split(" built")[0]

    def prose(text):
        return textwrap.wrap(text, WIDTH)

    def row(*cells):
        return "| " + " | ".join(cells) + " |"

    lines = prose(f"Measured by `dev/views.py` in headless {browser_name}, the median of "
                  f"{results['runs']} loads (or clicks) of each saved file.")
    lines += ["", row("page", "size", "opens in", "a head switch"), row(*["---"] * 4),
              row(f"graph view: one TransformerBlock of width 768, 12 heads, over 64 tokens "
                  f"({graph['nodes']} nodes), every op checked", f"{graph['bytes'] / 1e3:.0f} kB",
                  f"{graph['ready_ms']:,.0f} ms", ""),
              row("attention view: GPT-2 small's 12 layers x 12 heads over 64 tokens, with dL/dA",
                  f"{attention['bytes'] / 1e6:.1f} MB", f"{attention['ready_ms']:,.0f} ms",
                  f"{attention['switch_ms']:,.0f} ms"), ""]
    lines += prose("A head's drawing grows with its weights (one layer of 2 causal heads, with "
                   "dL/dA):")
    lines += ["", row("tokens", "weights a head", "opens in", "a head switch", ""),
              row(*["---"] * 5)]
    for head in limits["heads"]:
        cells = head["tokens"] ** 2
        lines.append(row(str(head["tokens"]), f"{cells:,}", f"{head['ready_ms']:,.0f} ms",
                         f"{head['switch_ms']:,.0f} ms",
                         "refused" if cells > limits["max_cells"] else ""))
    lines += [""] + prose(f"A page's opening grows with its size ({side} tokens, 12 heads a "
                          "layer, with dL/dA):")
    lines += ["", row("layers", "size", "opens in", ""), row(*["---"] * 4)]
    for page in limits["pages"]:
        lines.append(row(str(page["layers"]), f"{page['bytes'] / 1e6:.0f} MB",
                         f"{page['ready_ms']:,.0f} ms",
                         "refused" if page["bytes"] > limits["max_page_bytes"] else ""))
    lines += [""] + prose(f"So `attention_view` refuses a head of more than "
                          f"{limits['max_cells']:,} weights ({side} x {side}) and a page of more "
                          f"than {limits['max_page_bytes'] / 1e6:.0f} MB, saying so before it "
                          "writes anything.")
    return "\n".join(lines)


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
                results[name] = measured(chromium, view, folder / f"{name}.html", args.runs,
                                         switch=name == "attention")
                results[name]["build_seconds"] = round(seconds, 1)
                if nodes is not None:
                    results[name]["nodes"] = nodes
            results["limits"] = attention_limits(chromium, folder, args.runs)
    finally:
        chromium.quit()
    results["chromium"] = subprocess.run([browser.find("chromium", "chromium-browser"),
                                          "--version"], capture_output=True, text=True
                                         ).stdout.strip()
    results["runs"] = args.runs
    (ROOT / "docs" / "views.json").write_text(json.dumps(results, indent=2) + "\n")
    page = ROOT / "docs" / "views.md"
    before, rest = page.read_text().split(START)
    after = rest.split(END)[1]
    page.write_text(f"{before}{START}\n{tables(results)}\n{END}{after}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
