"""Chapter 1. `Module` and `Parameter`: how layers hold their weights.

A Module is a Python object whose attributes include its Parameters and its sub-Modules (also
inside lists, such as the blocks of a transformer). Walking those attributes in the order they were
set gives every parameter a dotted name, `blocks.0.attn.q_proj.weight`, used by `state_dict()`,
loading and drawing.

Later chapters add to the layers of this one in two ways: `extends(cls)` (tinyattn/extends.py)
adds a method to a class (chapter 2 gives the language model `generate`, chapter 3
gives every Module `save` and `load`), and `Module.hook(name, x)`, a line in a forward pass, is a
place where a function can read or replace an activation (chapter 4's hooks, which observe and
edit a model; what a model computes, its positions and its cache, is in its forward). Chapter 1
reads as if neither existed: without functions attached, `hook` returns x.
"""
from tinyattn import rng
from tinyattn.arguments import door, floating_dtype
from tinyattn.engine import Tensor, switches
from tinyattn.nn import checks
from tinyattn.extends import extends  # noqa: F401  (later chapters import it from here too)


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
        if not switches.watchers:                   # a tool may watch layers (engine.Watcher)
            return self.forward(*args, **kwargs)
        for watcher in switches.watchers:
            watcher.called(self, args, kwargs)
        output = self.forward(*args, **kwargs)
        for watcher in reversed(switches.watchers):
            watcher.returned(self, output)
        return output

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

    def named_modules(self, prefix=""):
        """(dotted name, module) for this module (named `prefix`, "" by default) and each of its
        sub-modules at every depth, depth first, each module once: "blocks.0.attn" is
        `self.blocks[0].attn`. The one walk over the tree of layers: hooks, LoRA, the drawing and
        the views all find layers by it, as in PyTorch."""
        seen, pending = set(), [(prefix, self)]
        while pending:
            name, module = pending.pop()
            if id(module) in seen:
                continue
            seen.add(id(module))
            yield name, module
            children = [(f"{name}.{child}" if name else child, sub)
                        for child, sub in module.named_children()]
            pending.extend(reversed(children))          # the first child comes out first

    def modules(self):
        """This module and all its sub-modules, depth first."""
        return (module for _, module in self.named_modules())

    def get_submodule(self, name):
        """The sub-module at the dotted `name` ("blocks.0.attn"; "" is this module)."""
        for dotted, module in self.named_modules():
            if dotted == name:
                return module
        raise AttributeError(f"{type(self).__name__} has no sub-module {name!r}")

    def set_submodule(self, name, module):
        """Put `module` at the dotted `name` in place of the sub-module there (in a list too:
        "blocks.0")."""
        for dotted, holder in self.named_modules():
            for child, _ in holder.named_children():
                if (f"{dotted}.{child}" if dotted else child) == name:
                    attribute, _, index = child.partition(".")
                    if index:
                        getattr(holder, attribute)[int(index)] = module
                    else:
                        setattr(holder, attribute, module)
                    return
        raise AttributeError(f"{type(self).__name__} has no sub-module {name!r}")

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
        arrays = checks.state_fits(self, state)         # {name: array in the parameter's dtype}
        for name, parameter in self.named_parameters():
            parameter.data[...] = arrays[name]

    # ---------------------------------------------------------------- activations, by name
    # A forward pass writes `x = self.hook("resid_post", x)` where it has an activation worth a
    # name; `activations` lists a layer's names. (The extension point of chapter 4.)
    activations = ()
    hooked = None           # {name: [function]} of the functions attached to this layer

    def hook(self, name, x):
        """The activation `x`, which this layer calls `name`, passed through the functions
        attached to that name (`attach`), in order: each gets it and returns it, or returns
        something else in its place, which the rest of the forward pass then uses (gradients flow
        through what it returns). With no function attached, x itself, at the cost of one
        attribute lookup."""
        if self.hooked is None or name not in self.hooked:
            return x
        for function in self.hooked[name]:
            x = function(x)
        return x

    def attach(self, name, function):
        """Pass this layer's activation `name` through `function(x) -> x` from now on; returns
        the function that detaches it again."""
        if name not in self.activations:
            raise ValueError(f"{type(self).__name__} has no activation {name!r}; its "
                             f"activations are {', '.join(self.activations) or 'none'}")
        if self.hooked is None:
            self.hooked = {}
        self.hooked.setdefault(name, []).append(function)

        def detach():
            self.hooked[name].remove(function)
            if not self.hooked[name]:
                del self.hooked[name]
            if not self.hooked:
                self.hooked = None
        return detach

    def __repr__(self):
        children = "".join(f"\n  ({name}): " + repr(child).replace("\n", "\n  ")
                           for name, child in self.named_children())
        return f"{type(self).__name__}({self.extra_repr()}{children}\n)" if children \
            else f"{type(self).__name__}({self.extra_repr()})"

    def extra_repr(self):
        return ""


def uniform(shape, bound, dtype):
    """A parameter drawn uniformly from [-bound, bound] with the seedable generator."""
    return Parameter(rng.generator.uniform(-bound, bound, shape).astype(dtype))
