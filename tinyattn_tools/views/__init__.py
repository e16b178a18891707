"""Views: interactive pages of what tinyattn computes, each one self-contained HTML file.

    graph.py      `graph_view(output)`: the graph backward walks, stepped through node by node
    attention.py  `attention_view(tokens, weights, grads=None)`: attention per layer and head
    records.py    `recording(model)`: keeps what a graph view shows that the graph does not keep
                  (op values and inputs, module names, the sweep of a backward run inside it)
    sweep.py      the engine's backward sweep, listened to: its order, the gradient at each node
    opcheck.py    each op's backward against finite differences, on its recorded inputs
    layout.py     where the boxes go: Graphviz's `dot`, or a small layered layout in Python
    page.py       the page: inline JSON, JavaScript and CSS; `View` saves it and shows it in
                  notebooks
    cli.py        `python -m tinyattn view graph|attention`
    *.js, *.css   the pages' scripts and style: plain JavaScript, no library, no build step

Both views and `recording` learn what they show as the engine's `Watcher` (tinyattn/engine.py,
part 6), which the engine tells of each op applied, each gradient its sweep hands a node, and
each layer called; none of them changes an object of the book.

Public through `tinyattn.viz`.
"""
from tinyattn_tools.views.attention import attention_view
from tinyattn_tools.views.graph import graph_view
from tinyattn_tools.views.page import View
from tinyattn_tools.views.records import recording

__all__ = ["View", "attention_view", "graph_view", "recording"]
