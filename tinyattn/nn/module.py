"""`Module` and `Parameter`: how layers hold their weights.

A Module is a Python object whose attributes include its Parameters and its sub-Modules (also
inside lists, such as the blocks of a transformer). Walking those attributes in the order they were
set gives every parameter a dotted name, `blocks.0.attn.q_proj.weight`, used by `state_dict()`,
saving, loading and drawing.
"""
import os
import zipfile
import zlib
from collections.abc import Mapping

import numpy as np

from tinyattn import rng
from tinyattn.arguments import door, floating_dtype
from tinyattn.engine import Tensor
from tinyattn.plumbing import data_of, numeric_array
from tinyattn.safetensors import (opened_to_read, read_safetensors, replaced_atomically,
                                  write_safetensors)


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
        where it lives, `q_proj.weight`, so that a drawing of the graph can label it.

        Modules are built inside out, so each enclosing module lengthens the names its children
        gave (`weight` -> `q_proj.weight` -> `attn.q_proj.weight`); a name is never replaced by
        one that does not end with it, so a tied weight keeps its first name. Parameters added
        otherwise (appended to a list later) keep a short name; `draw_graph(params=model)` names
        them from the model's point of view.
        """
        object.__setattr__(self, name, value)
        if isinstance(value, (Parameter, Module, list, tuple)):
            for dotted_name, parameter in self.named_parameters():
                if parameter.name is None or dotted_name.endswith("." + parameter.name):
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

    @property
    def dtype(self):
        """The dtype of the layer's parameters (None for a layer without any)."""
        return next((p.dtype for _, p in self.named_parameters()), None)

    @door(dtype=floating_dtype)
    def to(self, dtype):
        """Convert every parameter to `dtype` (e.g. np.float32), in place; returns self."""
        for parameter in self.parameters():
            parameter.data = parameter.data.astype(dtype)
            parameter.grad = None
        return self

    # ---------------------------------------------------------------- saving and loading
    def state_dict(self):
        """{dotted name: a copy of the parameter's array}."""
        return {name: parameter.data.copy() for name, parameter in self.named_parameters()}

    def load_state_dict(self, state):
        """Copy arrays into the parameters of the same names; names and shapes must match, and
        the numbers must fit the parameters' dtype. Everything is checked (and converted) before
        anything is changed, so a failed load leaves the module as it was."""
        if not isinstance(state, Mapping):
            raise TypeError(f"load_state_dict: expected a dict of arrays, "
                            f"got {type(state).__name__}")
        parameters = dict(self.named_parameters())
        missing, unexpected = parameters.keys() - state.keys(), state.keys() - parameters.keys()
        if missing or unexpected:
            raise ValueError(f"load_state_dict: missing {sorted(missing)}, "
                             f"unexpected {sorted(unexpected)}")
        arrays = {}
        for name, parameter in parameters.items():
            array = numeric_array(data_of(state[name]), f"load_state_dict: {name}")
            if array.shape != parameter.shape:
                raise ValueError(f"load_state_dict: {name} has shape {parameter.shape}, "
                                 f"the state has {array.shape}")
            try:
                with np.errstate(over="raise"):
                    arrays[name] = array.astype(parameter.dtype)
            except FloatingPointError:
                raise ValueError(f"load_state_dict: {name} holds numbers too large for "
                                 f"{parameter.dtype}") from None
        for name, parameter in parameters.items():
            parameter.data[...] = arrays[name]

    def save(self, path):
        """Save the parameters in the file `path`, under exactly that name (no extension is added,
        so `load(path)` finds it), as a safetensors file of arrays named as in `state_dict()`: the
        format Hugging Face and PyTorch read (`tinyattn/safetensors.py`). A save that fails leaves
        no half-written file.
        """
        with replaced_atomically(path, "save") as file:
            write_safetensors(file, self.state_dict())

    def load(self, path):
        """Load the parameters from a file written by `save` (or an older .npz checkpoint, see
        `read_checkpoint`); returns self. A file that is not such a checkpoint, or one of another
        model, raises an error saying why, and changes nothing."""
        path = os.fspath(path)
        state = read_checkpoint(path)
        try:
            self.load_state_dict(state)
        except (ValueError, TypeError) as error:
            reason = str(error).removeprefix("load_state_dict: ")
            raise type(error)(f"load: the checkpoint {path!r} does not fit this "
                              f"{type(self).__name__}: {reason}") from None
        return self

    def __repr__(self):
        children = "".join(f"\n  ({name}): " + repr(child).replace("\n", "\n  ")
                           for name, child in self.named_children())
        return f"{type(self).__name__}({self.extra_repr()}{children}\n)" if children \
            else f"{type(self).__name__}({self.extra_repr()})"

    def extra_repr(self):
        return ""


def write_checkpoint(path, arrays):
    """Write {name: array} to the file `path` as a NumPy .npz archive, which `read_checkpoint`
    reads back: the format `Module.save` wrote before it wrote safetensors, kept for arrays that
    safetensors cannot hold, such as the strings of demo 11's vocabulary (nothing that needs
    pickle). The file is written whole or not at all (`replaced_atomically`).
    """
    with replaced_atomically(path, "save") as file:
        np.savez(file, **arrays)


def read_checkpoint(path):
    """{name: array} from a checkpoint file, or a clear error saying why the file is not one.

    A checkpoint is a safetensors file (`Module.save` writes one) or a NumPy .npz archive
    (`write_checkpoint`, and `Module.save` before safetensors): an .npz is a zip, which begins
    with the bytes ZIP_START, and anything else is read as safetensors. NumPy's own messages
    about a damaged .npz speak of pickles and zip internals: they are said in a sentence here.
    """
    not_a_checkpoint = f"load: {path!r} is not a tinyattn checkpoint"
    with opened_to_read(path, "load", "checkpoint file") as file:
        start = file.read(len(ZIP_START))
        if not start:
            raise ValueError(f"{not_a_checkpoint}: the file is empty")
        file.seek(0)
        if start != ZIP_START:
            try:
                return read_safetensors(file, os.fstat(file.fileno()).st_size)
            except ValueError as error:
                raise ValueError(f"{not_a_checkpoint} (safetensors, or NumPy .npz): "
                                 f"{error}") from None
        try:
            with np.load(file, allow_pickle=False) as archive:
                return {name: archive[name] for name in archive.files}
        except (zipfile.BadZipFile, zlib.error, EOFError) as error:
            raise ValueError(f"{not_a_checkpoint}: the zip archive is damaged or cut short "
                             f"({error})") from None
        except ValueError as error:     # e.g. an array of Python objects, which only pickle reads
            raise ValueError(f"{not_a_checkpoint}: an entry of the archive cannot be read as an "
                             f"array of numbers ({error})") from None


ZIP_START = b"PK\x03\x04"          # the first bytes of every zip archive


def uniform(shape, bound, dtype):
    """A parameter drawn uniformly from [-bound, bound] with the seedable generator."""
    return Parameter(rng.generator.uniform(-bound, bound, shape).astype(dtype))
