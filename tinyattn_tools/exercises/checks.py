"""The kinds of check an exercise runs, each returning a `Measured`: the gradient checks of the
checklist's rows, outputs against NumPy references, float32 staying float32, and the properties a
rule must keep. The catalogue (chapter1.py, chapter2.py) builds its checks from these.

Every check builds its inputs when it runs and looks tinyattn's functions up when it runs, so that
what runs is the learner's code put in place of tinyattn's (running.py), never a reference kept
from before. A check of several cases that fails names the worst one and the tolerance each was
held to.
"""
import numpy as np

import tinyattn as ta
from tinyattn_tools import checklist
from tinyattn_tools.checklist.cases import fused_and_composed, op_check, op_inputs
from tinyattn_tools.exercises.exercise import Check, Measured
from tinyattn_tools.exercises.watching import watching
from tinyattn.gradient_check import compare_gradients

TOLERANCE = 1e-10        # outputs in float64 against NumPy: the same arithmetic, rounded otherwise
FLOAT32_TOLERANCE = 1e-4     # float32 against float64, relative to the largest float64 value


def row(name):
    """The checklist's row called `name`: (kind, case) with kind "op", "layer" or "fused"."""
    for kind, cases in (("op", checklist.OP_CASES), ("layer", checklist.LAYER_CASES),
                        ("fused", checklist.FUSED_CASES)):
        for case in cases:
            if case.name == name:
                return kind, case
    raise LookupError(f"the checklist has no row {name!r}")


def row_numbers(name):
    """(analytical, reference) numbers of one checklist row: gradients against central
    differences (float64, random upstream gradient), or a fused op's output and gradients against
    the primitive ops it replaces."""
    kind, case = row(name)
    if kind == "fused":
        fused, composed = fused_and_composed(case)
        return (np.concatenate([a.ravel() for a in fused]),
                np.concatenate([a.ravel() for a in composed]))
    fn, inputs = op_check(case) if kind == "op" else case.build()
    comparisons = compare_gradients(fn, inputs, directions=getattr(case, "directions", None))
    return (np.array([c.analytical for c in comparisons]),
            np.array([c.numerical for c in comparisons]))


def gradient_rows(*names):
    """Check: the gradients of these checklist rows against finite differences, judged as
    `python -m tinyattn check` judges them."""
    def measure():
        return judged_rows([(name, *row_numbers(name)) for name in names])
    rows = f"row {names[0]!r}" if len(names) == 1 else f"{len(names)} rows"
    return Check(f"gradients vs finite differences: {rows} of the checklist", measure)


def gradients(what, fn, *shapes):
    """Check: the gradients of fn(*inputs) with respect to float64 inputs of `shapes` against
    finite differences, for what no checklist row covers."""
    def measure():
        comparisons = compare_gradients(fn, leaves(*shapes))
        return judged_rows([(what, np.array([c.analytical for c in comparisons]),
                             np.array([c.numerical for c in comparisons]))])
    return Check(f"gradients vs finite differences: {what}", measure)


def judged_rows(rows):
    """Measured for [(name, numbers, reference numbers)], judged as the checklist judges."""
    worst, largest, failed, count = "", 0.0, [], 0
    for name, got, reference in rows:
        result = checklist.judged(name, "", got, reference)
        failed += [] if result.passed else [name]
        count += result.compared
        if not result.max_abs <= largest:       # NaN counts as the worst
            worst, largest = name, result.max_abs
    if not failed:
        return Measured(True, largest, f"worst row {worst!r}, of {count} numbers")
    return Measured(False, largest, f"{len(failed)} of {len(rows)} rows fail, the worst {worst!r}"
                                    f", of {count} numbers; held to |error| <= "
                                    f"{checklist.ATOL:g} + {checklist.RTOL:g} |reference|")


def forward_rows(*names):
    """Check: the output of these op rows against their NumPy reference, in float64."""
    def measure():
        worst, largest = "", 0.0
        for name in names:
            _, case = row(name)
            arrays = op_inputs(case)
            got = case.op(*[ta.tensor(a) for a in arrays])
            error = difference(got, case.reference(*arrays))
            if not error <= largest:
                worst, largest = name, error
        held = "" if largest <= TOLERANCE else f"; each held to {TOLERANCE:g}"
        return Measured(largest <= TOLERANCE, largest, f"worst row {worst!r}{held}")
    return Check(f"outputs vs NumPy: {len(names)} rows of the checklist", measure)


def difference(got, expected):
    """The largest |got - expected| (inf for another shape, NaN where either is NaN)."""
    got = np.asarray(got.data if isinstance(got, ta.Tensor) else got, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    if got.shape != expected.shape:
        raise WrongShape(f"shape {got.shape}, expected {expected.shape}")
    if got.size == 0:
        return 0.0
    same = (got == expected)                 # the same infinities count as no error
    error = np.where(same, 0.0, np.abs(got - expected))
    return float(np.max(error)) if not np.isnan(error).any() else float("nan")


def largest(errors):
    """The largest of the errors, NaN if any is NaN (Python's max would skip it, or not,
    depending on where it stands)."""
    errors = list(errors)
    return float("nan") if any(np.isnan(errors)) else max(errors, default=0.0)


class WrongShape(ValueError):
    """An output or gradient of another shape than the reference's."""


def matches(what, pairs, tolerance=TOLERANCE):
    """Check: `pairs()` gives [(case, got, expected), ...] (tensors or arrays; a case is a few
    words saying which input it was, or the pair is (got, expected) and numbered); every got is
    expected to `tolerance`. A failure names how many cases failed, and the worst."""
    def measure():
        cases = named_cases(pairs())
        errors = []
        for case, got, expected in cases:
            try:
                errors.append(difference(got, expected))
            except WrongShape as wrong:
                return Measured(False, None, f"case {case!r}: {wrong}")
        error = largest(errors)
        if error <= tolerance:
            return Measured(True, error)
        if len(cases) == 1:
            return Measured(False, error, f"held to {tolerance:g}")
        failed = [case for (case, _, _), e in zip(cases, errors) if not e <= tolerance]
        worst = next(case for (case, _, _), e in zip(cases, errors) if e == error or np.isnan(e))
        return Measured(False, error, f"{len(failed)} of {len(cases)} cases fail, the worst "
                                      f"{worst!r}; each held to {tolerance:g}")
    return Check(what, measure)


def named_cases(pairs):
    """[(case, got, expected)] from pairs that are named, or numbered ("#3 of 10")."""
    pairs = list(pairs)
    return [pair if len(pair) == 3 else (f"#{i + 1} of {len(pairs)}", *pair)
            for i, pair in enumerate(pairs)]


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
    return [out.data for out in outputs] + grads


def float32(fn, *shapes, domain="normal"):
    """Check: on float32 inputs, every output, every gradient a backward returns on the way and
    every input's gradient is float32 (a leaf would hide an upcast: it casts its gradient to its
    own dtype), and within FLOAT32_TOLERANCE of the float64 numbers (relative to their largest)."""
    def measure():
        inputs = leaves(*shapes, dtype=np.float32, domain=domain)
        with watching("upcasts") as yours:        # the learner's functions that made float64
            upcast = upcasts_on_the_way(fn, inputs)
            single = outputs_and_gradients(fn, inputs)
        if yours:
            return Measured(False, None, yours[0])
        double = outputs_and_gradients(fn, leaves(*shapes, domain=domain))
        upcast += [f"{'an output' if i < len(single) - len(inputs) else 'a gradient'} is "
                   f"{a.dtype}" for i, a in enumerate(single) if a.dtype != np.float32]
        if upcast:
            return Measured(False, None, f"{upcast[0]}, not float32")
        error = largest(difference(a, b) / max(1.0, float(np.abs(b).max(initial=0)))
                        for a, b in zip(single, double))
        held = "" if error <= FLOAT32_TOLERANCE else \
            f"held to {FLOAT32_TOLERANCE:g}, relative to the largest float64 number"
        return Measured(error <= FLOAT32_TOLERANCE, error, held)
    return Check("float32 in, float32 out (gradients too), close to float64", measure)


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


def holds(what, measure_error, tolerance=TOLERANCE):
    """Check: a property, measured as the largest deviation from it."""
    def measure():
        try:
            error = float(measure_error())
        except WrongShape as wrong:
            return Measured(False, None, str(wrong))
        return Measured(error <= tolerance, error,
                        "" if error <= tolerance else f"held to {tolerance:g}")
    return Check(what, measure)


def raises(what, call, error, *words):
    """Check: `call()` raises `error` whose message contains each of `words`."""
    def measure():
        try:
            call()
        except NotImplementedError:         # a RuntimeError too: the blank is not a refusal
            raise
        except error as raised:
            missing = [w for w in words if w not in str(raised)]
            return Measured(not missing, None, f"raised, without {missing[0]!r}" if missing
                            else "raised")
        return Measured(False, None, f"no {error.__name__} raised")
    return Check(what, measure)
