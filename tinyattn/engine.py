"""Chapter 1. The engine: the graph an op leaves behind, the backward sweep over it, and the Tensor.

Read this file top to bottom:

  1. `Function`  one application of an op: a node of the graph. It keeps what its backward rule
                 needs (`saved`) and the nodes of its inputs (`parents`).
  2. `Leaf`      the node of a tensor the user made with requires_grad=True: gradients end there.
  3. `unbroadcast` and the backward sweep: gradients flow from the output back to the leaves.
  4. `Tensor`    a NumPy array (`.data`) with a node (`_node`): a `Function` if an op made it, a
                 `Leaf` if the user asked for its gradient, None for a constant. Its operators
                 (`a + b`, `a @ b`, ...) call the op classes in `tinyattn/ops/`.
  5. `switches`  what `no_grad()`, `retain_grads()` and the doors of arguments.py switch for a
                 `with` block: recording the graph, keeping every .grad, checking arguments.
  6. `Watcher`   the one way for a tool to watch the engine (the views, the drawing): what ops
                 ran, what gradients the sweep sent, which layers were called.

The one import cycle: the ops subclass `Function` (defined here) and `Tensor`'s operators call the
ops. So this file imports `tinyattn.ops` at its very end, once `Function` and `Tensor` exist; every
op's class is looked up when the operator runs, never earlier. Kept apart, for a later reading:
how a Tensor behaves as a Python object and next to NumPy (len, np.asarray, comparisons, repr,
pickling: `tensor_protocols.py`), and how values become the arrays ops compute on (`arrays.py`,
with what NumPy 1.26 needs in `numpy_1_26.py`).

The sweep visits nodes newest first. A node is always created after its inputs, so by the time it
is visited every op that used its output has already sent it a gradient, and those gradients have
been summed. That order needs no recursion, so a chain of 20,000 ops backpropagates as easily as a
chain of three. Two rules are applied in the sweep, once, so that no op has to repeat them:
  * `unbroadcast`: an input that NumPy broadcast gets its gradient summed back to its own shape;
  * a leaf's gradient accumulates (`+=`) across backward calls until it is cleared.
"""
import contextlib
import heapq
import itertools
import re
import warnings
import weakref

import numpy as np

from tinyattn.arrays import data_of, named, numeric_array, operand_arrays, output_array
from tinyattn.tensor_protocols import ArrayProtocols

_node_counter = itertools.count()


# ------------------------------------------------------------------------------------------------
# 1. Function: one op applied to its inputs

class Function:
    """A node of the graph: one application of an op.

    An op subclasses Function and writes two methods:

      forward(*arrays, **params) -> array
          computes the output with NumPy, and puts in `self.saved` (a tuple) everything its
          backward needs: arrays, and small facts such as an input's shape or the summed axes.
      backward(grad) -> tuple
          `grad` is dL/d(out), shaped like the output; returns a tuple with dL/d(input) for each
          input, `(grad_a, grad_b)`, and `(grad_a,)` for an op of one input. For an input that is
          a constant (`self.needs_grad(i)` is False) it may return None and skip the work; None
          for any input means that no gradient flows to it.

    An op may also have a `check(*arrays, **params)`, which raises a clear error on bad input before
    forward runs, so that forward and backward hold only the math (tinyattn's ops name theirs in
    one line, `check = staticmethod(checks.matmul_operands)`, from ops/checks.py). It runs when a
    user applies the op, not when a function or layer of tinyattn does (`switches.checking`):
    their own doors have checked what they pass on.

    Backward rules are written as if nothing broadcast: the sweep sums each gradient back to its
    input's shape. After backward the sweep drops `saved`, which frees the arrays in it. An op
    that saves only small facts (`saves_arrays = False`: reshape, sum, a basic index such as `[0]`)
    keeps them, so it can take part in another backward pass, as in PyTorch.
    """

    saved = ()           # what forward kept for backward; None once a backward released it
    saves_arrays = True  # False for an op whose `saved` holds only shapes, axes and such
    check = None         # an op may have a check(*arrays, **params): it raises on bad input
    output = None        # the output tensor, only when it retains its gradient

    def __init_subclass__(cls):
        # The op's name in messages and drawings: LogSoftmax -> "log_softmax", RMSNorm -> "rms_norm"
        cls.name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_",
                          cls.__name__).lower()

    @classmethod
    def apply(cls, *inputs, **params):
        """Run the op on `inputs` (tensors, numbers or arrays); if any of them requires grad, the
        output gets this node. NumPy's complaints (shapes that do not broadcast, an index out of
        range) come back as tinyattn errors naming the op."""
        node = cls()
        arrays = operand_arrays(inputs, cls.name)   # a tensor's data; a number or array as is
        parents = [x._node if isinstance(x, Tensor) else None for x in inputs]   # None: constant
        try:
            if cls.check is not None and switches.checking:
                node.check(*arrays, **params)
            data = node.forward(*arrays, **params)
        except (IndexError, ValueError, TypeError) as error:   # bad input: NumPy's complaint,
            raise named(error, cls.name) from None      # said once, by the op that received it
        data = output_array(data, arrays)      # a 0-d result as an array, of the inputs' dtype
        out = Tensor.__new__(Tensor)
        out.data, out.grad, out.name, out._node = data, None, None, None
        if switches.grad_enabled and any(parents):   # some input requires grad (has a node)
            node.parents = parents
            node.shape = data.shape
            node.order = next(_node_counter)
            out._node = node
            if switches.retain_grads:
                node.output = out
        if switches.watchers:                         # none, unless a tool watches (part 6)
            for watcher in switches.watchers:
                watcher.applied(node, arrays, params, out)
        return out

    def needs_grad(self, i):
        """Whether input i wants a gradient (False for a constant)."""
        return self.parents[i] is not None


# ------------------------------------------------------------------------------------------------
# 2. Leaf: where gradients end

class Leaf:
    """The node of a tensor the user created with requires_grad=True: gradients end here.

    It refers to its tensor weakly: a tensor nobody holds any more needs no gradient.
    """

    name = "leaf"
    parents = ()

    def __init__(self, tensor):
        self.tensor = weakref.ref(tensor)
        self.shape = tensor.shape
        self.order = next(_node_counter)


# ------------------------------------------------------------------------------------------------
# 3. The backward sweep

def unbroadcast(grad, shape, op="backward"):
    """Sum `grad` over the axes that broadcasting added or stretched, so that it has `shape`.

    If `a` of shape (3, 1) was broadcast against (2, 3, 4), each element of `a` was used 2 * 4
    times, and its gradient is the sum of those 8 uses: sum over the added axis 0 and the stretched
    axis 2. (README, "Why un-broadcasting sums".)
    """
    return grad.sum(axis=broadcast_axes(grad.shape, shape, op)).reshape(shape)


def broadcast_axes(grad_shape, shape, op="backward"):
    """The axes of a gradient of `grad_shape` that broadcasting added (the leading ones) or
    stretched from 1 to reach it from `shape`: those `unbroadcast` sums over."""
    added = len(grad_shape) - len(shape)
    if added < 0 or any(g != n and n != 1 for g, n in zip(grad_shape[added:], shape)):
        raise RuntimeError(f"{op}: backward returned a gradient of shape {grad_shape} for an "
                           f"input of shape {shape}, which is not that shape broadcast")
    stretched = tuple(added + i for i, n in enumerate(shape)
                      if n == 1 and grad_shape[added + i] != 1)
    return tuple(range(added)) + stretched


def backward_sweep(root, seed, retain_graph=False):
    """Send gradients from node `root` (whose output gets `seed`) back to every leaf."""
    pending = {root: seed}               # node -> dL/d(its output), summed over its users so far
    queue = [(-root.order, root)]        # a heap: the newest node comes out first
    watchers = switches.watchers         # none, unless a tool watches (part 6)
    while queue:
        node = heapq.heappop(queue)[1]
        grad = pending.pop(node)
        if watchers:
            for watcher in watchers:
                watcher.reached(node, grad)
        if type(node) is Leaf:
            leaf = node.tensor()
            if leaf is not None:
                _accumulate(leaf, grad)
            continue
        if node.saved is None:
            raise RuntimeError(f"backward: the {node.name} node's saved arrays were released by an "
                               "earlier backward; pass retain_graph=True to backward twice")
        if node.output is not None:
            _accumulate(node.output, grad)        # a retained gradient adds up, as a leaf's
        grads = node.backward(grad)
        if type(grads) is not tuple or len(grads) != len(node.parents):
            raise_bad_backward(node, grads)
        if watchers:
            for watcher in watchers:
                watcher.sent(node, grads)
        for parent, parent_grad in zip(node.parents, grads):
            if parent is None or parent_grad is None:      # a constant, or no gradient for it
                continue
            if parent_grad.shape != parent.shape:
                parent_grad = unbroadcast(parent_grad, parent.shape, node.name)
            summed = pending.get(parent)
            if summed is None:                   # the first gradient to reach this parent
                pending[parent] = parent_grad
                heapq.heappush(queue, (-parent.order, parent))
            else:
                pending[parent] = summed + parent_grad
        if node.saved and node.saves_arrays and not retain_graph:
            node.saved = None


def raise_bad_backward(node, grads):
    """The error for a backward that did not return one gradient per input, as a tuple."""
    got = (f"a tuple of {len(grads)}" if type(grads) is tuple else
           f"an array of shape {grads.shape}" if isinstance(grads, np.ndarray) else
           f"a {type(grads).__name__}")
    raise TypeError(f"{node.name}: backward must return a tuple with one gradient (an array, or "
                    f"None) per input, {len(node.parents)} here, as in `return (grad_a, grad_b)` "
                    f"or `return (grad_a,)`; it returned {got}")


def _accumulate(tensor, grad):
    """Add `grad` to `tensor.grad` (a leaf's, or a retained one's), which is always an array the
    tensor owns, of the tensor's dtype."""
    if tensor.grad is None:
        tensor.grad = np.array(grad, dtype=tensor.data.dtype)
    else:
        tensor.grad += grad


# ------------------------------------------------------------------------------------------------
# 4. The Tensor

class Tensor(ArrayProtocols):
    """An n-dimensional array with reverse-mode automatic differentiation.

    `.data` is the NumPy array itself. Ops read it when they run and some save it for backward
    (`a * b` keeps `a` and `b`), so changing it in place between a forward pass and its backward,
    as in `b = a * a; a.data[0] = 10; b.backward(...)`, gives a gradient computed from the new
    numbers, silently. (PyTorch counts in-place changes to catch this; tinyattn does not.) Change
    `.data` only between steps, as the optimizers do.
    """

    __slots__ = ("data", "grad", "_node", "name", "__weakref__")
    # NumPy would otherwise turn `ndarray * tensor` into an ndarray and lose the graph; with this
    # it returns NotImplemented and Python calls `Tensor.__rmul__` instead.
    __array_ufunc__ = None

    def __init__(self, data, requires_grad=False):
        self.data = numeric_array(data_of(data), "tensor")
        self.grad = None
        self._node = None
        self.name = None
        self.requires_grad = requires_grad

    @property
    def requires_grad(self):
        return self._node is not None

    @requires_grad.setter
    def requires_grad(self, requires_grad):
        if not self.is_leaf:
            raise ValueError("requires_grad: can only be changed on a leaf; use detach() to get "
                             "a tensor cut from the graph")
        if requires_grad and self.data.dtype.kind != "f":
            raise TypeError(f"tensor: only floating-point tensors can require grad, got "
                            f"{self.data.dtype}")
        self._node = Leaf(self) if requires_grad else None

    @property
    def is_leaf(self):
        """True for tensors not made by an op: constants, and the tensors gradients are for."""
        return self._node is None or isinstance(self._node, Leaf)

    def backward(self, grad=None, retain_graph=False):
        """Compute d(self)/d(leaf), weighted by `grad`, and add it to every leaf's `.grad`.

        `grad` is dL/d(self), the seed of the sweep; it may be omitted only when self has one
        element (then it is 1). Afterwards the arrays saved for backward are released, unless
        `retain_graph=True`; the graph's structure stays, so it can still be drawn.
        """
        if not self.requires_grad:
            raise ValueError(f"backward: this tensor of shape {self.shape} does not require grad "
                             "(no input of the ops that made it requires grad)")
        if grad is None and self.size != 1:
            raise ValueError(f"backward: a seed gradient is needed for a tensor of shape "
                             f"{self.shape}; only one-element tensors get an implicit 1")
        seed = np.ones_like(self.data) if grad is None else \
            numeric_array(data_of(grad), "backward").astype(self.dtype)   # a copy: the sweep adds
        if seed.shape != self.shape:
            raise ValueError(f"backward: the seed gradient has shape {seed.shape} "
                             f"but the tensor has shape {self.shape}")
        backward_sweep(self._node, seed, retain_graph)

    def detach(self):
        """A constant sharing this tensor's data, cut from the graph."""
        return Tensor(self.data)

    def retain_grad(self):
        """Keep `.grad` on this (non-leaf) tensor after backward, as PyTorch's `retain_grad`."""
        if not self.is_leaf:
            self._node.output = self

    def zero_grad(self):
        self.grad = None

    # ---------------------------------------------------------------- arithmetic: the ops
    # `a + b` calls a.__add__(b); when `a` is a number or an array, Python calls b.__radd__(a).
    def __add__(self, other):       return ops.Add.apply(self, other)
    def __radd__(self, other):      return ops.Add.apply(other, self)
    def __sub__(self, other):       return ops.Sub.apply(self, other)
    def __rsub__(self, other):      return ops.Sub.apply(other, self)
    def __mul__(self, other):       return ops.Mul.apply(self, other)
    def __rmul__(self, other):      return ops.Mul.apply(other, self)
    def __truediv__(self, other):   return ops.Div.apply(self, other)
    def __rtruediv__(self, other):  return ops.Div.apply(other, self)
    def __pow__(self, other):       return ops.Pow.apply(self, other)
    def __rpow__(self, other):      return ops.Pow.apply(other, self)
    def __matmul__(self, other):    return ops.Matmul.apply(self, other)
    def __rmatmul__(self, other):   return ops.Matmul.apply(other, self)
    def __neg__(self):              return ops.Neg.apply(self)
    def exp(self):                  return ops.Exp.apply(self)
    def log(self):                  return ops.Log.apply(self)
    def sqrt(self):                 return ops.Sqrt.apply(self)
    def tanh(self):                 return ops.Tanh.apply(self)
    def relu(self):                 return ops.Relu.apply(self)

    def sum(self, axis=None, keepdims=False):
        return ops.Sum.apply(self, axis=axis, keepdims=keepdims)

    def mean(self, axis=None, keepdims=False):
        return ops.Mean.apply(self, axis=axis, keepdims=keepdims)

    def max(self, axis=None, keepdims=False):
        return ops.Max.apply(self, axis=axis, keepdims=keepdims)

    # ---------------------------------------------------------------- shapes and indexing
    def reshape(self, *shape):
        """A tensor of the given shape holding the same elements; one size may be -1 (inferred)."""
        return ops.Reshape.apply(self, shape=ops.unpacked(shape))

    def transpose(self, *axes):
        """The axes permuted (out.shape[i] = self.shape[axes[i]]); no axes: all axes reversed."""
        axes = ops.unpacked(axes) or tuple(reversed(range(self.ndim)))
        return ops.Transpose.apply(self, axes=axes)

    def swapaxes(self, axis1, axis2):
        return ops.Transpose.apply(self, axes=ops.swapped_axes(self.ndim, axis1, axis2, "swapaxes"))

    @property
    def T(self):
        """All axes reversed, as NumPy's `.T`. For a batch of matrices that is rarely what is meant
        (`q @ k.T` on (B, L, E) tensors): it warns, as PyTorch does, and points at `.mT`."""
        if self.ndim > 2:
            warnings.warn(f"T: reversing all {self.ndim} axes of a tensor of shape {self.shape}; "
                          "to transpose a batch of matrices (swap the last two axes), use .mT",
                          stacklevel=2)
        return self.transpose()

    @property
    def mT(self):
        """The last two axes swapped: a batch of transposed matrices."""
        if self.ndim < 2:
            raise ValueError(f"mT: needs at least 2 dimensions, got a tensor of shape {self.shape}")
        return self.swapaxes(-2, -1)

    def __getitem__(self, index):
        return ops.Index.apply(self, index=ops.as_index(index))

    # ---------------------------------------------------------------- the array's attributes
    shape = property(lambda self: self.data.shape)
    ndim = property(lambda self: self.data.ndim)
    dtype = property(lambda self: self.data.dtype)
    size = property(lambda self: self.data.size)


def tensor(data, requires_grad=False, dtype=None):
    """A new tensor holding a copy of `data` (a list, scalar, array or tensor), like `np.array`."""
    data = numeric_array(data_of(data), "tensor", dtype)
    return Tensor(data.copy(), requires_grad=requires_grad)


# ------------------------------------------------------------------------------------------------
# 5. The switches

class switches:
    """How ops behave, switched for the length of a `with` block by the functions below."""

    grad_enabled = True     # False under `no_grad()`: ops record no graph
    retain_grads = False    # True under `retain_grads()`: every op output keeps its .grad
    checking = True         # False inside a door (arguments.door): arguments were checked there
    watchers = ()           # the Watchers told what the engine does, inside `watching(...)`


@contextlib.contextmanager
def _switched(name, value):
    previous = getattr(switches, name)
    setattr(switches, name, value)
    try:
        yield
    finally:
        setattr(switches, name, previous)


def no_grad():
    """A context manager (or, as `@no_grad()`, a decorator) under which no graph is recorded: ops
    return constants."""
    return _switched("grad_enabled", False)


def retain_grads():
    """A context manager: every tensor an op creates inside it keeps `.grad` after backward.

    Normally only leaves keep their gradient (as in PyTorch). Inside this block each op output
    behaves as if `retain_grad()` had been called on it, which lets `tinyattn.viz.draw_graph` show
    the gradient norm of every op.
    """
    return _switched("retain_grads", True)


# ------------------------------------------------------------------------------------------------
# 6. Watching the engine

class Watcher:
    """What a tool that watches the engine is told, while `with watching(watcher):` lasts.

    The views and the drawing (tinyattn_tools) learn what they show this way, and only this way:
    a tool never replaces a method or an attribute of the engine's objects. A Watcher overrides
    the methods it needs; each is called after the event, and changes nothing by returning.

      applied(node, arrays, params, out)   an op ran: `node` is its Function (in the graph when
                                           `out._node is node`), `arrays` and `params` what its
                                           forward was given, `out` the tensor it returned
      reached(node, grad)                  the sweep hands `grad`, dL/d(node's output) summed over
                                           its users, to `node` (a Function or a Leaf)
      sent(node, grads)                    `node`'s backward returned `grads`, one per parent,
                                           before the sweep sums each back to its parent's shape
      called(module, args, kwargs)         a layer's forward is about to run (`Module.__call__`)
      returned(module, output)             ... and has returned `output`

    Watchers must not write into the arrays they are shown: they are the graph's own.
    """

    def applied(self, node, arrays, params, out):
        pass

    def reached(self, node, grad):
        pass

    def sent(self, node, grads):
        pass

    def called(self, module, args, kwargs):
        pass

    def returned(self, module, output):
        pass


@contextlib.contextmanager
def watching(watcher):
    """A `with` block during which `watcher` (a Watcher) is told what the engine does, after any
    watcher already watching."""
    previous = switches.watchers
    switches.watchers = previous + (watcher,)
    try:
        yield watcher
    finally:
        switches.watchers = previous


from tinyattn import ops  # noqa: E402  (the one cycle: see the top of this file)
