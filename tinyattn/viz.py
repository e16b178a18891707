"""`from tinyattn.viz import draw_graph`: the drawing tool lives in `tinyattn/tools/drawing.py`."""
from tinyattn.tools.drawing import draw_graph, nodes, record_calls, render  # noqa: F401

__all__ = ["draw_graph", "nodes", "record_calls", "render"]
