"""Graph drawing: the DOT text of known graphs, determinism, gradient norms, clusters, depth,
rendering where Graphviz's `dot` exists and the fallback where it does not."""
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.viz import draw_graph, nodes, record_calls, render

HAS_DOT = shutil.which("dot") is not None
ROOT = pathlib.Path(__file__).resolve().parent.parent


def linear_relu_sum():
    """sum(relu(x @ weight.T + bias)) for a Linear(3, 2) and a leaf x of shape (4, 3)."""
    ta.manual_seed(0)
    layer = nn.Linear(3, 2)
    x = ta.tensor(np.linspace(-1, 1, 12).reshape(4, 3), requires_grad=True)
    x.name = "x"
    return layer, x, layer(x).relu().sum()


def placement(source):
    """[(node id, node label, labels of the clusters it is drawn in, outermost first)]."""
    clusters, placed = [], []
    for line in source.splitlines():
        line = line.strip()
        if line.startswith("subgraph cluster"):
            clusters.append(None)
        elif line == "}" and clusters:
            clusters.pop()
        elif re.match(r"n\d+ \[", line):
            node_id, label = re.match(r'(n\d+) \[label="([^"]*)"', line).groups()
            placed.append((node_id, label, list(clusters)))
        elif clusters and "label=" in line:           # the cluster's own attributes
            clusters[-1] = re.search(r'label=("[^"]*"|\S+)', line).group(1).strip('"')
    return placed


def test_dot_text_of_a_small_graph():
    layer, x, out = linear_relu_sum()
    assert draw_graph(out, params=layer).source == """\
digraph tinyattn {
\tgraph [fontname=Helvetica ordering=in rankdir=TB]
\tnode [fillcolor=white fontname=Helvetica fontsize=10 shape=box style="rounded,filled"]
\tn0 [label="weight\\n(2, 3)" fillcolor="#cfe2f3" style=filled]
\tn1 [label="bias\\n(2,)" fillcolor="#cfe2f3" style=filled]
\tn2 [label="x\\n(4, 3)" fillcolor="#fff2cc" style=filled]
\tn3 [label="linear\\n(4, 2)"]
\tn4 [label="relu\\n(4, 2)"]
\tn5 [label="sum\\n()" fillcolor="#f9cb9c" penwidth=2]
\tn2 -> n3
\tn0 -> n3
\tn1 -> n3
\tn3 -> n4
\tn4 -> n5
}
"""


def test_leaf_names_from_a_dict_a_module_or_nothing():
    layer, x, out = linear_relu_sum()
    by_module = draw_graph(out, params=layer).source
    assert draw_graph(out, params=dict(layer.named_parameters())).source == by_module
    assert draw_graph(out, params={"W": layer.weight}).source.count('label="W\\n(2, 3)"') == 1
    # a module names its parameters itself, so nothing needs to be passed
    assert draw_graph(out).source == by_module and 'label="weight\\n(2, 3)"' in by_module
    layer.weight.name = layer.bias.name = None
    unnamed = draw_graph(out).source
    assert unnamed.count('label="parameter\\n') == 2 and 'label="x\\n(4, 3)"' in unnamed
    x.name = None
    assert 'label="leaf\\n(4, 3)"' in draw_graph(out).source


def test_a_constant_input_has_no_node():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    labels = [label for _, label, _ in placement(draw_graph(x * np.array([3.0, 4.0])).source)]
    assert labels == ["leaf\\n(2,)", "mul\\n(2,)"]


def test_same_computation_same_dot_text():
    sources = []
    for garbage in (0, 50):
        for _ in range(garbage):                       # shifts the creation counter and memory
            ta.tensor([1.0], requires_grad=True) * 2
        ta.manual_seed(3)
        attention = nn.MultiHeadAttention(8, 2)
        x = ta.tensor(np.ones((1, 3, 8)), requires_grad=True)
        out, _ = attention(x, is_causal=True)
        sources.append(draw_graph(out, params=attention).source)
    assert sources[0] == sources[1]
    assert "softmax\\n(1, 2, 3, 3)" in sources[0] and "where\\n(1, 2, 3, 3)" in sources[0]


def grad_norms(source):
    return {label.split("\\n")[0]: float(label.split("|grad| ")[1])
            for _, label, _ in placement(source) if "|grad|" in label}


def test_gradient_norms_after_backward():
    layer, x, out = linear_relu_sum()
    assert "|grad|" not in draw_graph(out, params=layer).source
    out.backward()
    norms = grad_norms(draw_graph(out, params=layer).source)
    assert set(norms) == {"weight", "bias", "x"}           # op outputs did not retain theirs
    weight, bias = layer.weight.data, layer.bias.data
    active = (x.data @ weight.T + bias > 0).astype(float)  # (4, 2): where relu lets gradient by
    expected = {"weight": active.T @ x.data, "bias": active.sum(axis=0), "x": active @ weight}
    for name, grad in expected.items():
        assert norms[name] == pytest.approx(np.linalg.norm(grad), rel=1e-2)


def test_gradient_norms_of_ops_under_retain_grads():
    x = ta.tensor([3.0, -4.0], requires_grad=True)
    with ta.retain_grads():
        doubled = x * 2                                # (6, -8)
        loss = (doubled * doubled).sum()
    loss.backward()
    labels = [label for _, label, _ in placement(draw_graph(loss).source)]
    assert labels == ["leaf\\n(2,)\\n|grad| 4.00e+01",       # 8 x = (24, -32)
                      "mul\\n(2,)\\n|grad| 2.00e+01",        # 2 doubled = (12, -16)
                      "mul\\n(2,)\\n|grad| 1.41e+00",        # (1, 1)
                      "sum\\n()\\n|grad| 1.00e+00"]


def two_heads_by_hand():
    """Two attention heads with their own projections, concatenated."""
    ta.manual_seed(1)
    x = ta.tensor(np.ones((3, 4)), requires_grad=True)
    heads = [[nn.Linear(4, 2) for _ in "qkv"] for _ in range(2)]
    outputs = [F.attention(q(x), k(x), v(x))[0] for q, k, v in heads]     # (3, 2) each
    return heads, x, outputs, ta.concatenate(outputs, axis=-1)              # (3, 4)


def test_one_cluster_per_head():
    heads, x, outputs, out = two_heads_by_hand()   # the heads keep their parameters alive
    source = draw_graph(out, clusters={"head 0": (outputs[0], x), "head 1": (outputs[1], x)})
    placed = placement(source.source)
    for head in ("head 0", "head 1"):
        inside = [label for _, label, clusters in placed if clusters == [head]]
        named_by_linear = [label for label in inside if label.startswith(("weight", "bias"))]
        assert len(named_by_linear) == 6
        assert sum(label.startswith("softmax") for label in inside) == 1
        assert len(inside) == 6 + 3 + 5             # 3 x linear, attention: 5
    outside = [label for _, label, clusters in placed if not clusters]
    assert outside == ["leaf\\n(3, 4)", "concatenate\\n(3, 4)"]


def test_attention_cluster_inside_a_transformer_block():
    ta.manual_seed(2)
    block = nn.TransformerBlock(8, 2)
    x = ta.tensor(np.ones((1, 3, 8)), requires_grad=True)
    with record_calls(block.attn) as attn_calls, record_calls(block.attn.q_proj) as q_calls:
        y = block(x, is_causal=True)
    assert "forward" not in vars(block.attn) and "forward" not in vars(block.attn.q_proj)
    assert len(attn_calls) == 1 and len(q_calls) == 1
    clusters = {"q_proj": q_calls[0], "attention": attn_calls[0]}
    placed = placement(draw_graph(y, params=block, clusters=clusters).source)
    in_attention = [label for _, label, clusters in placed if clusters[:1] == ["attention"]]
    standalone, _ = nn.MultiHeadAttention(8, 2)(x, is_causal=True)
    assert len(in_attention) == len(nodes(standalone)) - 1      # every node but x itself
    assert sum(label.startswith("attn.") for label in in_attention) == 8
    assert not any(label.startswith(("ln1.", "ln2.", "ff.")) for label in in_attention)
    in_q_proj = {label.split("\\n")[0] for _, label, clusters in placed
                 if clusters == ["attention", "q_proj"]}
    assert in_q_proj == {"attn.q_proj.weight", "attn.q_proj.bias", "linear"}


def test_clusters_that_overlap_without_nesting_are_refused():
    x = ta.tensor([1.0], requires_grad=True)
    doubled = x * 2
    shifted = doubled + 1
    out = shifted * 3
    with pytest.raises(ValueError, match="'first' and 'second' share nodes"):
        draw_graph(out, clusters={"first": (shifted, x), "second": (out, doubled)})
    with pytest.raises(TypeError, match="pair"):
        draw_graph(out, clusters={"first": shifted})


def test_a_chain_of_20000_ops_draws_without_recursion():
    x = ta.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(20_000):
        y = y * 1.0
    source = draw_graph(y).source
    assert source.count(" -> ") == 20_000
    assert source.count('label="mul\\n(1,)"') == 20_000


def test_what_cannot_be_drawn():
    with pytest.raises(ValueError, match="does not require grad"):
        draw_graph(ta.tensor([1.0]) * 2)
    with pytest.raises(TypeError, match="expected a Tensor"):
        draw_graph(np.ones(3))


@pytest.mark.skipif(not HAS_DOT, reason="Graphviz's dot program is not installed")
def test_render_svg_and_png_of_multi_head_attention(tmp_path):
    ta.manual_seed(0)
    attention = nn.MultiHeadAttention(8, 2)
    out, _ = attention(ta.tensor(np.ones((1, 3, 8)), requires_grad=True))
    graph = draw_graph(out, params=attention)
    svg = render(graph, tmp_path / "attention")
    assert svg == tmp_path / "attention.svg"
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    assert "softmax" in text and "q_proj.weight" in text
    png = render(graph, tmp_path / "attention.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_without_dot_the_source_is_written_and_the_install_named(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))       # no `dot` to be found
    layer, x, out = linear_relu_sum()
    graph = draw_graph(out, params=layer)
    with pytest.warns(UserWarning, match="install Graphviz") as caught:
        written = render(graph, tmp_path / "graph.svg")
    assert written == tmp_path / "graph.dot"
    assert written.read_text() == graph.source
    assert not (tmp_path / "graph.svg").exists()
    assert "apt-get install graphviz" in str(caught[0].message)


def test_render_makes_a_missing_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))       # the .dot fallback: no `dot` needed
    layer, x, out = linear_relu_sum()
    with pytest.warns(UserWarning):
        written = render(draw_graph(out), tmp_path / "new" / "folder" / "graph.svg")
    assert written == tmp_path / "new" / "folder" / "graph.dot" and written.exists()


def test_ta_viz_is_reachable_after_import_tinyattn():
    code = ("import sys, tinyattn as ta; before = 'graphviz' in sys.modules; "
            "print(before, ta.viz.draw_graph.__name__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT)
    assert result.stdout.split() == ["False", "draw_graph"]


def test_import_tinyattn_does_not_import_viz_or_graphviz():
    code = "import sys, tinyattn; print('tinyattn.viz' in sys.modules, 'graphviz' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT)
    assert result.stdout.split() == ["False", "False"]


def test_drawing_keeps_nothing_alive():
    """No reference cycle: once the output is dropped, its graph is freed at once, without
    waiting for the garbage collector."""
    import gc
    import weakref
    layer, x, out = linear_relu_sum()
    draw_graph(out, clusters={"linear": (out, x)})
    node = weakref.ref(out._node)
    gc.disable()
    try:
        del out
        assert node() is None
    finally:
        gc.enable()
