"""Chapter 1. Doors: every public function and layer checks its arguments once, where the user
called it.

A door is written where the signature is, and says what each argument must be:

    @door(query="(..., L, E)", key="(..., S, E)", value="(..., S, Ev)", is_causal=bool,
          scale=optional(number), block_size=at_least(1))
    def flash_attention(query, key, value, is_causal=False, scale=None, block_size=64):

A shape is written as in the shape comments of the code: a letter stands for the same size
wherever it appears, a number for that size, a name of the layer's attributes for its value
(`"(..., in_features)"` in `Linear.forward`), and the leading `...` axes must broadcast. Tensors
given a shape hold floating-point numbers of one dtype: the dtype of the layer's parameters, for a
layer. A rule no single argument can say (num_heads must divide embed_dim) is a function passed as
`check`, which gets the arguments by name.

On a user's call the door checks, then runs the function with checking switched off
(`engine.switches.checking`). So tinyattn's own calls inside it, a layer calling its sub-layers or
attention calling matmul, are not checked again: the door above them has guaranteed what they
receive. A TransformerBlock checks its input once, not once more in each of its LayerNorms,
Linears and matmuls, and the bodies below the doors are the math.

A failed check raises a TypeError (the wrong kind of argument: a string where a number belongs, a
float32 input to a float64 layer) or a ValueError (a value or shape that does not fit), with the
name of the function in front: `flash_attention: query and key disagree on E ...` (for a layer's
`__init__` and `forward`, the layer's class name). A `check` that had to read an argument to check
it (a generator of parameters can be read only once) returns {name: what it read}, which the
function then receives instead.
"""
import functools
import inspect
import math

import numpy as np

from tinyattn.engine import Tensor, switches
from tinyattn.arrays import INTEGERS, TensorIndexError, data_of, numeric_array

REAL_NUMBERS = (int, float, np.integer, np.floating)


def door(check=None, **specs):
    """Check the arguments of the function below on a user's call: see the top of this file."""
    def guard(function):
        signature = inspect.signature(function)
        names = list(signature.parameters)
        unknown = set(specs) - set(names)
        if unknown:
            raise TypeError(f"door: {function.__qualname__} has no argument {sorted(unknown)}")
        defaults = {name: p.default for name, p in signature.parameters.items()
                    if p.default is not p.empty}
        # a shape, or optional(shape), is checked with the other shapes; bool stands for `flag`
        shaped = {name: spec for name, spec in specs.items()
                  if isinstance(spec, str) or hasattr(spec, "pattern")}
        rules = {name: flag if spec is bool else spec for name, spec in specs.items()
                 if name not in shaped}
        # a layer's __init__ and forward are named after the layer, its
        # other methods after the layer and the method: "CausalTransformer.generate"
        is_layer_call = function.__name__ == "__init__" or function.__name__.startswith("forward")

        @functools.wraps(function)
        def guarded(*args, **kwargs):
            if not switches.checking:                   # called by tinyattn, inside a door
                return function(*args, **kwargs)
            values = {**defaults, **dict(zip(names, args)), **kwargs}
            if len(args) > len(names) or len(values) != len(names):
                return function(*args, **kwargs)        # Python's own TypeError says what is off
            try:
                for name, rule in rules.items():
                    rule(name, values[name])
                if shaped:
                    layer = values.get("self")
                    shapes(dtype=getattr(layer, "dtype", None), layer=layer,
                           **{name: (values[name], getattr(spec, "pattern", spec))
                              for name, spec in shaped.items()
                              if values[name] is not None or isinstance(spec, str)})
                read = check(**values) if check is not None else None
            except (TypeError, ValueError) as error:    # an IndexError is a ValueError here
                owner = values[names[0]] if names else None   # self, or cls: a classmethod
                owner = owner if isinstance(owner, type) else type(owner)
                is_method = "." in function.__qualname__      # (nn.module.extends sets it)
                name = (function.__name__ if not is_method else owner.__name__
                        if is_layer_call else f"{owner.__name__}.{function.__name__}")
                raise type(error)(f"{name}: {error}") from None
            if read is not None:                        # {name: what the check read}
                args, kwargs = (), {**values, **read}
            switches.checking = False
            try:
                return function(*args, **kwargs)
            finally:
                switches.checking = True
        return guarded
    return guard


# ------------------------------------------------------------------------------------------------
# What an argument may be: the rules a door is written with. Each is called as rule(name, value)
# and raises if the value does not fit.

def any_tensor(name, value):
    """A Tensor, of any shape and dtype."""
    if not isinstance(value, Tensor):
        raise TypeError(f"{name} must be a Tensor, got {type(value).__name__}")


def number(name, value):
    """A real number: not a bool, not NaN."""
    if isinstance(value, bool) or not isinstance(value, REAL_NUMBERS):
        raise TypeError(f"{name} must be a number, got {value!r}")
    if math.isnan(value):
        raise ValueError(f"{name} must not be NaN")


def between(low, high=math.inf):
    """A real number in [low, high]."""
    def rule(name, value):
        number(name, value)
        if not low <= value <= high:
            bounds = f">= {low}" if high == math.inf else f"between {low} and {high}"
            raise ValueError(f"{name} must be {bounds}, got {value}")
    return rule


def integer(name, value):
    """An int (not a bool), of any sign: an index, as NumPy's (-1 the last)."""
    if isinstance(value, bool) or not isinstance(value, INTEGERS):
        raise TypeError(f"{name} must be an int, got {value!r}")


def at_least(low):
    """An int (not a bool) of at least `low`: a size, a count."""
    def rule(name, value):
        integer(name, value)
        if value < low:
            raise ValueError(f"{name} must be at least {low}, got {value}")
    return rule


def optional(rule):
    """None, or what `rule` accepts (scale=None: the default scale); `rule` may be a shape."""
    def optional_rule(name, value):
        if value is not None:
            (flag if rule is bool else rule)(name, value)
    if isinstance(rule, str):
        optional_rule.pattern = rule
    return optional_rule


def one_of(*choices):
    """One of `choices`; the error lists them."""
    def rule(name, value):
        if value not in choices:
            raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}, "
                             f"got {value!r}")
    return rule


def floating_dtype(name, value):
    """A floating-point dtype (None: float64, the default)."""
    try:
        dtype = np.dtype(value)
    except TypeError:
        raise TypeError(f"{name} must be a floating-point type, got {value!r}") from None
    if dtype.kind != "f":
        raise TypeError(f"{name} must be a floating-point type, got {dtype}")


def flag(name, value):
    """A bool, Python's or NumPy's: is_causal="no" must not run causal attention, nor
    is_causal=None plain attention, without a word (PyTorch raises too). `door` takes `bool`
    for it."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a bool, got {value!r}")


def ids(name, values, count, counted="ids"):
    """Integers in [0, count) (an array, a list or a tensor): token ids, class indices. One out of
    range is an IndexError, as NumPy's."""
    values = numeric_array(data_of(values), name)
    if values.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integers, got dtype {values.dtype}")
    if values.size and (values.min() < 0 or values.max() >= count):
        bad = values.max() if values.max() >= count else values.min()
        raise TensorIndexError(f"{name} must lie in [0, {count}) ({count} {counted}), got {bad}")


def shapes(dtype=None, layer=None, **patterns):
    """Tensors against shape patterns, `name=(tensor, "(..., L, E)")`; returns {letter: size},
    with the broadcast leading axes under "...". The tensors hold floating-point numbers of one
    dtype (`dtype`, the layer's, when given); a name in a pattern that is an attribute of `layer`
    is its value."""
    sizes, leading = {}, []
    symbols_of = {name: pattern.strip("()").replace(",", " ").split()
                  for name, (_, pattern) in patterns.items()}
    for name, (x, _) in patterns.items():
        any_tensor(name, x)
        symbols = [str(getattr(layer, s)) if hasattr(layer, s) else s for s in symbols_of[name]]
        symbols_of[name] = symbols
        batched = symbols[0] == "..."
        core = symbols[1:] if batched else symbols
        if x.ndim < len(core) or not batched and x.ndim != len(core):
            raise ValueError(f"{name} must have shape {_shown(symbols)}, got {x.shape}")
        for symbol, size in zip(core, x.shape[x.ndim - len(core):]):
            if symbol.isdigit() and size != int(symbol):
                raise ValueError(f"{name} must have shape {_shown(symbols)}, got {x.shape}")
            if sizes.setdefault(symbol, size) != size:
                first = next(n for n in patterns if symbol in symbols_of[n])
                raise ValueError(f"{first} and {name} disagree on {symbol} "
                                 f"({sizes[symbol]} and {size}): {_expected(patterns, symbols_of)}")
        if batched:
            leading.append(x.shape[:x.ndim - len(core)])
    try:
        sizes["..."] = np.broadcast_shapes(*leading)
    except ValueError:
        raise ValueError(f"the leading (batch) axes do not broadcast: "
                         f"{_expected(patterns, symbols_of)}") from None
    tensors = {name: x for name, (x, _) in patterns.items()}
    for name, x in tensors.items():
        if dtype is not None and x.dtype != dtype:
            raise TypeError(f"{name} has dtype {x.dtype} but the layer's parameters are {dtype}; "
                            f"convert one of them (the layer with .to(dtype))")
    if len({x.dtype for x in tensors.values()}) > 1:
        raise TypeError(f"{_listed(list(tensors))} must have the same dtype, got "
                        f"{_listed([str(x.dtype) for x in tensors.values()])}")
    for name, x in tensors.items():
        if x.dtype.kind != "f":
            raise TypeError(f"{name} must hold floating-point numbers, got {x.dtype}")
    return sizes


def _shown(symbols):
    return "(" + ", ".join(symbols) + ")"


def _listed(words):
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else words[0]


def _expected(patterns, symbols_of):
    """'expected query (..., L, E), key (..., S, E); got query (2, 3, 4), key (2, 5, 3)'."""
    return ("expected " + ", ".join(f"{n} {_shown(symbols_of[n])}" for n in patterns)
            + "; got " + ", ".join(f"{n} {x.shape}" for n, (x, _) in patterns.items()))
