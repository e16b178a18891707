"""Chapter 1 of the exercises, in the README's reading order: the ops' backward rules, the engine's
sweep, the tool that checks them, then attention built from them.

Each entry names the functions it blanks (its units), what to read first, its checks (checks.py:
rows of the checklist, and probes whose numbers are compared with what tinyattn's own code gives),
its hints, and the classic wrong versions that the checks must catch, written down as edits of
the solution (tests/test_exercises.py runs every one of them).
"""
import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import engine
from tinyattn.engine import Function
from tinyattn.ops.elementwise import Tanh
from tinyattn import gradient_check
from tinyattn.gradient_check import unit
from tinyattn.nn.multi_head_attention import MultiHeadAttention    # chapter 1's, which it blanks
from tinyattn_tools.exercises.checks import (float32, forward_rows, gradient_rows, leaves, raises,
                                             row_check, same)
from tinyattn_tools.exercises.exercise import Exercise, WrongVersion as Wrong


def upstream(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape)


# ------------------------------------------------------------------------------------------------
# The ops' backward rules

def divided_by_a_huge_b():
    """dL/db of a / b where b^2 overflows: as -grad * out / b it is an ordinary number."""
    a, b = ta.tensor([1e200, -3e200], requires_grad=True), ta.tensor([1e200, 2e200],
                                                                        requires_grad=True)
    (a / b).backward(np.array([1.0, 2.0]))
    return {"dL/db": b.grad}


MUL_DIV = Exercise(
    "mul_div", 1, "the backward of multiplication and division",
    "tinyattn.ops.elementwise", ("Mul.backward", "Div.backward"),
    read_first="tinyattn/engine.py, the docstring of Function (what backward gets and returns); "
               "the top of tinyattn/ops/elementwise.py, then Add and Sub, written for you",
    checks=(
        gradient_rows("mul", "mul broadcast", "mul broadcast both", "mul array", "rmul array",
                      "div", "div broadcast", "rdiv number", "div number"),
        float32(lambda a, b: a * b / (b * b + 1.0), (3, 4), (4,)),
        same("dL/db of a / b at b = 1e200, where b^2 overflows", divided_by_a_huge_b, 1e-12),
    ),
    hints=(
        "Re-read the docstrings of Mul and Div: each gives dL/da and dL/db; `grad` is dL/d(out). "
        "`self.saved` holds what forward kept: (a, b) for Mul, (b, out) for Div.",
        "backward returns a tuple with one gradient per input, in the order of the inputs: "
        "(dL/da, dL/db). You need not undo broadcasting: the sweep does it (engine.unbroadcast).",
        "For Div, d(a / b)/db = -a / b^2 = -out / b: write it with the saved output, so that "
        "nothing squares a large b.",
    ),
    wrong_versions=(
        Wrong("the gradients of a and b swapped in Mul",
              (("grad * b if self.needs_grad(0)", "grad * a if self.needs_grad(0)"),
               ("grad * a if self.needs_grad(1)", "grad * b if self.needs_grad(1)"))),
        Wrong("the minus sign of dL/db forgotten in Div",
              (("-grad * out / b if", "grad * out / b if"),)),
        Wrong("dL/da of Div multiplied by b instead of divided",
              (("grad / b if self.needs_grad(0)", "grad * b if self.needs_grad(0)"),)),
        Wrong("dL/db of Div through b^2, which overflows",
              (("-grad * out / b if", "-grad * (out * b) / (b * b) if"),)),
        Wrong("Mul's dL/da written into grad in place (`grad *= b`), which Add shares",
              (("        return (grad * b if self.needs_grad(0) else None,\n"
                "                grad * a if self.needs_grad(1) else None)",
                "        grad_b = grad * a\n        grad *= b\n        return grad, grad_b"),)),
    ),
)


EXP_LOG = Exercise(
    "exp_log", 1, "the backward of exp and log",
    "tinyattn.ops.elementwise", ("Exp.backward", "Log.backward"),
    read_first="the docstrings of Exp and Log in tinyattn/ops/elementwise.py, and Sqrt and Tanh "
               "below them (written for you): each saves the cheapest thing its backward needs",
    checks=(
        gradient_rows("exp", "log"),
        float32(lambda a: a.exp() + a.log(), (3, 4), domain="positive"),
    ),
    hints=(
        "Re-read the docstring of Exp: exp is its own derivative, so forward saved the output.",
        "The chain rule for one element: dL/da = dL/dout * dout/da, with dL/dout = grad. "
        "Return a tuple of one gradient: `(something,)`.",
        "d exp(a)/da = exp(a) = out; d log(a)/da = 1 / a, and Log saved a.",
    ),
    wrong_versions=(
        Wrong("Exp's chain rule forgotten: out, not grad * out", (("(grad * out,)", "(out,)"),)),
        Wrong("Log's chain rule forgotten: 1 / a, not grad / a", (("(grad / a,)", "(1 / a,)"),)),
        Wrong("exp applied again to the saved output",
              (("(grad * out,)", "(grad * np.exp(out),)"),)),
        Wrong("log's derivative as log(a)", (("(grad / a,)", "(grad * np.log(a),)"),)),
        Wrong("Exp's saved output multiplied by grad in place: the output tensor's own data",
              (("(grad * out,)", "(np.multiply(out, grad, out=out),)"),)),
    ),
)


SUM_MEAN = Exercise(
    "sum_mean", 1, "the backward of sum and mean over axes",
    "tinyattn.ops.reductions", ("Sum.backward", "Mean.backward", "restore_reduced_axes"),
    read_first="the top of tinyattn/ops/reductions.py; normalize_axes (what `axes` holds); "
               "NumPy's np.expand_dims and np.broadcast_to",
    checks=(
        gradient_rows("sum all", "sum axis", "sum axes keepdims", "sum negative axis", "mean all",
                      "mean axes", "mean keepdims"),
        float32(lambda a: a.sum(axis=(0, 2)) * a.mean(axis=(0, 2)), (2, 3, 4)),
    ),
    hints=(
        "Re-read the top of reductions.py: each input element gets the gradient of the output "
        "element it was summed into, with weight 1 for sum and 1/n for mean.",
        "With keepdims=False the summed axes are gone from grad. Put them back as axes of size 1 "
        "(np.expand_dims takes a tuple of axes), then np.broadcast_to the input's shape.",
        "For mean, n is the number of elements summed into one output: the product of the input's "
        "sizes along the reduced axes only.",
    ),
    wrong_versions=(
        Wrong("mean's gradient not divided by n", (("grad / count", "grad"),)),
        Wrong("n counted over every axis, not the reduced ones",
              (("math.prod(input_shape[i] for i in axes)", "math.prod(input_shape)"),)),
        Wrong("the summed axes never put back (keepdims ignored)",
              (("return grad if keepdims else np.expand_dims(grad, axes)", "return grad"),)),
        Wrong("the summed axes put back at the end, not where they were",
              (("np.expand_dims(grad, axes)", "grad.reshape(grad.shape + (1,) * len(axes))"),)),
    ),
)


def tied_maxima():
    """Rows with two and three tied maxima, and a maximum over everything tied three times."""
    a = ta.tensor([[1.0, 3.0, 3.0], [2.0, 2.0, 2.0], [0.0, 5.0, 1.0]], requires_grad=True)
    a.max(axis=1).backward(np.array([1.0, 2.0, 3.0]))
    b = ta.tensor([[4.0, 1.0], [4.0, 4.0]], requires_grad=True)
    b.max(axis=None, keepdims=True).backward(np.array([[6.0]]))
    return {"by row": a.grad, "over everything": b.grad}


MAX = Exercise(
    "max", 1, "the backward of max, with ties",
    "tinyattn.ops.reductions", ("Max.backward",),
    read_first="the docstring of Max in tinyattn/ops/reductions.py, Sum.backward above it, and "
               "restore_reduced_axes",
    checks=(
        gradient_rows("max all", "max axis", "max axes keepdims"),
        same("tied maxima share the gradient evenly", tied_maxima),
        float32(lambda a: a.max(axis=1) + a.max(), (2, 3, 4)),
    ),
    hints=(
        "Re-read Max's docstring: the gradient goes to the position of the maximum, and tied "
        "maxima share it evenly, so that the total passed back is still grad.",
        "Forward saved the input and the maximum with keepdims=True (`kept`), so `a == kept` "
        "broadcasts to a boolean array of the maxima.",
        "Count the ties per output element (sum the booleans over the reduced axes, keeping them) "
        "in grad's dtype: an integer count would make float32 gradients float64.",
    ),
    wrong_versions=(
        Wrong("every tied maximum gets the whole gradient",
              (("is_max * (grad / ties)", "is_max * grad"),)),
        Wrong("ties counted over the whole array, not per output element",
              (("is_max.sum(axis=axes, keepdims=True, dtype=grad.dtype)",
                "is_max.sum(dtype=grad.dtype)"),)),
        Wrong("ties counted as integers: float32 gradients become float64",
              (("keepdims=True, dtype=grad.dtype)", "keepdims=True)"),)),
    ),
)


RESHAPE_TRANSPOSE = Exercise(
    "reshape_transpose", 1, "the backward of reshape and transpose",
    "tinyattn.ops.shape", ("Reshape.backward", "Transpose.backward"),
    read_first="the top of tinyattn/ops/shape.py; NumPy's np.argsort",
    checks=(
        gradient_rows("reshape", "reshape tuple", "transpose", "transpose axes",
                      "transpose negative axes", "swapaxes", "T", "mT",
                      "transpose(), all axes reversed"),
        float32(lambda a: a.transpose(1, 2, 0).reshape(4, 6), (2, 3, 4)),
    ),
    hints=(
        "Re-read the top of shape.py: the backward moves the gradient back the same way the "
        "forward moved the elements.",
        "grad has the output's shape. Reshape saved the input's shape; Transpose saved the "
        "permutation, with out.shape[i] == a.shape[axes[i]].",
        "To undo a permutation, apply its inverse, which np.argsort gives. (1, 2, 0) is not its "
        "own inverse: try it.",
    ),
    wrong_versions=(
        Wrong("grad permuted again by the same axes, not back",
              (("grad.transpose(tuple(axes.index(i) for i in range(len(axes))))",
                "grad.transpose(axes)"),)),
        Wrong("grad's axes all reversed, whatever the permutation",
              (("grad.transpose(tuple(axes.index(i) for i in range(len(axes))))",
                "grad.transpose()"),)),
        Wrong("reshape's gradient left in the output's shape",
              (("(grad.reshape(input_shape),)", "(grad,)"),)),
    ),
)


INDEX = Exercise(
    "index", 1, "the backward of indexing, with repeated indices",
    "tinyattn.ops.shape", ("Index.backward",),
    read_first="the docstring of Index in tinyattn/ops/shape.py; NumPy's np.add.at, and why "
               "`x[index] += y` adds only once for a repeated index",
    checks=(
        gradient_rows("index int", "index slices", "index None ellipsis", "index array repeats",
                      "index arrays 2-d", "index tensor", "index mixed", "index boolean",
                      "Embedding"),
        float32(lambda a: a[[0, 2, 0]][:, 1:], (3, 4)),
    ),
    hints=(
        "Re-read Index's docstring: zeros of the input's shape, with grad *added* at the indexed "
        "positions.",
        "Forward saved the input's shape and the index. Start from zeros in grad's dtype.",
        "`grad_a[index] += grad` writes a repeated index once (NumPy buffers it); np.add.at adds "
        "every occurrence.",
    ),
    wrong_versions=(
        Wrong("`=` where gradients must add",
              (("np.add.at(grad_a, index, grad)", "grad_a[index] = grad"),)),
        Wrong("`+=` with a repeated index: NumPy adds it once",
              (("np.add.at(grad_a, index, grad)", "grad_a[index] += grad"),)),
        Wrong("ones at the picked positions, not grad",
              (("np.add.at(grad_a, index, grad)", "np.add.at(grad_a, index, 1)"),)),
        Wrong("zeros in float64 whatever grad's dtype",
              (("np.zeros(input_shape, dtype=grad.dtype)", "np.zeros(input_shape)"),)),
    ),
)


CONCATENATE_ROWS = ("concatenate", "concatenate axis -1", "concatenate one tensor", "stack",
                    "stack axis -1")
CONCATENATE = Exercise(
    "concatenate", 1, "concatenate: where the seams are, and the gradient split at them",
    "tinyattn.ops.shape", ("Concatenate.forward", "Concatenate.backward"),
    read_first="the docstring of Concatenate in tinyattn/ops/shape.py; NumPy's np.split (its "
               "indices are where to cut) and itertools.accumulate",
    checks=(
        forward_rows(*CONCATENATE_ROWS),
        gradient_rows(*CONCATENATE_ROWS),
        float32(lambda a, b, c: ta.concatenate([a, b, c], axis=1), (2, 3), (2, 1), (2, 2)),
    ),
    hints=(
        "Re-read Concatenate's docstring: input k gets the slice of grad where it went.",
        "Forward must save what backward needs to cut grad: the axis, and the positions along it "
        "where one input ends and the next begins.",
        "Those positions are the running sums of the inputs' sizes along the axis, all but the "
        "last input's; np.split(grad, positions, axis) then gives one piece per input (return "
        "them as a tuple).",
    ),
    wrong_versions=(
        Wrong("the seams at the sizes, not at their running sums",
              (("tuple(itertools.accumulate(a.shape[axis] for a in arrays[:-1]))",
                "tuple(a.shape[axis] for a in arrays[:-1])"),)),
        Wrong("one seam too many: the last input's size included",
              (("for a in arrays[:-1]))", "for a in arrays))"),)),
        Wrong("grad split into equal parts",
              (("np.split(grad, seams, axis=axis)", "np.split(grad, len(seams) + 1, axis=axis)"),)),
        Wrong("backward returns a list, not a tuple",
              (("return tuple(np.split(grad, seams, axis=axis))",
                "return np.split(grad, seams, axis=axis)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# The engine: un-broadcasting and the sweep

def unbroadcast_pairs():
    shapes = [((2, 3, 4), (3, 1)), ((2, 3, 4), (4,)), ((2, 3, 4), ()), ((2, 3, 4), (1, 1, 1)),
              ((2, 1, 4), (1, 1, 4)), ((5,), (1,)), ((3, 1, 2), (3, 1, 2)),
              ((3, 1, 4), (1, 1, 1)), ((4, 1, 5), (4, 1, 1)), ((2, 3, 5, 4), (5, 1))]
    random = np.random.default_rng(0)
    return {f"grad {grad_shape} to {shape}":
            engine.unbroadcast(random.standard_normal(grad_shape), shape)
            for grad_shape, shape in shapes}


UNBROADCAST = Exercise(
    "unbroadcast", 1, "unbroadcast: summing a gradient back to its input's shape",
    "tinyattn.engine", ("unbroadcast", "broadcast_axes"),
    read_first="README, \"Why un-broadcasting sums\"; the top of tinyattn/engine.py; NumPy's "
               "broadcasting rules (shapes are aligned at their last axes)",
    checks=(
        same("unbroadcast on 10 pairs of shapes", unbroadcast_pairs),
        gradient_rows("add broadcast row", "add broadcast both", "add scalar tensor",
                      "sub broadcast", "mul broadcast", "mul broadcast both", "div broadcast",
                      "pow broadcast", "matmul broadcast batch", "matmul shared left",
                      "where broadcast"),
        raises("a gradient that is not the shape broadcast is refused, naming the op and shapes",
               lambda: engine.unbroadcast(np.ones((3, 5)), (4,), "mul"), RuntimeError,
               "mul: ", "(3, 5)", "(4,)"),
        float32(lambda a, b: a * b, (2, 3, 4), (3, 1)),
    ),
    hints=(
        "Re-read the docstrings of unbroadcast and broadcast_axes: sum over the axes broadcasting "
        "added (in front) and the axes it stretched (size 1 in `shape`, larger in grad).",
        "Shapes line up at their last axes: grad has `grad.ndim - len(shape)` added axes in "
        "front, and axis i of `shape` is axis (added + i) of grad.",
        "One sum over all those axes at once, then a reshape to `shape` brings the size-1 axes "
        "back. Refuse (RuntimeError) a grad that is not `shape` broadcast, naming both shapes.",
    ),
    wrong_versions=(
        Wrong("only the added axes summed, not the stretched ones",
              (("return tuple(range(added)) + stretched", "return tuple(range(added))"),)),
        Wrong("the mean where broadcasting needs the sum",
              (("return grad.sum(axis=", "return grad.mean(axis="),)),
        Wrong("stretched axes counted from grad's front, not after the added axes",
              (("tuple(added + i for i, n in enumerate(shape)",
                "tuple(i for i, n in enumerate(shape)"),)),
        Wrong("the sum taken in float64 (dtype=float): float32 gradients become float64",
              (("grad.sum(axis=broadcast_axes(grad.shape, shape, op))",
                "grad.sum(axis=broadcast_axes(grad.shape, shape, op), dtype=float)"),)),
    ),
)


class Passing(Function):
    """out = a, counting the calls of its backward: a sweep visits each node once."""

    calls = 0

    def forward(self, a):
        return a.copy()

    def backward(self, grad):
        Passing.calls += 1
        return (grad,)


class ReturningAList(Function):
    """out = a, with a backward that breaks the rule: a list, not a tuple."""

    def forward(self, a):
        return a.copy()

    def backward(self, grad):
        return [grad]


class ReturningAWrongShape(Function):
    """out = a, with a backward that breaks the rule: a gradient that is not a's shape broadcast."""

    def forward(self, a):
        return a.copy()

    def backward(self, grad):
        return (grad[..., :1],)


class FirstOnly(Function):
    """out = a + b, sending no gradient (None) to b: b gets none, as a constant would."""

    def forward(self, a, b):
        return a + b

    def backward(self, grad):
        return grad, None


def no_gradient_and_no_holder():
    """An op may send None to an input that requires grad; a leaf that nobody holds any more
    (its tensor gone) gets nothing. Neither stops the sweep."""
    x, w = leaves((3,), (3,))
    (FirstOnly.apply(x, w) * 2.0).sum().backward()
    held_by_no_one, found = leaves((3,), seed=3)[0], {"dL/dx": x.grad, "w.grad": w.grad}
    y = (held_by_no_one * w).sum()
    del held_by_no_one                    # its Leaf's weak reference now leads nowhere
    y.backward()
    return {**found, "dL/dw": w.grad}


def used_twice():
    """y = x * x + exp(x) * x: three uses of x."""
    (x,) = leaves((3, 4))
    (x * x + x.exp() * x).backward(upstream((3, 4)))
    return {"dL/dx": x.grad}


def reused_through_several_paths():
    """(u + v) + u: Add hands one gradient array to both of its inputs, so u's first gradient is
    v's as well; a sweep that adds u's second one into it in place (`summed += parent_grad`)
    changes v's too."""
    u, v = leaves((3,), (3,))
    ((u + v) + u).backward(upstream((3,)))
    return {"dL/du": u.grad, "dL/dv": v.grad}


def leaf_gradients_of_their_own():
    """x + y hands one gradient array to x and y: a sweep that keeps it as both x.grad and y.grad
    makes the next `x.grad += ...` (a second backward, an optimizer's clipping) change y.grad as
    well."""
    x, y = leaves((3,), (3,))
    (x + y).backward(upstream((3,)))
    shared = bool(np.shares_memory(x.grad, y.grad))
    (x + y).backward(upstream((3,)))
    return {"x.grad shares y.grad's memory": shared, "dL/dx": x.grad, "dL/dy": y.grad}


def each_node_once():
    """A ladder y_k+1 = pass(y_k) + y_k: 2^n paths from the top to x, but n + n nodes; visited
    newest first, each node's backward runs once."""
    x = ta.tensor(1.0, requires_grad=True)
    y = x
    for _ in range(10):
        y = Passing.apply(y) + y
    Passing.calls = 0
    y.backward()
    return {"backward calls of the 10 pass nodes": Passing.calls, "dy/dx": x.grad}


def a_retained_gradient():
    """y.retain_grad(): the sweep keeps y's gradient, as it keeps a leaf's."""
    x, w = leaves((3,), (3,))
    y = x * 3.0
    y.retain_grad()
    (y * w).sum().backward()
    return {"dL/dy": y.grad}


class Told(engine.Watcher):
    """What a watcher of the engine is told during a sweep (engine.py, part 6): each gradient
    handed to a node, and the gradients its backward sends on."""

    def __init__(self):
        self.told = {}

    def reached(self, node, grad):
        self.told[f"{len(self.told)}: the {node.name} node reached by"] = grad.copy()

    def sent(self, node, grads):
        self.told[f"{len(self.told)}: the {node.name} node sent"] = list(grads)


def watched_sweep():
    x, w = leaves((2, 3), (3,))
    with engine.watching(Told()) as watcher:
        (x * w).sum(axis=0).backward(upstream((3,)))
    return watcher.told


def retained_graph():
    (x,) = leaves((3,))
    y = (x * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    return {"dL/dx": x.grad}


def second_backward():
    (x,) = leaves((3,))
    y = (x * x).sum()
    y.backward()
    y.backward()


def saved_arrays_released():
    """After backward the sweep drops what a node saved (arrays), unless it saves no arrays."""
    (x,) = leaves((2, 3))
    product = x * x
    total = product.sum()
    total.backward()
    return {"mul's saved": repr(product._node.saved), "sum's saved": repr(total._node.saved)}


BACKWARD_SWEEP = Exercise(
    "backward_sweep", 1, "the backward sweep: every node once, newest first",
    "tinyattn.engine", ("backward_sweep",),
    read_first="the top of tinyattn/engine.py (why newest first), Function (parents, order, "
               "saved, saves_arrays, output), Leaf, _accumulate and raise_bad_backward; Python's "
               "heapq",
    checks=(
        gradient_rows("add broadcast both", "add number", "index array repeats", "F.cross_entropy",
                      "attention: sdpa, causal", "MultiHeadAttention, self",
                      "a broadcast input shaped like the output",
                      "a chain of 3,000 ops (deeper than Python's recursion limit)"),
        same("a tensor used three times gets the sum of its three gradients", used_twice),
        same("(u + v) + u: u reached by two paths, v's gradient left as it was",
             reused_through_several_paths),
        same("x + y: x.grad and y.grad are arrays of their own, and add up over two backward "
             "calls", leaf_gradients_of_their_own),
        same("no gradient for an input an op sends None, nor for a leaf nobody holds",
             no_gradient_and_no_holder),
        same("a ladder of 10 steps: each node's backward runs once, dy/dx = 2^10", each_node_once),
        same("retain_grad keeps an inner tensor's gradient", a_retained_gradient),
        same("backward(retain_graph=True), then backward again: twice the gradient",
             retained_graph),
        same("a watcher of the engine is told each gradient reached and sent", watched_sweep),
        raises("a second backward without retain_graph raises, saying so",
               second_backward, RuntimeError, "retain_graph"),
        same("after backward, a node's saved arrays are released (shapes and axes are kept)",
             saved_arrays_released),
        raises("a backward returning a list, not a tuple, is named",
               lambda: (ReturningAList.apply(leaves((2,))[0]) * leaves((2,))[0]).sum().backward(),
               TypeError, "returning_a_list: backward must return a tuple", "it returned a list"),
        raises("a backward returning a gradient of another shape is named",
               lambda: (ReturningAWrongShape.apply(leaves((2, 3))[0]) * 2.0).sum().backward(),
               RuntimeError, "returning_a_wrong_shape: backward returned a gradient of shape "
                             "(2, 1) for an input of shape (2, 3)"),
    ),
    hints=(
        "Re-read the top of engine.py: a node is visited only once every op that used its output "
        "has sent it a gradient, and visiting the newest node first guarantees that.",
        "`pending` maps a node to the gradient summed so far; the queue is a heap of "
        "(-node.order, node), so the newest node comes out first. A Leaf's gradient goes to "
        "_accumulate; an op's node with an `output` retains its gradient the same way.",
        "Call node.backward(grad) and check it with raise_bad_backward. For each parent: skip a "
        "None parent or gradient, unbroadcast to the parent's shape, add the gradient to "
        "pending, and push the parent only when its first gradient arrives.",
        "A node whose saved is None was released by an earlier backward: raise a RuntimeError "
        "that mentions retain_graph. After its backward, release saved (set it to None) unless "
        "retain_graph or the op saves no arrays.",
    ),
    equivalent_mutants=(
        ("backward_sweep: queue = [(-root.order, root)]        # a heap: the newest node comes "
         "out first :: -root.order -> root.order",
         "the root is alone in the heap when it comes out, and no node has it as a parent, so "
         "the sign of its own key orders nothing"),
    ),
    wrong_versions=(
        Wrong("the oldest node first: the heap ordered by order, not -order",
              (("queue = [(-root.order, root)]", "queue = [(root.order, root)]"),
               ("(-parent.order, parent)", "(parent.order, parent)"))),
        Wrong("`=` where gradients must add: a second gradient replaces the first",
              (("pending[parent] = summed + parent_grad", "pending[parent] = parent_grad"),)),
        Wrong("a broadcast input's gradient not summed back to its shape",
              (("parent_grad = unbroadcast(parent_grad, parent.shape, node.name)",
                "parent_grad = parent_grad"),)),
        Wrong("saved arrays released even when retain_graph is asked for",
              (("if node.saved and node.saves_arrays and not retain_graph:",
                "if node.saved and node.saves_arrays:"),)),
        Wrong("a second gradient added in place, into an array another node may hold",
              (("pending[parent] = summed + parent_grad", "summed += parent_grad"),)),
        Wrong("a leaf's gradient kept as the very array the sweep was handed",
              (("_accumulate(leaf, grad)",
                "leaf.grad = grad if leaf.grad is None else leaf.grad + grad"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# Matmul, softmax, layer norm

MATMUL = Exercise(
    "matmul", 1, "the backward of matmul, with batches that broadcast",
    "tinyattn.ops.matmul", ("Matmul.backward",),
    given=("as_matrices",),
    read_first="README, \"The matmul adjoint\"; the docstring of Matmul in tinyattn/ops/matmul.py "
               "(the 1-D and broadcast cases), and as_matrices (in your file, below)",
    checks=(
        gradient_rows("matmul", "matmul batched", "matmul shared weight", "matmul shared left",
                      "matmul broadcast batch", "matmul vector left", "matmul vector right",
                      "matmul vectors", "matmul batch and vector", "matmul vector and batch",
                      "rmatmul array", "matmul constant matrix", "matmul constant vector",
                      "matmul length-1 vector"),
        float32(lambda a, b, c: (a @ b) @ c, (2, 3, 4), (4, 5), (5,)),
    ),
    hints=(
        "Re-read Matmul's docstring: dL/da = grad @ b^T and dL/db = a^T @ grad, where ^T swaps "
        "the last two axes only.",
        "`.T` reverses every axis: on a batch (..., m, k) it is not the transpose of each matrix. "
        "swapaxes(-1, -2) is. The sweep sums the broadcast batch axes back for you.",
        "A 1-D operand: as_matrices makes it a one-row (a) or one-column (b) matrix, with grad "
        "given the axis the product dropped; take b's column out of its gradient again (a's "
        "row the sweep sums away).",
    ),
    wrong_versions=(
        Wrong("dL/da with its factors in the wrong order: b^T @ grad",
              (("grad @ b.swapaxes(-1, -2)", "b.swapaxes(-1, -2) @ grad"),)),
        Wrong("the transposes swapped in dL/db: a @ grad^T",
              (("a.swapaxes(-1, -2) @ grad", "a @ grad.swapaxes(-1, -2)"),)),
        Wrong("`.T` on a batch, which reverses every axis",
              (("a.swapaxes(-1, -2) @ grad", "a.T @ grad"),)),
        Wrong("b's transpose forgotten in dL/da",
              (("grad @ b.swapaxes(-1, -2)", "grad @ b"),)),
        Wrong("b's column dropped with squeeze(), which drops a length-1 vector's axis too",
              (("grad_b = grad_b[..., 0]", "grad_b = grad_b.squeeze()"),)),
    ),
)


SOFTMAX = Exercise(
    "softmax", 1, "the backward of softmax",
    "tinyattn.ops.softmax", ("Softmax.backward",),
    read_first="README, \"The softmax backward\"; the docstring of Softmax in "
               "tinyattn/ops/softmax.py",
    checks=(
        gradient_rows("softmax", "softmax axis 0", "softmax 3-d",
                      "attention: sdpa, fully masked row"),
        float32(lambda x: F.softmax(x, axis=1), (2, 3, 4)),
    ),
    hints=(
        "Re-read Softmax's docstring: dL/dx_i = out_i * (grad_i - sum_j grad_j * out_j).",
        "Forward saved its output and the axis. The sum runs along that axis, which need not be "
        "the last.",
        "Keep the summed axis (keepdims=True), so that the sum broadcasts against grad row by row.",
    ),
    wrong_versions=(
        Wrong("softmax's backward without its subtraction term",
              (("out * (grad - (grad * out).sum(axis=axis, keepdims=True))", "out * grad"),)),
        Wrong("the sum always over the last axis",
              (("(grad * out).sum(axis=axis, keepdims=True)",
                "(grad * out).sum(axis=-1, keepdims=True)"),)),
        Wrong("the Jacobian's diagonal only: out (1 - out) grad",
              (("out * (grad - (grad * out).sum(axis=axis, keepdims=True))",
                "out * (1 - out) * grad"),)),
        Wrong("the sum over the axis without keepdims",
              (("(grad * out).sum(axis=axis, keepdims=True)", "(grad * out).sum(axis=axis)"),)),
        Wrong("the subtraction done in place, in grad",
              (("return (out * (grad - (grad * out).sum(axis=axis, keepdims=True)),)",
                "grad -= (grad * out).sum(axis=axis, keepdims=True)\n"
                "        return (out * grad,)"),)),
    ),
)


LOG_SOFTMAX = Exercise(
    "log_softmax", 1, "the backward of log-softmax",
    "tinyattn.ops.softmax", ("LogSoftmax.backward",),
    read_first="the docstring of LogSoftmax in tinyattn/ops/softmax.py, and Softmax above it",
    checks=(
        gradient_rows("log_softmax", "log_softmax axis 0", "F.cross_entropy",
                      "F.cross_entropy (N, C, d), ignore_index"),
        float32(lambda x: F.log_softmax(x, axis=0), (3, 5)),
    ),
    hints=(
        "Re-read LogSoftmax's docstring: d out_j / d x_i = 1[i = j] - softmax_i.",
        "So dL/dx_i = grad_i - softmax_i * sum_j grad_j. Forward saved the output: softmax is "
        "exp of it.",
        "The sum of grad runs along the saved axis, kept as a size-1 axis so that it broadcasts.",
    ),
    wrong_versions=(
        Wrong("softmax's place taken by the log-probabilities",
              (("grad - np.exp(out) * grad.sum(", "grad - out * grad.sum("),)),
        Wrong("the softmax term without the sum of grad",
              (("np.exp(out) * grad.sum(axis=axis, keepdims=True)", "np.exp(out)"),)),
        Wrong("the sum always over the last axis",
              (("grad.sum(axis=axis, keepdims=True)", "grad.sum(axis=-1, keepdims=True)"),)),
        Wrong("only the diagonal of the Jacobian",
              (("grad - np.exp(out) * grad.sum(axis=axis, keepdims=True)",
                "grad * (1 - np.exp(out))"),)),
        Wrong("np used without importing it (tinyattn's module imports it, the file does not)",
              (("import numpy as np\n", ""),)),
    ),
)


LAYER_NORM = Exercise(
    "layer_norm", 1, "LayerNorm's fused backward",
    "tinyattn.ops.layer_norm", ("LayerNorm.backward",),
    read_first="the docstring of LayerNorm in tinyattn/ops/layer_norm.py, its derivation line "
               "by line",
    checks=(
        gradient_rows("layer_norm", "layer_norm, no weight or bias", "layer_norm, rows of one",
                      "LayerNorm", "LayerNorm over two axes"),
        gradient_rows("layer_norm, frozen weight (as add_lora leaves it)").named(
            "a frozen weight (it needs no gradient) still scales dL/dx: row 'layer_norm, frozen "
            "weight' of the checklist"),
        gradient_rows("layer_norm = composed", "layer_norm = composed, no weight or bias",
                      "layer_norm = composed, eps=0.1, no bias").named(
            "output and gradients vs the same formula in primitive ops: 3 rows"),
        float32(F.layer_norm, (2, 3, 5), (5,), (5,)),
    ),
    hints=(
        "Re-read LayerNorm's docstring: it gives dL/dbias, dL/dweight and dL/dx, with "
        "g = grad * weight = dL/dxhat.",
        "Forward saved xhat, 1 / sigma (one number per row) and the weight. Return three "
        "gradients: x, weight, bias (the sweep sums the last two over the rows).",
        "dL/dx = (1 / sigma) (g - mean(g) - xhat mean(g xhat)), both means over the last axis "
        "and kept as size-1 axes.",
    ),
    wrong_versions=(
        Wrong("the mean(g) term forgotten", (("(g - mean_g - ", "(g - "),)),
        Wrong("the xhat * mean(g * xhat) term forgotten",
              (("- xhat * mean_g_xhat)", ")"),)),
        Wrong("the weight left out of g", (("g = grad * weight  ", "g = grad  "),)),
        Wrong("dL/dweight as grad, the bias's rule",
              (("grad * xhat if self.needs_grad(1)", "grad if self.needs_grad(1)"),)),
        Wrong("a frozen weight (needs no gradient) left out of dL/dx",
              (("g = grad * weight  ", "g = grad * weight if self.needs_grad(1) else grad  "),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# The tool: central differences

def sine_loss(x, v):
    return lambda: float(np.sum(v * np.sin(x)))


def element_by_element():
    """L(x) = sum(v sin(x)): each element's central difference, eps = 1e-5."""
    random = np.random.default_rng(0)
    x, v = random.standard_normal((3, 4)), random.standard_normal((3, 4))
    return {"dL/dx": np.array([gradient_check.central_difference(sine_loss(x, v), x,
                                                                 unit(x.shape, where), 1e-5)
                               for where in np.ndindex(x.shape)])}


def along_a_direction():
    """Perturbing all of x along u estimates <u, dL/dx>."""
    random = np.random.default_rng(1)
    x, v, u = (random.standard_normal((4, 5)) for _ in range(3))
    return {"<u, dL/dx>": gradient_check.central_difference(sine_loss(x, v), x, u, 1e-5)}


def x_afterwards():
    random = np.random.default_rng(2)
    x, v = random.standard_normal((3, 4)), random.standard_normal((3, 4))
    gradient_check.central_difference(sine_loss(x, v), x, unit(x.shape, (1, 2)), 1e-5)
    gradient_check.central_difference(sine_loss(x, v), x, v, 1e-5)
    return {"x": x}


def x_after_the_loss_raised():
    x, calls = np.linspace(-1.0, 1.0, 6), []

    def loss():
        calls.append(1)
        if len(calls) == 2:
            raise ArithmeticError("the function under test failed")
        return float(np.sum(x ** 3))
    try:
        gradient_check.central_difference(loss, x, unit(x.shape, (3,)), 1e-5)
    except ArithmeticError:
        pass
    return {"x": x}


class SigmoidWithTanhsBackward(Tanh):
    """sigmoid's forward, with the backward of tanh that it inherits: gradcheck must catch it."""

    def forward(self, a):
        out = 1.0 / (1.0 + np.exp(-a))
        self.saved = (out,)
        return out


def estimates_on_rows():
    """gradcheck's central differences (compare_gradients) on three rows of the checklist."""
    found = {}
    for name in ("mul broadcast", "softmax 3-d", "attention: sdpa, causal"):
        fn, inputs, directions = row_check(name)
        comparisons = gradient_check.compare_gradients(fn, inputs, directions=directions)
        found[name] = [comparison.numerical for comparison in comparisons]
    return found


def a_wrong_backward_checked():
    try:
        ta.gradcheck(SigmoidWithTanhsBackward.apply, leaves((2, 3)))
    except ta.GradcheckError:
        return {"gradcheck": "raised GradcheckError"}
    return {"gradcheck": "passed it"}


CENTRAL_DIFFERENCE = Exercise(
    "central_difference", 1, "central differences, the core of gradcheck",
    "tinyattn.gradient_check", ("central_difference",),
    read_first="the top of tinyattn/gradient_check.py (the formula, and the random "
               "directions), then compare_gradients, which calls the function you write",
    checks=(
        same("dL/dx of sum(v sin(x)), element by element, eps = 1e-5", element_by_element, 1e-8),
        same("<u, dL/dx> along a random direction u", along_a_direction, 1e-8),
        same("x holds its own numbers again afterwards", x_afterwards, 0),
        same("x holds its own numbers again when the loss raises", x_after_the_loss_raised, 0),
        same("gradcheck's estimates with it: 3 rows of the checklist", estimates_on_rows, 1e-8),
        same("gradcheck with it catches a wrong backward", a_wrong_backward_checked),
    ),
    hints=(
        "Re-read the formula at the top of gradient_check.py: (L(x + eps d) - L(x - eps d)) / "
        "(2 eps), where the direction d is e_i for one element (or u for a random direction).",
        "Change x in place, x[...] = original + eps * direction, call loss(), then the same "
        "with - eps * direction: loss reads x itself. Keep a copy of the original numbers first "
        "(x.copy()).",
        "Put x back in a `finally:` block, so that it is restored even when the function under "
        "test raises.",
    ),
    wrong_versions=(
        Wrong("a forward difference, (L(x + p) - L(x)) / eps",
              (("x[...] = original - eps * direction", "x[...] = original"),
               ("/ (2 * eps)", "/ eps"))),
        Wrong("divided by eps, not 2 eps", (("/ (2 * eps)", "/ eps"),)),
        Wrong("x left perturbed, never restored",
              (("    finally:\n        x[...] = original\n",
                "    finally:\n        pass\n"),)),
        Wrong("x restored only when the loss returns",
              (("    finally:\n        x[...] = original\n",
                "    except ArithmeticError:\n        raise\n    x[...] = original\n"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# Functions and layers

CROSS_ENTROPY_CASES = [((5,), 3), ((4, 5), [1, 0, 4, 1]), ((2, 4, 3), [[1, -100, 3], [0, 2, 2]]),
                       ((2, 3, 2, 2), [[[0, 2], [1, 1]], [[2, -100], [0, 0]]])]


def cross_entropy_losses():
    random = np.random.default_rng(0)
    return {f"logits {shape}": F.cross_entropy(ta.tensor(random.standard_normal(shape)),
                                               np.array(targets))
            for shape, targets in CROSS_ENTROPY_CASES}


def large_logits():
    """Logits of size 1e4: e^logit overflows (to inf, or to 0 below -745), unless each row is
    shifted by its maximum first, as log_softmax does."""
    logits = ta.tensor(1e4 * np.random.default_rng(3).standard_normal((4, 5)), requires_grad=True)
    loss = F.cross_entropy(logits, np.array([1, 0, 4, 2]))
    loss.backward()
    return {"the loss": loss, "dL/dlogits": logits.grad}


def other_ignore_indices():
    """The targets equal to ignore_index are left out, whatever it is: -1, and 2 (a class)."""
    random = np.random.default_rng(4)
    return {f"ignore_index={ignore_index}":
            F.cross_entropy(ta.tensor(random.standard_normal((2, 4, 3))), np.array(targets),
                            ignore_index=ignore_index)
            for ignore_index, targets in ((-1, [[1, -1, 3], [0, 2, -1]]),
                                          (2, [[1, 2, 3], [0, 2, 2]]))}


CROSS_ENTROPY = Exercise(
    "cross_entropy", 1, "cross-entropy: classes on axis 1, ignored targets",
    "tinyattn.functional.basics", ("cross_entropy",),
    read_first="the docstring of cross_entropy in tinyattn/functional/basics.py and PyTorch's "
               "F.cross_entropy (the same shapes); log_softmax above it",
    checks=(
        same("the loss: logits (C,), (N, C), (N, C, d) and (N, C, d1, d2)", cross_entropy_losses),
        same("logits of size 1e4: the loss and dL/dlogits, finite", large_logits),
        same("ignore_index = -1 and = 2: those targets left out", other_ignore_indices),
        gradient_rows("F.cross_entropy", "F.cross_entropy (N, C, d), ignore_index"),
        float32(lambda logits: F.cross_entropy(logits, np.array([[1, 2], [0, 1]])), (2, 3, 2)),
    ),
    hints=(
        "Re-read the docstring: the mean over the targets that count of -log softmax(logits)"
        "[target], with the classes on axis 1 of the logits.",
        "Move the classes to the last axis (a transpose), then make the logits one row per "
        "target (C columns) and the targets one flat array.",
        "Keep only the rows whose target is not ignore_index; pick each row's log-probability "
        "with integer-array indexing [rows, targets[rows]], and take minus the mean.",
    ),
    equivalent_mutants=(
        ("cross_entropy: if logits.ndim > 2:                 # (N, C, d1, ...) -> (N, d1, ..., "
         "C): classes last :: logits.ndim > 2 -> logits.ndim >= 2",
         "for 2-D logits the transpose (0, *range(2, 2), 1) is (0, 1), which changes nothing"),
        ("cross_entropy: targets = targets.reshape(-1)                     # (rows,) :: 1 -> 2",
         "NumPy's reshape takes any negative size, -2 as well as -1, for 'the rest'"),
        ("cross_entropy: picked = log_softmax(logits, axis=-1)[rows, targets[rows]]    # "
         "(counted rows,) :: -1 -> 1", "the logits are (rows, C) by then: axis 1 is axis -1"),
    ),
    wrong_versions=(
        Wrong("the sum where the mean belongs",
              (("return -picked.mean()", "return -picked.sum()"),)),
        Wrong("the log-likelihood without its minus sign",
              (("return -picked.mean()", "return picked.mean()"),)),
        Wrong("log-softmax over the rows, not the classes",
              (("log_softmax(logits, axis=-1)", "log_softmax(logits, axis=0)"),)),
        Wrong("(N, C, d) logits reshaped without moving the classes last",
              (("logits = logits.transpose(0, *range(2, logits.ndim), 1)",
                "logits = logits.swapaxes(1, -1)"),)),
        Wrong("ignore_index hard-coded to -100",
              (("targets != ignore_index", "targets != -100"),)),
        Wrong("log-softmax written out without shifting by the maximum: e^1e4 overflows",
              (("log_softmax(logits, axis=-1)[rows, targets[rows]]",
                "(logits - logits.exp().sum(axis=-1, keepdims=True).log())"
                "[rows, targets[rows]]"),)),
    ),
)


QKV = ((2, 3, 4), (2, 5, 4), (2, 5, 6))          # query (B, L, E), key (B, S, E), value (B, S, Ev)
MASK = np.array([[True, False, True, True, False], [True, True, False, True, True],
                 [False, False, False, False, False]])          # query 2 sees no key
BIAS = np.linspace(-1.0, 1.0, 15).reshape(3, 5)                 # a float mask, in float64


def attention_outputs():
    """F.attention's output and weights: plain, a boolean mask with a fully masked row, causal, a
    float mask, unscaled, and batch axes that broadcast."""
    random = np.random.default_rng(0)
    q, k, v = (ta.tensor(random.standard_normal(shape)) for shape in QKV)
    cases = {"plain": {}, "a boolean mask, a query without keys": dict(attn_mask=MASK),
             "causal": dict(is_causal=True), "unscaled": dict(scale=1.0),
             "mask and causal": dict(attn_mask=MASK, is_causal=True),
             "a float mask": dict(attn_mask=BIAS)}
    found = {}
    for case, kwargs in cases.items():
        found[f"{case}: output"], found[f"{case}: weights"] = F.attention(q, k, v, **kwargs)
    q4, k4 = ta.tensor(q.data[:, None]), ta.tensor(random.standard_normal((1, 3, 5, 4)))
    found["batch axes that broadcast: output"] = F.attention(q4, k4, ta.tensor(v.data[:, None]))[0]
    return found


def attention_with_dropout():
    """dropout_p = 0.5 drops weights as F.dropout does, with the same draws under one seed."""
    random = np.random.default_rng(1)
    q, k, v = (ta.tensor(random.standard_normal(shape)) for shape in QKV)
    ta.manual_seed(0)
    out, weights = F.attention(q, k, v, dropout_p=0.5)
    return {"weights": weights, "output": out}


ATTENTION = Exercise(
    "attention", 1, "scaled dot-product attention: scores, masks, softmax, weighted sum",
    "tinyattn.functional.scaled_dot_product", ("attention_weights", "attention"),
    given=("scaled_dot_product_attention",),
    read_first="the top of tinyattn/functional/scaled_dot_product.py and the docstring of "
               "scaled_dot_product_attention (in your file, below); split_mask and causal_mask",
    checks=(
        same("outputs and weights: masks, causal, float mask, unscaled, broadcast",
             attention_outputs),
        same("dropout_p = 0.5: the weights F.dropout keeps, under the same seed",
             attention_with_dropout),
        gradient_rows("attention: sdpa", "attention: sdpa, output and weights",
                      "attention: sdpa, broadcast batch", "attention: sdpa, boolean mask",
                      "attention: sdpa, fully masked row", "attention: sdpa, learned float mask",
                      "attention: sdpa, causal and mask", "attention: sdpa, ALiBi bias, causal"),
        float32(lambda q, k, v: F.attention(q, k, v, attn_mask=MASK, is_causal=True)[0], *QKV),
        float32(lambda q, k, v: F.attention(q, k, v, attn_mask=BIAS)[0], *QKV).named(
            "float32, with a float64 NumPy float mask: float32 out"),
    ),
    hints=(
        "Re-read the top of scaled_dot_product.py: scores = query @ key^T * scale, weights = "
        "softmax(scores + mask) (attention_weights), output = weights @ value (attention); and "
        "scaled_dot_product_attention's docstring for what the masks mean.",
        "scale defaults to 1 / sqrt(E), a number: a Python float, or a NumPy scalar, which "
        "tinyattn's ops take as a Python number (plain NumPy 2 would make float32 times a float64 "
        "scalar float64), so either keeps float32 attention float32; a float64 array would not. "
        "`.mT` transposes a batch of keys.",
        "split_mask turns attn_mask into a boolean mask and an additive one; with is_causal, "
        "causal_mask(L, S, allowed) ands the causal mask in.",
        "Add the additive mask to the scores; hide the pairs the boolean mask forbids *before* "
        "the softmax, with -inf (ops.where), so that their weights come out exactly 0.",
    ),
    equivalent_mutants=(
        ("attention_weights: if dropout_p > 0.0: :: dropout_p > 0.0 -> dropout_p >= 0.0",
         "dropout with p = 0 returns the weights as they are"),
    ),
    wrong_versions=(
        Wrong("the mask applied after the softmax",
              (("    if allowed is not None:\n        scores = ops.where(allowed, scores, "
                "-math.inf)", "    if False:\n        pass"),
               ("    if dropout_p > 0.0:", "    if allowed is not None:\n        weights = "
                "ops.where(allowed, weights, 0.0)\n    if dropout_p > 0.0:"))),
        Wrong("the scale forgotten", (("(query @ key.mT) * scale", "(query @ key.mT)"),)),
        Wrong("scaled by 1 / E, not 1 / sqrt(E)",
              (("1.0 / math.sqrt(E) if scale is None", "1.0 / E if scale is None"),)),
        Wrong("a causal mask off by one: the diagonal hidden",
              (("allowed = causal_mask(L, S, allowed)",
                "allowed = causal_mask(L, S, allowed, offset=-1)"),)),
        Wrong("softmax over the queries, not the keys",
              (("softmax(scores, axis=-1)", "softmax(scores, axis=-2)"),)),
        Wrong("the mask added as a float64 array of 0 and -inf: float32 scores become float64",
              (("scores = ops.where(allowed, scores, -math.inf)",
                "scores = scores + ops.where(allowed, 0.0, -math.inf)"),)),
    ),
)


def multi_head_outputs():
    """Outputs and weights: self, cross, key != value, causal with padding, and causal with
    functions on the hook points of the queries, keys and values (chapter 4's hooks replace them
    there)."""
    ta.manual_seed(0)
    layer = MultiHeadAttention(12, 3)
    random = np.random.default_rng(0)
    x, memory, values = (ta.tensor(random.standard_normal(shape)) for shape in
                         ((2, 4, 12), (2, 6, 12), (2, 6, 12)))
    padding = np.array([True, True, True, False])[None, None, None, :]
    cases = {"self": ((x,), {}), "cross": ((x, memory), {}),
             "cross, key != value": ((x, memory, values), {}),
             "causal with padding": ((x,), dict(attn_mask=padding, is_causal=True))}
    found = {}
    for case, (inputs, kwargs) in cases.items():
        found[f"{case}: output"], found[f"{case}: weights"] = layer(*inputs, **kwargs)
    with layer.hooks({"q": lambda q: q * 2.0, "k": lambda k: k * 3.0, "v": lambda v: -v}):
        found["causal, q, k and v replaced at their hook points: output"] = layer(
            x, is_causal=True)[0]
    return found


def multi_head_in_eval():
    """A layer with dropout, in eval mode: no weight is dropped."""
    ta.manual_seed(0)
    layer = MultiHeadAttention(8, 2, dropout=0.5)
    layer.eval()
    out, weights = layer(ta.tensor(np.random.default_rng(2).standard_normal((2, 3, 8))))
    return {"output": out, "weights": weights}


def multi_head_float32(x):
    ta.manual_seed(0)
    layer = MultiHeadAttention(8, 2, dtype=x.dtype)
    return layer(x, is_causal=True)[0]


MULTI_HEAD = Exercise(
    "multi_head", 1, "multi-head attention: project, split into heads, attend, merge, project",
    "tinyattn.nn.multi_head_attention", ("MultiHeadAttention.forward",),
    read_first="the top of tinyattn/nn/multi_head_attention.py (the five steps and their "
               "shapes) and MultiHeadAttention's docstring; Module.hook in "
               "tinyattn/nn/module.py; attention_weights",
    checks=(
        same("outputs and weights: self, cross, causal with padding, hooked q, k and v",
             multi_head_outputs),
        same("a layer with dropout, in eval mode: nothing dropped", multi_head_in_eval),
        gradient_rows("MultiHeadAttention, self", "MultiHeadAttention, cross, key != value",
                      "MultiHeadAttention, causal and padding"),
        float32(multi_head_float32, (2, 3, 8)),
    ),
    hints=(
        "Re-read the five steps at the top of the file and their shapes: (B, T, E) -> "
        "(B, H, T, D) -> attention -> (B, L, E).",
        "Split: reshape (B, T, E) to (B, T, H, D), so head h owns features h*D ... (h+1)*D - 1, "
        "then transpose to (B, H, T, D): the head axis becomes a batch axis of attention.",
        "Merge is the split undone: transpose back to (B, L, H, D) before reshaping to (B, L, E).",
        "Name the activations with self.hook(name, x) (q, k, v, weights, heads, out): it returns "
        "x, unless a function is attached (chapter 4's hooks read and replace activations there), "
        "and the rest of the forward uses what it returns.",
    ),
    wrong_versions=(
        Wrong("heads split by a reshape alone, without the transpose",
              (('self.hook("q", q.reshape(B, L, H, D).transpose(0, 2, 1, 3))',
                'self.hook("q", q.reshape(B, H, L, D))'),)),
        Wrong("heads merged by a reshape alone, without transposing back",
              (("heads.transpose(0, 2, 1, 3).reshape(B, L, E)", "heads.reshape(B, L, E)"),)),
        Wrong("the values projected by the key projection",
              (("v = self.v_proj(value)", "v = self.k_proj(value)"),)),
        Wrong("the queries not passed through their hook point: a function there never sees them",
              (('q = self.hook("q", q.reshape(B, L, H, D).transpose(0, 2, 1, 3))',
                'q = q.reshape(B, L, H, D).transpose(0, 2, 1, 3)'),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# An AdamW step

SETTINGS = dict(lr=0.1, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.2)


def optimizer_steps(optimizer_class, dtype=np.float64):
    """({name: value} of the parameters after 4 steps of the optimizer, the optimizer); the
    second parameter has no gradient at step 2."""
    random = np.random.default_rng(0)
    start = [random.standard_normal((3, 4)), random.standard_normal((5,))]
    grads = [[random.standard_normal(p.shape) for p in start] for _ in range(4)]
    grads[1][1] = None
    params = [ta.tensor(p.astype(dtype), requires_grad=True) for p in start]
    optimizer = optimizer_class(params, **SETTINGS)
    for step in grads:
        for p, g in zip(params, step):
            p.grad = None if g is None else g.astype(dtype)
        optimizer.step()
    return {**{f"parameter {i}": p.data for i, p in enumerate(params)},
            "the parameters' dtypes": [p.dtype for p in params]}, optimizer


def adamw_in_float32():
    found, optimizer = optimizer_steps(ta.optim.AdamW, np.float32)
    return {**found, "the dtypes of the moments m and v": [
        np.asarray(state[i]).dtype for state in (optimizer.m, optimizer.v) for i in range(2)]}


ADAMW = Exercise(
    "adamw", 1, "an AdamW step: moments, bias correction, decoupled weight decay",
    "tinyattn.optim", ("Adam.step", "AdamW.decay"),
    changes=(("AdamW.decay", "p"),),          # the decay of the parameter p is its point
    read_first="the docstrings of Adam and AdamW in tinyattn/optim.py, Optimizer.gradient, and "
               "Algorithm 2 of Loshchilov & Hutter, \"Decoupled Weight Decay Regularization\"",
    checks=(
        same("AdamW, 4 steps of 2 parameters (one without a gradient once)",
             lambda: optimizer_steps(ta.optim.AdamW)[0]),
        same("Adam with L2 weight decay, the same steps",
             lambda: optimizer_steps(ta.optim.Adam)[0]),
        same("float32 parameters stay float32, and so do their moments m and v (the optimizer's "
             "memory)", adamw_in_float32, 1e-5),
    ),
    hints=(
        "Re-read Adam's docstring: m and v are moving averages of g and g^2; t counts this "
        "parameter's own steps; p moves by lr * m_hat / (sqrt(v_hat) + eps).",
        "A parameter without a gradient takes no step. Make m, v (zeros of its shape and dtype) "
        "and its step count at its first step; self.gradient(p) is the g to follow (Adam's "
        "includes weight_decay * p).",
        "Bias correction: m_hat = m / (1 - beta1^t), v_hat = v / (1 - beta2^t). Keep m and v in "
        "self.m[i] and self.v[i], move p.data in place, with Python floats, so that float32 stays "
        "float32.",
        "AdamW: Adam's step calls self.decay(p) just before it moves p; AdamW's decay shrinks "
        "p by (1 - lr * weight_decay), and its gradient is the plain one.",
    ),
    wrong_versions=(
        Wrong("no bias correction",
              (("m_hat = self.m[i] / (1.0 - self.beta1 ** t)", "m_hat = self.m[i]"),
               ("v_hat = self.v[i] / (1.0 - self.beta2 ** t)", "v_hat = self.v[i]"))),
        Wrong("AdamW's decay added to the gradient (coupled, as in Adam)",
              (("p.data *= 1.0 - self.lr * self.weight_decay",
                "p.grad = p.grad + self.weight_decay * p.data"),)),
        Wrong("the decay without the learning rate",
              (("p.data *= 1.0 - self.lr * self.weight_decay",
                "p.data *= 1.0 - self.weight_decay"),)),
        Wrong("v from the gradient, not its square",
              (("(1.0 - self.beta2) * g * g", "(1.0 - self.beta2) * g"),)),
        Wrong("the moments kept in float64 for float32 parameters: twice the memory",
              (("np.zeros_like(p.data), np.zeros_like(p.data)",
                "np.zeros(p.shape), np.zeros(p.shape)"),)),
    ),
)


EXERCISES = (MUL_DIV, EXP_LOG, SUM_MEAN, MAX, RESHAPE_TRANSPOSE, INDEX, CONCATENATE, UNBROADCAST,
             BACKWARD_SWEEP, MATMUL, SOFTMAX, LOG_SOFTMAX, LAYER_NORM, CENTRAL_DIFFERENCE,
             CROSS_ENTROPY, ATTENTION, MULTI_HEAD, ADAMW)
