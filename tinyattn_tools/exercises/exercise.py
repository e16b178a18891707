"""What an exercise is: the functions it blanks, what to read first, its checks, its hints, and
the classic wrong versions that its checks must catch."""
from typing import NamedTuple


class Worded(Exception):
    """An error that the grader words itself, for the learner: its message is shown alone,
    without the class's name."""


class Measured(NamedTuple):
    """What one check found: whether it passed, the largest error (None for a check that measures
    no number, such as a dtype), and a few words on where (the worst row, the wrong dtype)."""
    passed: bool
    error: float = None
    detail: str = ""


class WrongVersion(NamedTuple):
    """A classic mistake, as edits of the solution file: each `old` text occurs exactly once in it
    (so that an edit that no longer applies after a change of the code is noticed)."""
    mistake: str
    edits: tuple                      # (old, new) pairs, applied in order


class Exercise(NamedTuple):
    name: str
    chapter: int
    title: str
    module: str                       # where the code lives, "tinyattn.ops.elementwise"
    units: tuple                      # what the learner writes: "Mul.backward", "unbroadcast"
    read_first: str
    checks: tuple                     # checks.Check, in the order they are printed
    hints: tuple                      # from "re-read this line" to the key step, never the code
    wrong_versions: tuple             # WrongVersion: at least three, each must fail
    given: tuple = ()                 # helpers of the module copied into the file, for reading
    equivalent_mutants: tuple = ()    # (mutant, why it computes the same function): see
                                      # dev/exercise_mutants.py
    changes: tuple = ()               # (unit, parameter) that the unit changes in place by
                                      # design (an optimizer's parameter); every other input a
                                      # learner's function leaves changed fails the check

    @property
    def file(self):
        """The source file, relative to the repository: "tinyattn/ops/elementwise.py"."""
        return self.module.replace(".", "/") + ".py"


def apply_edits(text, edits, what="edit"):
    """`text` with each (old, new) of `edits` applied; each old text must occur exactly once."""
    for old, new in edits:
        count = text.count(old)
        if count != 1:
            raise ValueError(f"{what}: {old!r} occurs {count} times in the file, not once")
        text = text.replace(old, new)
    return text
