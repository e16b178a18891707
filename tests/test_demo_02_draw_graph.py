"""Demo 2: it draws the three graphs it promises, with the nodes they should have."""
import importlib
import re
import shutil

import pytest

import tinyattn as ta

pytest.importorskip("graphviz")
demo = importlib.import_module("02_draw_graph")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo02")
    if shutil.which("dot"):
        return demo.main([str(folder), "--quick"]), folder
    with pytest.warns(UserWarning, match="install Graphviz"):
        return demo.main([str(folder), "--quick"]), folder


def test_the_graphs_have_the_nodes_they_should(run):
    numbers, _ = run
    # MLP: 2 x linear + relu + cross_entropy (reshape, log_softmax, index, mean, neg); leaves: 2
    # weights, 2 biases (the input batch is a constant).
    # Head: 3 x linear + transpose, matmul, mul, softmax, matmul; x + 6 params.
    # Multi-head: 4 x linear + 3 x (reshape, transpose) + the 5 attention ops + merge (transpose,
    # reshape); x + 8 params.
    assert numbers == {"mlp_ops": 8, "mlp_leaves": 4, "attention_head_ops": 8,
                       "attention_head_leaves": 7, "multi_head_attention_ops": 17,
                       "multi_head_attention_leaves": 9, "key_bias_grad": numbers["key_bias_grad"]}
    assert numbers["key_bias_grad"] < 1e-12          # softmax ignores a shift of a whole row


def test_the_files_are_written(run):
    _, folder = run
    written = {path.name for path in folder.iterdir()}
    if shutil.which("dot"):
        assert written == {"mlp.svg", "attention_head.svg", "attention_head.png",
                           "multi_head_attention.svg", "attention_head.html"}
    else:                                           # the DOT sources, with a warning
        assert written == {"mlp.dot", "attention_head.dot", "multi_head_attention.dot",
                           "attention_head.html"}


def test_the_head_drawing_shows_shapes_names_and_the_key_bias_gradient():
    ta.manual_seed(0)
    _, _, graph = demo.head_graph()
    assert "softmax\\n(4, 4)" in graph.source and "query.weight\\n(4, 8)" in graph.source
    key_bias_grad = re.search(r'key\.bias\\n\(4,\)\\n\|grad\| (\S+)"', graph.source).group(1)
    assert float(key_bias_grad) < 1e-12


def test_the_multi_head_drawing_boxes_its_parts():
    _, _, graph = demo.multi_head_graph()
    for cluster in ("MultiHeadAttention", "q_proj", "out_proj", "split heads, attend, merge heads"):
        assert f"label={cluster}" in graph.source or f'label="{cluster}"' in graph.source


def test_the_heads_page_steps_through_every_node_with_each_op_checked():
    ta.manual_seed(0)
    page = demo.head_view().html
    # the head's 8 ops and the loss's 2 (mul, sum), each op's backward right; 7 leaves unchecked
    assert page.count('"verdict":"good"') == 10 and page.count('"verdict":null') == 7
