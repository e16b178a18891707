"""Checking a learner's file: its functions put in place of tinyattn's for one run, the exercise's
checks run against them, one line each.

Putting a function in place, and taking it out again afterwards, whatever happens:
  * a method (`Mul.backward`) is set on tinyattn's class;
  * a function behind a door (`@door(...) def attention`) keeps tinyattn's door, which calls the
    function below it: that function is swapped for the learner's, so every reference to the
    door, a function table's included, runs the learner's body;
  * any other function (`unbroadcast`) is replaced in every tinyattn module that holds it, and
    in the learner's file, where the learner's other functions call it.
Each function put in place counts its calls, and runs under the watches of watching.py (writes
into the arrays it was given, float32 made float64, where a NaN began). A check during which the
learner's code never ran fails: a grader that checked tinyattn's own code instead would be worse
than none. For the same reason a file whose functions are not its own (an import put tinyattn's
in their place) is refused, and so is one that ends the program (sys.exit()) before the checks
can say anything.
"""
import ast
import contextlib
import importlib
import math
import pathlib
import signal
import sys
import threading
import traceback
import types
import warnings

import numpy as np

import tinyattn
from tinyattn_tools.exercises import watching
from tinyattn_tools.exercises.exercise import Measured, Worded


class LearnerFileError(Exception):
    """A learner's file that cannot be checked: a syntax error, an error while loading it, a
    function missing or not its own, a call that ends the program. The message is one line."""


class OutOfTime(Worded):
    """A check that ran past its time limit."""


def load(exercise, path, seconds=None):
    """{unit: the learner's function} from the file at `path`, loaded within `seconds`."""
    try:
        text = path.read_text()
    except OSError as error:
        raise LearnerFileError(f"cannot read {path}: {error.strerror}") from None
    try:
        code = compile(text, str(path), "exec")
    except SyntaxError as error:
        raise LearnerFileError(f"{path.name}, line {error.lineno}: {error.msg} "
                               f"(a SyntaxError: Python cannot read the file)") from None
    module = types.ModuleType(f"tinyattn_exercise_{exercise.name}")
    module.__file__ = str(path)
    try:
        with time_limit(seconds):
            exec(code, module.__dict__)
    except SystemExit as error:
        raise LearnerFileError(ends_the_program(error, path, "while loading")) from None
    except Exception as error:
        raise LearnerFileError(f"{path.name} stopped while loading: "
                               f"{in_one_line(error, path)}") from None
    functions = {}
    for unit in exercise.units:
        owner, _, name = unit.rpartition(".")
        holder = module.__dict__.get(owner) if owner else module
        function = vars(holder).get(name) if holder is not None else None
        if not callable(function):
            where = f"class {owner} with a method {name}" if owner else f"a function {name}"
            raise LearnerFileError(f"{path.name} has no {unit}: it must keep {where}, as the "
                                   f"file was given")
        written_in = source_file(function)
        if written_in != str(path):
            raise LearnerFileError(not_its_own(exercise, unit, written_in, path))
        functions[unit] = function
    return functions


def source_file(function):
    """The file a function was written in (below its decorators), or None for one that is not
    Python code."""
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    code = getattr(function, "__code__", None)
    return code.co_filename if code is not None else None


def not_its_own(exercise, unit, written_in, path):
    """The line refusing a file whose `unit` was not written in it."""
    if written_in is None:
        return f"{path.name}: its {unit} is not a function written in {path.name}"
    root = pathlib.Path(tinyattn.__file__).parents[1]
    shown = pathlib.Path(written_in)
    shown = shown.relative_to(root) if shown.is_relative_to(root) else shown
    return (f"{path.name}: its {unit} comes from {shown}, not from {path.name} (an import such "
            f"as `from {exercise.module} import *` replaced yours): only your own code is graded")


def ends_the_program(error, path, when):
    """The line for a learner's file that called sys.exit() or exit() `when`."""
    return (f"{path.name} calls sys.exit() or exit(){where_in(error, path)} {when}: that would "
            "end the grader too, before it says anything; remove the call")


def in_one_line(error, path=None):
    """`TypeError: ... (mul_div.py, line 31, in Div.backward)`: the error, and the last line of
    the learner's file it went through (the engine may raise it later, from what the learner's
    code returned: then the message says what was wrong)."""
    message = " ".join(str(error).split())
    if len(message) > 300:
        message = message[:300] + " ..."
    if isinstance(error, Worded):
        text = message
    else:
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text + where_in(error, path)


def where_in(error, path):
    """" (mul_div.py, line 31, in Div.backward)": the last line of the learner's file that the
    error (or an error that caused it) went through; "" if none did."""
    seen = set()
    while path is not None and error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = [(frame.f_code, line) for frame, line in traceback.walk_tb(error.__traceback__)
                  if frame.f_code.co_filename == str(path)]
        if frames:
            code, line = frames[-1]
            return f" ({path.name}, line {line}, in {qualified_name(code, path)})"
        error = error.__cause__ or error.__context__
    return ""


def qualified_name(code, path):
    """`Div.backward`, the qualified name of the function whose code is `code`, defined in the
    file at `path`. Python 3.11 and later give it (co_qualname); Python 3.10's code objects have
    only the bare name (`backward`), so there it is found in the file's source."""
    if hasattr(code, "co_qualname"):
        return code.co_qualname
    try:
        source = path.read_text()
    except OSError:                             # the file was removed since it was loaded
        return code.co_name
    return qualified_name_in(source, code.co_firstlineno, code.co_name)


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def qualified_name_in(source, first_line, name):
    """The qualified name Python gives the code `name` whose first line is `first_line` in
    `source`: the names of the classes and functions it is defined in, joined by dots, with
    `<locals>` after a function ("outer.<locals>.inner", "Mul.backward"). A definition's first
    line is its first decorator's, if it has any; code that is no definition (a lambda) takes
    the name of the innermost definition whose lines hold it ("Mul.backward.<locals>.<lambda>")."""
    chains = list(definitions_in(ast.parse(source)))
    defined_there = [chain for chain in chains if chain[-1].name == name
                     and first_line_of(chain[-1]) == first_line]
    if defined_there:
        chain, inside = defined_there[0], []
    else:
        around = [chain for chain in chains
                  if first_line_of(chain[-1]) <= first_line <= chain[-1].end_lineno]
        chain, inside = max(around, key=len, default=()), [name]
    parts = []
    for depth, node in enumerate(chain):
        parts.append(node.name)
        if not isinstance(node, ast.ClassDef) and (depth < len(chain) - 1 or inside):
            parts.append("<locals>")
    return ".".join(parts + inside)


def definitions_in(node, chain=()):
    """Every class and function definition under `node`, each as the chain of definitions from
    the outermost to it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, DEFINITIONS):
            yield chain + (child,)
            yield from definitions_in(child, chain + (child,))
        else:
            yield from definitions_in(child, chain)


def first_line_of(definition):
    return min([definition.lineno] + [decorator.lineno for decorator in definition.decorator_list])


def counted(function, calls, unit):
    """The learner's `function`, counting its calls in calls[unit], run under the watches."""
    def counting(*args, **kwargs):
        calls[unit] += 1
        return watching.call(unit, function, args, kwargs)
    counting.__name__, counting.__qualname__ = function.__name__, function.__qualname__
    counting.__doc__ = function.__doc__
    return counting


def behind_a_door(function):
    """The cell of a door's wrapper that holds the function below the door, or None."""
    code = getattr(function, "__code__", None)
    if code is None or "function" not in code.co_freevars or not hasattr(function, "__wrapped__"):
        return None
    return function.__closure__[code.co_freevars.index("function")]


def of_class(method, cls):
    """The learner's method, with `super()` in it meaning tinyattn's class, not the learner's
    copy of it (a zero-argument super() reads the class from a cell named __class__)."""
    code = method.__code__
    if "__class__" not in code.co_freevars:
        return method
    cells = tuple(types.CellType(cls) if name == "__class__" else cell
                  for name, cell in zip(code.co_freevars, method.__closure__))
    rebuilt = types.FunctionType(code, method.__globals__, method.__name__, method.__defaults__,
                                 cells)
    rebuilt.__kwdefaults__ = method.__kwdefaults__
    return rebuilt


@contextlib.contextmanager
def in_place(exercise, functions, calls):
    """The learner's `functions` in place of tinyattn's units, for the `with` block; `calls`
    (a dict) counts the calls of each."""
    module = importlib.import_module(exercise.module)
    undo = []
    try:
        for unit, learner in functions.items():
            calls.setdefault(unit, 0)
            owner, _, name = unit.rpartition(".")
            holder = getattr(module, owner) if owner else module
            original = vars(holder)[name]
            cell = behind_a_door(original)
            if cell is not None:
                body = getattr(learner, "__wrapped__", learner)    # the learner's own door: off
                undo.append((setattr, (cell, "cell_contents", cell.cell_contents)))
                cell.cell_contents = counted(body, calls, unit)
            elif owner:
                undo.append((setattr, (holder, name, original)))
                setattr(holder, name, counted(of_class(learner, holder), calls, unit))
            else:
                replacement = counted(learner, calls, unit)
                for other in list(sys.modules.values()):
                    if getattr(other, "__name__", "").partition(".")[0] != "tinyattn":
                        continue
                    for attribute, value in list(vars(other).items()):
                        if value is original:
                            undo.append((setattr, (other, attribute, original)))
                            setattr(other, attribute, replacement)
                # the learner's other functions call it through their file's globals: counted too
                undo.append((dict.__setitem__, (learner.__globals__, name, learner)))
                learner.__globals__[name] = replacement
        yield
    finally:
        for action, arguments in reversed(undo):
            action(*arguments)


@contextlib.contextmanager
def time_limit(seconds):
    """OutOfTime after `seconds`, where a signal can interrupt (the main thread of a Unix
    process); elsewhere no limit."""
    if not seconds or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise OutOfTime(f"stopped after {seconds:g} s: does every loop of yours end?")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def run_checks(exercise, functions, path=None, fail_fast=False, seconds=None, on_result=None):
    """[(check, Measured)] for the exercise's checks, with `functions` in place; stops after the
    first failure when `fail_fast`. After a check that ran out of time, the others fail unrun
    (each would most likely wait as long). `on_result(check, measured)` is called as each one is
    done. A check's error becomes a failed Measured, told in one line; a NaN is traced to where
    it began; a learner's function that ends the program raises LearnerFileError."""
    calls, results, stopped = {}, [], None
    with in_place(exercise, functions, calls):
        for check in exercise.checks:
            before = sum(calls.values())
            if stopped is not None:
                measured = Measured(False, None, f"not run: the check {stopped!r} ran out of time")
            else:
                try:
                    measured = measured_by(check, path, seconds)
                except OutOfTime as error:
                    measured, stopped = Measured(False, None, in_one_line(error, path)), check.what
            if measured.passed and sum(calls.values()) == before:
                measured = Measured(False, None, "the check did not run your code (a fault of "
                                                 "the exercise: please report it)")
            if measured.error is not None and math.isnan(measured.error):
                measured = measured._replace(detail=f"{measured.detail}; "
                                                    f"{first_nan(check, path, seconds)}")
            results.append((check, measured))
            if on_result is not None:
                on_result(check, measured)
            if fail_fast and not measured.passed:
                break
    never = [unit for unit in exercise.units if not calls.get(unit)]
    if never and all(m.passed for _, m in results) and not fail_fast:
        results.append((None, Measured(False, None, f"no check ran {', '.join(never)} (a "
                                                    "fault of the exercise: please report it)")))
        if on_result is not None:
            on_result(*results[-1])
    return results


def measured_by(check, path, seconds):
    """What the check measures, with the learner's code in place; an error, a failed Measured
    (but OutOfTime, raised)."""
    try:
        with time_limit(seconds), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return check.measure()
    except NotImplementedError as error:
        return Measured(False, None, "not written yet: NotImplementedError" + where_in(error, path))
    except SystemExit as error:
        raise LearnerFileError(ends_the_program(error, path, f"in the check {check.what!r}")) \
            from None
    except OutOfTime:
        raise
    except Exception as error:
        return Measured(False, None, in_one_line(error, path))


def first_nan(check, path, seconds):
    """Where the NaN of a failed check began: the check run again, watching the learner's
    functions for the first NaN they make, then (if none) for the first inf."""
    for made, raising in (("NaN", dict(invalid="raise")),
                          ("inf", dict(invalid="raise", over="raise", divide="raise"))):
        with watching.watching("nans", **raising) as found, \
                contextlib.suppress(OutOfTime):
            measured_by(check, path, seconds)
        if found:
            unit, what, error = found[0]
            where = where_in(error, path) if error is not None else ""
            return f"the first {made} came from your {unit}{where}: {what}"
    return "no function of yours made a NaN or an inf: a later op made it from what yours returned"


def report_line(check, measured):
    """pass or FAIL, the largest error found (or - for a check that measures no number), what it
    checks, and a few words on what was found."""
    what = check.what if check is not None else "every function of the exercise ran"
    error = f"{measured.error:.1e}" if measured.error is not None else "-"
    detail = f" ({measured.detail})" if measured.detail else ""
    return f"  {'pass' if measured.passed else 'FAIL'}  {error:>8}  {what}{detail}"


def summary(results):
    passed = sum(measured.passed for _, measured in results)
    return (f"{passed} of {len(results)} checks pass; the number after pass or FAIL is the "
            "largest error found.")


def report(results):
    """One line per check, then how many passed."""
    return [report_line(check, measured) for check, measured in results] + [summary(results)]
