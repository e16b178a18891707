"""Exercises: learn by rewriting tinyattn's own code, graded by its checks.

    python -m tinyattn exercises                      the list, with your progress
    python -m tinyattn exercise start NAME [--dir D]  writes tinyattn-exercises/NAME.py
    python -m tinyattn exercise check NAME [--dir D]  runs your code in place of tinyattn's
    python -m tinyattn exercise hint NAME [--dir D]   the next hint
    python -m tinyattn exercise solution NAME         your file, as it would pass

Read in this order:
    exercise.py    what an exercise is: the functions it blanks (its units), what to read
                   first, its checks, its hints, and the classic wrong versions that must fail
    cutting.py     the learner's file, cut from tinyattn's source by its syntax tree, so that it
                   never drifts from the code: signature and docstring kept, the body blanked;
                   and the learner's functions spliced back into the module, for the grader
    checks.py      the kinds of check, each in two halves: `run` computes with the learner's
                   code, `judge` compares with tinyattn's own (the checklist's rows, NumPy)
    chapter1.py,   the catalogue, in the README's reading order (catalogue.py gathers it)
    chapter2.py,
    chapter4.py,
    chapter5.py,
    chapter6.py
    grader.py      a check run: a copy of tinyattn with the learner's functions in it, a check
                   process that imports it (child.py) and sends back raw numbers, judged here
    child.py       the check process: the learner's code run, each check's numbers sent
    watching.py    what is watched while the learner's functions run: writes into the arrays
                   they were given, float32 made float64, where a NaN began
    messages.py    what the check process sends: JSON lines, arrays as bytes, no pickles
    cli.py         the commands, and the learner's progress (progress.json in the workspace)

How honest the grader is (wrong versions that must fail, single-token mutants of the solutions)
is measured by the tests and by the repository's dev/exercise_mutants.py.
"""


def __getattr__(name):
    """EXERCISES and BY_NAME, from the catalogue, imported when first asked for: the check
    process imports this package before the copy of tinyattn it checks, which the catalogue
    imports."""
    if name in ("EXERCISES", "BY_NAME"):
        from tinyattn_tools.exercises import catalogue
        return getattr(catalogue, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
