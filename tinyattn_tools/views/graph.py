"""`graph_view(output)`: the graph `output.backward()` walks, as a page to step through.

    with viz.recording(model):                  # optional: values, folding, checks, gradients
        logits = model(ids)                                   # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        loss.backward()                         # optional: without it, the view runs backward
    viz.graph_view(loss, check=True).save("loss.html")

The page shows the graph with each node's forward value (shape, first numbers, norm). Its Step
button (or the right arrow key) runs the backward sweep one node at a time, in the order the
engine visits them, and shows on each node the gradient that reached it: the sum of what its
users sent, each summed back to the node's shape where broadcasting had stretched it. The
gradients shown are not recomputed here: they are what the engine's own backward handed each
node (`sweep.py` listens to it as an `engine.Watcher`): the view's own run of it, on the user's
graph, which is left as it was, or the user's backward, when `viz.recording` wrote it down.

A graph larger than `FOLD_ABOVE` nodes is folded: each module call (recorded by `viz.recording`)
becomes one box, opened by a click, so a TransformerBlock reads as `ln1 -> attn -> ln2 -> ff`
until one looks inside. With `check=True`, each op's backward is compared with finite differences
on its own (`opcheck.py`) and the page can colour the nodes by the result: a wrong rule in a
custom op or an exercise shows red, on its own node.
"""
import numpy as np

from tinyattn.engine import Leaf, Tensor, broadcast_axes
from tinyattn.nn.module import Parameter
from tinyattn_tools.drawing import graph_nodes
from tinyattn_tools.views import layout, opcheck
from tinyattn_tools.views.page import View, page, summary
from tinyattn_tools.views.records import RECORDS, SWEEPS
from tinyattn_tools.views.sweep import tensor_of, listened_sweep

FOLD_ABOVE = 40                 # nodes: a larger graph starts with its modules folded
CHAR_WIDTH, LINE_HEIGHT = 6.6, 13   # pixels, of the page's 11 px sans-serif labels


def graph_view(output, grad=None, check=False, fold=None, layout_engine=None, title=None):
    """An interactive page of the graph behind `output`, stepping through its backward sweep.

    grad:          the seed dL/d(output), as for `output.backward(grad)`; for an output of more
                   than one element it defaults to ones (the gradient of output.sum()), and the
                   page says so
    check:         compare each op's backward with finite differences (needs the graph built
                   inside `viz.recording(...)`, which keeps each op's inputs)
    fold:          fold module calls into boxes (default: when the graph has more than
                   FOLD_ABOVE nodes and was recorded with its modules)
    layout_engine: "dot" (Graphviz), "python" (the fallback), or None: dot when installed

    Before `output.backward()` (or after `output.backward(retain_graph=True)`) it runs the
    backward itself, listening, and puts every .grad back as it was. After a backward that
    released the saved arrays, it shows that backward: every node's gradient when it ran inside
    `viz.recording(...)`, which wrote them down; otherwise the order the engine visits the nodes
    in (newest first, read from the graph) and the gradients the graph still holds, the leaves'
    `.grad`, and the page says that an op's own was not kept.
    """
    if not isinstance(output, Tensor):
        raise TypeError(f"graph_view: expected a Tensor, got {type(output).__name__}")
    if not output.requires_grad:
        raise ValueError(f"graph_view: this tensor of shape {output.shape} does not require "
                         "grad, so no graph produced it")
    if layout_engine not in (None, "dot", "python"):
        raise ValueError(f"graph_view: layout_engine must be 'dot', 'python' or None, got "
                         f"{layout_engine!r}")
    seed = np.ones_like(output.data) if grad is None else np.asarray(grad, dtype=output.dtype)
    if seed.shape != output.shape:
        raise ValueError(f"graph_view: the seed gradient has shape {seed.shape} but the output "
                         f"has shape {output.shape}")
    nodes = graph_nodes(output._node)
    if check and not any(node in RECORDS for node in nodes):
        raise ValueError("graph_view: check=True runs each op again on its inputs, which the "
                         "graph does not keep: build it inside `with viz.recording(...):`")
    released = any(getattr(node, "saved", ()) is None for node in nodes)   # a leaf saves nothing
    if released and grad is not None:
        raise ValueError("graph_view: backward has run on this graph already, with its own seed, "
                         "and released its saved arrays: give grad= before output.backward(), or "
                         "after output.backward(retain_graph=True)")
    notes = []
    if not released:
        steps = _steps(listened_sweep(output, seed, nodes))
        if grad is None and output.size != 1:
            notes.append(f"The seed is ones of shape {output.shape}: the gradient of "
                         "output.sum().")
    elif output._node in SWEEPS:
        steps = _steps(SWEEPS[output._node])
        notes.append("This is the backward that ran inside `viz.recording(...)`: each gradient "
                     "shown is the one it handed the node.")
    else:
        steps = _steps_read_from(nodes)
        notes.append("backward had run outside `viz.recording(...)` and released what the ops "
                     "saved: the order is the engine's (newest node first), read from the graph; "
                     "the gradients shown are the leaves' .grad, summed over every backward since "
                     "it was cleared. An op's own gradient was not kept: to see each one, call "
                     "graph_view before backward, or run backward inside "
                     "`with viz.recording(...):`.")

    ids = {node: i for i, node in enumerate(nodes)}
    described = [_describe(node, output, check) for node in nodes]
    for number, (node, grad_summary, sent) in enumerate(steps, start=1):
        entry = described[ids[node]]
        entry["step"], entry["grad"] = number, grad_summary
        for parent, shape in sent:
            described[ids[parent]]["arrived"].append(
                {"from": ids[node], "shape": None if shape is None else list(shape),
                 "summed": list(broadcast_axes(shape, parent.shape))
                 if shape not in (None, parent.shape) else []})
    described[ids[output._node]]["arrived"].insert(0, {"from": None, "shape": list(seed.shape),
                                                        "summed": []})
    for node, entry in zip(nodes, described):
        entry["parents"] = [ids[p] for p in node.parents if p is not None]

    clusters = _clusters(described)
    if fold is None:
        fold = len(nodes) > FOLD_ABOVE
    views = _views(described, clusters if fold else [], layout_engine)
    if not any(node in RECORDS for node in nodes):
        notes.append("Op values are shown when the graph is built inside "
                     "`with viz.recording(model):`, which keeps them.")
    if views[0]["engine"] == "python":
        why = ": Graphviz's `dot` was not found" if layout_engine is None else ""
        notes.append(f"Laid out in Python{why} (edges are straight and may pass behind boxes).")
    title = title or f"backward of {described[-1]['label']} {tuple(output.shape)}"
    data = {"title": title, "nodes": described, "sweep": [ids[node] for node, _, _ in steps],
            "clusters": clusters, "views": views, "notes": notes,
            "checked": bool(check), "thresholds": [opcheck.GOOD, opcheck.DOUBTFUL]}
    return View(title, page(title, "graph_view.js", data))


def _steps(visits):
    """[(node, summary of the gradient that reached it, [(parent, shape sent)])] of a sweep."""
    return [(visit.node(), visit.grad, visit.sent) for visit in visits]


def _steps_read_from(nodes):
    """The steps of a sweep that was not listened to, as far as the graph tells them: the
    engine's order (newest node first), each node's parents, and the gradient a leaf (or an op
    output made under `ta.retain_grads()`) holds in `.grad`."""
    steps = []
    for node in reversed(nodes):
        tensor = tensor_of(node)
        grad = None if tensor is None or tensor.grad is None else summary(tensor.grad)
        steps.append((node, grad, [(parent, None) for parent in node.parents
                                   if parent is not None]))
    return steps


def _describe(node, output, check):
    """What the page knows of one node before the sweep: its name, kind, shape, value, module,
    and its op's check."""
    record = RECORDS.get(node)
    if isinstance(node, Leaf):
        tensor = node.tensor()
        kind = "parameter" if isinstance(tensor, Parameter) else "leaf"
        label = getattr(tensor, "name", None) or kind
        value = None if tensor is None else tensor.data
        module = label.rpartition(".")[0] if kind == "parameter" else ""
    else:
        kind, label = "op", node.name
        retained = getattr(node, "output", None)       # an output made under retain_grads
        value = record.value if record else None if retained is None else retained.data
        module = record.module if record else ""
    checks = (opcheck.check_op(node, record, np.random.default_rng(0))
              if check and record and not isinstance(node, Leaf) else None)
    return {"label": label, "kind": "output" if node is output._node else kind,
            "shape": list(node.shape), "value": None if value is None else summary(value),
            "module": module, "step": None, "grad": None, "arrived": [], "checks": checks,
            "verdict": opcheck.verdict(checks) if checks else None}


def _clusters(described):
    """[{"name", "parent" (index or None), "members" (node indices, at any depth)}], one per module
    that ran an op, outermost first; each node's "cluster" is set to its innermost one (a
    parameter's: that of the module its dotted name says it belongs to)."""
    names = sorted({entry["module"] for entry in described if entry["kind"] in ("op", "output")}
                   - {""},
                   key=lambda name: (name.count("."), name))
    index = {name: i for i, name in enumerate(names)}

    def enclosing(name):          # the innermost cluster whose name is a dotted prefix of `name`
        parts = name.split(".")
        for cut in range(len(parts), 0, -1):
            if ".".join(parts[:cut]) in index:
                return index[".".join(parts[:cut])]
        return None

    clusters = [{"name": name, "parent": enclosing(name.rpartition(".")[0]), "members": []}
                for name in names]
    for i, entry in enumerate(described):
        entry["cluster"] = enclosing(entry["module"]) if entry["module"] else None
        home = entry["cluster"]
        while home is not None:
            clusters[home]["members"].append(i)
            home = clusters[home]["parent"]
    return clusters


def _views(described, clusters, engine):
    """One laid-out view for the whole graph and, when folding, one for each cluster: its own
    nodes, its sub-clusters folded, and the nodes just outside that it exchanges gradients with."""
    def chain(i):                 # the clusters node i lies in, outermost first
        found, home = [], described[i]["cluster"]
        while home is not None:
            found.insert(0, home)
            home = clusters[home]["parent"]
        return found

    views = []
    for cluster in [None, *range(len(clusters))]:
        def shown(i):             # the box node i is drawn in, in this view; None: not drawn
            path = chain(i) if clusters else []
            if cluster is not None and cluster not in path:
                return ("outside", i)
            depth = path.index(cluster) + 1 if cluster is not None else 0
            return ("cluster", path[depth]) if depth < len(path) else ("node", i)

        boxes, edges = {}, []
        inside = [i for i in range(len(described)) if shown(i)[0] != "outside"]
        for i in inside:
            boxes.setdefault(shown(i), None)
        for i, entry in enumerate(described):
            for parent in entry["parents"]:
                tail, head = shown(parent), shown(i)
                if tail == head or (tail[0] == "outside" and head[0] == "outside"):
                    continue
                boxes.setdefault(tail, None)
                boxes.setdefault(head, None)
                if (tail, head) not in edges:
                    edges.append((tail, head))
        names = {box: f"{box[0][0]}{box[1]}" for box in boxes}      # n12, c3, o7
        sizes = [(names[box], *_box_size(box, described, clusters)) for box in boxes]
        placed = layout.lay_out(sizes, [(names[t], names[h]) for t, h in edges], engine)
        views.append({"cluster": cluster, "engine": placed["engine"],
                      "width": placed["width"], "height": placed["height"],
                      "boxes": [{"id": names[box], "kind": box[0], "ref": box[1],
                                 "x": placed["boxes"][names[box]][0],
                                 "y": placed["boxes"][names[box]][1], "w": w, "h": h}
                                for box, (_, w, h) in zip(boxes, sizes)],
                      "edges": placed["edges"]})
    return views


def _box_size(box, described, clusters):
    """(width, height) in pixels of a box: wide enough for its longest line of text."""
    kind, ref = box
    if kind == "cluster":
        lines = [clusters[ref]["name"], f"{len(clusters[ref]['members'])} nodes", "0 of 000 done"]
    else:
        entry = described[ref]
        lines = [entry["label"], str(tuple(entry["shape"])), "|grad| -0.0000e-00"]
        if kind == "outside":
            lines = lines[:2]
    return round(max(map(len, lines)) * CHAR_WIDTH + 16), len(lines) * LINE_HEIGHT + 10
