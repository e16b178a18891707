"""The backward sweep as the engine runs it, node by node, with the gradient that reaches each.

`recorded_sweep(output, seed)` runs the real `output.backward(seed, retain_graph=True)` and
listens: each op node's `backward(grad)` is wrapped for the length of the run, so the sweep
itself says in which order it visits the nodes and what `grad` it hands each one (the sum of what
its users sent); each leaf's `tensor()` (the weak reference the sweep reads a leaf's tensor
through) is wrapped the same way, so leaves take their place in the order too. What a node's
backward returns is what it sends its parents: when that is larger than the parent (NumPy
broadcast the parent in the forward pass), the sweep sums it back, and the record says over which
axes.

The user's graph is left as it was: its saved arrays stay (retain_graph), and every `.grad` the
run touched (leaves, and op outputs made under `ta.retain_grads()`) is put back as it was.
"""
import numpy as np

from tinyattn.engine import Leaf


class Visit:
    """One step of the sweep: the node visited, the gradient that reached it, and what its
    backward sent each parent (parent node, shape before the sweep summed it to the parent's)."""

    def __init__(self, node):
        self.node, self.grad, self.sent = node, None, []




def recorded_sweep(output, seed, nodes):
    """[Visit] in the order the engine's backward visits `nodes`, the graph behind `output`."""
    visits, by_node = [], {}

    def visit(node):
        if node not in by_node:            # a node is visited once; a second look is not a visit
            by_node[node] = Visit(node)
            visits.append(by_node[node])
        return by_node[node]

    def listening_backward(node, backward):
        def backward_heard(grad):
            step = visit(node)
            step.grad = np.array(grad)           # a copy: a custom op may change its argument
            grads = backward(grad)
            if type(grads) is tuple:             # otherwise the engine raises its own error
                step.sent = [(parent, np.shape(sent)) for parent, sent in zip(node.parents, grads)
                             if parent is not None and sent is not None]
            return grads
        return backward_heard

    def listening_tensor(node, reference):
        def tensor_heard():
            visit(node)
            return reference()
        return tensor_heard

    leaves = [node for node in nodes if isinstance(node, Leaf)]
    references = {leaf: leaf.tensor for leaf in leaves}
    held = [tensor for tensor in map(_tensor_of, nodes) if tensor is not None]
    grads_before = [tensor.grad for tensor in held]
    try:
        for tensor in held:
            tensor.grad = None                  # so that after the run, .grad is what arrived
        for node in nodes:
            if isinstance(node, Leaf):
                node.tensor = listening_tensor(node, references[node])
            else:
                node.backward = listening_backward(node, node.backward)
        output.backward(seed, retain_graph=True)
        for step in visits:
            if isinstance(step.node, Leaf):
                tensor = references[step.node]()
                step.grad = None if tensor is None else tensor.grad
    finally:
        for node in nodes:
            if isinstance(node, Leaf):
                node.tensor = references[node]
            else:                               # the op class's own backward shows through again
                vars(node).pop("backward", None)
        for tensor, grad in zip(held, grads_before):
            tensor.grad = grad
    return visits


def _tensor_of(node):
    """The tensor whose `.grad` the sweep adds to at `node`: a leaf's, or an op output that keeps
    its gradient (made under `ta.retain_grads()`); None for any other node."""
    if isinstance(node, Leaf):
        return node.tensor()
    return getattr(node, "output", None)


def summed_axes(sent_shape, shape):
    """The axes over which a gradient of `sent_shape` is summed to reach an input of `shape`: the
    leading axes broadcasting added, and those it stretched from 1 (as `engine.unbroadcast`)."""
    added = len(sent_shape) - len(shape)
    return list(range(added)) + [added + i for i, n in enumerate(shape)
                                 if n == 1 and sent_shape[added + i] != 1]
