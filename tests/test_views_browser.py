"""The views in a real headless Chromium, used as a person would: the Step button clicked through
a whole sweep, each gradient read off the page and compared with the `.grad` the user's own
backward gives, in the order the engine really visits the nodes (the view made before backward,
and after it); modules opened by a click; a long graph stepped, its node kept in sight; layers and
heads switched and the drawn weights compared with the arrays, the masked ones grey; a token
hovered. And the views as a notebook shows them, in a page standing for the notebook: trusted,
untrusted (frames and scripts removed), in a narrow output, and after a click (the keyboard given
back). Every page must make no network request but its own file and log no console error. One
browser for the whole file (tests/browser.py starts it, or skips, or fails under
TINYATTN_REQUIRE_BROWSER=1); each test leaves a screenshot in its tmp_path."""
import re

import numpy as np
import pytest

import browser
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.viz as viz
from test_views import engine_order, grad_of, t5_cross_attention, vit_attention
from tinyattn_tools.views import cli

GPT2_TINY = "tests/fixtures/gpt2-tiny"


@pytest.fixture(scope="module")
def chromium():
    session = browser.start()
    yield session
    session.quit()


def opened(chromium, view, path):
    """Save `view` to `path`, open it, and check it fetched nothing and logged no error."""
    chromium.open(view.save(path))
    assert chromium.requests() == [chromium.url]         # the page's own file, and nothing else
    assert chromium.errors() == []


def shown_numbers(text):
    """The numbers of "[0.1, -2, …]"."""
    return [float(number) for number in text.strip("[]").replace(", …", "").split(", ")]


def small_attention_graph():
    """One attention head over 3 tokens, with a bias broadcast over the tokens; built under
    retain_grads, so that after backward every op output holds the .grad to compare with."""
    random = np.random.default_rng(0)
    x = ta.tensor(random.standard_normal((3, 4)), requires_grad=True)
    w = ta.tensor(random.standard_normal((4, 4)) / 2, requires_grad=True)
    bias = ta.tensor(random.standard_normal(4), requires_grad=True)
    x.name, w.name, bias.name = "x", "w", "bias"
    with ta.retain_grads(), viz.recording():
        query = x @ w + bias                                  # (T, E) + (E,): bias broadcast
        output, _ = F.attention(query, x, x)                  # (T, E)
        loss = (output * output).sum()
    return loss, (x, w, bias)            # the leaves too: a leaf's node holds it only weakly


@pytest.mark.parametrize("layout_engine, order", [("dot", "view, then backward"),
                                                  ("python", "view, then backward"),
                                                  ("dot", "backward, then view")])
def test_stepping_shows_each_gradient_backward_gives_in_the_engines_order(
        chromium, tmp_path, monkeypatch, layout_engine, order):
    loss, leaves = small_attention_graph()
    if order == "view, then backward":
        view = viz.graph_view(loss, check=True, layout_engine=layout_engine)
        popped = engine_order(loss, monkeypatch)     # the user's own backward: fills every .grad
    else:                   # a learner's order: backward (inside recording), then the view
        with viz.recording():
            popped = engine_order(loss, monkeypatch, retain_graph=False)
        view = viz.graph_view(loss, check=True, layout_engine=layout_engine)
    nodes = viz.nodes(loss)
    opened(chromium, view, tmp_path / "graph.html")
    for step, node in enumerate(popped, start=1):
        chromium.find("#step").click()
        assert chromium.find("#counter").text == f"step {step} of {len(popped)}"
        assert chromium.find("#panel").get_attribute("data-node") == str(nodes.index(node))
        grad = grad_of(node)
        shown = shown_numbers(chromium.find('[data-field="grad-numbers"]').text)
        np.testing.assert_allclose(shown, grad.reshape(-1)[:len(shown)], rtol=5e-4, atol=1e-12)
        assert len(shown) == min(grad.size, 8)
        norm = float(chromium.find('[data-field="grad-norm"]').text)
        assert norm == pytest.approx(np.linalg.norm(grad), rel=5e-4)
        current = chromium.find(".box.current")
        assert current.get_attribute("data-id") == f"n{nodes.index(node)}"
    assert chromium.find("#step").get_attribute("disabled") == "true"     # the sweep is over
    chromium.find('[data-id="n2"]').click()                             # the bias, (4,)
    assert "summed over axis 0" in chromium.find("#panel").text
    chromium.press("ARROW_LEFT")
    assert chromium.find("#counter").text == f"step {len(popped) - 1} of {len(popped)}"
    chromium.find("#colour-check").click()
    assert len(chromium.find_all(".checked .box.good")) == len(popped) - 3   # every op's rule
    assert chromium.errors() == []
    chromium.screenshot(tmp_path / "graph.png")


def test_a_transformer_block_opens_folded_and_a_module_opens_on_a_click(chromium, tmp_path):
    view = cli.block_graph_view()
    opened(chromium, view, tmp_path / "block.html")
    print(f"\nTransformerBlock graph view ready {chromium.ready_milliseconds():.0f} ms after "
          f"navigation start")
    top = [box.get_attribute("data-id") for box in chromium.find_all(".box.cluster")]
    assert len(top) == 4                                         # ln1, attn, ln2, ff
    chromium.find("#follow").click()                             # stay where the clicks go
    attention = next(box for box in chromium.find_all(".box.cluster") if "attn" in box.text)
    attention.click()
    assert chromium.find("#crumbs").text.startswith("whole graph › attn")
    assert {box.text.split("\n")[0] for box in chromium.find_all(".box.cluster")} == {
        "attn.q_proj", "attn.k_proj", "attn.v_proj", "attn.out_proj"}
    assert "softmax" in [box.text.split("\n")[0] for box in chromium.find_all(".box.op")]
    chromium.press("END")                                        # the whole sweep
    assert all("done" in box.get_attribute("class").split()
               for box in chromium.find_all(".box.cluster"))
    assert chromium.errors() == []
    chromium.screenshot(tmp_path / "block.png")


def test_layers_and_heads_switch_and_draw_gpt2s_weights(chromium, tmp_path):
    text = "The cat sat on the mat"
    view = cli.gpt2_attention_view(GPT2_TINY, text)
    model = ta.nn.CausalTransformer.from_pretrained(GPT2_TINY).eval()
    ids = np.array([ta.tokenizer.GPT2Tokenizer.from_pretrained(GPT2_TINY).encode(text)])
    logits, weights = model(ids, return_weights=True)
    for layer_weights in weights:
        layer_weights.retain_grad()
    F.cross_entropy(logits[0, :-1], ids[0, 1:]).backward()
    opened(chromium, view, tmp_path / "attention.html")
    chromium.find('[data-layer="1"]').click()
    chromium.find('[data-head="2"]').click()
    expected = weights[1].data[0, 2]                                    # (T, T)
    cells = chromium.find_all("#weights .cell")
    drawn = np.zeros_like(expected)
    for cell in cells:
        drawn[int(cell.get_attribute("data-q")), int(cell.get_attribute("data-k"))] = \
            float(cell.get_attribute("data-v"))
    assert len(cells) == expected.size
    np.testing.assert_allclose(drawn, expected, rtol=1e-6, atol=1e-9)
    grads = {(int(c.get_attribute("data-q")), int(c.get_attribute("data-k"))):
             float(c.get_attribute("data-v")) for c in chromium.find_all("#grads .cell")}
    np.testing.assert_allclose([grads[q, k] for q, k in np.ndindex(*expected.shape)],
                               weights[1].grad[0, 2].reshape(-1), rtol=1e-5, atol=1e-9)
    lines = {(int(line.get_attribute("data-q")), int(line.get_attribute("data-k"))):
             float(line.get_attribute("data-w")) for line in chromium.find_all(".link")}
    assert set(lines) == set(zip(*np.nonzero(expected >= 0.01)))      # the visible ones
    np.testing.assert_allclose(list(lines.values()), [expected[key] for key in lines], rtol=1e-6)
    chromium.hover(chromium.find('.token[data-side="query"][data-i="3"]'))
    lit = chromium.find_all(".link.lit")
    assert lit and {line.get_attribute("data-q") for line in lit} == {"3"}
    assert chromium.find("#readout").text.startswith("query 3 ' on' attends to: ")
    chromium.hover(chromium.find('#grads .cell[data-q="4"][data-k="1"]'))
    assert chromium.find("#readout").text == (
        f"query 4 ' the' → key 1 ' cat': weight {expected[4, 1]:.4f}, "
        f"dL/dA {weights[1].grad[0, 2, 4, 1]:.3e}".replace("e-0", "e-").replace("e+0", "e+"))
    masked = chromium.find_all("#grads .cell.masked")          # the causal mask's zeros
    assert {(int(c.get_attribute("data-q")), int(c.get_attribute("data-k"))) for c in masked} \
        == set(zip(*np.nonzero(expected == 0))) and len(masked) == 6 * 5 // 2
    assert {cell.get_attribute("fill") for cell in masked} == {"#d9d9d9"}
    chromium.hover(chromium.find('#grads .cell[data-q="1"][data-k="4"]'))
    assert chromium.find("#readout").text.endswith("(masked: a weight held at 0 cannot move)")
    assert not weights[1].grad[0, 2, 5].any()              # the last token predicts nothing
    assert chromium.find(".pane:has(#grads) .note-grads").text.startswith(
        "Blank row 5 ' mat': the loss does not depend on this query's output")
    assert chromium.errors() == []
    chromium.screenshot(tmp_path / "attention.png")


def drawn_weights(chromium, shape):
    """The weights of the heatmap on the page, read off its cells' data-v, as an array."""
    cells = chromium.find_all("#weights .cell")
    drawn = np.full(shape, np.nan)
    for cell in cells:
        drawn[int(cell.get_attribute("data-q")), int(cell.get_attribute("data-k"))] = \
            float(cell.get_attribute("data-v"))
    assert len(cells) == drawn.size
    return drawn


def test_t5s_cross_attention_draws_target_tokens_against_source_tokens(chromium, tmp_path):
    target, source, weights = t5_cross_attention()
    opened(chromium, viz.attention_view(target, weights, key_tokens=source),
           tmp_path / "cross.html")
    for layer, head in ((0, 0), (1, 2)):
        chromium.find(f'[data-layer="{layer}"]').click()
        chromium.find(f'[data-head="{head}"]').click()
        expected = np.asarray(weights[layer])[0, head]                     # (T, S) = (6, 10)
        np.testing.assert_allclose(drawn_weights(chromium, (6, 10)), expected, rtol=1e-6)
        assert [t.text for t in chromium.find_all('.token[data-side="query"]')] == target
        assert [t.text for t in chromium.find_all('.token[data-side="key"]')] == source
        assert [t.text for t in chromium.find_all("#weights text")] == target + source
    key = int(expected.max(axis=0).argmax())              # a source token some query looks at
    chromium.hover(chromium.find(f'.token[data-side="key"][data-i="{key}"]'))
    lit = chromium.find_all(".link.lit")
    assert lit and {line.get_attribute("data-k") for line in lit} == {str(key)}
    readout = chromium.find("#readout").text
    assert readout.startswith(f"key {key} '{source[key]}' is attended by: ")
    assert chromium.requests() == [] and chromium.errors() == []      # nothing since it opened
    chromium.screenshot(tmp_path / "cross.png")


def test_a_vits_patches_are_drawn_as_pictures_and_its_heads_switch(chromium, tmp_path):
    image, weights = vit_attention()                       # 16 patches of 8 x 8, and [CLS]
    opened(chromium, viz.attention_view(None, weights, image=image, patch_size=8),
           tmp_path / "vit.html")
    scaled = (image[0] - image.min()) / (image.max() - image.min()) * 255  # (C, H, W)
    expected = np.round(scaled[:, 8:16, 16:24]).astype(int)              # patch 6: row 1, col 2
    for side in ("query", "key"):
        drawn = chromium.find_all(f'.token[data-side="{side}"]')
        assert drawn[0].tag_name == "text" and drawn[0].text == "[CLS]"
        assert [t.get_attribute("data-patch") for t in drawn[1:]] == [str(n) for n in range(16)]
        assert all(t.rect["width"] == 20 for t in drawn[1:])             # a row's height, less 4
        rgba = chromium.run("return [...arguments[0].querySelector('canvas').getContext('2d')"
                            ".getImageData(0, 0, 8, 8).data]", drawn[7])  # the pixels drawn
        np.testing.assert_array_equal(np.reshape(rgba, (8, 8, 4))[..., :3],
                                      expected.transpose(1, 2, 0))
    assert len(chromium.find_all("#weights .patch")) == 2 * 16           # both axes
    chromium.find('[data-layer="1"]').click()
    chromium.find('[data-head="3"]').click()
    expected = np.asarray(weights[1])[0, 3]                              # (1 + P, 1 + P)
    np.testing.assert_allclose(drawn_weights(chromium, (17, 17)), expected, rtol=1e-6)
    chromium.hover(chromium.find('.token[data-side="query"][data-i="7"]'))
    assert {line.get_attribute("data-q") for line in chromium.find_all(".link.lit")} == {"7"}
    assert chromium.find("#readout").text.startswith(
        "query 7 'patch 6 (row 1, column 2)' attends to: ")
    assert "lit" in chromium.find('.token[data-side="query"][data-i="7"]').get_attribute("class")
    assert chromium.requests() == [] and chromium.errors() == []      # nothing since it opened
    chromium.screenshot(tmp_path / "vit.png")


def test_a_long_input_is_capped_with_a_note(chromium, tmp_path):
    scores = np.random.default_rng(0).standard_normal((1, 300, 300))
    weights = np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)
    view = viz.attention_view([f"t{i}" for i in range(300)], weights)
    opened(chromium, view, tmp_path / "long.html")
    assert chromium.find("#note").text.startswith("Showing the first 64 of 300 queries")
    assert len(chromium.find_all("#weights .cell")) == 64 * 64
    chromium.screenshot(tmp_path / "long.png")


def notebook(view, path, width=None, sanitized=False, styles=True):
    """A page standing for a notebook with `view` as a cell's output, in an output area `width`
    pixels wide. `sanitized`: as an untrusted notebook's front-end shows it, its frames and
    scripts removed (and, with styles=False, its style attributes, as the strictest sanitizers
    do). The page notes every keydown that reaches it, in `window.keys`."""
    output = view._repr_html_()
    if sanitized:
        # the srcdoc attribute is escaped HTML: it holds no ">" that could end the tag early
        output = re.sub(r"<iframe[^>]*></iframe>|<script>.*?</script>", "", output, flags=re.S)
    if not styles:
        output = re.sub(r' style="[^"]*"', "", output)
    area = f' style="width: {width}px"' if width else ""
    path.write_text("<!DOCTYPE html><html><body><p>a notebook cell's output:</p>"
                    f'<div id="output"{area}>{output}</div><p id="below">the next cell</p>'
                    "<script>window.keys = []; document.addEventListener('keydown', (event) => {"
                    "window.keys.push((event.ctrlKey ? 'Ctrl+' : '') + event.key); "
                    "event.preventDefault(); });</script></body></html>", encoding="utf-8")
    return path


def test_the_notebook_iframe_runs_the_page_on_its_own_and_covers_the_hint(chromium, tmp_path):
    """What a notebook shows: `_repr_html_` inside a host page; the view runs in its iframe,
    which hides the line meant for an untrusted notebook."""
    loss, leaves = small_attention_graph()
    chromium.open(notebook(viz.graph_view(loss), tmp_path / "notebook.html"), frame="iframe")
    chromium.find("#step").click()
    assert chromium.find("#counter").text.startswith("step 1 of")
    assert chromium.requests() == [chromium.url]
    assert chromium.errors() == []
    chromium.driver.switch_to.default_content()
    covering = chromium.run("const hint = document.querySelector('.tinyattn-view p')"
                            ".getBoundingClientRect(); return document.elementFromPoint("
                            "hint.left + hint.width / 2, hint.top + hint.height / 2).tagName")
    assert covering == "IFRAME"
    chromium.screenshot(tmp_path / "notebook.png")


@pytest.mark.parametrize("styles", [True, False])
def test_an_untrusted_notebook_shows_one_line_saying_how_to_see_the_view(chromium, tmp_path,
                                                                          styles):
    loss, leaves = small_attention_graph()
    for name, view in (("graph", viz.graph_view(loss)),
                       ("attention", viz.attention_view(list("ab"), np.eye(2)[None]))):
        page = notebook(view, tmp_path / f"untrusted_{name}.html", sanitized=True, styles=styles)
        chromium.driver.get(page.resolve().as_uri())
        assert chromium.find_all("iframe") == []
        hint = chromium.find(".tinyattn-view p")
        assert hint.is_displayed() and hint.text == (
            f"The tinyattn view \u201c{view.title}\u201d is not shown: this notebook is not "
            "trusted, so its front-end removed the view. Run the cell again, or trust the "
            "notebook (JupyterLab: File \u203a Trust Notebook), to see it.")
        below = chromium.find("#below").rect
        assert below["y"] >= hint.rect["y"] + hint.rect["height"]     # nothing drawn over it
    chromium.screenshot(tmp_path / "untrusted.png")


def test_in_a_narrow_output_each_view_fits_and_its_frame_fits_the_view(chromium, tmp_path):
    loss, leaves = small_attention_graph()
    image, weights = vit_attention()
    views = {"graph": viz.graph_view(loss), "block": cli.block_graph_view(),
             "attention": cli.gpt2_attention_view(GPT2_TINY, "The cat sat on the mat"),
             "patches": viz.attention_view(None, weights, image=image, patch_size=8)}
    for name, view in views.items():
        chromium.open(notebook(view, tmp_path / f"narrow_{name}.html", width=400),
                      frame="iframe")
        content = chromium.run("return [document.documentElement.scrollWidth, "
                               "document.documentElement.clientWidth, Math.ceil(document"
                               ".documentElement.getBoundingClientRect().height)]")
        assert content[0] <= content[1] <= 400, name             # nothing sticks out sideways
        chromium.driver.switch_to.default_content()
        chromium.wait_until(f"return document.querySelector('iframe').clientHeight === "
                            f"{content[2]}")                     # the frame is the page's height
        chromium.screenshot(tmp_path / f"narrow_{name}.png")


def test_a_frame_fits_its_view_when_the_notebook_listens_late(chromium, tmp_path):
    """A notebook may run the script beside the frame after the page in it has drawn and told its
    height (JupyterLab and Notebook 7 opening a notebook whose outputs are saved did, now and
    then, in dev/notebook_frontends.py): the script asks the page again, and the frame fits."""
    view = viz.attention_view(list("abc"), np.eye(3)[None])
    page = notebook(view, tmp_path / "late.html")
    html = page.read_text(encoding="utf-8")
    script = re.search(r"<script>(\(function \(\) \{.*?\}\)\(\);)</script>", html,
                       flags=re.S).group(1)
    page.write_text(html.replace(f"<script>{script}</script>", ""), encoding="utf-8")
    chromium.open(page, frame="iframe")                              # drawn, height told: lost
    height = chromium.run("return Math.ceil(document.documentElement.getBoundingClientRect()"
                          ".height)")
    chromium.driver.switch_to.default_content()
    frame = "document.querySelector('iframe')"
    assert chromium.run(f"return {frame}.clientHeight") != height    # nobody heard it
    chromium.run(script)                                             # the notebook, late
    chromium.wait_until(f"return {frame}.clientHeight === {height}")


def test_a_frame_fits_its_view_under_a_notebooks_border_box_style(chromium, tmp_path):
    """nbclassic's style sheet makes every box border-box, which would take the frame's borders
    out of the height the page asked for (found by dev/notebook_frontends.py)."""
    page = notebook(viz.attention_view(list("abc"), np.eye(3)[None]), tmp_path / "boxes.html")
    page.write_text(page.read_text(encoding="utf-8").replace(
        "<body>", "<body><style>* { box-sizing: border-box; }</style>"), encoding="utf-8")
    chromium.open(page, frame="iframe")
    height = chromium.run("return Math.ceil(document.documentElement.getBoundingClientRect()"
                          ".height)")
    chromium.driver.switch_to.default_content()
    chromium.wait_until(f"return document.querySelector('iframe').clientHeight === {height}")


def test_a_click_in_the_view_gives_the_keyboard_back_to_the_notebook(chromium, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    loss, leaves = small_attention_graph()
    chromium.open(notebook(viz.graph_view(loss), tmp_path / "keys.html"), frame="iframe")
    chromium.find("#step").click()
    assert chromium.find("#counter").text.startswith("step 1 of")      # the click did its work
    chromium.driver.switch_to.default_content()
    chromium.wait_until("return document.activeElement.tagName !== 'IFRAME'")
    ActionChains(chromium.driver).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL) \
        .perform()
    assert chromium.run("return window.keys")[-1] == "Ctrl+s"        # Ctrl+S reached it


def test_stepping_a_large_graph_keeps_the_node_stepped_in_sight(chromium, tmp_path):
    """A 4-layer model's graph, not recorded (so not folded), wider and taller than the page: the
    boxes stay at a readable size, and each step scrolls the canvas to its node."""
    ta.manual_seed(0)
    model = ta.nn.CausalTransformer(11, 16, 2, 4)
    ids = np.arange(6)[None]                                            # (1, T)
    loss = F.cross_entropy(model(ids)[0], np.roll(ids[0], -1))
    opened(chromium, viz.graph_view(loss), tmp_path / "long_graph.html")
    scale = chromium.run("const svg = document.querySelector('#canvas svg'); return "
                         "svg.width.baseVal.value / svg.viewBox.baseVal.width")
    assert scale >= 0.8
    in_sight = ("const box = document.querySelector('.box.current').getBoundingClientRect(), "
                "canvas = document.querySelector('#canvas'), frame = canvas"
                ".getBoundingClientRect(), top = frame.top + canvas.clientTop, left = frame.left"
                " + canvas.clientLeft; return box.top >= top && box.left >= left && "
                "box.bottom <= top + canvas.clientHeight && box.right <= left + canvas.clientWidth")
    assert len(chromium.find_all(".box")) > 150
    for key in ["ARROW_RIGHT"] * 10 + ["END", "ARROW_LEFT"]:
        chromium.press(key)
        assert chromium.run(in_sight), key
    chromium.screenshot(tmp_path / "long_graph.png")
