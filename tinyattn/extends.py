"""Chapter 1. `extends`, how a later chapter adds a method to a class of an earlier one."""


def extends(cls):
    """A decorator that adds the function below it to `cls` as a method, under its own name
    (d2l's `add_to_class`): how a later chapter gives a class of an earlier one a new method
    without the earlier file knowing of it. `@extends(CausalTransformer)` above `def generate`
    in nn/generation.py makes `model.generate(...)` work, `@extends(Tensor)` above `def cumsum`
    `t.cumsum(axis)`; a classmethod, staticmethod or property is added as one."""
    def add(function):
        # the function itself: a classmethod's __func__, a property's fget
        inner = getattr(function, "__func__", getattr(function, "fget", function))
        wrapped = inner
        while wrapped is not None:          # it, and what decorators (a door) wrapped, are named
            wrapped.__qualname__ = f"{cls.__name__}.{inner.__name__}"    # as methods in errors
            wrapped = getattr(wrapped, "__wrapped__", None)
        setattr(cls, inner.__name__, function)
        return function
    return add
