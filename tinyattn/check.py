"""`python -m tinyattn check`: the library's gradient checks, runnable without pytest.

Two tables of checks, each row compared against central finite differences in float64 with a
random upstream gradient (see `tinyattn/gradcheck.py`):

- OP_CASES: every op, one row per op and shape, broadcast shapes included. Each row also carries
  the same computation in NumPy, which the tests compare the forward values with.
- LAYER_CASES: every function and layer as a whole, with respect to every input and parameter.
  Large inputs are checked along random directions instead of element by element.

The test suite runs these same tables (tests/test_ops.py, tests/test_layers.py), so what a user
runs here is what the continuous integration runs.
"""
import argparse
from typing import Callable, NamedTuple

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.gradcheck import compare_gradients

ATOL, RTOL = 1e-7, 1e-5     # tighter than gradcheck's defaults: float64 differences are this good
REL_FLOOR = 1e-4            # relative errors are reported where |numerical| is above this; below
                            # it the rounding error of the differences (~1e-10) dominates them


# ------------------------------------------------------------------------------------------------
# 1. Ops

class OpCase(NamedTuple):
    name: str
    op: Callable            # on tensors
    reference: Callable     # the same computation on NumPy arrays
    shapes: tuple           # one shape per input
    domain: str = "normal"  # how inputs are drawn: normal, positive, away_from_zero
    float64_constant: bool = False   # mixes in a float64 array, which NumPy's promotion obeys


def np_softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def np_log_softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


BOOL_MASK = np.array([[True, False, True, True], [False, False, True, False],
                      [True, True, False, True]])
CONDITION = np.array([[True], [False], [True]])

OP_CASES = [
    # binary elementwise, same shape and broadcast on either side
    OpCase("add", lambda a, b: a + b, np.add, ((3, 4), (3, 4))),
    OpCase("add broadcast row", lambda a, b: a + b, np.add, ((3, 4), (4,))),
    OpCase("add broadcast both", lambda a, b: a + b, np.add, ((2, 1, 4), (3, 1))),
    OpCase("add scalar tensor", lambda a, b: a + b, np.add, ((), (3, 4))),
    OpCase("sub", lambda a, b: a - b, np.subtract, ((3, 4), (3, 4))),
    OpCase("sub broadcast", lambda a, b: a - b, np.subtract, ((3, 1), (2, 1, 4))),
    OpCase("mul", lambda a, b: a * b, np.multiply, ((3, 4), (3, 4))),
    OpCase("mul broadcast", lambda a, b: a * b, np.multiply, ((4,), (2, 3, 4))),
    OpCase("mul broadcast both", lambda a, b: a * b, np.multiply, ((2, 1, 4), (3, 1))),
    OpCase("div", lambda a, b: a / b, np.divide, ((3, 4), (3, 4)), "away_from_zero"),
    OpCase("div broadcast", lambda a, b: a / b, np.divide, ((2, 3, 4), (3, 1)), "away_from_zero"),
    OpCase("pow", lambda a, b: a ** b, np.power, ((3, 4), (3, 4)), "positive"),
    OpCase("pow broadcast", lambda a, b: a ** b, np.power, ((3, 4), (4,)), "positive"),
    # with constants: Python numbers and arrays on either side
    OpCase("add number", lambda a: 2.5 + a + 1, lambda a: 2.5 + a + 1, ((3, 4),)),
    OpCase("rsub number", lambda a: 1 - a, lambda a: 1 - a, ((3, 4),)),
    OpCase("mul array", lambda a: a * np.arange(4.0), lambda a: a * np.arange(4.0), ((3, 4),),
         float64_constant=True),
    OpCase("rmul array", lambda a: np.arange(4.0) * a, lambda a: np.arange(4.0) * a, ((3, 4),),
         float64_constant=True),
    OpCase("rdiv number", lambda a: 2 / a, lambda a: 2 / a, ((3, 4),), "away_from_zero"),
    OpCase("div number", lambda a: a / 4, lambda a: a / 4, ((3, 4),)),
    OpCase("square", lambda a: a ** 2, lambda a: a ** 2, ((3, 4),)),
    OpCase("pow half", lambda a: a ** 0.5, np.sqrt, ((3, 4),), "positive"),
    OpCase("rpow number", lambda a: 3 ** a, lambda a: 3 ** a, ((3, 4),)),
    OpCase("neg", lambda a: -a, np.negative, ((3, 4),)),
    # unary elementwise
    OpCase("exp", lambda a: a.exp(), np.exp, ((3, 4),)),
    OpCase("log", lambda a: a.log(), np.log, ((3, 4),), "positive"),
    OpCase("sqrt", lambda a: a.sqrt(), np.sqrt, ((3, 4),), "positive"),
    OpCase("tanh", lambda a: a.tanh(), np.tanh, ((3, 4),)),
    OpCase("relu", lambda a: a.relu(), lambda a: np.maximum(a, 0), ((3, 4),), "away_from_zero"),
    OpCase("F.relu", F.relu, lambda a: np.maximum(a, 0), ((2, 5),), "away_from_zero"),
    # reductions
    OpCase("sum all", lambda a: a.sum(), np.sum, ((2, 3, 4),)),
    OpCase("sum axis", lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), ((2, 3, 4),)),
    OpCase("sum axes keepdims", lambda a: a.sum(axis=(0, 2), keepdims=True),
         lambda a: a.sum(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    OpCase("sum negative axis", lambda a: a.sum(axis=-1), lambda a: a.sum(axis=-1), ((2, 3, 4),)),
    OpCase("mean all", lambda a: a.mean(), np.mean, ((2, 3, 4),)),
    OpCase("mean axes", lambda a: a.mean(axis=(0, -1)), lambda a: a.mean(axis=(0, -1)),
         ((2, 3, 4),)),
    OpCase("mean keepdims", lambda a: a.mean(axis=1, keepdims=True),
         lambda a: a.mean(axis=1, keepdims=True), ((2, 3, 4),)),
    OpCase("max all", lambda a: a.max(), np.max, ((2, 3, 4),)),
    OpCase("max axis", lambda a: a.max(axis=1), lambda a: a.max(axis=1), ((2, 3, 4),)),
    OpCase("max axes keepdims", lambda a: a.max(axis=(0, 2), keepdims=True),
         lambda a: a.max(axis=(0, 2), keepdims=True), ((2, 3, 4),)),
    # shapes and indexing
    OpCase("reshape", lambda a: a.reshape(6, -1), lambda a: a.reshape(6, -1), ((2, 3, 4),)),
    OpCase("reshape tuple", lambda a: a.reshape((4, 6)), lambda a: a.reshape((4, 6)), ((2, 3, 4),)),
    OpCase("transpose", lambda a: a.transpose(), np.transpose, ((2, 3, 4),)),
    OpCase("transpose axes", lambda a: a.transpose(1, 2, 0), lambda a: a.transpose(1, 2, 0),
         ((2, 3, 4),)),
    OpCase("swapaxes", lambda a: a.swapaxes(0, -1), lambda a: a.swapaxes(0, -1), ((2, 3, 4),)),
    OpCase("T", lambda a: a.T, lambda a: a.T, ((2, 3, 4),)),
    OpCase("mT", lambda a: a.mT, lambda a: np.swapaxes(a, -1, -2), ((2, 3, 4),)),
    OpCase("index int", lambda a: a[1], lambda a: a[1], ((3, 4),)),
    OpCase("index slices", lambda a: a[1:, ::2], lambda a: a[1:, ::2], ((3, 4),)),
    OpCase("index None ellipsis", lambda a: a[None, ..., -1], lambda a: a[None, ..., -1],
         ((2, 3, 4),)),
    OpCase("index array repeats", lambda a: a[[0, 2, 0, 0]], lambda a: a[[0, 2, 0, 0]], ((3, 4),)),
    OpCase("index arrays 2-d", lambda a: a[np.array([[0, 1], [1, 1]]), np.array([2, 2])],
         lambda a: a[np.array([[0, 1], [1, 1]]), np.array([2, 2])], ((3, 4),)),
    OpCase("index tensor", lambda a: a[ta.tensor([1, 1, 2])], lambda a: a[np.array([1, 1, 2])],
         ((3, 4),)),
    OpCase("index mixed", lambda a: a[:, [2, 0, 2]], lambda a: a[:, [2, 0, 2]], ((2, 3, 4),)),
    OpCase("index boolean", lambda a: a[BOOL_MASK], lambda a: a[BOOL_MASK], ((3, 4),)),
    OpCase("concatenate", lambda a, b: ta.concatenate([a, b]), lambda a, b: np.concatenate([a, b]),
         ((2, 3), (4, 3))),
    OpCase("concatenate axis -1", lambda a, b, c: ta.concatenate([a, b, c], axis=-1),
         lambda a, b, c: np.concatenate([a, b, c], axis=-1), ((2, 3), (2, 1), (2, 2))),
    OpCase("stack", lambda a, b: ta.stack([a, b]), lambda a, b: np.stack([a, b]), ((2, 3), (2, 3))),
    OpCase("stack axis -1", lambda a, b: ta.stack([a, b], axis=-1),
         lambda a, b: np.stack([a, b], axis=-1), ((2, 3), (2, 3))),
    OpCase("where", lambda a, b: ta.where(CONDITION, a, b), lambda a, b: np.where(CONDITION, a, b),
         ((3, 4), (3, 4))),
    OpCase("where broadcast", lambda a, b: ta.where(CONDITION, a, b),
         lambda a, b: np.where(CONDITION, a, b), ((1, 4), (3, 1))),
    OpCase("where constant", lambda a: ta.where(CONDITION, a, -1.0),
         lambda a: np.where(CONDITION, a, -1.0), ((3, 4),)),
    # matmul: plain, batched, broadcast batch, shared 2-D weight, 1-D operands
    OpCase("matmul", lambda a, b: a @ b, np.matmul, ((3, 4), (4, 5))),
    OpCase("matmul batched", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (2, 4, 5))),
    OpCase("matmul shared weight", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (4, 5))),
    OpCase("matmul shared left", lambda a, b: a @ b, np.matmul, ((3, 4), (2, 4, 5))),
    OpCase("matmul broadcast batch", lambda a, b: a @ b, np.matmul, ((2, 1, 3, 4), (5, 4, 2))),
    OpCase("matmul vector left", lambda a, b: a @ b, np.matmul, ((4,), (4, 5))),
    OpCase("matmul vector right", lambda a, b: a @ b, np.matmul, ((3, 4), (4,))),
    OpCase("matmul vectors", lambda a, b: a @ b, np.matmul, ((4,), (4,))),
    OpCase("matmul batch and vector", lambda a, b: a @ b, np.matmul, ((2, 3, 4), (4,))),
    OpCase("matmul vector and batch", lambda a, b: a @ b, np.matmul, ((4,), (2, 4, 5))),
    OpCase("rmatmul array", lambda b: np.ones((2, 3)) @ b, lambda b: np.ones((2, 3)) @ b, ((3, 4),),
         float64_constant=True),
    # softmax and log-softmax
    OpCase("softmax", F.softmax, np_softmax, ((3, 5),)),
    OpCase("softmax axis 0", lambda a: F.softmax(a, axis=0), lambda a: np_softmax(a, axis=0),
         ((3, 5),)),
    OpCase("softmax 3-d", lambda a: F.softmax(a, axis=1), lambda a: np_softmax(a, axis=1),
         ((2, 3, 4),)),
    OpCase("log_softmax", F.log_softmax, np_log_softmax, ((3, 5),)),
    OpCase("log_softmax axis 0", lambda a: F.log_softmax(a, axis=0),
         lambda a: np_log_softmax(a, axis=0), ((2, 3, 4),)),
]


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


# ------------------------------------------------------------------------------------------------
# 2. Functions and layers, as a whole

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


def seeded_dropout(x):
    """Dropout with the same mask at every call, so that finite differences see one function."""
    ta.manual_seed(0)
    return F.dropout(x, p=0.3)


QKV = ((2, 3, 4), (2, 5, 4), (2, 5, 6))        # query (B, L, E), key (B, S, E), value (B, S, Ev)
MASK = np.array([[True, False, True, True, False],
                 [True, True, False, True, True],
                 [False, True, True, False, True]])              # (L, S) = (3, 5)
ROW_FULLY_MASKED = MASK & np.array([[True], [False], [True]])    # query 1 sees no key
PADDING = np.array([True, True, True, False])[None, None, None, :]   # (B, H, L, S): key 3 hidden


def sdpa_with_learned_mask():
    """The additive float mask is a tensor that requires grad too: the scores' gradient flows
    into it."""
    query, key, value, bias = leaves(*QKV, (3, 5))
    return F.scaled_dot_product_attention, [query, key, value, bias]


def embedding():
    ta.manual_seed(0)
    table = nn.Embedding(6, 4)
    ids = np.array([[0, 3, 3], [5, 0, 3]])       # repeated ids: their gradients add up
    return (lambda weight: table(ids)), [table.weight]


def causal_language_model():
    ta.manual_seed(0)
    model = nn.CausalTransformer(vocab_size=7, embed_dim=8, num_heads=2, num_layers=2, max_len=8)
    ids = np.array([[1, 4, 4, 2, 0], [6, 5, 1, 1, 3]])
    return (lambda *parameters: model(ids)), model.parameters()


LAYER_CASES = [
    # functions
    LayerCase("F.gelu", function(F.gelu, (3, 4))),
    LayerCase("F.layer_norm", function(F.layer_norm, (2, 3, 5), (5,), (5,))),
    LayerCase("F.dropout (fixed mask)", function(seeded_dropout, (4, 5))),
    LayerCase("F.cross_entropy",
              function(F.cross_entropy, (4, 5), targets=np.array([1, 0, 4, 1]))),
    LayerCase("F.cross_entropy (N, C, d), ignore_index",
              function(F.cross_entropy, (2, 4, 3), targets=np.array([[1, -100, 3], [0, 2, 2]]))),
    # scaled dot-product attention, on query, key and value of the shapes QKV
    LayerCase("attention: sdpa", function(F.scaled_dot_product_attention, *QKV)),
    LayerCase("attention: sdpa, output and weights", function(F.attention, *QKV)),
    LayerCase("attention: sdpa, broadcast batch", function(F.scaled_dot_product_attention,
                                                           (2, 1, 3, 4), (1, 2, 5, 4), (2, 5, 6))),
    LayerCase("attention: sdpa, unscaled (scale=1)",
              function(F.scaled_dot_product_attention, *QKV, scale=1.0)),
    LayerCase("attention: sdpa, boolean mask",
              function(F.scaled_dot_product_attention, *QKV, attn_mask=MASK)),
    LayerCase("attention: sdpa, fully masked row",
              function(F.attention, *QKV, attn_mask=ROW_FULLY_MASKED)),
    LayerCase("attention: sdpa, learned float mask", sdpa_with_learned_mask),
    LayerCase("attention: sdpa, causal",
              function(F.attention, (2, 4, 4), (2, 4, 4), (2, 4, 3), is_causal=True)),
    LayerCase("attention: sdpa, causal and mask",
              function(F.scaled_dot_product_attention, *QKV, attn_mask=MASK, is_causal=True)),
    # layers, with respect to their inputs and every parameter
    LayerCase("Linear", layer(lambda: nn.Linear(4, 3), (2, 3, 4))),
    LayerCase("Linear, no bias", layer(lambda: nn.Linear(4, 3, bias=False), (5, 4))),
    LayerCase("LayerNorm", layer(lambda: nn.LayerNorm(5), (2, 3, 5))),
    LayerCase("Embedding", embedding),
    LayerCase("PositionalEncoding", layer(lambda: nn.PositionalEncoding(6, max_len=8), (2, 5, 6))),
    LayerCase("FeedForward", layer(lambda: nn.FeedForward(4, 8), (2, 3, 4))),
    LayerCase("MultiHeadAttention, self", layer(lambda: nn.MultiHeadAttention(8, 2), (2, 3, 8))),
    LayerCase("MultiHeadAttention, cross",
              layer(lambda: nn.MultiHeadAttention(8, 2), (2, 3, 8), (2, 5, 8))),
    LayerCase("MultiHeadAttention, cross, key != value",
              layer(lambda: nn.MultiHeadAttention(8, 2), (2, 3, 8), (2, 5, 8), (2, 5, 8))),
    LayerCase("MultiHeadAttention, causal and padding",
              layer(lambda: nn.MultiHeadAttention(8, 4), (2, 4, 8), attn_mask=PADDING,
                    is_causal=True)),
    LayerCase("TransformerBlock, causal",
              layer(lambda: nn.TransformerBlock(8, 2, hidden_dim=16), (2, 4, 8))),
    LayerCase("MultiHeadAttention, E=64 (random directions)",
              layer(lambda: nn.MultiHeadAttention(64, 8), (2, 6, 64)), directions=4),
    LayerCase("CausalTransformer (random directions)", causal_language_model, directions=4),
]


# ------------------------------------------------------------------------------------------------
# 3. Running the checks

class Result(NamedTuple):
    name: str
    shapes: str             # what was checked, e.g. "(2, 3, 8) + 8 params"
    compared: int           # how many (analytical, numerical) pairs
    max_abs: float          # the largest |analytical - numerical|
    max_rel: float          # the largest |analytical - numerical| / |numerical| (> REL_FLOOR)
    passed: bool


def describe(inputs):
    """The shapes of the inputs, with a layer's parameters counted rather than listed."""
    tensors = [x for x in inputs if isinstance(x, ta.Tensor) and not isinstance(x, nn.Parameter)]
    parameters = [x for x in inputs if isinstance(x, nn.Parameter)]
    text = " ".join(str(x.shape) for x in tensors).replace(", ", ",")
    if parameters:
        text += (" + " if text else "") + f"{sum(p.size for p in parameters)} in params"
    return text


def run(name, fn, inputs, directions=None):
    """Compare every gradient of `fn(*inputs)` with finite differences; one Result."""
    comparisons = compare_gradients(fn, inputs, directions=directions)
    errors = [abs(c.analytical - c.numerical) for c in comparisons]
    relative = [e / abs(c.numerical) for e, c in zip(errors, comparisons)
                if abs(c.numerical) > REL_FLOOR]
    passed = all(e <= ATOL + RTOL * abs(c.numerical) for e, c in zip(errors, comparisons))
    return Result(name, describe(inputs), len(comparisons), max(errors),
                  max(relative, default=0.0), passed)


def all_checks(pattern=""):
    """(name, build, directions) of every check whose name contains `pattern`."""
    checks = [(case.name, lambda case=case: op_check(case), None) for case in OP_CASES]
    checks += [(case.name, case.build, case.directions) for case in LAYER_CASES]
    return [check for check in checks if pattern.lower() in check[0].lower()]


def main(argv=()):
    parser = argparse.ArgumentParser(prog="python -m tinyattn check",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("-k", dest="pattern", default="",
                        help="only the checks whose name contains this text")
    args = parser.parse_args(argv)
    checks = all_checks(args.pattern)
    if not checks:
        print(f"no check matches {args.pattern!r}")
        return 2
    print(f"{'check':<44} {'inputs':<40} {'numbers':>7} {'max abs':>9} {'max rel':>9}  result")
    failed = 0
    for name, build, directions in checks:
        fn, inputs = build()
        result = run(name, fn, inputs, directions)
        failed += not result.passed
        print(f"{result.name:<44} {result.shapes:<40} {result.compared:>7} {result.max_abs:>9.1e} "
              f"{result.max_rel:>9.1e}  {'pass' if result.passed else 'FAIL'}", flush=True)
    print(f"\n{len(checks) - failed} of {len(checks)} checks pass.\n"
          "Every gradient element (large inputs: random directions) against central differences "
          f"in float64;\na number passes when |analytical - numerical| <= {ATOL:g} + {RTOL:g} "
          f"|numerical|. 'max rel' looks at numbers above {REL_FLOOR:g}.")
    return 1 if failed else 0
