"""How honest is the grader? Single-token mutants of the solutions, and the share it catches.

A mutant is tinyattn's solution of an exercise with one token changed in the body of one unit:
an operator (+ for -, * for /, @ for *, & for |, `+=` for `-=` or for `=`), a comparison (< for
<=, == for !=, `is` for `is not`), `and` for `or`, a unary minus or `not` dropped, a number n made
n + 1 (1.0 made 2.0), True made False, or a function's name made its sibling's (sum for mean,
maximum for minimum, tril for triu, sin for cos, exp for log, zeros for ones, argsort for sort).
Each is checked as a learner's file would be (in a check process of its own, stopping at the
first failed check); a mutant the checks pass is a wrong function that a learner could hand in
and be told it is right, unless it computes the same function as the solution: such
"equivalent" mutants are recorded with the exercise (`equivalent_mutants`), each with the reason,
and left out of the share. The time printed is the wall-clock time of the run (on a machine busy
with other work it is longer).

    python dev/exercise_mutants.py [NAME ...] [--list] [--swaps] [--record]

prints one line per surviving mutant, a line per exercise and the share over all of them.
`--swaps` counts a harder kind apart: a local name read where another belongs (`grad * a` for
`grad * b`), two drawn for each name read; some of those compute the same function (a name that
holds the same value), and none is left out. `--record` runs both kinds over every exercise and
writes what they print to docs/exercise_mutants.txt; `--record NAME ...` runs them over those
exercises only and puts their lines in place of theirs in the record (the others' kept), the
totals counted again from every exercise's line.
"""
import argparse
import ast
import contextlib
import copy
import functools
import io
import pathlib
import random
import re
import sys
import tempfile
import textwrap
import time

from tinyattn_tools.exercises import BY_NAME, EXERCISES
from tinyattn_tools.exercises.cutting import body_start, compose, source_of, unit_node
from tinyattn_tools.exercises.grader import LearnerFileError, passed, run_checks

OPERATORS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
             ast.FloorDiv: ast.Div, ast.Mod: ast.FloorDiv, ast.Pow: ast.Mult,
             ast.MatMult: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd}
COMPARISONS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
               ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
               ast.In: ast.NotIn, ast.NotIn: ast.In}
SIBLINGS = {"sum": "mean", "mean": "sum", "max": "min", "min": "max", "maximum": "minimum",
            "minimum": "maximum", "tril": "triu", "triu": "tril", "sin": "cos", "cos": "sin",
            "exp": "log", "log": "exp", "zeros": "ones", "ones": "zeros",
            "zeros_like": "ones_like", "ones_like": "zeros_like", "argsort": "sort",
            "add": "subtract"}
SECONDS = 20                 # a mutant whose check runs longer is stopped, and counted as caught
RECORD = pathlib.Path(__file__).resolve().parents[1] / "docs" / "exercise_mutants.txt"


def changes(node):
    """The single-token changes of one syntax node: [(a copy of it changed, what changed)]."""
    found = []

    def changed(**fields):
        new = copy.copy(node)
        for name, value in fields.items():
            setattr(new, name, value)
        return new
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        found.append(changed(op=OPERATORS[type(node.op)]()))
    elif isinstance(node, ast.AugAssign) and type(node.op) in OPERATORS:
        found.append(changed(op=OPERATORS[type(node.op)]()))
        found.append(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno))
    elif isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            ops = list(node.ops)
            ops[i] = COMPARISONS[type(op)]()
            found.append(changed(ops=ops))
    elif isinstance(node, ast.BoolOp):
        found.append(changed(op=ast.Or() if isinstance(node.op, ast.And) else ast.And()))
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Not)):
        found.append(node.operand)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool):
        value = (not node.value if isinstance(node.value, bool) else node.value + 1)
        found.append(changed(value=value))
    elif isinstance(node, ast.Attribute) and node.attr in SIBLINGS:
        found.append(changed(attr=SIBLINGS[node.attr]))
    elif isinstance(node, ast.Name) and node.id in SIBLINGS:
        found.append(changed(id=SIBLINGS[node.id]))
    return [(new, f"{unparse(node)} -> {unparse(new)}") for new in found]


def unparse(node):
    text = ast.unparse(node)
    return text if len(text) <= 60 else text[:57] + "..."


def mutations(exercise, swaps=False):
    """[(key, unit, mutated)] for every single-token change in the exercise's units: mutated()
    gives the unit's changed source. The key names the unit, the line as it reads in tinyattn's
    source, and the change. With `swaps`, the changes are names swapped instead (`name_swaps`)."""
    _, text, tree = source_of(exercise.module)
    lines = text.splitlines()
    found, keys = [], set()
    for unit in exercise.units:
        function = unit_node(tree, unit, exercise.module)
        skip = body_start(function)
        names = local_names(function)
        for statement in function.body:
            if statement.lineno < skip:          # the docstring
                continue
            for node in ast.walk(statement):
                for new, change in (name_swaps(node, names, unit) if swaps else changes(node)):
                    key = f"{unit}: {lines[node.lineno - 1].strip()} :: {change}"
                    while key in keys:
                        key += " (again)"
                    keys.add(key)
                    found.append((key, unit, functools.partial(mutated, function, node, new)))
    return found


def local_names(function):
    """The function's arguments and the names it assigns, but `self`."""
    arguments = function.args
    names = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    names |= {node.id for node in ast.walk(function)
              if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    return sorted(names - {"self"})


def name_swaps(node, names, unit):
    """A harder kind of mutant, counted apart: a local name read where another one belongs
    (`grad * a` for `grad * b`), two of the other names for each name read, drawn at random
    (seeded by the place, so that a run draws the same ones again)."""
    if not (isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in names):
        return []
    others = [name for name in names if name != node.id]
    drawn = random.Random(f"{unit}:{node.lineno}:{node.col_offset}").sample(
        others, min(2, len(others)))
    return [(ast.Name(id=other, ctx=ast.Load()), f"{node.id} -> {other}") for other in drawn]


def mutated(function, node, new):
    """The source of `function` with `node` replaced by `new`, indented as in its module."""
    return textwrap.indent(ast.unparse(replaced(function, node, new)), " " * function.col_offset)


def mutant_file(exercise, unit, mutated):
    """The solution file with the unit's source replaced by a mutant's."""
    return compose(exercise, {**dict.fromkeys(exercise.units, "solution"), unit: mutated()})


def replaced(tree, old, new):
    """A copy of `tree` with the node `old` (found by identity) replaced by `new`."""
    class Replacer(ast.NodeTransformer):
        def visit(self, node):
            return new if node is old else super().visit(node)
    return ast.fix_missing_locations(Replacer().visit(copy.deepcopy(tree, {id(old): old})))


def caught(exercise, text, folder):
    """Whether the exercise's checks fail the file `text` (stopping at the first failure)."""
    path = pathlib.Path(folder) / f"{exercise.name}.py"
    path.write_text(text)
    try:
        results = run_checks(exercise, path, fail_fast=True, seconds=SECONDS)
    except LearnerFileError:
        return True
    return not passed(exercise, results)


def measure(exercise, folder, swaps=False, out=None):
    """(mutants, caught, equivalent) for one exercise, printing each surviving mutant."""
    equivalent = {} if swaps else dict(exercise.equivalent_mutants)
    every = mutations(exercise, swaps)
    stale = set(equivalent) - {key for key, _, _ in every}    # recorded for the single tokens
    for key in sorted(stale):
        print(f"  recorded as equivalent, but no longer a mutant: {key}", file=out)
    killed = same = 0
    for key, unit, source in every:
        if caught(exercise, mutant_file(exercise, unit, source), folder):
            killed += 1
            if key in equivalent:
                print(f"  recorded as equivalent, but caught: {key}", file=out)
        elif key in equivalent:
            same += 1
        else:
            print(f"  SURVIVED {key}", file=out)
    return len(every), killed, same


def main(argv=()):
    parser = argparse.ArgumentParser(prog="python dev/exercise_mutants.py",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("names", nargs="*", help="exercises (default: all)")
    parser.add_argument("--list", action="store_true", help="list the mutants, run none")
    parser.add_argument("--swaps", action="store_true",
                        help="names swapped instead (harder; no equivalent one is left out)")
    parser.add_argument("--record", action="store_true",
                        help=f"both kinds, every exercise (or the NAMEs'), written to {RECORD}")
    args = parser.parse_args(argv)
    if args.record and args.names:
        return record_some(args.names)
    if args.record:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            print("What `python dev/exercise_mutants.py --record` printed: the "
                  "single-token mutants,\nthen the name swaps (--swaps).\n")
            main([])
            print()
            main(["--swaps"])
        RECORD.write_text(printed.getvalue())
        print(printed.getvalue(), end="")
        return 0
    chosen = [BY_NAME[name] for name in args.names] if args.names else EXERCISES
    if args.list:
        for exercise in chosen:
            for key, _, _ in mutations(exercise, args.swaps):
                print(key)
        return 0
    total = [0, 0, 0]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for exercise in chosen:
            count, killed, same = measure(exercise, folder, args.swaps)
            total = [total[0] + count, total[1] + killed, total[2] + same]
            print(f"{exercise.name:<22} {count:4} mutants, {same:3} equivalent, {killed:4} "
                  f"caught: {share(killed, count - same)}", flush=True)
    print("\n" + totals(args.swaps, len(chosen), total,
                         f"{time.perf_counter() - started:.0f} s"))
    return 0


def totals(swaps, exercises, total, when):
    """The last line of a run: (mutants, caught, equivalent) summed over `exercises`."""
    if swaps:
        return (f"all {exercises} exercises: {total[0]} name-swap mutants, {total[1]} caught: "
                f"{share(total[1], total[0])}, equivalent ones not left out (each survivor is "
                f"listed above) ({when})")
    return (f"all {exercises} exercises: {total[0]} single-token mutants, {total[2]} "
            f"equivalent (recorded with a reason), {total[1]} caught: "
            f"{share(total[1], total[0] - total[2])} of the mutants that compute another "
            f"function ({when})")


EXERCISE_LINE = re.compile(r"^(\S+)\s+(\d+) mutants,\s+(\d+) equivalent,\s+(\d+) caught")


def exercise_blocks(lines):
    """{exercise: its lines} of one kind's run: the lines of its survivors, then its own."""
    blocks, pending = {}, []
    for line in lines:
        found = EXERCISE_LINE.match(line)
        if found:
            blocks[found.group(1)] = pending + [line]
            pending = []
        elif line.startswith("  "):
            pending.append(line)
    return blocks


def record_some(names):
    """Both kinds over the exercises `names`, their lines put in place of theirs in the record;
    the totals counted again from every exercise's line (the time: of the parts re-run)."""
    kinds = RECORD.read_text().split("\nall ")          # the single tokens, then the swaps
    single, swaps = exercise_blocks(kinds[0].splitlines()), exercise_blocks(kinds[1].splitlines())
    for blocks, argv in ((single, names), (swaps, ["--swaps", *names])):
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            main(argv)
        blocks.update(exercise_blocks(printed.getvalue().splitlines()))
    parts = []
    for is_swaps, blocks in ((False, single), (True, swaps)):
        kept = [blocks[e.name] for e in EXERCISES if e.name in blocks]
        total = [0, 0, 0]
        for block in kept:
            count, same, killed = map(int, EXERCISE_LINE.match(block[-1]).group(2, 3, 4))
            total = [total[0] + count, total[1] + killed, total[2] + same]
        parts.append("\n".join(line for block in kept for line in block) + "\n\n" + totals(
            is_swaps, len(kept), total, "recorded in parts, the last: " + ", ".join(names)))
    RECORD.write_text("What `python dev/exercise_mutants.py --record` printed: the "
                      "single-token mutants,\nthen the name swaps (--swaps).\n\n"
                      + "\n\n".join(parts) + "\n")
    print(RECORD.read_text(), end="")
    return 0


def share(part, whole):
    return f"{100 * part / whole:.1f}%" if whole else "-"


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
