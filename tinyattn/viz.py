"""`import tinyattn.viz as viz`: drawing the graph (`draw_graph`, in `tinyattn_tools/drawing.py`)
and interactive offline views (`graph_view`, `attention_view`, in `tinyattn_tools/views/`)."""
from tinyattn_tools.drawing import draw_graph, nodes, record_calls, render  # noqa: F401
from tinyattn_tools.views import View, attention_view, graph_view, recording  # noqa: F401

__all__ = ["View", "attention_view", "draw_graph", "graph_view", "nodes", "record_calls",
           "recording", "render"]
