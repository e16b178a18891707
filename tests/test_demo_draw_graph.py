"""The graph-drawing demo: it draws the three graphs it promises, with the nodes it should have."""
import importlib
import re
import shutil

import pytest

pytest.importorskip("graphviz")


def run_demo(folder):
    demo = importlib.import_module("02_draw_graph")
    if shutil.which("dot"):
        return demo.main([str(folder), "--quick"])
    with pytest.warns(UserWarning, match="install Graphviz"):
        return demo.main([str(folder), "--quick"])


def test_draw_graph_demo(tmp_path, capsys):
    results = run_demo(tmp_path)
    printed = capsys.readouterr().out
    counts = {name: (result["ops"], result["leaves"]) for name, result in results.items()}
    # MLP: 2 x (transpose, matmul, add) + relu + cross_entropy (reshape, log_softmax, index, mean,
    # neg); leaves: 2 weights, 2 biases (the input batch is a constant).
    # Head: 3 x (transpose, matmul, add) + transpose, matmul, mul, softmax, matmul; x + 6 params.
    # Multi-head: 4 projections x 3 + 3 x (reshape, transpose) + the 5 attention ops + merge
    # (transpose, reshape); x + 8 params.
    assert counts == {"mlp": (12, 4), "attention_head": (14, 7),
                      "multi_head_attention": (25, 9)}
    for name, result in results.items():
        assert re.search(rf"{name}\s+{result['ops']}\s+{result['leaves']}", printed)
        for path in result["paths"]:
            assert path.parent == tmp_path and path.stat().st_size > 0
    head = results["attention_head"]["dot"]
    assert "softmax\\n(4, 4)" in head and "query.weight\\n(4, 8)" in head
    key_bias_grad = re.search(r'key\.bias\\n\(4,\)\\n\|grad\| (\S+)"', head).group(1)
    assert float(key_bias_grad) < 1e-12             # softmax ignores a shift of a whole row
    multi_head = results["multi_head_attention"]["dot"]
    for cluster in ("MultiHeadAttention", "q_proj", "out_proj", "split heads, attend, merge heads"):
        assert f"label={cluster}" in multi_head or f'label="{cluster}"' in multi_head
    if shutil.which("dot"):
        suffixes = {path.suffix for result in results.values() for path in result["paths"]}
        assert suffixes == {".svg", ".png"}
