"""Drawing the graph that backward walks, with the `graphviz` package.

    graph = draw_graph(loss, params=model)        # a graphviz.Digraph
    render(graph, "loss.svg")                     # needs Graphviz's `dot` program

Each op node shows the op's name and its output shape; each leaf shows its shape and, for a
parameter, its dotted name (`q_proj.weight`). Once backward has run, nodes show the norm of their
gradient: leaves always, op outputs when they were created under `ta.retain_grads()`. Constants
(numbers, masks, tensors that need no gradient) have no node, so they are not drawn.

Nodes are numbered by creation order (`node.order`), never by memory address, so the same
computation always gives the same DOT text and therefore the same drawing. The graph is walked
with an explicit stack, so a chain of 20,000 ops draws as easily as three.

`clusters` boxes groups of nodes, e.g. the nodes of one module: `{"attention": (outputs, inputs)}`
boxes the ops that lie behind `outputs` but in front of `inputs`, together with the leaves only
those ops use (the module's parameters). `record_calls(module)` collects exactly those tensors from
a module's calls. A cluster whose nodes all belong to another one is drawn inside it.

`import tinyattn` imports this module on first use of `ta.viz`: the core needs NumPy only.
"""
import contextlib
import pathlib
import warnings

import numpy as np

from tinyattn.engine import Leaf, Tensor, Watcher, watching
from tinyattn.nn.module import Parameter

try:
    import graphviz
except ImportError:
    raise ImportError("tinyattn.viz needs the graphviz package: pip install graphviz") from None

INSTALL_DOT = ("install Graphviz (`apt-get install graphviz`, `brew install graphviz`, "
               "or see https://graphviz.org/download/)")
COLORS = {"output": "#f9cb9c", "parameter": "#cfe2f3", "leaf": "#fff2cc"}


def nodes(tensor):
    """Every node of the graph that produced `tensor`, oldest first (walked without recursion)."""
    if not isinstance(tensor, Tensor):
        raise TypeError(f"draw_graph: expected a Tensor, got {type(tensor).__name__}")
    if tensor._node is None:
        raise ValueError(f"draw_graph: this tensor of shape {tensor.shape} does not require grad, "
                         "so no graph produced it")
    return graph_nodes(tensor._node)


def graph_nodes(node):
    """`node` and every node behind it, oldest first, walked without recursion."""
    seen, stack = {node}, [node]
    while stack:
        for parent in stack.pop().parents:
            if parent is not None and parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return sorted(seen, key=lambda node: node.order)


def draw_graph(tensor, params=None, clusters=None, title=None, rankdir="TB"):
    """A `graphviz.Digraph` of the graph that produced `tensor`, inputs at the top.

    params:   a Module, or a dict {name: parameter}, to label leaves with their names (without
              it, parameters carry the names their module gave them: `q_proj.weight`)
    clusters: {label: (outputs, inputs)}, outputs and inputs each a tensor or a list of tensors
    """
    if params is not None and hasattr(params, "named_parameters"):
        params = dict(params.named_parameters())
    names = {p._node: name for name, p in (params or {}).items() if p._node is not None}
    graph_nodes = nodes(tensor)
    ids = {node: f"n{i}" for i, node in enumerate(graph_nodes)}
    users = {node: [] for node in graph_nodes}       # node -> the op nodes that read its output
    for node in graph_nodes:
        for parent in node.parents:
            if parent is not None:
                users[parent].append(node)

    tree = _cluster_tree(clusters or {}, users)
    home = {node: i for i, (_, members, _) in enumerate(tree) for node in members}
    graph = graphviz.Digraph("tinyattn", graph_attr={"rankdir": rankdir, "ordering": "in",
                                                     "fontname": "Helvetica"},
                             node_attr={"shape": "box", "style": "rounded,filled",
                                        "fillcolor": "white", "fontname": "Helvetica",
                                        "fontsize": "10"})
    if title:
        graph.attr(label=title, labelloc="t")

    boxes = [graphviz.Digraph(name=f"cluster_{i}") for i in range(len(tree))]   # one per cluster
    for box, (label, _, _) in zip(boxes, tree):
        box.attr(label=label, style="rounded,dashed", color="grey40")
    for node in graph_nodes:
        box = boxes[home[node]] if node in home else graph
        box.node(ids[node], _label(node, names), **_style(node, names, tensor._node))
    # Nest the boxes, innermost first: graphviz copies a subgraph's text when it is added, so a box
    # must be complete by then. An enclosing cluster always comes before the ones it contains.
    children = {i: [child for child, (_, _, parent) in enumerate(tree) if parent == i]
                for i in [None, *range(len(tree))]}
    for i in reversed(range(len(tree))):
        for child in children[i]:
            boxes[i].subgraph(boxes[child])
    for child in children[None]:
        graph.subgraph(boxes[child])
    for node in graph_nodes:
        for parent in node.parents:
            if parent is not None:
                graph.edge(ids[parent], ids[node])
    return graph


def _label(node, names):
    """'name\\nshape', and '|grad| norm' once a gradient is there."""
    if isinstance(node, Leaf):
        leaf = node.tensor()                  # None once nobody holds the tensor any more
        fallback = "parameter" if isinstance(leaf, Parameter) else "leaf"
        title = names.get(node) or getattr(leaf, "name", None) or fallback
        grad = leaf.grad if leaf is not None else None
    else:
        title = node.name
        grad = node.output.grad if node.output is not None else None
    lines = [title, str(node.shape)]
    if grad is not None:
        lines.append(f"|grad| {np.linalg.norm(grad):.2e}")
    return "\\n".join(lines)


def _style(node, names, output):
    """How `node` differs from an op node (a white rounded box): leaves are square and coloured,
    the output is orange with a thick border."""
    style = {}
    if isinstance(node, Leaf):
        is_parameter = node in names or isinstance(node.tensor(), Parameter)
        style.update(style="filled", fillcolor=COLORS["parameter" if is_parameter else "leaf"])
    if node is output:
        style.update(fillcolor=COLORS["output"], penwidth="2")
    return style


def _cluster_tree(clusters, users):
    """[(label, member nodes, index of the enclosing cluster or None)], the largest first."""
    found = []
    for label, spec in clusters.items():
        if not (isinstance(spec, (tuple, list)) and len(spec) == 2):
            raise TypeError(f"draw_graph: cluster {label!r} must be a pair (outputs, inputs), "
                            f"got {spec!r}")
        found.append((label, _members(*spec, users)))
    found.sort(key=lambda cluster: -len(cluster[1]))       # stable: equal sizes keep their order
    tree = []
    for label, members in found:
        enclosing = None
        for i, (other_label, other, _) in enumerate(tree):
            if members <= other:
                enclosing = i                       # the last one found is the smallest
            elif members & other:
                raise ValueError(f"draw_graph: clusters {other_label!r} and {label!r} share nodes "
                                 "but neither contains the other")
        tree.append((label, members, enclosing))
    return tree


def _members(outputs, inputs, users):
    """The op nodes behind `outputs` and in front of `inputs`, and the leaves only they use."""
    stop = set(_nodes_of(inputs))
    inside = set()
    stack = [node for node in _nodes_of(outputs) if node not in stop]
    while stack:
        node = stack.pop()
        if node in inside or isinstance(node, Leaf) or node not in users:
            continue
        inside.add(node)
        stack.extend(p for p in node.parents if p is not None and p not in stop)
    leaves = {p for node in inside for p in node.parents
              if isinstance(p, Leaf) and p not in stop and all(u in inside for u in users[p])}
    return inside | leaves


def _nodes_of(tensors):
    return [t._node for t in _tensors_among(tensors) if t._node is not None]


def render(graph, path):
    """Draw `graph` into `path`, in the format its suffix names (.svg, .png, .pdf; none: .svg).

    Returns the path written; a missing folder is created. Without Graphviz's `dot` program,
    writes the DOT source next to it (`path.dot`), warns how to install `dot`, and returns the
    .dot path.
    """
    path = pathlib.Path(path)
    if not path.suffix:
        path = path.with_suffix(".svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        picture = graph.pipe(format=path.suffix[1:])
    except graphviz.ExecutableNotFound:
        dot_path = path.with_suffix(".dot")
        dot_path.write_text(graph.source)
        warnings.warn(f"Graphviz's `dot` program was not found, so {path} was not drawn; its "
                      f"source is in {dot_path}. To draw it, {INSTALL_DOT}, then run "
                      f"`dot -T{path.suffix[1:]} {dot_path} -o {path}`.", stacklevel=2)
        return dot_path
    path.write_bytes(picture)
    return path


class CallRecorder(Watcher):
    """The Watcher of `record_calls`: each call of `module`, as (outputs, inputs), in `calls`."""

    def __init__(self, module):
        self.module, self.calls = module, []
        self.running = []            # the inputs of the calls of `module` running now

    def called(self, module, args, kwargs):
        if module is self.module:
            self.running.append(_tensors_among([*args, *kwargs.values()]))

    def returned(self, module, output):
        if module is self.module:
            self.calls.append((_tensors_among(output), self.running.pop()))


@contextlib.contextmanager
def record_calls(module):
    """Inside the block, record every call of `module` as (outputs, inputs): its tensors, ready to
    be a cluster of `draw_graph`. It watches the layer calls as the engine's `Watcher`
    (tinyattn/engine.py, part 6), which `Module.__call__` tells of each one.

        with record_calls(block.attn) as calls:
            y = block(x)
        draw_graph(y, clusters={"attention": calls[0]})
    """
    with watching(CallRecorder(module)) as recorder:
        yield recorder.calls


def _tensors_among(values):
    """The tensors among `values` (one value, or a tuple or list of them)."""
    values = values if isinstance(values, (tuple, list)) else [values]
    return [value for value in values if isinstance(value, Tensor)]
