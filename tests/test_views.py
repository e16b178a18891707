"""The views' pages, read as data (what a browser does with them: tests/test_views_browser.py):
the sweep's order is the engine's own, every gradient shown is the `.grad` backward gives, the
user's graph is left as it was, a view after backward shows that backward (all of it when it ran
inside `recording`), the tools watch through engine.Watcher and change no object of the book, a
wrong backward rule is found on its own node, large graphs fold, both layouts place boxes sanely,
attention takes every form it promises and refuses the rest (a view too large to draw among it),
and pages fetch nothing."""
import base64
import configparser
import heapq
import html
import json
import pathlib
import re

import graphviz
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
import tinyattn.viz as viz
from tinyattn import engine
from tinyattn.engine import Function, Leaf
from tinyattn_tools.views import cli, layout
from tinyattn_tools.views.graph import FOLD_ABOVE
from tinyattn_tools.views.page import summary

ROOT = pathlib.Path(__file__).resolve().parent.parent
VIEWS = ROOT / "tinyattn_tools" / "views"


def data_of(view):
    """The JSON a page's script reads."""
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', view.html,
                      re.S)
    return json.loads(found.group(1).replace("<\\/", "</"))


def floats(text, shape):
    return np.frombuffer(base64.b64decode(text), dtype="<f4").reshape(shape)


def engine_order(output, monkeypatch, retain_graph=True):
    """The nodes in the order the engine's backward pops them off its heap: the engine itself,
    instrumented, not an assumption about it."""
    popped = []

    def heappop(queue):
        item = heapq.heappop(queue)
        popped.append(item[1])
        return item

    class Heap:                 # the engine's `heapq`, with heappop listened to
        heappush = staticmethod(heapq.heappush)

    Heap.heappop = staticmethod(heappop)
    monkeypatch.setattr(engine, "heapq", Heap)
    output.backward(retain_graph=retain_graph)
    monkeypatch.undo()
    return popped


def diamond():
    """x (3, 1) and w (2, 3, 4) broadcast; `a` is used three times. Built under retain_grads
    (every op output keeps .grad) and recording (values and inputs kept)."""
    x = ta.tensor(np.linspace(-1, 1, 3).reshape(3, 1), requires_grad=True)
    w = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
    x.name, w.name = "x", "w"
    with ta.retain_grads(), viz.recording():
        a = x * w                                   # (2, 3, 4): x broadcast
        b = F.softmax(a, axis=-1) * a.tanh()
        loss = (b + a).sum()
    return x, w, loss


def grad_of(node):
    return node.tensor().grad if isinstance(node, Leaf) else node.output.grad


def test_the_sweep_is_the_engines_order_and_each_gradient_is_the_grad_backward_gives(
        monkeypatch):
    x, w, loss = diamond()
    data = data_of(viz.graph_view(loss))
    assert x.grad is None and w.grad is None          # the view put every .grad back
    popped = engine_order(loss, monkeypatch)          # the user's own backward, listened to
    nodes = viz.nodes(loss)                           # oldest first, as the page numbers them
    assert [nodes[i] for i in data["sweep"]] == popped
    assert len(popped) == len(nodes) == len(data["nodes"])
    for i, node in enumerate(nodes):
        shown = data["nodes"][i]
        assert shown["grad"] == summary(grad_of(node)), node.name
        assert shown["step"] == popped.index(node) + 1


def test_un_broadcasting_is_shown_where_it_summed():
    x, w, loss = diamond()
    shown = {entry["label"]: entry for entry in data_of(viz.graph_view(loss))["nodes"]}
    # x (3, 1) was stretched to (2, 3, 4) by `x * w`: its gradient was summed over axes 0 and 2
    assert shown["x"]["arrived"] == [{"from": shown["x"]["arrived"][0]["from"],
                                      "shape": [2, 3, 4], "summed": [0, 2]}]
    assert shown["w"]["arrived"][0]["summed"] == []
    assert shown["sum"]["arrived"] == [{"from": None, "shape": [], "summed": []}]   # the seed


def test_the_users_graph_still_works_after_a_view():
    x, w, loss = diamond()
    viz.graph_view(loss)
    loss.backward(retain_graph=True)                  # the saved arrays are still there
    expected = x.grad.copy()
    viz.graph_view(loss)                              # a view after backward changes no .grad
    np.testing.assert_array_equal(x.grad, expected)
    loss.backward()
    np.testing.assert_array_equal(x.grad, 2 * expected)       # leaf gradients add up, as ever


def test_after_a_backward_inside_recording_each_gradient_it_handed_a_node_is_shown(monkeypatch):
    x, w, loss = diamond()
    with viz.recording():
        popped = engine_order(loss, monkeypatch, retain_graph=False)   # releases the saved arrays
    grads = x.grad.copy(), w.grad.copy()
    data = data_of(viz.graph_view(loss))
    nodes = viz.nodes(loss)
    assert [nodes[i] for i in data["sweep"]] == popped
    for i, node in enumerate(nodes):
        assert data["nodes"][i]["grad"] == summary(grad_of(node)), node.name
    assert data["nodes"][0]["arrived"][0]["summed"] == [0, 2]          # x, as before backward
    assert any("ran inside `viz.recording(...)`" in note for note in data["notes"])
    np.testing.assert_array_equal(x.grad, grads[0])                    # no .grad changed
    np.testing.assert_array_equal(w.grad, grads[1])


def test_after_a_backward_outside_recording_the_order_and_the_leaves_gradients_are_shown(
        monkeypatch):
    x = ta.tensor(np.linspace(-1, 1, 3).reshape(3, 1), requires_grad=True)
    w = ta.tensor(np.random.default_rng(0).standard_normal((2, 3, 4)), requires_grad=True)
    x.name, w.name = "x", "w"
    a = x * w
    loss = (F.softmax(a, axis=-1) * a.tanh() + a).sum()
    popped = engine_order(loss, monkeypatch, retain_graph=False)
    data = data_of(viz.graph_view(loss))
    nodes = viz.nodes(loss)
    assert [nodes[i] for i in data["sweep"]] == popped                 # read from the graph
    shown = {entry["label"]: entry for entry in data["nodes"]}
    assert shown["x"]["grad"] == summary(x.grad) and shown["w"]["grad"] == summary(w.grad)
    assert all(entry["grad"] is None for entry in data["nodes"] if entry["kind"] != "leaf")
    assert shown["x"]["arrived"] == [{"from": 2, "shape": None, "summed": []}]   # from x * w
    assert any("An op's own gradient was not kept" in note for note in data["notes"])


def test_values_are_shown_when_recorded_and_a_note_says_when_not():
    x, w, loss = diamond()
    shown = data_of(viz.graph_view(loss))
    assert shown["nodes"][2]["value"] == summary(x.data * w.data)          # the op x * w
    assert not any("recording" in note for note in shown["notes"])
    plain = ta.tensor([1.0, 2.0], requires_grad=True)
    data = data_of(viz.graph_view((plain * 3).sum()))
    assert data["nodes"][1]["value"] is None and data["nodes"][0]["value"] == summary(plain.data)
    assert any("viz.recording" in note for note in data["notes"])


def test_a_seed_of_ones_for_a_larger_output_is_said():
    x = ta.tensor(np.ones((2, 2)), requires_grad=True)
    data = data_of(viz.graph_view(x * 2))
    assert data["notes"][0].startswith("The seed is ones of shape (2, 2)")
    assert data["nodes"][0]["grad"] == summary(np.full((2, 2), 2.0))


class Cube(Function):
    """x**3, with a backward that is wrong on purpose: 2 x^2 instead of 3 x^2."""

    def forward(self, x):
        self.saved = (x,)
        return x ** 3

    def backward(self, grad):
        (x,) = self.saved
        return (2 * x ** 2 * grad,)


def test_the_check_finds_the_wrong_rule_on_its_own_node():
    x = ta.tensor(np.linspace(0.5, 2, 6).reshape(2, 3), requires_grad=True)
    w = ta.tensor(np.random.default_rng(1).standard_normal((3, 1)), requires_grad=True)
    x.name, w.name = "x", "w"
    with viz.recording():
        loss = (Cube.apply(x @ w) + w.sum()).mean()
    verdicts = {entry["label"]: entry["verdict"]
                for entry in data_of(viz.graph_view(loss, check=True))["nodes"]}
    assert verdicts == {"x": None, "w": None, "matmul": "good", "cube": "wrong", "sum": "good",
                        "add": "good", "mean": "good"}


class Broken(Function):
    """log(x) whose backward divides by x - x: a rule giving NaN, which the page must survive."""

    def forward(self, x):
        self.saved = (x,)
        return np.log(x)

    def backward(self, grad):
        (x,) = self.saved
        with np.errstate(divide="ignore", invalid="ignore"):
            return (grad / (x - x),)


def test_a_rule_that_gives_nan_is_marked_wrong_not_a_crash():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    with viz.recording():
        loss = Broken.apply(x).sum()
    broken = data_of(viz.graph_view(loss, check=True))["nodes"][1]
    assert broken["verdict"] == "wrong" and broken["checks"][0]["error"] is None
    assert broken["grad"] == summary(np.ones(2))       # what reached it; it sent NaN onwards


def test_every_op_of_a_transformer_block_passes_its_check():
    data = data_of(cli.block_graph_view())
    verdicts = [entry["verdict"] for entry in data["nodes"] if entry["kind"] != "parameter"]
    assert verdicts.count("good") == len(verdicts) - 1       # all but the leaf x
    errors = [check["error"] for entry in data["nodes"] for check in entry["checks"] or []]
    assert len(errors) > 40 and max(errors) < 1e-6


def test_a_transformer_block_folds_into_its_modules():
    data = data_of(cli.block_graph_view())
    names = [cluster["name"] for cluster in data["clusters"]]
    assert names == ["attn", "ff", "ln1", "ln2", "attn.k_proj", "attn.out_proj", "attn.q_proj",
                     "attn.v_proj", "ff.down", "ff.up"]
    assert len(data["nodes"]) > FOLD_ABOVE
    assert len(data["views"]) == len(names) + 1
    root = [(box["kind"], box["ref"]) for box in data["views"][0]["boxes"]]
    assert sorted(ref for kind, ref in root if kind == "cluster") == list(range(4))   # top level
    # every node is drawn as a box of its own in exactly one view: its innermost module's
    owners = [[v for v, view in enumerate(data["views"])
               if ("node", i) in [(b["kind"], b["ref"]) for b in view["boxes"]]]
              for i in range(len(data["nodes"]))]
    assert all(len(owner) == 1 for owner in owners)
    q_weight = next(i for i, e in enumerate(data["nodes"]) if e["label"] == "attn.q_proj.weight")
    assert data["views"][owners[q_weight][0]]["cluster"] == names.index("attn.q_proj")


def test_small_graphs_are_not_folded_unless_asked():
    feed_forward = nn.FeedForward(4, 8)                 # up, gelu, down
    with viz.recording(feed_forward):
        loss = feed_forward(ta.tensor(np.ones((2, 4)))).sum()
    assert len(data_of(viz.graph_view(loss))["views"]) == 1
    assert len(data_of(viz.graph_view(loss, fold=True))["views"]) == 3


def test_recording_watches_and_changes_nothing():
    block = nn.TransformerBlock(8, 2)
    attributes = {name: dict(vars(module)) for name, module in block.named_modules()}
    with viz.recording(block):
        assert len(engine.switches.watchers) == 1
        block(ta.tensor(np.ones((1, 2, 8))))
    assert engine.switches.watchers == ()
    assert {name: dict(vars(module)) for name, module in block.named_modules()} == attributes


def test_no_tool_assigns_to_the_books_objects():
    """Issue 31's grep: the views and the drawing observe through engine.Watcher only."""
    surgery = re.compile(r"\.forward =|\.backward =|setattr\(|__closure__|cell_contents")
    for path in [*VIEWS.glob("*.py"), ROOT / "tinyattn_tools" / "drawing.py"]:
        assert not surgery.search(path.read_text()), path


@pytest.mark.parametrize("engine_name", ["dot", "python"])
def test_both_layouts_place_every_box_with_edges_downwards(engine_name):
    x, w, loss = diamond()
    view = data_of(viz.graph_view(loss, layout_engine=engine_name))["views"][0]
    assert view["engine"] == engine_name
    boxes = {box["id"]: box for box in view["boxes"]}
    assert len(boxes) == 8 and len(view["edges"]) == 9
    for tail, head, path in view["edges"]:
        assert boxes[tail]["y"] < boxes[head]["y"] and path.startswith("M")
    rows = {}
    for box in boxes.values():                       # boxes of one row do not overlap
        rows.setdefault(box["y"], []).append((box["x"] - box["w"] / 2, box["x"] + box["w"] / 2))
    for spans in rows.values():
        spans.sort()
        assert all(left[1] <= right[0] for left, right in zip(spans, spans[1:]))
    assert all(0 <= box["x"] <= view["width"] and 0 <= box["y"] <= view["height"]
               for box in boxes.values())


def test_without_dot_the_python_layout_is_used_and_said(monkeypatch):
    def missing(*args, **kwargs):
        raise graphviz.ExecutableNotFound(["dot"])

    monkeypatch.setattr(layout.graphviz, "pipe", missing)
    x, w, loss = diamond()
    data = data_of(viz.graph_view(loss))
    assert data["views"][0]["engine"] == "python"
    assert any("Graphviz's `dot` was not found" in note for note in data["notes"])
    with pytest.raises(graphviz.ExecutableNotFound):
        viz.graph_view(loss, layout_engine="dot")


def test_graph_view_refuses_what_it_cannot_show():
    x, w, loss = diamond()
    with pytest.raises(TypeError, match="graph_view: expected a Tensor, got ndarray"):
        viz.graph_view(np.ones(3))
    with pytest.raises(ValueError, match=r"graph_view: this tensor of shape \(3,\) does not"):
        viz.graph_view(ta.tensor(np.ones(3)))
    with pytest.raises(ValueError, match=r"seed gradient has shape \(2,\) but the output has "
                                         r"shape \(\)"):
        viz.graph_view(loss, grad=np.ones(2))
    with pytest.raises(ValueError, match="layout_engine must be 'dot', 'python' or None"):
        viz.graph_view(loss, layout_engine="neato")
    plain = ta.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match=r"check=True .* `with viz.recording\(...\):`"):
        viz.graph_view((plain * 2).sum(), check=True)
    released = (plain * plain).sum()
    released.backward()
    with pytest.raises(ValueError, match=r"backward has run on this graph already, with its own "
                                         r"seed, .* give grad= before output.backward\(\)"):
        viz.graph_view(released, grad=np.ones(()))


# ---------------------------------------------------------------- attention
def heads(shape, seed=0):
    scores = np.random.default_rng(seed).standard_normal(shape)
    return np.exp(scores) / np.exp(scores).sum(axis=-1, keepdims=True)


def test_attention_takes_a_multi_head_layers_weights_and_a_models_list():
    attention = nn.MultiHeadAttention(8, 2)
    _, weights = attention(ta.tensor(np.random.default_rng(0).standard_normal((3, 5, 8))))
    data = data_of(viz.attention_view(list("abcde"), weights, batch=2))
    assert (data["layers"], data["heads"], data["length"], data["keyCount"]) == (1, 2, 5, 5)
    np.testing.assert_allclose(floats(data["weights"], (1, 2, 5, 5))[0], weights.data[2],
                               rtol=1e-6)
    ta.manual_seed(0)
    model = nn.CausalTransformer(11, 16, 2, 3)
    _, per_layer = model(np.arange(6)[None], return_weights=True)
    data = data_of(viz.attention_view([str(i) for i in range(6)], per_layer))
    shown = floats(data["weights"], (3, 2, 6, 6))
    for layer in range(3):
        np.testing.assert_allclose(shown[layer], per_layer[layer].data[0], rtol=1e-6)


def test_attention_of_demo_11s_tiny_gpt_one_character_a_token():
    import importlib
    demo = importlib.import_module("11_tiny_gpt")
    ta.manual_seed(0)
    text = "for x in"
    vocabulary = "".join(sorted(set(text)))
    model = demo.build_model(len(vocabulary), "sinusoidal", embed_dim=16, num_heads=2,
                             num_layers=2, max_len=demo.CONTEXT)
    _, weights = model(demo.encode(text, vocabulary)[None], return_weights=True)
    data = data_of(viz.attention_view(list(text), weights))
    assert data["queries"] == list(text) and (data["layers"], data["heads"]) == (2, 2)


def test_attention_of_gpt2_with_its_gradients_and_why_the_last_row_is_blank():
    data = data_of(cli.gpt2_attention_view(str(ROOT / "tests/fixtures/gpt2-tiny"), "Hello there"))
    assert data["queries"] == data["keys"] and "".join(data["queries"]) == "Hello there"
    assert data["grads"] is not None and data["note"] == ""
    length = data["length"]
    grads = floats(data["grads"], (data["layers"], data["heads"], length, length))
    assert not grads[:, :, -1].any() and grads[:, :, :-1].any(axis=(0, 1, 3)).all()
    assert data["noteGrads"] == (
        f"Blank row {length - 1} '{data['queries'][-1]}': the loss does not depend on this "
        f"query's output, so dL/dA = dL/d(out) V^T is 0 there (a next-token loss has no target "
        f"after the last token).")


def test_no_note_on_blank_rows_when_the_loss_reads_every_query():
    weights = heads((2, 4, 4))
    grads = np.random.default_rng(1).standard_normal((2, 4, 4))
    data = data_of(viz.attention_view(list("abcd"), weights, grads=grads))
    assert data["noteGrads"] == ""
    grads[:, 1:3] = 0.0
    data = data_of(viz.attention_view(list("abcd"), weights, grads=grads))
    assert data["noteGrads"].startswith("Blank rows 1 'b', 2 'c': the loss does not depend on "
                                        "these queries' output")
    assert data_of(viz.attention_view(list("abcd"), weights))["noteGrads"] == ""


def test_long_inputs_are_capped_and_the_page_says_what_was_left_out():
    weights = heads((2, 100, 100))
    data = data_of(viz.attention_view([f"t{i}" for i in range(100)], weights, max_tokens=10))
    assert data["length"] == data["keyCount"] == 10 and len(data["queries"]) == 10
    left_out = weights[:, :10, 10:].sum(axis=-1).max()
    assert data["note"] == (f"Showing the first 10 of 100 queries and 10 of 100 keys "
                            f"(max_tokens=10). The weights a shown query puts on the keys left "
                            f"out add up to at most {left_out:.3g}.")
    np.testing.assert_allclose(floats(data["weights"], (1, 2, 10, 10))[0],
                               weights[:, :10, :10], rtol=1e-6)


def test_cross_attention_takes_query_and_key_tokens():
    data = data_of(viz.attention_view((["q1", "q2"], ["k1", "k2", "k3"]), heads((1, 2, 3))))
    assert data["queries"] == ["q1", "q2"] and data["keys"] == ["k1", "k2", "k3"]
    named = data_of(viz.attention_view(["q1", "q2"], heads((1, 2, 3)),
                                       key_tokens=["k1", "k2", "k3"]))
    assert named == data and data["title"].startswith("attention over 2 query and 3 key tokens")
    with pytest.raises(TypeError, match=r"^attention_view: the key tokens are given twice"):
        viz.attention_view((["q1", "q2"], ["k1", "k2", "k3"]), heads((1, 2, 3)),
                           key_tokens=["k"])
    with pytest.raises(TypeError, match=r"^attention_view: the key tokens must be a list of "):
        viz.attention_view(["q1", "q2"], heads((1, 2, 3)), key_tokens="abc")


def t5_cross_attention():
    """T5's decoder against its encoder (tests/fixtures/t5-tiny): the first input of the
    fixture's references, its target and source tokens, and every decoder block's
    cross-attention weights (B, H, T, S) from run_with_cache."""
    model = nn.from_pretrained(ROOT / "tests/fixtures/t5-tiny")
    reference = ta.load_safetensors(ROOT / "tests/fixtures/t5-tiny/reference.safetensors")
    source, target = reference["input_ids"][:1], reference["decoder_input_ids"][:1]
    _, cache = model.run_with_cache(source, target)
    weights = [cache[f"decoder.{i}.cross_attn.weights"] for i in range(2)]       # (1, H, T, S)
    return ([f"t{i}={t}" for i, t in enumerate(target[0])],
            [f"s{i}={s}" for i, s in enumerate(source[0])], weights)


def test_cross_attention_of_t5s_decoder_shows_target_tokens_against_source_tokens():
    target, source, weights = t5_cross_attention()
    data = data_of(viz.attention_view(target, weights, key_tokens=source))
    assert (data["layers"], data["heads"], data["length"], data["keyCount"]) == (2, 3, 6, 10)
    assert data["queries"] == target and data["keys"] == source
    shown = floats(data["weights"], (2, 3, 6, 10))
    for layer in range(2):
        np.testing.assert_allclose(shown[layer], np.asarray(weights[layer])[0], rtol=1e-6)


def vit_attention():
    """nn.ViT from tests/fixtures/vit-tiny (32 x 32 pixels, patches of 8: 16 patches, 4 heads,
    2 blocks) on a smooth colour ramp: the image (1, 3, 32, 32) and each block's weights
    (1, H, 1 + P, 1 + P) from run_with_cache."""
    model = nn.from_pretrained(ROOT / "tests/fixtures/vit-tiny")
    y, x = np.mgrid[0:32, 0:32] / 31.0
    image = np.stack([x, y, 1 - x * y]).astype(np.float32)[None]          # (1, C, H, W)
    _, cache = model.run_with_cache(image)
    return image, [cache[f"blocks.{i}.attn.weights"] for i in range(2)]


def patch_pixels(data):
    """The pixels a page draws, (n, p, p, 3) uint8."""
    patches = data["patches"]
    return np.frombuffer(base64.b64decode(patches["pixels"]), dtype=np.uint8).reshape(
        patches["count"], patches["size"], patches["size"], 3)


def test_a_vits_patches_are_its_tokens_after_the_class_token():
    image, weights = vit_attention()
    data = data_of(viz.attention_view(None, weights, image=image, patch_size=8))
    assert (data["layers"], data["heads"], data["length"], data["keyCount"]) == (2, 4, 17, 17)
    assert data["queries"] == data["keys"] and data["queries"][0] == "[CLS]"
    assert data["queries"][6] == "patch 5 (row 1, column 1)"
    assert data["patches"]["queries"] == data["patches"]["keys"] == [None] + list(range(16))
    np.testing.assert_allclose(floats(data["weights"], (2, 4, 17, 17)),
                               np.stack([np.asarray(w)[0] for w in weights]), rtol=1e-6)
    pixels = patch_pixels(data)                                           # (16, 8, 8, 3)
    scaled = (image[0] - image.min()) / (image.max() - image.min()) * 255  # (C, H, W)
    for patch in (0, 5, 15):                      # patch i at row i // 4, column i % 4
        row, column = divmod(patch, 4)
        expected = scaled[:, 8 * row:8 * row + 8, 8 * column:8 * column + 8].transpose(1, 2, 0)
        np.testing.assert_array_equal(pixels[patch], np.round(expected).astype(np.uint8))


def test_text_against_an_images_patches_and_a_grey_image_without_a_class_token():
    text = ["a", "red", "square"]
    weights = heads((2, 3, 16))
    grey = np.arange(64.0).reshape(8, 8)                                  # (H, W): 16 patches
    data = data_of(viz.attention_view(text, weights, image=grey, patch_size=2))
    assert data["queries"] == text and data["keys"][0] == "patch 0 (row 0, column 0)"
    assert data["patches"]["queries"] == [None] * 3
    assert data["patches"]["keys"] == list(range(16))
    pixels = patch_pixels(data)                                           # (16, 2, 2, 3)
    assert (pixels == pixels[..., :1]).all()                              # grey: R = G = B
    np.testing.assert_array_equal(pixels[5, :, :, 0], np.round(
        grey[2:4, 2:4] / 63 * 255).astype(np.uint8))
    capped = data_of(viz.attention_view(text, weights, image=grey, patch_size=2, max_tokens=5))
    assert capped["patches"]["count"] == 5 and capped["keys"] == data["keys"][:5]


@pytest.mark.parametrize("tokens, options, error, message", [
    (None, {"image": np.zeros((3, 32, 32)), "patch_size": 6}, ValueError,
     r"attention_view: patch_size must be an int dividing the image's height and width, "
     r"\(32, 32\), got 6$"),
    (None, {"image": np.zeros((3, 32, 32)), "patch_size": 16}, ValueError,
     r"attention_view: an image of \(32, 32\) in patches of 16 has 4 patches, for weights of "
     r"17 keys: give weights of 4 keys, or 5 with a class token first$"),
    (None, {"image": np.zeros((2, 32, 32)), "patch_size": 8}, ValueError,
     r"attention_view: image must be \(C, H, W\), \(H, W\) or \(B, C, H, W\) with C 1 or 3, "
     r"got shape \(2, 32, 32\)$"),
    (None, {"image": np.zeros((3, 32, 32)), "patch_size": 8, "key_tokens": list("ab")},
     TypeError, r"attention_view: the key tokens are given twice, as key_tokens and as the "
                r"patches of image: give one$"),
    (list("ab"), {"patch_size": 8}, TypeError,
     r"attention_view: patch_size=8 is given without an image$"),
    (None, {}, TypeError, r"attention_view: tokens is None: give one string per position, or an "
                          r"image whose patches are the tokens$"),
])
def test_attention_view_refuses_patches_that_do_not_fit(tokens, options, error, message):
    with pytest.raises(error, match=message):
        viz.attention_view(tokens, heads((1, 17, 17)), **options)


@pytest.mark.parametrize("tokens, weights, grads, error, message", [
    (list("ab"), np.ones((2, 2)), None, ValueError,
     r"attention_view: weights must be \(H, L, S\), \(B, H, L, S\) or a list of those per "
     r"layer, got shape \(2, 2\)"),
    (list("abc"), heads((1, 2, 2)), None, ValueError,
     r"attention_view: 3 query and 3 key tokens for weights of \(L, S\) = \(2, 2\)"),
    ("ab", heads((1, 2, 2)), None, TypeError, "tokens must be a list of strings"),
    (list("ab"), [heads((1, 2, 2)), heads((2, 2, 2))], None, ValueError,
     r"every layer's weights must have one shape \(H, L, S\), got \[\(1, 2, 2\), \(2, 2, 2\)\]"),
    (list("ab"), heads((1, 2, 2)), np.ones((1, 2, 3)), ValueError,
     r"grads must have the weights' shapes, \[\(1, 2, 2\)\], got \[\(1, 2, 3\)\]"),
    (list("ab"), [], None, ValueError, "weights is an empty list"),
    (list("ab"), heads((1, 1, 2, 2)).astype(str), None, TypeError, "must hold numbers"),
])
def test_attention_view_refuses_what_does_not_fit(tokens, weights, grads, error, message):
    with pytest.raises(error, match=message):
        viz.attention_view(tokens, weights, grads)


def test_attention_view_refuses_a_batch_row_it_does_not_have_and_a_bad_cap():
    with pytest.raises(ValueError, match=r"batch 3 is out of range for weights of shape "
                                         r"\(2, 1, 2, 2\)"):
        viz.attention_view(list("ab"), heads((2, 1, 2, 2)), batch=3)
    with pytest.raises(ValueError, match="max_tokens must be a positive int, got 0"):
        viz.attention_view(list("ab"), heads((1, 2, 2)), max_tokens=0)


def test_an_attention_view_too_large_to_draw_is_refused_before_it_is_written():
    from tinyattn_tools.views.attention import MAX_CELLS, MAX_PAGE_BYTES
    side = int(MAX_CELLS ** 0.5)
    tokens = [f"t{i}" for i in range(side + 1)]
    weights = np.broadcast_to(1.0 / len(tokens), (12, len(tokens), len(tokens)))   # no memory
    viz.attention_view(tokens, weights, max_tokens=side)              # the largest: drawn
    with pytest.raises(ValueError, match=rf"a head of {side + 1} x {side + 1} weights is more "
                                         rf"than .* max_tokens={side} or less"):
        viz.attention_view(tokens, weights, max_tokens=side + 1)
    layer = weights[:, :side, :side]
    per_layer = 2 * 4 * -(-4 * layer.size // 3)                       # its page bytes, with dL/dA
    layers = [layer] * (MAX_PAGE_BYTES // per_layer + 1)
    with pytest.raises(ValueError, match=rf"{len(layers)} layers x 12 heads of {side} x {side} "
                                         rf"weights and their dL/dA make a page of .* MB, more "
                                         rf"than one opens at a usable speed \(100 MB\): show "
                                         rf"fewer layers"):
        viz.attention_view(tokens[:side], layers, grads=layers, max_tokens=side)


# ---------------------------------------------------------------- pages
def test_a_page_names_no_url_but_the_svg_namespace():
    x, w, loss = diamond()
    image, weights = vit_attention()
    for view in (viz.graph_view(loss), viz.attention_view(list("ab"), heads((1, 2, 2))),
                 viz.attention_view(None, weights, image=image, patch_size=8)):
        urls = set(re.findall(r"[a-z]+://[^\s\"'<>)]*", view.html))
        assert urls == {"http://www.w3.org/2000/svg"}      # a name in createElementNS: no fetch
        assert "<link" not in view.html and " src=" not in view.html


def test_a_token_cannot_end_the_pages_script():
    view = viz.attention_view(["</script><b>", "x"], heads((1, 2, 2)))
    assert data_of(view)["queries"][0] == "</script><b>"
    assert view.html.count("</script>") == 2       # the data's and the script's: no third


def test_save_and_the_notebook_iframe(tmp_path):
    view = viz.attention_view(list("ab"), heads((1, 2, 2)))
    path = view.save(tmp_path / "sub" / "a.html")
    assert path.read_text(encoding="utf-8") == view.html
    frame = view._repr_html_()
    srcdoc = re.search(r'srcdoc="([^"]*)"', frame).group(1)
    assert html.unescape(srcdoc) == view.html and 'sandbox="allow-scripts"' in frame
    assert "require" not in view.html
    # each output's frame has its own id, which the script beside it listens to
    frame_id = re.compile(r'<iframe id="([^"]+)"')
    own, other = frame_id.search(frame).group(1), frame_id.search(view._repr_html_()).group(1)
    assert own != other
    assert f'getElementById("{own}")' in frame and f'getElementById("{other}")' not in frame


def test_the_packaging_ships_every_asset_of_the_views():
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    patterns = config["options.package_data"]["tinyattn_tools.views"].replace(",", " ").split()
    assets = [path for path in VIEWS.iterdir() if path.is_file() and path.suffix != ".py"]
    assert {path.suffix for path in assets} == {".js", ".css"}
    assert all(any(path.match(pattern) for pattern in patterns) for path in assets)


def test_the_command_line_writes_each_view_and_prints_its_path(tmp_path, capsys):
    graph_path, attention_path = tmp_path / "g.html", tmp_path / "a.html"
    assert cli.main(["graph", "--out", str(graph_path), "--layout", "python"]) == 0
    assert capsys.readouterr().out.strip() == str(graph_path.resolve())
    assert data_of(viz.View("", graph_path.read_text()))["views"][0]["engine"] == "python"
    assert cli.main(["attention", str(ROOT / "tests/fixtures/gpt2-tiny"), "--out",
                     str(attention_path), "--max-tokens", "3"]) == 0
    assert capsys.readouterr().out.strip() == str(attention_path.resolve())
    assert "Showing the first 3 of" in attention_path.read_text()
    with pytest.raises(SystemExit):
        cli.main(["attention", str(tmp_path / "nothing")])
    assert "no GPT-2 checkpoint in" in capsys.readouterr().err


@pytest.mark.parametrize("kind, described", [
    ("graph", ("--out PATH  where the page is written",)),
    ("attention", ("FOLDER a GPT-2 checkpoint", "--text TEXT the text GPT-2 reads",
                   "--out PATH where the page is written")),
])
def test_each_argument_of_a_view_is_described_in_its_help(kind, described, capsys):
    with pytest.raises(SystemExit):
        cli.main([kind, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for words in described:
        assert " ".join(words.split()) in out


def test_without_a_browser_the_browser_tests_skip_or_fail_when_ci_requires_them(monkeypatch):
    import browser
    monkeypatch.setattr(browser.shutil, "which", lambda name: None)
    monkeypatch.delenv("TINYATTN_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium, chromedriver not found"):
        browser.start()
    monkeypatch.setenv("TINYATTN_REQUIRE_BROWSER", "1")
    with pytest.raises(pytest.fail.Exception, match="TINYATTN_REQUIRE_BROWSER=1 says they must"):
        browser.start()


def test_the_docs_quote_the_measured_times_and_the_limits_are_the_ones_measured():
    import views  # dev/views.py

    from tinyattn_tools.views.attention import MAX_CELLS, MAX_PAGE_BYTES
    measured = json.loads((ROOT / "docs/views.json").read_text())
    page = (ROOT / "docs/views.md").read_text()
    assert f"{views.START}\n{views.tables(measured)}\n{views.END}" in page
    limits = measured["limits"]
    assert (limits["max_cells"], limits["max_page_bytes"]) == (MAX_CELLS, MAX_PAGE_BYTES)
    # the sizes measured reach the limits and pass them: the last drawn, the first refused
    cells = [head["tokens"] ** 2 for head in limits["heads"]]
    assert MAX_CELLS in cells and max(cells) > MAX_CELLS
    sizes = [entry["bytes"] for entry in limits["pages"]]
    assert max(size for size in sizes if size <= MAX_PAGE_BYTES) > 0.9 * MAX_PAGE_BYTES
    assert max(sizes) > MAX_PAGE_BYTES
