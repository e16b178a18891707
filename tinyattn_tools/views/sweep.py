"""The backward sweep as the engine runs it, node by node, with the gradient that reaches each.

The engine tells a `Watcher` (tinyattn/engine.py, part 6) of each node its sweep visits, with the
gradient it hands the node (the sum of what the node's users sent), and of what the node's
backward sends each parent, before the sweep sums it back to the parent's shape. `SweepListener`
writes that down, one `Visit` per node in the order the sweep visits them. A sweep begins at a
node that no node of a running sweep has sent a gradient to: its root, the tensor `backward` was
called on.

`listened_sweep(output, seed)` runs the real `output.backward(seed, retain_graph=True)` with a
listener attached. The user's graph is left as it was: its saved arrays stay (retain_graph), and
every `.grad` the run touched (leaves, and op outputs made under `ta.retain_grads()`) is put back
as it was. `viz.recording` attaches a listener too, so a backward the user runs inside its block
is written down, and a view made after it can show that sweep.
"""
import weakref

from tinyattn.engine import Leaf, Watcher, watching
from tinyattn_tools.views.page import summary


class Visit:
    """One step of the sweep: the node visited (held weakly: a record keeps no graph alive), a
    summary of the gradient that reached it, and what its backward sent each parent: (parent
    node, shape before the sweep summed it to the parent's)."""

    def __init__(self, node, grad):
        self.node, self.grad, self.sent = weakref.ref(node), summary(grad), []


class SweepListener(Watcher):
    """Told of every backward sweep run while it watches; `sweeps` maps each sweep's root node
    to its [Visit], in the order the sweep visited them (weakly: it goes with the root)."""

    def __init__(self):
        self.sweeps = weakref.WeakKeyDictionary()
        self.visits = None           # the [Visit] of the sweep running now
        self.expected = set()        # the nodes sent a gradient and not yet visited

    def reached(self, node, grad):
        if node not in self.expected:            # no running sweep sent it anything: a new root
            self.visits, self.expected = [], set()
            self.sweeps[node] = self.visits
        self.expected.discard(node)
        self.visits.append(Visit(node, grad))

    def sent(self, node, grads):
        visit = self.visits[-1]
        for parent, grad in zip(node.parents, grads):
            if parent is not None and grad is not None:
                visit.sent.append((parent, grad.shape))
                self.expected.add(parent)


def listened_sweep(output, seed, nodes):
    """[Visit] in the order the engine's backward visits `nodes`, the graph behind `output`."""
    held = [tensor for tensor in map(tensor_of, nodes) if tensor is not None]
    grads_before = [tensor.grad for tensor in held]
    try:
        for tensor in held:
            tensor.grad = None       # the sweep would add into the user's array: it gets its own
        with watching(SweepListener()) as listener:
            output.backward(seed, retain_graph=True)
    finally:
        for tensor, grad in zip(held, grads_before):
            tensor.grad = grad
    return listener.sweeps[output._node]


def tensor_of(node):
    """The tensor whose `.grad` the sweep adds to at `node`: a leaf's, or an op output that keeps
    its gradient (made under `ta.retain_grads()`); None for any other node."""
    if isinstance(node, Leaf):
        return node.tensor()
    return node.output
