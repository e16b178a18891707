"""`Module` and `Parameter`: how layers hold their weights.

A Module is a Python object whose attributes include its Parameters and its sub-Modules (also
inside lists, such as the blocks of a transformer). Walking those attributes in the order they were
set gives every parameter a dotted name, `blocks.0.attn.q_proj.weight`, used by `state_dict()`,
saving, loading and drawing.
"""
from collections.abc import Mapping

import numpy as np

from tinyattn import rng
from tinyattn.engine import Tensor


class Parameter(Tensor):
    """A tensor a Module learns: it requires grad."""

    def __init__(self, data, requires_grad=True):
        super().__init__(data, requires_grad=requires_grad)


class Module:
    """Base class of the layers: subclasses set Parameters and sub-Modules in `__init__` and
    write `forward`."""

    training = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward")

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def __setattr__(self, name, value):
        """Setting a Parameter or sub-Module (or a list of them) also names every parameter after
        where it now lives, `q_proj.weight`, so that a drawing of the graph can label it."""
        object.__setattr__(self, name, value)
        if isinstance(value, (Parameter, Module, list, tuple)):
            for dotted_name, parameter in self.named_parameters():
                parameter.name = dotted_name

    # ---------------------------------------------------------------- the tree of modules
    def named_children(self):
        """(name, module) for each direct sub-Module, including those in lists and tuples."""
        for name, value in vars(self).items():
            if isinstance(value, Module):
                yield name, value
            elif isinstance(value, (list, tuple)):
                for i, item in enumerate(value):
                    if isinstance(item, Module):
                        yield f"{name}.{i}", item

    def named_parameters(self, prefix=""):
        """(dotted name, parameter) for every parameter of this module and its sub-modules; a
        parameter shared by two modules is listed once."""
        seen = set()
        for name, parameter in self._all_named_parameters(prefix):
            if id(parameter) not in seen:
                seen.add(id(parameter))
                yield name, parameter

    def _all_named_parameters(self, prefix):
        for name, value in vars(self).items():
            if isinstance(value, Parameter):
                yield prefix + name, value
        for name, child in self.named_children():
            yield from child._all_named_parameters(f"{prefix}{name}.")

    def parameters(self):
        return [parameter for _, parameter in self.named_parameters()]

    def modules(self):
        """This module and all its sub-modules, depth first."""
        yield self
        for _, child in self.named_children():
            yield from child.modules()

    # ---------------------------------------------------------------- training state
    def zero_grad(self):
        for parameter in self.parameters():
            parameter.grad = None

    def train(self, mode=True):
        """Switch training mode (dropout on) or, with mode=False, evaluation mode; returns self."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def to(self, dtype):
        """Convert every parameter to `dtype` (e.g. np.float32), in place; returns self."""
        dtype = np.dtype(dtype)
        if dtype.kind != "f":
            raise TypeError(f"to: parameters must be floating point, got {dtype}")
        for parameter in self.parameters():
            parameter.data = parameter.data.astype(dtype)
            parameter.grad = None
        return self

    # ---------------------------------------------------------------- saving and loading
    def state_dict(self):
        """{dotted name: a copy of the parameter's array}."""
        return {name: parameter.data.copy() for name, parameter in self.named_parameters()}

    def load_state_dict(self, state):
        """Copy arrays into the parameters of the same names; names, shapes and kinds (real
        numbers) must match. Everything is checked before anything is changed."""
        if not isinstance(state, Mapping):
            raise TypeError(f"load_state_dict: expected a dict of arrays, got {type(state).__name__}")
        parameters = dict(self.named_parameters())
        missing, unexpected = parameters.keys() - state.keys(), state.keys() - parameters.keys()
        if missing or unexpected:
            raise ValueError(f"load_state_dict: missing {sorted(missing)}, "
                             f"unexpected {sorted(unexpected)}")
        arrays = {}
        for name, parameter in parameters.items():
            array = np.asarray(state[name].data if isinstance(state[name], Tensor) else state[name])
            if array.dtype.kind not in "biuf":
                raise TypeError(f"load_state_dict: {name} must hold real numbers, the state has "
                                f"dtype {array.dtype}")
            if array.shape != parameter.shape:
                raise ValueError(f"load_state_dict: {name} has shape {parameter.shape}, "
                                 f"the state has {array.shape}")
            arrays[name] = array
        for name, parameter in parameters.items():
            parameter.data[...] = arrays[name]

    def save(self, path):
        """Save the parameters to a NumPy `.npz` file (arrays only, no pickle)."""
        np.savez(path, **self.state_dict())

    def load(self, path):
        """Load parameters saved by `save`."""
        with np.load(path, allow_pickle=False) as arrays:
            self.load_state_dict(dict(arrays))
        return self

    def __repr__(self):
        children = "".join(f"\n  ({name}): " + repr(child).replace("\n", "\n  ")
                           for name, child in self.named_children())
        return f"{type(self).__name__}({self.extra_repr()}{children}\n)" if children \
            else f"{type(self).__name__}({self.extra_repr()})"

    def extra_repr(self):
        return ""


def check_sizes(layer, **sizes):
    """Each size (a number of features, heads, embeddings...) must be an int >= 0."""
    for name, size in sizes.items():
        if not isinstance(size, (int, np.integer)) or isinstance(size, bool):
            raise TypeError(f"{layer}: {name} must be an int, got {size!r}")
        if size < 0:
            raise ValueError(f"{layer}: {name} must not be negative, got {size}")


def check_input(layer, x, dtype=None, name="input"):
    """Layers take tensors (as PyTorch's do) of their parameters' dtype: NumPy would promote a
    float32 input to a float64 layer's float64 silently. Anything else is a TypeError naming the
    layer."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{layer}: the {name} must be a Tensor, got {type(x).__name__}")
    if dtype is not None and x.dtype != dtype:
        raise TypeError(f"{layer}: the {name} has dtype {x.dtype} but the layer's parameters are "
                        f"{dtype}; convert one of them (the layer with .to(dtype))")


def uniform(shape, bound, dtype):
    """A parameter drawn uniformly from [-bound, bound] with the seedable generator."""
    return Parameter(rng.generator.uniform(-bound, bound, shape).astype(dtype or np.float64))
