"""Checking arguments at the door.

Every public function and layer checks what it receives once, where it receives it, with the
helpers below, so that the code under them is math. A shape check reads like the docstring:

    check_shapes("scaled_dot_product_attention", same_dtype=True,
                 query=(query, "... L E"), key=(key, "... S E"), value=(value, "... S Ev"))

says that query is (..., L, E), key (..., S, E) and value (..., S, Ev): a name stands for the same
size wherever it appears, a number for that size, and the leading `...` axes must broadcast.

Each helper raises the error the library promises, naming the operation that received the
argument: a TypeError for the wrong kind of argument (a string where a number belongs, a float32
input to a float64 layer), a ValueError for a value out of range or shapes that do not fit.
"""
import math

import numpy as np

from tinyattn.engine import Tensor, TensorIndexError, data_of

INTEGERS = (int, np.integer)
REAL_NUMBERS = (int, float, np.integer, np.floating)


def check_shapes(op, same_dtype=False, dtype=None, floating=False, optional=(), **patterns):
    """Check tensors against shape patterns; returns {name: size} for the names in the patterns,
    and the broadcast leading axes under "...".

    Each keyword is `name=(tensor, pattern)`. `same_dtype`: all the tensors share one dtype (as
    PyTorch requires: no silent promotion). `dtype`: all of them have this dtype, the dtype of the
    parameters of the layer `op`. `floating`: the tensors hold floating-point numbers. `optional`:
    the names whose tensor may be None (then it is not checked).
    """
    patterns = {name: (x, pattern) for name, (x, pattern) in patterns.items()
                if not (x is None and name in optional)}
    sizes, leading = {}, []
    for name, (x, pattern) in patterns.items():
        check_tensor(op, name, x)
        symbols = pattern.split()
        batched = symbols[0] == "..."
        core = symbols[1:] if batched else symbols
        if x.ndim < len(core) or not batched and x.ndim != len(core):
            raise ValueError(f"{op}: {name} must have shape {_shown(pattern)}, got {x.shape}")
        for symbol, size in zip(core, x.shape[x.ndim - len(core):]):
            if symbol.isdigit() and size != int(symbol):
                raise ValueError(f"{op}: {name} must have shape {_shown(pattern)}, got {x.shape}")
            if sizes.setdefault(symbol, size) != size:
                first = next(n for n, (_, p) in patterns.items() if symbol in p.split())
                raise ValueError(f"{op}: {first} and {name} disagree on {symbol} "
                                 f"({sizes[symbol]} and {size}): {_expected(patterns)}")
        if batched:
            leading.append(x.shape[:x.ndim - len(core)])
    try:
        sizes["..."] = np.broadcast_shapes(*leading)
    except ValueError:
        raise ValueError(f"{op}: the leading (batch) axes do not broadcast: "
                         f"{_expected(patterns)}") from None
    dtypes = [x.dtype for x, _ in patterns.values()]
    if same_dtype and len(set(dtypes)) > 1:
        raise TypeError(f"{op}: {_listed(list(patterns))} must have the same dtype, got "
                        f"{_listed([str(d) for d in dtypes])}")
    for name, (x, _) in patterns.items():
        if floating and x.dtype.kind != "f":
            raise TypeError(f"{op}: the {name} must hold floating-point numbers, got {x.dtype}")
        if dtype is not None and x.dtype != dtype:
            raise TypeError(f"{op}: the {name} has dtype {x.dtype} but the layer's parameters "
                            f"are {dtype}; convert one of them (the layer with .to(dtype))")
    return sizes


def check_tensor(op, name, value, optional=False):
    """`value` must be a Tensor (or None, when `optional`)."""
    if not (isinstance(value, Tensor) or optional and value is None):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")


def check_ints(op, low=None, **values):
    """Each value must be an int (not a bool), at least `low` if given: sizes, counts."""
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, INTEGERS):
            raise TypeError(f"{op}: {name} must be an int, got {value!r}")
        if low is not None and value < low:
            raise ValueError(f"{op}: {name} must be at least {low}, got {value}")


def check_number(op, name, value, low=None, high=None):
    """`value` must be a real number (not a bool, not NaN) in [low, high]; returns it as a Python
    float, so that it cannot upcast a float32 array it multiplies."""
    if isinstance(value, bool) or not isinstance(value, REAL_NUMBERS):
        raise TypeError(f"{op}: {name} must be a number, got {value!r}")
    if math.isnan(value):
        raise ValueError(f"{op}: {name} must not be NaN")
    if low is not None and value < low or high is not None and value > high:
        bounds = (f"between {low} and {high}" if low is not None and high is not None
                  else f">= {low}" if low is not None else f"<= {high}")
        raise ValueError(f"{op}: {name} must be {bounds}, got {value}")
    return float(value)


def check_numbers(op, low=None, high=None, **values):
    """`check_number` for several values with the same bounds: they come back as Python floats,
    in the order given."""
    return tuple(check_number(op, name, value, low, high) for name, value in values.items())


def check_ids(op, name, ids, count, counted):
    """`ids` (an array, a list or a tensor) must be integers in [0, count): token ids, class
    indices. Returns them as a NumPy array; one out of range is an IndexError (as NumPy's)."""
    ids = np.asarray(data_of(ids))
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= count):
        bad = ids.max() if ids.max() >= count else ids.min()
        raise TensorIndexError(f"{op}: {name} must lie in [0, {count}) ({count} {counted}), "
                               f"got {bad}")
    return ids


def check_axes(axes, ndim, shown, op=None):
    """`axes` must be ints (else a TypeError), each in [-ndim, ndim), none twice: NumPy's rules
    for the axes of a reduction or a permutation. `shown` is how a message names them ("axis 2",
    "axes 0 and 2"); `op` prefixes the message (inside an op, `Function.apply` does that)."""
    prefix = f"{op}: " if op else ""
    if not all(isinstance(a, INTEGERS) for a in axes):
        raise TypeError(f"{prefix}axes must be ints, got {tuple(axes)}")
    if not all(-ndim <= a < ndim for a in axes):
        verb = "are" if shown.startswith("axes") else "is"
        raise ValueError(f"{prefix}{shown} {verb} out of range for a tensor with {ndim} dimensions")
    if len({a % ndim for a in axes}) != len(axes):
        raise ValueError(f"{prefix}{shown} repeats an axis")


def check_choice(op, name, value, choices):
    """`value` must be one of `choices`; the error lists them."""
    if value not in choices:
        raise ValueError(f"{op}: {name} must be one of {', '.join(map(repr, choices))}, "
                         f"got {value!r}")


def _shown(pattern):
    return "(" + ", ".join(pattern.split()) + ")"


def _listed(words):
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _expected(patterns):
    """'expected query (..., L, E), key (..., S, E); got query (2, 3, 4), key (2, 5, 3)'."""
    return ("expected " + ", ".join(f"{n} {_shown(p)}" for n, (_, p) in patterns.items())
            + "; got " + ", ".join(f"{n} {x.shape}" for n, (x, _) in patterns.items()))
