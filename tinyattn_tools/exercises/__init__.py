"""Exercises: learn by rewriting tinyattn's own code, graded by its gradient checks.

    python -m tinyattn exercises                      the list, with your progress
    python -m tinyattn exercise start NAME [--dir D]  writes tinyattn-exercises/NAME.py
    python -m tinyattn exercise check NAME [--dir D]  runs your code in place of tinyattn's
    python -m tinyattn exercise hint NAME [--dir D]   the next hint
    python -m tinyattn exercise solution NAME         your file, as it would pass

Read in this order:
    exercise.py    what an exercise is: the functions it blanks (its units), what to read
                   first, its checks, its hints, and the classic wrong versions that must fail
    cutting.py     the learner's file, cut from tinyattn's source by its syntax tree, so that it
                   never drifts from the code: signature and docstring kept, the body blanked
    checks.py      the kinds of check: checklist rows, NumPy references, float32, properties
    chapter1.py,   the catalogue, in the README's reading order
    chapter2.py,
    chapter4.py
    running.py     the learner's functions put in place of tinyattn's for one run, the checks
                   run, one line each
    watching.py    what is watched while the learner's functions run: writes into the arrays
                   they were given, float32 made float64, where a NaN began
    cli.py         the commands, and the learner's progress (progress.json in the workspace)
    mutants.py     how honest the grader is: single-token mutants of the solutions, and the
                   share of them that the checks catch
"""
from tinyattn_tools.exercises import chapter1, chapter2, chapter4

EXERCISES = chapter1.EXERCISES + chapter2.EXERCISES + chapter4.EXERCISES
BY_NAME = {exercise.name: exercise for exercise in EXERCISES}
