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

How a door is written: its lines sit at the top of the function, of `forward` or of the
constructor, when they fit in a few; a longer door is one helper, `check_<function>_arguments`,
placed right after the function it guards. The operation is named by a string, its name as the
caller wrote it ("scaled_dot_product_attention", "MultiHeadAttention"), or by
`type(self).__name__` where subclasses inherit the door (the optimizers).
"""
import math

import numpy as np

from tinyattn.engine import Tensor, TensorIndexError, data_of, numeric_array

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
            raise TypeError(f"{op}: {name} must hold floating-point numbers, got {x.dtype}")
        if dtype is not None and x.dtype != dtype:
            raise TypeError(f"{op}: {name} has dtype {x.dtype} but the layer's parameters "
                            f"are {dtype}; convert one of them (the layer with .to(dtype))")
    return sizes


def check_tensor(op, name, value, optional=False):
    """`value` must be a Tensor (or None, when `optional`)."""
    if not (isinstance(value, Tensor) or optional and value is None):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")


def check_ints(op, low=None, optional=False, **values):
    """Each value must be an int (not a bool), at least `low` if given: sizes, counts. With
    `optional`, None passes too (an optional size, such as hidden_dim=None: the layer's default)."""
    for name, value in values.items():
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, INTEGERS):
            raise TypeError(f"{op}: {name} must be an int, got {value!r}")
        if low is not None and value < low:
            raise ValueError(f"{op}: {name} must be at least {low}, got {value}")


def check_number(op, name, value, low=None, high=None, optional=False):
    """`value` must be a real number (not a bool, not NaN) in [low, high]; returns it as a Python
    float, so that it cannot upcast a float32 array it multiplies. With `optional`, None passes
    too, and is returned (such as scale=None: the default scale)."""
    if optional and value is None:
        return None
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
    indices. Returns them as a NumPy array; one out of range is an IndexError (as NumPy's), a
    ragged list a ValueError naming `op` (`numeric_array`)."""
    ids = numeric_array(data_of(ids), f"{op}: {name}")
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{op}: {name} must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= count):
        bad = ids.max() if ids.max() >= count else ids.min()
        raise TensorIndexError(f"{op}: {name} must lie in [0, {count}) ({count} {counted}), "
                               f"got {bad}")
    return ids


def check_axes(op, axes, ndim, shown):
    """`axes` must be ints (else a TypeError), each in [-ndim, ndim), none twice: NumPy's rules
    for the axes of a reduction or a permutation. `shown` is how a message names them ("axis 2",
    "axes 0 and 2"); `op` prefixes the message, or is None inside an op (whose errors
    `Function.apply` prefixes with its name)."""
    prefix = f"{op}: " if op else ""
    if not all(isinstance(a, INTEGERS) for a in axes):
        raise TypeError(f"{prefix}axes must be ints, got {tuple(axes)}")
    if not all(-ndim <= a < ndim for a in axes):
        verb = "are" if shown.startswith("axes") else "is"
        raise ValueError(f"{prefix}{shown} {verb} out of range for a tensor with {ndim} dimensions")
    if len({a % ndim for a in axes}) != len(axes):
        raise ValueError(f"{prefix}{shown} repeats an axis")


def check_flags(op, **flags):
    """Each flag must be a bool (Python's or NumPy's): is_causal="no" must not run causal
    attention, nor is_causal=None plain attention, without a word (PyTorch raises too)."""
    for name, value in flags.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{op}: {name} must be a bool, got {value!r}")


def check_dtype(op, dtype):
    """`dtype` must name a floating-point dtype (None: float64, the default); returns it as a
    NumPy dtype."""
    try:
        checked = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"{op}: dtype must be a floating-point type, got {dtype!r}") from None
    if checked.kind != "f":
        raise TypeError(f"{op}: dtype must be a floating-point type, got {checked}")
    return checked


def check_layer_arguments(op, embed_dim, num_heads=1, hidden_dim=None, dropout=0.0, scale=None,
                          dtype=None, rope=False):
    """The door of the transformer layers (MultiHeadAttention, FeedForward, and the blocks and
    models built of them), for the arguments they share and hand down: embed_dim and num_heads
    ints >= 1, embed_dim divisible by num_heads (into an even head_dim with rope, which rotates
    pairs of features), hidden_dim None or an int >= 1, dropout in [0, 1], scale None or a
    number, dtype a floating-point dtype (None: float64), rope a bool. `op` is the layer that
    received them, so that an error names it, not a sub-layer the caller never wrote."""
    check_ints(op, low=1, embed_dim=embed_dim, num_heads=num_heads)
    check_ints(op, low=1, optional=True, hidden_dim=hidden_dim)
    check_number(op, "dropout", dropout, 0, 1)
    check_number(op, "scale", scale, optional=True)
    check_dtype(op, dtype)
    check_flags(op, rope=rope)
    if embed_dim % num_heads:
        raise ValueError(f"{op}: embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
    if rope and (embed_dim // num_heads) % 2:
        raise ValueError(f"{op}: rope rotates pairs of features, so it needs an even head_dim; "
                         f"got embed_dim {embed_dim} / num_heads {num_heads} = "
                         f"{embed_dim // num_heads}")


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
