"""What the grader watches while a learner's function runs, besides what it returns.

  * Writes into the arrays it was given. An op's forward gets the tensors' own data; its backward
    gets the upstream gradient, which the sweep may hand to several ops (Add passes the same
    array on to both of its inputs), and the arrays forward saved, which may be a tensor's data
    too. A rule that writes into them (`grad *= b`) gets the right numbers in a check and spoils
    another op's numbers in a real graph. So while the checks run, those arrays are read-only,
    and a write into one is told, naming the array.
  * Inputs left changed. Whatever the learner's function was given (arrays, tensors' data, the
    arrays in its lists, tuples and dicts, a model's parameters; not a method's own `self`) must
    hold the same numbers once it returns: a direct logit attribution that centres the cached
    stream in place gets the right numbers, and every later reader of the cache gets wrong ones.
    Each is copied before the call and compared after it, but those an exercise says its unit
    changes by design (CHANGED: AdamW.decay's parameter).
  * float32 made float64, during a float32 check: the learner's function that did it is named,
    rather than a later op of tinyattn's that only passed the float64 on.
  * Where a NaN began, when a check failed with one and runs again to find it: the learner's
    function where an invalid operation (0 * inf, inf - inf, 0 / 0) first made one, or that
    returned one from inputs without any; failing that, where an inf was first made (an overflow,
    a division by 0), from which a later op made the NaN.

`watched(unit)` is the decorator the grader writes above each of the learner's functions in its
copy of the module (cutting.splice): it counts the function's calls (a check that never ran the
learner's code fails) and runs each call under these watches. It also gives the function the
globals of the learner's file (LEARNERS_GLOBALS, `in_the_learners_file`) in place of the module's,
so that the learner's code sees what the learner's file imports and defines, and nothing else.
This file imports no tinyattn module at its top, since that copy imports it while tinyattn is
being imported.
"""
import ast
import collections
import contextlib
import functools
import inspect
import textwrap
import types

import numpy as np

from tinyattn_tools.exercises.exercise import Worded

CALLS = collections.Counter()      # {unit: calls of the learner's function} in this process
LEARNERS_GLOBALS = {}              # the learner's file's globals: child.py fills them
CHANGED = set()                    # {(unit, parameter)} changed in place by design: child.py


class WroteIntoAGivenArray(Worded):
    """A learner's forward or backward that wrote into an array it was given."""


class LeftAnInputChanged(Worded):
    """A learner's function that returned with an input's numbers changed."""


FOUND = {               # what the watches found during one run of a check (None: watch off)
    "upcasts": None,    # ["your unbroadcast returned float64 for float32 input", ...]
    "nans": None,       # [(unit, what happened, the error that tells the line, or None), ...]
    "raising": {},      # np.errstate's settings while hunting: the errors that raise
}


@contextlib.contextmanager
def watching(kind, **raising):
    """Turn the watch `kind` on for the `with` block, and yield its list: "upcasts", or "nans"
    with the floating-point errors to raise at (`invalid="raise"` for NaN, `over` and `divide`
    for inf)."""
    previous, found = dict(FOUND), []
    FOUND.update({kind: found, "raising": raising})
    try:
        yield found
    finally:
        FOUND.update(previous)


def in_the_learners_file(function):
    """`function`, which the grader spliced into tinyattn's module, as the learner's file defines
    it: the same code, defaults and closure (super()'s class among it), with the learner's file's
    globals in place of the module's. The names it reads are then those the learner's file
    imports or defines, as when the file runs on its own: tinyattn's module imports numpy as np
    whether or not the learner's file does."""
    mine = types.FunctionType(function.__code__, LEARNERS_GLOBALS, function.__name__,
                              function.__defaults__, function.__closure__)
    mine.__kwdefaults__ = function.__kwdefaults__
    for name in ("__module__", "__qualname__", "__doc__", "__annotations__", "__dict__"):
        setattr(mine, name, getattr(function, name))
    return mine


def watched(unit):
    """The decorator of the learner's `unit`: its globals the learner's file's, its calls counted
    in CALLS, each run by `call`."""
    def decorate(function):
        function = in_the_learners_file(function)

        @functools.wraps(function)
        def watched_function(*args, **kwargs):
            CALLS[unit] += 1
            return call(unit, function, args, kwargs)
        return watched_function
    return decorate


def call(unit, function, args, kwargs):
    """function(*args, **kwargs), the learner's `unit`, run under the watches that are on."""
    given = arrays_given(unit, function, args)
    inputs = inputs_kept(unit, function, args, kwargs)
    if FOUND["nans"] is None:
        result = guarded(unit, function, args, kwargs, given)
    else:
        with np.errstate(**FOUND["raising"]):      # the first NaN (or inf) made raises
            try:
                result = guarded(unit, function, args, kwargs, given)
            except FloatingPointError as error:
                FOUND["nans"].append((unit, f"{error}{on_shapes(args)}", error))
                raise
        inf = "over" in FOUND["raising"]
        if not_finite(result, inf) and not not_finite((args, kwargs), inf):
            FOUND["nans"].append((unit, f"it returned {'inf' if inf else 'NaN'} from inputs "
                                     f"without any{on_shapes(args)}", None))
    if FOUND["upcasts"] is not None and floating_dtypes((args, kwargs)) == {np.dtype(np.float32)}:
        made = floating_dtypes(result, tensors_first=False) - {np.dtype(np.float32)}
        if made:
            FOUND["upcasts"].append(f"your {unit} returned {sorted(map(str, made))[0]} for "
                                 "float32 input")
    changed = [what for what, read, copy in inputs if not holds(read, copy)]
    if changed:
        raise LeftAnInputChanged(f"{unit} left {changed[0]} changed, an input it was given: "
                                 "every later reader of it would see the change; compute on a "
                                 "new array (`x - mean`, not `x -= mean`)")
    return result


# ------------------------------------------------------------------------------------------------
# Inputs left changed

def inputs_kept(unit, function, args, kwargs):
    """[(what, read, copy)]: every array the call was given (tensors' data, the arrays in lists,
    tuples and dicts, a module's parameters), but a method's `self`: its name as the learner's
    code names it, how to read it again after the call, and a copy of its numbers now."""
    names = parameter_names(function, len(args))
    given = list(zip(names, args))[1 if "." in unit else 0:] + list(kwargs.items())
    kept = []
    for name, value in given:
        if (unit, name) not in CHANGED:
            keep(kept, name, lambda value=value: value, depth=3)
    return kept


def keep(kept, what, read, depth):
    """Add `read()` to `kept` if it is an array, else what it holds, `depth` levels down."""
    value = read()
    if isinstance(value, np.ndarray):
        kept.append((what, read, value.copy()))
    elif hasattr(value, "data") and isinstance(value.data, np.ndarray):       # a tensor
        keep(kept, what, lambda: read().data, depth)
    elif depth == 0:
        return
    elif isinstance(value, dict):
        for key in value:
            keep(kept, f"{what}[{key!r}]", lambda key=key: read()[key], depth - 1)
    elif isinstance(value, (list, tuple)):
        for i in range(len(value)):
            keep(kept, f"{what}[{i}]", lambda i=i: read()[i], depth - 1)
    elif callable(getattr(value, "named_parameters", None)):                 # a module
        for name, parameter in value.named_parameters():
            keep(kept, f"{what}.{name}", lambda parameter=parameter: parameter.data, 0)


def holds(read, copy):
    """Whether what `read()` gives now holds the numbers of `copy` (NaNs included), bit for bit."""
    try:
        now = read()
    except (KeyError, IndexError):            # taken out of its dict or list
        return False
    return isinstance(now, np.ndarray) and now.dtype == copy.dtype and \
        now.shape == copy.shape and now.tobytes() == copy.tobytes()


# ------------------------------------------------------------------------------------------------
# Writes into the arrays a forward or a backward was given

def arrays_given(unit, function, args):
    """[(what the array is, array)]: the arrays the learner's forward or backward gets and must
    not write into, named as its own code names them; [] for any other function."""
    from tinyattn.engine import Function
    method = unit.rpartition(".")[2]
    if method not in ("forward", "backward") or not args or not isinstance(args[0], Function):
        return []
    names = parameter_names(function, len(args))
    if method == "forward":
        return [(f"{names[i]} (input {i - 1}), a tensor's own data", array)
                for i, array in enumerate(args) if isinstance(array, np.ndarray)]
    node, grad = args[0], args[1]
    given = [(f"{names[1]} (the upstream gradient), which another op may share", grad)]
    saved_as = saved_names(function)
    for i, array in enumerate(node.saved or ()):
        if isinstance(array, np.ndarray):
            name = f"{saved_as[i]} (self.saved[{i}])" if i in saved_as else f"self.saved[{i}]"
            given.append((f"{name}, which forward saved and may be a tensor's own data", array))
    return given


def parameter_names(function, count):
    """The names of the function's first `count` positional parameters (for `*arrays`:
    arrays[0], arrays[1], ...)."""
    names = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.kind == parameter.VAR_POSITIONAL:
            names += [f"{parameter.name}[{i}]" for i in range(count - len(names))]
        elif parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD):
            names.append(parameter.name)
    return names + [f"argument {i}" for i in range(len(names), count)]


def saved_names(function):
    """{i: name} from the learner's `a, b = self.saved`, as far as it can be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return {}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and ast.unparse(node.value) == "self.saved"
                and isinstance(node.targets[0], ast.Tuple)):
            return {i: target.id for i, target in enumerate(node.targets[0].elts)
                    if isinstance(target, ast.Name)}
    return {}


def guarded(unit, function, args, kwargs, given):
    """The call, with the `given` arrays read-only; a write into one raises WroteIntoAGivenArray,
    naming it."""
    locked = [array for _, array in given if array.flags.writeable]
    for array in locked:
        array.flags.writeable = False
    try:
        return function(*args, **kwargs)
    except ValueError as error:
        if "read-only" not in str(error) or not given:
            raise
        writeable_again(locked)
        written = written_into(function, args, kwargs, given)
        if not written:
            raise
        raise WroteIntoAGivenArray(f"{unit} wrote into {written[0]}; make a new array instead "
                                   "(`grad_a = grad * b`, not `grad *= b`)") from error
    finally:
        writeable_again(locked)


def written_into(function, args, kwargs, given):
    """What the function writes into, found by running it again with one given array read-only
    at a time (what those runs wrote into the others is put back); an array that was read-only
    already counts when none of the others is written into."""
    originals = [(array, array.copy()) for _, array in given if array.flags.writeable]
    written = []
    for what, array in given:
        if not array.flags.writeable:
            continue
        array.flags.writeable = False
        try:
            function(*args, **kwargs)
        except ValueError as error:
            if "read-only" in str(error):
                written.append(what)
        except Exception:
            pass
        finally:
            array.flags.writeable = True
            for original, copy in originals:
                original[...] = copy
    return written or [what for what, array in given if not array.flags.writeable]


def writeable_again(arrays):
    """Each array writeable again. A view can be made writeable only once its base is: those
    that fail are tried again after the others."""
    waiting = list(reversed(arrays))
    for _ in range(len(waiting) + 1):
        failed = []
        for array in waiting:
            try:
                array.flags.writeable = True
            except ValueError:
                failed.append(array)
        if not failed:
            return
        waiting = failed


# ------------------------------------------------------------------------------------------------
# dtypes and NaN

def arrays_in(value):
    """The tensors and arrays in `value`, lists, tuples and dicts opened."""
    from tinyattn.engine import Tensor
    if isinstance(value, (Tensor, np.ndarray)):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (list, tuple)):
        return [found for item in value for found in arrays_in(item)]
    return []


def floating_dtypes(value, tensors_first=True):
    """The floating dtypes in `value`: of its tensors when it holds any and `tensors_first` (a
    float64 NumPy mask passed with float32 tensors asks for float32 out), else of all."""
    from tinyattn.engine import Tensor
    found = arrays_in(value)
    tensors = [x for x in found if isinstance(x, Tensor)]
    return {x.dtype for x in (tensors if tensors and tensors_first else found)
            if x.dtype.kind == "f"}


def not_finite(value, inf=False):
    """Whether `value` holds a NaN (or, with `inf`, an inf as well)."""
    bad = np.isinf if inf else np.isnan
    return any(x.dtype.kind in "fc" and bad(np.asarray(getattr(x, "data", x))).any()
               for x in arrays_in(value))


def on_shapes(args):
    """", on (2, 5, 3), (2, 5, 3)": the shapes the call got, to say which input it was."""
    shapes = [str(x.shape) for x in arrays_in(args)]
    return f", on {', '.join(shapes[:4])}{' ...' if len(shapes) > 4 else ''}" if shapes else ""
