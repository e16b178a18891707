"""The three kinds of row in the checklist, and how a row builds what it checks.

- OpCase: one op on inputs of given shapes, with the same computation in NumPy (the tests compare
  the forward values with it); its gradients are checked element by element.
- LayerCase: a function or a layer as a whole, built fresh and seeded, with respect to every
  input and parameter; large inputs are checked along random directions.
- FusedCase: a fused op against the chain of primitive ops it replaces: the same output and the
  same gradients, both computed by the engine.
"""
from typing import Callable, NamedTuple

import numpy as np

import tinyattn as ta


class OpCase(NamedTuple):
    name: str
    op: Callable            # on tensors
    reference: Callable     # the same computation on NumPy arrays
    shapes: tuple           # one shape per input
    domain: str = "normal"  # how inputs are drawn: normal, positive, away_from_zero
    float64_constant: bool = False   # mixes in a float64 array, which NumPy's promotion obeys


def op_inputs(case, dtype=np.float64, seed=0):
    """The NumPy arrays an op case runs on, drawn from its domain."""
    random = np.random.default_rng(seed)
    arrays = []
    for shape in case.shapes:
        x = random.standard_normal(shape)
        if case.domain == "positive":
            x = random.uniform(0.5, 2.0, shape)
        elif case.domain == "away_from_zero":
            x = np.sign(x) * (0.3 + np.abs(x))
        arrays.append(x.astype(dtype))
    return arrays


def op_check(case):
    """(fn, inputs) for gradcheck: the op on fresh float64 leaves."""
    return case.op, [ta.tensor(a, requires_grad=True) for a in op_inputs(case)]


class LayerCase(NamedTuple):
    name: str
    build: Callable        # () -> (fn, inputs): a fresh float64 layer and its inputs, seeded
    directions: int = None  # check along this many random directions instead of element-wise


def leaves(*shapes, seed=0):
    """Standard normal float64 tensors that require grad, one per shape."""
    random = np.random.default_rng(seed)
    return [ta.tensor(random.standard_normal(shape), requires_grad=True) for shape in shapes]


def with_parameters(module, *inputs, **kwargs):
    """(fn, inputs) checking `module(*inputs, **kwargs)` with respect to the inputs and every
    parameter.

    The parameters are passed to gradcheck as extra inputs: gradcheck perturbs their arrays in
    place, and the module reads them from there, so `fn` can ignore them.
    """
    def fn(*args):
        return module(*args[:len(inputs)], **kwargs)
    return fn, [*inputs, *module.parameters()]


def layer(make_module, *input_shapes, **kwargs):
    """A build function: a module made after seeding (so every run draws the same parameters),
    applied to standard normal inputs of the given shapes."""
    def build():
        ta.manual_seed(0)
        return with_parameters(make_module(), *leaves(*input_shapes), **kwargs)
    return build


def function(fn, *input_shapes, **kwargs):
    """A build function for `fn(*inputs, **kwargs)` on standard normal inputs."""
    return lambda: (lambda *args: fn(*args, **kwargs), leaves(*input_shapes))


class FusedCase(NamedTuple):
    name: str
    fused: Callable         # on tensors: the fused op
    composed: Callable      # on tensors: the same function written with primitive ops
    shapes: tuple           # one shape per input


def fused_and_composed(case, seed=0):
    """[output, dL/d(input) for each input] of the fused and of the composed function, on the same
    float64 inputs and for the same random upstream gradient."""
    results = []
    for fn in (case.fused, case.composed):
        inputs = leaves(*case.shapes, seed=seed)
        out = fn(*inputs)
        out.backward(np.random.default_rng(seed + 1).standard_normal(out.shape))
        results.append([out.data] + [x.grad for x in inputs])
    return results


FIXED_IDS = np.array([[1, 4, 4, 2, 0], [6, 5, 1, 1, 3]])     # (2, 5): a batch of token ids


def language_model_logits(model, cached=False):
    """(the function of the parameters a LayerCase checks, the parameters) for a language model on
    FIXED_IDS: its logits, or with `cached` the last two positions' logits, computed after the
    first three went into its key/value cache (`model.empty_cache()`)."""
    def logits(*parameters):
        if not cached:
            return model(FIXED_IDS)
        cache = model.empty_cache()
        model(FIXED_IDS[:, :3], cache=cache)
        return model(FIXED_IDS[:, 3:], cache=cache)
    return logits, model.parameters()
