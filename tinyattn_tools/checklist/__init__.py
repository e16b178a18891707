"""`python -m tinyattn check`: the library's gradient checks, runnable without pytest.

Every row is compared against central finite differences in float64 with a random upstream
gradient (see `tinyattn/gradient_check.py`), except the rows of fused ops, compared with the
chain of primitive ops each replaces. The rows live in tables, one file per part of the library,
each with OP_CASES, LAYER_CASES and/or FUSED_CASES, gathered in TABLES below; `cases.py` says what
a row is. The test suite runs these same tables (tests/test_ops.py, tests/test_checklist.py), so
what a user runs here is what the continuous integration runs.
"""
import argparse
import itertools
import textwrap
from typing import NamedTuple

import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn_tools.checklist import (chapter5, clip, decoder_experts, diffusion_transformer,
                                     efficient_attention, fused, latent_and_experts, layers,
                                     lora, ops, positions, t5, vit, whisper)
from tinyattn_tools.checklist.cases import fused_and_composed, op_check
from tinyattn.gradient_check import compare_gradients

TABLES = [ops, layers, fused, positions, efficient_attention, decoder_experts, lora, chapter5,
          latent_and_experts, whisper, vit, diffusion_transformer, t5, clip]
OP_CASES = [case for table in TABLES for case in getattr(table, "OP_CASES", ())]
LAYER_CASES = [case for table in TABLES for case in getattr(table, "LAYER_CASES", ())]
FUSED_CASES = [case for table in TABLES for case in getattr(table, "FUSED_CASES", ())]

ATOL, RTOL = 1e-7, 1e-5     # tighter than gradcheck's defaults: float64 differences are this good
NAME_WIDTH, INPUTS_WIDTH = 38, 24    # the table fits 100 columns; longer names and inputs wrap
REL_FLOOR = 1e-4            # relative errors are reported where |numerical| is above this; below
                            # it the rounding error of the differences (~1e-10) dominates them


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
    return judged(name, describe(inputs), [c.analytical for c in comparisons],
                  [c.numerical for c in comparisons])


def run_fused(case):
    """Compare a fused op's output and gradients with those of the chain it replaces; one Result
    (the composed numbers take the place of the numerical ones)."""
    fused, composed = fused_and_composed(case)
    shapes = " ".join(str(shape) for shape in case.shapes).replace(", ", ",")
    return judged(case.name, shapes + " vs composed", np.concatenate([a.ravel() for a in fused]),
                  np.concatenate([a.ravel() for a in composed]))


def judged(name, shapes, got, reference):
    """The Result of comparing numbers `got` with `reference`, number by number."""
    got, reference = np.asarray(got, dtype=float), np.asarray(reference, dtype=float)
    errors = np.abs(got - reference)
    above_floor = np.abs(reference) > REL_FLOOR
    relative = errors[above_floor] / np.abs(reference[above_floor])
    passed = bool(np.all(errors <= ATOL + RTOL * np.abs(reference)))
    return Result(name, shapes, len(errors), float(errors.max()), float(relative.max(initial=0.0)),
                  passed)


def all_checks(pattern=""):
    """(name, check) of every check whose name contains `pattern`; check() gives its Result."""
    checks = [(case.name, lambda case=case: run(case.name, *op_check(case))) for case in OP_CASES]
    checks += [(case.name, lambda case=case: run(case.name, *case.build(), case.directions))
               for case in LAYER_CASES]
    checks += [(case.name, lambda case=case: run_fused(case)) for case in FUSED_CASES]
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
    name_width = min(max(len(name) for name, _ in checks), NAME_WIDTH)
    print(f"{'check':<{name_width}} {'inputs':<{INPUTS_WIDTH}} {'numbers':>7} {'max abs':>9} "
          f"{'max rel':>9}  result")
    failed = 0
    for _, check in checks:
        result = check()
        failed += not result.passed
        names = textwrap.wrap(result.name, name_width)
        shapes = textwrap.wrap(result.shapes, INPUTS_WIDTH) or [""]
        print(f"{names[0]:<{name_width}} {shapes[0]:<{INPUTS_WIDTH}} {result.compared:>7} "
              f"{result.max_abs:>9.1e} {result.max_rel:>9.1e}  "
              f"{'pass' if result.passed else 'FAIL'}", flush=True)
        for more_name, more_shapes in itertools.zip_longest(names[1:], shapes[1:], fillvalue=""):
            print(f"{more_name:<{name_width}} {more_shapes}".rstrip())
    print(f"\n{len(checks) - failed} of {len(checks)} checks pass.\n"
          "Every gradient element (large inputs: random directions) against central differences "
          "in float64\n(fused ops: output and gradients against the primitive ops they replace);"
          f"\na number passes when |analytical - numerical| <= {ATOL:g} + {RTOL:g} "
          f"|numerical|.\n'max rel' looks at numbers above {REL_FLOOR:g}.")
    return 1 if failed else 0
