"""What a graph view shows that the graph alone does not keep, noted while the forward pass runs.

A node of the graph keeps what its backward needs, and nothing more: not its output's values,
not its inputs, not the module that ran it. Inside `with viz.recording(model):`

  * every op's output values are kept, to be shown on its node;
  * every op's input arrays and parameters (`axis=-1`, ...) are kept, so that the view can run
    the op's forward and backward again on its own and compare its backward with finite
    differences (`graph_view(..., check=True)`);
  * every op is tagged with the module call it ran in (`blocks.0.attn.q_proj`), so that a large
    graph can be folded module by module.

It does this by wrapping, for the length of the block, each op class's `forward` and each
module's forward methods; nothing of the engine changes, and everything is put back at the end.
"""
import contextlib
import weakref

import numpy as np

from tinyattn.engine import Function

# node -> OpRecord, for the nodes made inside a `recording` block; an entry goes with its node
RECORDS = weakref.WeakKeyDictionary()


class OpRecord:
    """One op's call: its input arrays, its parameters, the innermost module it ran in, and the
    output it computed."""

    def __init__(self, arrays, params, module):
        self.arrays, self.params, self.module = arrays, params, module
        self.value = None


@contextlib.contextmanager
def recording(*modules):
    """Inside the block, note what `graph_view` shows: op outputs' values, each op's inputs (for
    `check=True`), and which call of `modules` (and of their sub-modules, named as in
    `named_parameters`: `blocks.0.attn`) each op ran in.

        with viz.recording(model):
            logits = model(ids)                                   # (B, T, V)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        viz.graph_view(loss, check=True).save("loss.html")
    """
    module_stack = []           # the dotted names of the module calls running now, innermost last
    with contextlib.ExitStack() as stack:
        for op in op_classes():
            if "forward" in vars(op):
                stack.enter_context(_recording_forward(op, module_stack))
        for root in modules:
            for name, module in root.named_modules():
                for method in [m for m in dir(type(module)) if m.startswith("forward")]:
                    stack.enter_context(_entering(module, method, name, module_stack))
        yield


def op_classes():
    """Every subclass of Function (the ops, and any op a user wrote), however deep."""
    found, stack = [], [Function]
    while stack:
        for subclass in stack.pop().__subclasses__():
            found.append(subclass)
            stack.append(subclass)
    return found


@contextlib.contextmanager
def _recording_forward(op, module_stack):
    """Within the block, `op.forward` notes its arguments and the current module for its node."""
    forward = op.forward

    def recorded_forward(self, *arrays, **params):
        # an op whose forward calls its parent class's keeps the outermost call's arguments
        outermost = self not in RECORDS
        if outermost:
            RECORDS[self] = OpRecord(arrays, params, module_stack[-1] if module_stack else "")
        value = forward(self, *arrays, **params)
        if outermost:
            RECORDS[self].value = np.asarray(value)
        return value

    op.forward = recorded_forward
    try:
        yield
    finally:
        op.forward = forward


@contextlib.contextmanager
def _entering(module, method, name, module_stack):
    """Within the block, a call of `module.<method>` pushes the module's name while it runs.

    The wrapper is an instance attribute, found before the class's method, as `record_calls` of
    the drawing tool does; `forward_with_weights` is wrapped as well as `forward`, since a layer
    may call its sub-layer's directly (CausalTransformer calls each block's)."""
    bound, own = getattr(module, method), method in vars(module)

    def entered(*args, **kwargs):
        module_stack.append(name)
        try:
            return bound(*args, **kwargs)
        finally:
            module_stack.pop()

    setattr(module, method, entered)
    try:
        yield
    finally:
        if own:
            setattr(module, method, bound)
        else:
            delattr(module, method)
