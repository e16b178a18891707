"""The kinds of check an exercise runs. Each is run in two halves, in two processes:

    run()        in the check process, where tinyattn is a copy with the learner's code in place
                 of its own (grader.py): it computes, and returns the raw numbers (arrays, dtypes,
                 what was raised), never a verdict;
    judge(raw)   in the grader's process, which runs tinyattn's own code only: it computes the
                 same with tinyattn (or takes the checklist's NumPy reference), compares, and
                 returns a Measured.

So nothing the learner's file does can change what a check concludes: it can only change the
numbers it sends. The kinds:

    gradient_rows(*names)   rows of the checklist (tinyattn_tools/checklist): their gradients
                            against tinyattn's, number by number, judged as `python -m tinyattn
                            check` judges (a fused op's row: against the primitive ops it replaces)
    forward_rows(*names)    rows' outputs against their NumPy reference
    same(what, probe)       whatever probe() returns ({name: value}), against what it returns
                            with tinyattn's code: outputs, gradients, dtypes, counts
    float32(fn, *shapes)    float32 in, float32 out (every gradient on the way too), close to
                            the float64 numbers
    raises(what, call, error, *words)   the call raises `error`, with these words in its message

Every check builds its inputs when it runs (seeded, the same in both processes) and looks
tinyattn's functions up when it runs. A check of several cases that fails names the worst one and
the tolerance each was held to.
"""
import functools
import hashlib

import numpy as np

import tinyattn as ta
from tinyattn_tools import checklist
from tinyattn_tools.checklist.cases import fused_and_composed, op_check, op_inputs
from tinyattn_tools.exercises.exercise import Measured, Worded
from tinyattn_tools.exercises.messages import same_as_sent
from tinyattn_tools.exercises.watching import watching

TOLERANCE = 1e-10        # float64 against tinyattn or NumPy, relative to the largest number
FLOAT32_TOLERANCE = 1e-4     # float32 against float64, relative to the largest float64 number


class Check:
    """One line of a check run: `what` is the line the learner reads."""

    def __init__(self, what):
        self.what = what

    def named(self, what):
        """The same check, read as `what`."""
        renamed = object.__new__(type(self))
        renamed.__dict__.update(self.__dict__, what=what)
        return renamed


def row(name):
    """The checklist's row called `name`: (kind, case) with kind "op", "layer" or "fused"."""
    for kind, cases in (("op", checklist.OP_CASES), ("layer", checklist.LAYER_CASES),
                        ("fused", checklist.FUSED_CASES)):
        for case in cases:
            if case.name == name:
                return kind, case
    raise LookupError(f"the checklist has no row {name!r}")


def rows_named(names, kind="rows"):
    return f"row {names[0]!r}" if len(names) == 1 else f"{len(names)} {kind}"


# ------------------------------------------------------------------------------------------------
# Rows of the checklist

class GradientRows(Check):
    def __init__(self, names):
        super().__init__(f"gradients vs tinyattn's: {rows_named(names)} of the checklist")
        self.names = names

    def run(self):
        return {name: in_row(name, row_gradients, name) for name in self.names}

    def judge(self, raw):
        rows = []
        for name in self.names:
            yours = raw[name]
            reference = tinyattns_gradients(name, yours["inputs"])
            if reference["inputs"] is None:
                shapes = [np.shape(x) for x in yours["inputs"]]
                return Measured(False, None, f"row {name!r}: the inputs and parameters that "
                                f"require grad have shapes {shapes}, tinyattn's "
                                f"{reference['shapes']}")
            rows.append((name, yours["numbers"], reference["numbers"]))
        return judged_rows(rows)


def gradient_rows(*names):
    """Check: the gradients of these checklist rows against tinyattn's."""
    return GradientRows(names)


def row_gradients(name, inputs=None, composed=False):
    """{"inputs": the arrays of the row's tensors that require grad, "numbers": their gradients}
    for a random upstream gradient (seeded as gradcheck seeds it); `inputs` puts those numbers in
    place first (if their shapes are the row's; else "inputs" is None). A fused op's row: its
    output and gradients (zeros for an input that got none), or with `composed` those of the
    primitive ops it replaces."""
    kind, case = row(name)
    if kind == "fused":
        output, *gradients = fused_and_composed(case)[1 if composed else 0]
        gradients = [np.zeros(shape) if g is None else g for g, shape in zip(gradients,
                                                                              case.shapes)]
        return {"inputs": [], "numbers": np.concatenate([np.ravel(a) for a in
                                                         [output, *gradients]])}
    fn, arguments = op_check(case) if kind == "op" else case.build()
    leaves = [x for x in arguments if isinstance(x, ta.Tensor) and x.requires_grad]
    if inputs is not None:
        if [np.shape(x) for x in inputs] != [x.shape for x in leaves]:
            return {"inputs": None, "shapes": [x.shape for x in leaves]}
        for leaf, numbers in zip(leaves, inputs):
            leaf.data[...] = numbers
    outputs = fn(*arguments)
    random = np.random.default_rng(0)
    for out in outputs if isinstance(outputs, (tuple, list)) else (outputs,):
        upstream = random.standard_normal(out.shape).astype(out.dtype)
        if out.requires_grad:
            out.backward(upstream, retain_graph=True)
    gradients = [x.grad if x.grad is not None else np.zeros(x.shape) for x in leaves]
    return {"inputs": [x.data.copy() for x in leaves],
            "numbers": np.concatenate([np.ravel(g) for g in gradients] or [np.zeros(0)])}


TINYATTNS_GRADIENTS = {}       # (row, digest of the inputs) -> tinyattn's row_gradients there


def tinyattns_gradients(name, inputs):
    """tinyattn's row_gradients of row `name` at the learner's `inputs` (the same as the row's
    own, unless the learner's code draws a layer's parameters), computed once for each."""
    hashed = hashlib.sha256(name.encode())
    for array in inputs:
        hashed.update(f"{array.dtype}{array.shape}".encode() + array.tobytes())
    key = hashed.hexdigest()
    if key not in TINYATTNS_GRADIENTS:
        TINYATTNS_GRADIENTS[key] = row_gradients(name, inputs, composed=True)
    return TINYATTNS_GRADIENTS[key]


def judged_rows(rows):
    """Measured for [(name, numbers, reference numbers)], judged as the checklist judges."""
    worst, largest_error, failed, count = "", 0.0, [], 0
    for name, got, reference in rows:
        if np.shape(got) != np.shape(reference):
            return Measured(False, None, f"row {name!r}: {np.size(got)} numbers, tinyattn's "
                                         f"{np.size(reference)}")
        result = checklist.judged(name, "", got, reference)
        failed += [] if result.passed else [name]
        count += result.compared
        if not worst or not result.max_abs <= largest_error:     # NaN counts as the worst
            worst, largest_error = name, result.max_abs
    if not failed:
        return Measured(True, largest_error, f"worst row {worst!r}, of {count} numbers")
    return Measured(False, largest_error, f"{len(failed)} of {len(rows)} rows fail, the worst "
                    f"{worst!r}, of {count} numbers; held to |error| <= {checklist.ATOL:g} + "
                    f"{checklist.RTOL:g} |tinyattn's|")


class InRow(Worded):
    """An error raised while a row of the checklist ran: the row's name, then the error."""


def in_row(name, function, *arguments):
    """function(*arguments), an error in it (but the blank's NotImplementedError, and the
    grader's own errors) said as the row's."""
    try:
        return function(*arguments)
    except (NotImplementedError, Worded):
        raise
    except Exception as error:
        raise InRow(f"row {name!r}: {type(error).__name__}: {error}") from error


class ForwardRows(Check):
    def __init__(self, names):
        super().__init__(f"outputs vs NumPy: {rows_named(names)} of the checklist")
        self.names = names

    def run(self):
        return {name: in_row(name, lambda case: case.op(*map(ta.tensor, op_inputs(case))).data,
                             row(name)[1]) for name in self.names}

    def judge(self, raw):
        return compared(raw, {name: row(name)[1].reference(*op_inputs(row(name)[1]))
                              for name in self.names}, TOLERANCE, "rows", "NumPy's")


def forward_rows(*names):
    """Check: the output of these op rows against their NumPy reference, in float64."""
    return ForwardRows(names)


def row_check(name):
    """(fn, inputs, directions) of row `name`, as `python -m tinyattn check` runs it."""
    kind, case = row(name)
    return (*(op_check(case) if kind == "op" else case.build()), getattr(case, "directions",
                                                                          None))


# ------------------------------------------------------------------------------------------------
# Anything, against tinyattn

class Same(Check):
    def __init__(self, what, probe, tolerance):
        super().__init__(what)
        self.probe, self.tolerance = probe, tolerance

    def run(self):
        return as_arrays(self.probe())

    def judge(self, raw):
        return compared(raw, self.tinyattns(), self.tolerance)

    @functools.lru_cache(maxsize=None)
    def tinyattns(self):
        return same_as_sent(as_arrays(self.probe()))


def same(what, probe, tolerance=TOLERANCE):
    """Check: probe() ({name: value}) gives what it gives with tinyattn's own code: arrays and
    numbers within `tolerance` of tinyattn's, relative to their largest number; anything else
    (a dtype, a shape, a word) the same."""
    return Same(what, probe, tolerance)


def as_arrays(value):
    """`value` with its tensors as their arrays and its dtypes as their names."""
    if isinstance(value, ta.Tensor):
        return value.data
    if isinstance(value, np.dtype):
        return str(value)
    if isinstance(value, dict):
        return {name: as_arrays(item) for name, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_arrays(item) for item in value]
    return value


def compared(got, expected, tolerance, kind="cases", whose="tinyattn's"):
    """Measured for {case: value} against {case: expected value} (a list's items are cases of
    their own): an array or a number within `tolerance` of the expected one (relative to its
    largest finite number), anything else equal. A failure names how many cases failed, and the
    worst."""
    got, expected, errors = dict(flat(got)), dict(flat(expected)), {}
    for case in [*expected, *got]:
        if case not in got or case not in expected:
            return Measured(False, None, f"case {case!r}: " + (
                f"{whose} has it, yours not" if case not in got else f"yours only, not {whose}"))
        mine, value = got[case], expected[case]
        if is_numeric(value) and is_numeric(mine):
            if np.shape(mine) != np.shape(value):
                return Measured(False, None, f"case {case!r}: shape {np.shape(mine)}, {whose} "
                                             f"{np.shape(value)}")
            errors[case] = difference(mine, value)
        elif type(mine) is not type(value) or mine != value:
            return Measured(False, None, f"case {case!r}: yours {shown(mine)}, {whose} "
                                         f"{shown(value)}")
    error = largest(errors.values())
    held = f"held to {tolerance:g}" + ("" if whose != "tinyattn's" else
                                       ", relative to tinyattn's largest number")
    if error <= tolerance:
        return Measured(True, error)
    if len(errors) == 1:
        return Measured(False, error, held)
    failed = [case for case, e in errors.items() if not e <= tolerance]
    worst = next(case for case, e in errors.items() if e == error or np.isnan(e))
    return Measured(False, error, f"{len(failed)} of {len(errors)} {kind} fail, the worst "
                                  f"{worst!r}; each {held}")


def flat(value, name=None):
    """[(case, value)] of a dict whose values may be lists: item i of the list at "case" is the
    case "case[i]"."""
    if isinstance(value, dict):
        return [pair for key, item in value.items() for pair in flat(item, key)]
    if isinstance(value, list) and name is not None:
        return [pair for i, item in enumerate(value) for pair in flat(item, f"{name}[{i}]")]
    return [(name, value)]


def is_numeric(value):
    return isinstance(value, (np.ndarray, int, float)) and not isinstance(value, bool)


def shown(value):
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def difference(got, expected):
    """The largest |got - expected|, relative to the largest finite |expected| (when above 0);
    the same infinities count as no error, a NaN on either side makes the error NaN."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    if got.size == 0:
        return 0.0
    same_number = (got == expected)
    error = np.where(same_number, 0.0, np.abs(got - expected))
    if np.isnan(error).any():
        return float("nan")
    finite = np.abs(expected[np.isfinite(expected)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    return float(error.max()) / scale


def largest(errors):
    """The largest of the errors, NaN if any is NaN (Python's max would skip it, or not,
    depending on where it stands)."""
    errors = list(errors)
    return float("nan") if any(np.isnan(errors)) else max(errors, default=0.0)


# ------------------------------------------------------------------------------------------------
# float32, and refusals

def leaves(*shapes, dtype=np.float64, seed=0, domain="normal"):
    """Random tensors that require grad, one per shape."""
    random = np.random.default_rng(seed)
    tensors = []
    for shape in shapes:
        x = (random.uniform(0.5, 2.0, shape) if domain == "positive"
             else random.standard_normal(shape))
        tensors.append(ta.tensor(x.astype(dtype), requires_grad=True))
    return tensors


def outputs_and_gradients(fn, inputs, seed=1):
    """[each output, then each input's gradient] as arrays, for a random upstream gradient of the
    outputs' dtype (an input that got no gradient: zeros)."""
    outputs = fn(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    random = np.random.default_rng(seed)
    for out in outputs:
        if out.requires_grad:
            out.backward(random.standard_normal(out.shape).astype(out.dtype), retain_graph=True)
    grads = [x.grad if x.grad is not None else np.zeros(x.shape, x.dtype) for x in inputs]
    return [np.asarray(out.data) for out in outputs] + grads


class Float32(Check):
    def __init__(self, fn, shapes, domain):
        super().__init__("float32 in, float32 out (gradients too), close to float64")
        self.fn, self.shapes, self.domain = fn, shapes, domain

    def run(self):
        inputs = leaves(*self.shapes, dtype=np.float32, domain=self.domain)
        with watching("upcasts") as yours:        # the learner's functions that made float64
            on_the_way = upcasts_on_the_way(self.fn, inputs)
            numbers = outputs_and_gradients(self.fn, inputs)
        return {"yours": yours[:1], "on the way": on_the_way[:1], "numbers": numbers,
                "float64": outputs_and_gradients(self.fn, leaves(*self.shapes,
                                                                 domain=self.domain))}

    def judge(self, raw):
        if raw["yours"] or raw["on the way"]:
            return Measured(False, None, (raw["yours"] or raw["on the way"])[0] +
                            ("" if raw["yours"] else ", not float32"))
        single, double = raw["numbers"], raw["float64"]
        outputs = len(double) - len(self.shapes)
        for i, a in enumerate(single):
            if a.dtype != np.float32:
                return Measured(False, None, f"{'an output' if i < outputs else 'a gradient'} "
                                             f"is {a.dtype}, not float32")
            if a.shape != double[i].shape:
                return Measured(False, None, f"shape {a.shape} in float32, {double[i].shape} in "
                                             "float64")
        error = largest(difference(a, b) for a, b in zip(single, double))
        held = "" if error <= FLOAT32_TOLERANCE else \
            f"held to {FLOAT32_TOLERANCE:g}, relative to the largest float64 number"
        return Measured(error <= FLOAT32_TOLERANCE, error, held)


def float32(fn, *shapes, domain="normal"):
    """Check: on float32 inputs, every output, every gradient a backward returns on the way and
    every input's gradient is float32 (a leaf would hide an upcast: it casts its gradient to its
    own dtype), and within FLOAT32_TOLERANCE of the same code's float64 numbers (whether those are
    right, the other checks say)."""
    return Float32(fn, shapes, domain)


def upcasts_on_the_way(fn, inputs):
    """What each op's backward returns in the graph of fn(*inputs), for float32 ones as grad:
    ["the gradient the max op's backward returns is float64"] for each one not float32."""
    outputs = fn(*inputs)
    nodes, seen, found = [out._node for out in (outputs if isinstance(outputs, tuple)
                                                else (outputs,))], set(), []
    while nodes:
        node = nodes.pop()
        if node is None or id(node) in seen or not hasattr(node, "backward"):
            continue
        seen.add(id(node))
        grads = node.backward(np.ones(node.shape, np.float32))
        found += [f"the gradient the {node.name} op's backward returns is {g.dtype}"
                  for g in grads if g is not None and np.asarray(g).dtype != np.float32]
        nodes.extend(node.parents)
    return found


class Raises(Check):
    def __init__(self, what, call, error, words):
        super().__init__(what)
        self.call, self.error, self.words = call, error, words

    def run(self):
        try:
            self.call()
        except NotImplementedError:         # a RuntimeError too: the blank is not a refusal
            raise
        except Exception as raised:
            return {"raised": [c.__name__ for c in type(raised).__mro__], "message": str(raised)}
        return {"raised": [], "message": ""}

    def judge(self, raw):
        if self.error.__name__ not in raw["raised"]:
            return Measured(False, None, f"no {self.error.__name__} raised")
        missing = [w for w in self.words if w not in raw["message"]]
        return Measured(not missing, None, f"raised, without {missing[0]!r}" if missing
                        else "raised")


def raises(what, call, error, *words):
    """Check: `call()` raises `error` whose message contains each of `words`."""
    return Raises(what, call, error, words)
