"""What a graph view shows that the graph alone does not keep, noted while the model runs.

A node of the graph keeps what its backward needs, and nothing more: not its output's values,
not its inputs, not the module that ran it, and after a backward not even that. Inside
`with viz.recording(model):`

  * every op's output values are kept, to be shown on its node;
  * every op's input arrays and parameters (`axis=-1`, ...) are kept, so that the view can run
    the op's forward and backward again on its own and compare its backward with finite
    differences (`graph_view(..., check=True)`);
  * every op is tagged with the module call it ran in (`blocks.0.attn.q_proj`), so that a large
    graph can be folded module by module;
  * a backward run inside the block is written down, node by node (sweep.py), so that
    `loss.backward(); viz.graph_view(loss)` shows the gradient that reached every node.

It learns all this as the engine's `Watcher` (tinyattn/engine.py, part 6): told of each op
applied, each layer called and returned, each gradient of a sweep. Nothing of the model or the
engine is changed.
"""
import contextlib
import weakref

from tinyattn.engine import watching
from tinyattn_tools.views.sweep import SweepListener

# node -> OpRecord, for the nodes made inside a `recording` block; an entry goes with its node
RECORDS = weakref.WeakKeyDictionary()
# root node -> [Visit]: the backward sweeps run inside a `recording` block
SWEEPS = weakref.WeakKeyDictionary()


class OpRecord:
    """One op's call: its input arrays, its parameters, the innermost module it ran in, and the
    output it computed."""

    def __init__(self, arrays, params, module, value):
        self.arrays, self.params, self.module, self.value = arrays, params, module, value


class Recorder(SweepListener):
    """The Watcher of `recording`: each op applied, under the name of the innermost module call
    of `names` running (a module not among them takes its caller's); each sweep, into SWEEPS."""

    def __init__(self, names):
        super().__init__()
        self.sweeps = SWEEPS
        self.names = names           # id(module) -> its dotted name
        self.calls = []              # (module, name) of the module calls running, innermost last

    def called(self, module, args, kwargs):
        if id(module) in self.names:
            self.calls.append((module, self.names[id(module)]))

    def returned(self, module, output):
        # the entries above this call's are those of calls that raised, and never returned
        for depth in range(len(self.calls) - 1, -1, -1):
            if self.calls[depth][0] is module:
                del self.calls[depth:]
                return

    def applied(self, node, arrays, params, out):
        if out._node is node:                    # the op is in the graph
            module = self.calls[-1][1] if self.calls else ""
            RECORDS[node] = OpRecord(arrays, params, module, out.data)


@contextlib.contextmanager
def recording(*modules):
    """Inside the block, note what `graph_view` shows: op outputs' values, each op's inputs (for
    `check=True`), which call of `modules` (and of their sub-modules, named as in
    `named_modules`: `blocks.0.attn`) each op ran in, and each backward's sweep.

        with viz.recording(model):
            logits = model(ids)                                   # (B, T, V)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
            loss.backward()
        viz.graph_view(loss, check=True).save("loss.html")
    """
    names = {}
    for root in modules:
        for name, module in root.named_modules():
            names.setdefault(id(module), name)
    with watching(Recorder(names)):
        yield
