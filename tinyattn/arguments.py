"""Doors: every public function and layer checks its arguments once, where the user called it.

A door is a check function with the signature of the function it guards, attached where that
signature is:

    @door(check_attention)
    def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, ...):

On a user's call the door runs the check, which raises a clear error for anything the function
cannot use, then runs the function with checking switched off (`engine.switches.checking`). So
tinyattn's own calls inside it, a layer calling its sub-layers or attention calling matmul, are
not checked again: the door above them has guaranteed what they receive. A TransformerBlock checks
its input once, not once more in each of its LayerNorms, Linears and matmuls, and the bodies below
the doors are the math.

A check raises a TypeError (the wrong kind of argument: a string where a number belongs, a float32
input to a float64 layer) or a ValueError (a value or shape that does not fit), without naming the
function: the door puts the name in front, `scaled_dot_product_attention: query and key disagree
on E ...` (for a layer's `__init__` and `forward`, the layer's class name). A check that had to
read an argument to check it (a generator of parameters can be read only once) returns
{name: what it read}, which the function then receives instead.

The helpers below are what the checks are written with. Shapes are written as in the shape
comments of the code: `shapes(query=(query, "(..., L, E)"), key=(key, "(..., S, E)"))` says that
query is (..., L, E) and key (..., S, E): a letter stands for the same size wherever it appears,
a number for that size, and the leading `...` axes must broadcast.
"""
import functools
import inspect
import math

import numpy as np

from tinyattn.engine import Tensor, switches
from tinyattn.plumbing import INTEGERS, TensorIndexError, data_of, numeric_array

REAL_NUMBERS = (int, float, np.integer, np.floating)


def door(check):
    """Attach `check` (same signature) as the door of the function below: see the top of this
    file."""
    def attach(function):
        signature = inspect.signature(function)
        if inspect.signature(check) != signature:
            raise TypeError(f"door: {check.__name__}{inspect.signature(check)} does not have the "
                            f"signature of {function.__qualname__}{signature}")
        # a layer's __init__ and forward (forward_with_weights) are named after the layer, its
        # other methods after the layer and the method: "CausalTransformer.generate"
        is_method = "." in function.__qualname__
        is_layer_call = function.__name__ == "__init__" or function.__name__.startswith("forward")

        @functools.wraps(function)
        def guarded(*args, **kwargs):
            if not switches.checking:                   # called by tinyattn, inside a door
                return function(*args, **kwargs)
            try:
                read = check(*args, **kwargs)
            except (TypeError, ValueError) as error:    # an IndexError is a ValueError here
                name = (function.__name__ if not is_method else type(args[0]).__name__
                        if is_layer_call else f"{type(args[0]).__name__}.{function.__name__}")
                raise type(error)(f"{name}: {error}") from None
            if read is not None:                        # {name: what the check read}
                bound = signature.bind(*args, **kwargs)
                bound.arguments.update(read)
                args, kwargs = bound.args, bound.kwargs
            switches.checking = False
            try:
                return function(*args, **kwargs)
            finally:
                switches.checking = True
        return guarded
    return attach


# ------------------------------------------------------------------------------------------------
# The helpers checks are written with

def shapes(same_dtype=False, dtype=None, floating=False, optional=(), **patterns):
    """Check tensors against shape patterns; returns {letter: size} for the letters of the
    patterns, and the broadcast leading axes under "...".

    Each keyword is `name=(tensor, "(B, L, E)")`. `same_dtype`: all the tensors share one dtype (as
    PyTorch requires: no silent promotion). `dtype`: all of them have this dtype, the dtype of the
    layer's parameters. `floating`: they hold floating-point numbers. `optional`: the names whose
    tensor may be None (then it is not checked).
    """
    patterns = {name: (x, pattern.strip("()").replace(",", " ").split())
                for name, (x, pattern) in patterns.items()
                if not (x is None and name in optional)}
    sizes, leading = {}, []
    for name, (x, symbols) in patterns.items():
        tensor(name, x)
        batched = symbols[0] == "..."
        core = symbols[1:] if batched else symbols
        if x.ndim < len(core) or not batched and x.ndim != len(core):
            raise ValueError(f"{name} must have shape {_shown(symbols)}, got {x.shape}")
        for symbol, size in zip(core, x.shape[x.ndim - len(core):]):
            if symbol.isdigit() and size != int(symbol):
                raise ValueError(f"{name} must have shape {_shown(symbols)}, got {x.shape}")
            if sizes.setdefault(symbol, size) != size:
                first = next(n for n, (_, s) in patterns.items() if symbol in s)
                raise ValueError(f"{first} and {name} disagree on {symbol} "
                                 f"({sizes[symbol]} and {size}): {_expected(patterns)}")
        if batched:
            leading.append(x.shape[:x.ndim - len(core)])
    try:
        sizes["..."] = np.broadcast_shapes(*leading)
    except ValueError:
        raise ValueError(f"the leading (batch) axes do not broadcast: "
                         f"{_expected(patterns)}") from None
    dtypes = [x.dtype for x, _ in patterns.values()]
    if same_dtype and len(set(dtypes)) > 1:
        raise TypeError(f"{_listed(list(patterns))} must have the same dtype, got "
                        f"{_listed([str(d) for d in dtypes])}")
    for name, (x, _) in patterns.items():
        if floating and x.dtype.kind != "f":
            raise TypeError(f"{name} must hold floating-point numbers, got {x.dtype}")
        if dtype is not None and x.dtype != dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but the layer's parameters are {dtype}; "
                            f"convert one of them (the layer with .to(dtype))")
    return sizes


def tensor(name, value, optional=False):
    """`value` must be a Tensor (or None, when `optional`)."""
    if not (isinstance(value, Tensor) or optional and value is None):
        raise TypeError(f"{name} must be a Tensor, got {type(value).__name__}")


def ints(low=None, optional=False, **values):
    """Each value must be an int (not a bool), at least `low` if given: sizes, counts. With
    `optional`, None passes too (an optional size, such as hidden_dim=None: the layer's default)."""
    for name, value in values.items():
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, INTEGERS):
            raise TypeError(f"{name} must be an int, got {value!r}")
        if low is not None and value < low:
            raise ValueError(f"{name} must be at least {low}, got {value}")


def numbers(low=None, high=None, optional=False, **values):
    """Each value must be a real number (not a bool, not NaN) in [low, high]. With `optional`, None
    passes too (such as scale=None: the default scale)."""
    for name, value in values.items():
        if optional and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, REAL_NUMBERS):
            raise TypeError(f"{name} must be a number, got {value!r}")
        if math.isnan(value):
            raise ValueError(f"{name} must not be NaN")
        if low is not None and value < low or high is not None and value > high:
            bounds = (f"between {low} and {high}" if low is not None and high is not None
                      else f">= {low}" if low is not None else f"<= {high}")
            raise ValueError(f"{name} must be {bounds}, got {value}")


def flags(**values):
    """Each flag must be a bool (Python's or NumPy's): is_causal="no" must not run causal
    attention, nor is_causal=None plain attention, without a word (PyTorch raises too)."""
    for name, value in values.items():
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{name} must be a bool, got {value!r}")


def floating_dtype(dtype):
    """`dtype` must name a floating-point dtype (None: float64, the default)."""
    try:
        checked = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"dtype must be a floating-point type, got {dtype!r}") from None
    if checked.kind != "f":
        raise TypeError(f"dtype must be a floating-point type, got {checked}")


def ids(name, ids, count, counted):
    """`ids` (an array, a list or a tensor) must be integers in [0, count): token ids, class
    indices. One out of range is an IndexError (as NumPy's)."""
    ids = numeric_array(data_of(ids), name)
    if ids.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or ids.max() >= count):
        bad = ids.max() if ids.max() >= count else ids.min()
        raise TensorIndexError(f"{name} must lie in [0, {count}) ({count} {counted}), got {bad}")


def one_of(name, value, choices):
    """`value` must be one of `choices`; the error lists them."""
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, got {value!r}")


def attention_mask(mask, scores_shape, dtype, name="attn_mask"):
    """An attention mask (None, or booleans / floats broadcasting to the scores' shape
    (..., L, S)); a float mask given as a tensor (it may be learned) must have the scores' dtype,
    one given as an array is converted to it (`functional.scaled_dot_product.split_mask`)."""
    if mask is None:
        return
    array = numeric_array(data_of(mask), name)
    try:
        fits = np.broadcast_shapes(array.shape, scores_shape) == tuple(scores_shape)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name} of shape {array.shape} does not broadcast to the scores' shape "
                         f"{tuple(scores_shape)} (..., L, S)")
    if array.dtype != np.bool_ and array.dtype.kind != "f":
        raise TypeError(f"{name} must be boolean or float, got dtype {array.dtype}")
    if isinstance(mask, Tensor) and array.dtype.kind == "f" and array.dtype != dtype:
        raise TypeError(f"{name} is a {array.dtype} tensor but the query is {dtype}; convert one "
                        f"of them")


def attention_inputs(query, key, value, scale=None, keys="S"):
    """query (..., L, E), key (..., S, E) and value (..., S, Ev), floating-point tensors of one
    dtype, and `scale` None (1 / sqrt(E), which needs E >= 1) or a number. `keys` names the number
    of keys in messages ("L": there must be as many as queries). Returns the sizes."""
    sizes = shapes(same_dtype=True, floating=True, query=(query, "(..., L, E)"),
                   key=(key, f"(..., {keys}, E)"), value=(value, f"(..., {keys}, Ev)"))
    numbers(optional=True, scale=scale)
    if scale is None and sizes["E"] == 0:
        raise ValueError("queries and keys need a width E of 1 or more, got a width E of 0")
    return sizes


def layer_sizes(embed_dim, num_heads=1, hidden_dim=None, dropout=0.0, scale=None, dtype=None,
                rope=False):
    """What the transformer layers share (MultiHeadAttention, FeedForward, and the blocks and
    models built of them): embed_dim and num_heads ints >= 1, embed_dim divisible by num_heads
    (into an even head_dim with rope, which rotates pairs of features), hidden_dim None or an int
    >= 1, dropout in [0, 1], scale None or a number, dtype a floating-point dtype, rope a bool."""
    ints(low=1, embed_dim=embed_dim, num_heads=num_heads)
    ints(low=1, optional=True, hidden_dim=hidden_dim)
    numbers(0, 1, dropout=dropout)
    numbers(optional=True, scale=scale)
    floating_dtype(dtype)
    flags(rope=rope)
    if embed_dim % num_heads:
        raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
    if rope and (embed_dim // num_heads) % 2:
        raise ValueError(f"rope rotates pairs of features, so it needs an even head_dim; got "
                         f"embed_dim {embed_dim} / num_heads {num_heads} = "
                         f"{embed_dim // num_heads}")


def _shown(symbols):
    return "(" + ", ".join(symbols) + ")"


def _listed(words):
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _expected(patterns):
    """'expected query (..., L, E), key (..., S, E); got query (2, 3, 4), key (2, 5, 3)'."""
    return ("expected " + ", ".join(f"{n} {_shown(s)}" for n, (_, s) in patterns.items())
            + "; got " + ", ".join(f"{n} {x.shape}" for n, (x, _) in patterns.items()))
