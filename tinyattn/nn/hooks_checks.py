"""Chapter 4. What makes an argument of the hooks (nn/hooks.py) bad: the functions `hooks` is
given, the names `run_with_cache` keeps, what a function returns in place of an activation."""
from collections.abc import Mapping

from tinyattn.engine import Tensor


def hook_functions_fit(self, functions):
    """Module.hooks: {name: function} or [(name, function)], each name one of the model's
    activations and each function callable. Returns the pairs, as a list."""
    if isinstance(functions, Mapping):
        pairs = list(functions.items())
    elif isinstance(functions, (list, tuple)):
        pairs = list(functions)
    else:
        raise TypeError(f"functions must be a dict {{name: function}} or a list of (name, "
                        f"function) pairs, got {type(functions).__name__}")
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"functions must be a dict {{name: function}} or a list of (name, "
                            f"function) pairs, got the item {pair!r}")
        if not callable(pair[1]):
            raise TypeError(f"the function for {pair[0]!r} must be callable, got "
                            f"{type(pair[1]).__name__}")
    activations_known(self, [name for name, _ in pairs])
    return {"functions": pairs}


def names_to_cache(self, names):
    """Module.run_with_cache: None (every activation) or a list of the model's activation names.
    Returns the names. (run_with_cache passes its inputs on, so this check names it itself.)"""
    if names is None:
        return self.activation_names()
    names_known(self, names, f"{type(self).__name__}.run_with_cache")
    return list(names)


def names_known(model, names, function):
    """A list of the model's activation names; errors begin with `function`."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TypeError(f"{function}: names must be a list of activation names, got {names!r}")
    try:
        activations_known(model, names)
    except ValueError as error:
        raise ValueError(f"{function}: {error}") from None


def activations_known(model, names):
    """Every name one of `model.activation_names()`; the error lists them."""
    known = model.activation_names()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no activation {', '.join(map(repr, unknown))}; this "
                         f"{type(model).__name__}'s activations are {listed(known) or 'none'}")


def listed(names):
    """The names in one line, those of numbered layers once per layer kind:
    'embed, blocks.N.resid_pre, blocks.N.attn.q, final (N = 0 ... 3)'."""
    numbers, patterns = set(), []
    for name in names:
        parts = name.split(".")
        numbered = [i for i, part in enumerate(parts) if part.isdigit()][:1]
        for i in numbered:
            numbers.add(int(parts[i]))
            parts[i] = "N"
        if ".".join(parts) not in patterns:
            patterns.append(".".join(parts))
    if not numbers:
        return ", ".join(patterns)
    low, high = min(numbers), max(numbers)
    span = f"N = {low} ... {high}" if len(numbers) == high - low + 1 else f"N in {sorted(numbers)}"
    return f"{', '.join(patterns)} ({span})"


def replacement_fits(model, name, activation, replacement):
    """What a function given to Module.hooks returned in place of the activation `name`: a
    Tensor of the activation's shape and dtype. (Called in the forward pass: it names hooks.)"""
    where = f"{type(model).__name__}.hooks: the function on {name!r}"
    if not isinstance(replacement, Tensor):
        raise TypeError(f"{where} returned a {type(replacement).__name__}: return None to leave "
                        f"the activation as it is, or a Tensor to replace it (ta.tensor(array) "
                        f"for numbers of your own: gradients stop there)")
    if replacement.shape != activation.shape or replacement.dtype != activation.dtype:
        raise ValueError(f"{where} returned a {replacement.dtype} tensor of shape "
                         f"{replacement.shape} for an activation {activation.dtype} "
                         f"{activation.shape}: a replacement has the activation's shape and dtype")


def computed_once(model, name, cache):
    """Module.run_with_cache: an activation computed once per forward pass (a layer called twice
    in one pass would compute its activations twice, under one name)."""
    if name in cache:
        raise ValueError(f"{type(model).__name__}.run_with_cache: the activation {name!r} was "
                         f"computed twice in one forward pass (its layer was called twice); a "
                         f"cache holds one array per name")


def named_for(name, error):
    """An error raised by the function given to `hooks` for the activation `name`, said again
    with the name; a write into the read-only activation said plainly."""
    if "read-only" in str(error):
        return ValueError(f"hooks: the function for {name!r} wrote into the activation in place "
                          f"(x.data[...] = ...), which its backward would not know of: return a "
                          f"new Tensor to replace it (made with tinyattn's ops, so that "
                          f"gradients flow), or None to leave it as it is")
    if repr(name) in str(error):                        # it names the activation already
        return error
    return type(error)(f"{error} (in the function given to hooks for {name!r})")
