"""The exercise cycle of docs/exercises.md, as it prints: the list, start, a first attempt with a
classic mistake, check (failing, with the first hint), hint, the fix, check (passing).

    python dev/exercise_transcript.py            prints the page's section
    python dev/exercise_transcript.py --write    writes it into docs/exercises.md

The section stands between `<!-- exercises:start -->` and `<!-- exercises:end -->`;
tests/test_exercises_cli.py runs the cycle again and compares it with the page's copy.
"""
import contextlib
import io
import os
import pathlib
import sys
import tempfile

from tinyattn_tools.exercises import BY_NAME, cli

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "exercises.md"
START, END = "<!-- exercises:start -->", "<!-- exercises:end -->"
NAME = "mul_div"
FIRST_ATTEMPT = ("        a, b = self.saved\n        return grad * b, grad * a\n",
                 "        b, out = self.saved\n        return grad / b, grad * out / b\n")
MISTAKE, FIX = "return grad / b, grad * out / b", "return grad / b, -grad * out / b"


def command(argv):
    """`$ python -m tinyattn ...` and what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        if argv == ["exercises"]:
            cli.list_main([])
        else:
            cli.main(argv[1:])
    return f"$ python -m tinyattn {' '.join(argv)}\n{printed.getvalue()}"


def attempt(path):
    """The learner's first attempt: both blanks written, dL/db of Div without its minus sign."""
    text = path.read_text()
    for body in FIRST_ATTEMPT:
        text = text.replace("        raise NotImplementedError\n", body, 1)
    path.write_text(text)


def cycle():
    """The page's section: the cycle run in a fresh folder, as it printed."""
    exercise = BY_NAME[NAME]
    previous = os.getcwd()
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        try:
            listing = command(["exercises"])
            started = command(["exercise", "start", NAME])
            path = pathlib.Path(cli.WORKSPACE) / f"{NAME}.py"
            attempt(path)
            failing = command(["exercise", "check", NAME]) + command(["exercise", "hint", NAME])
            path.write_text(path.read_text().replace(MISTAKE, FIX))
            passing = command(["exercise", "check", NAME])
        finally:
            os.chdir(previous)
    first = "\n\n".join(f"class {unit.split('.')[0]}(Function):\n    ...\n"
                        f"    def backward(self, grad):\n{body}"
                        for unit, body in zip(exercise.units, FIRST_ATTEMPT))
    return "\n".join([
        "```", listing.rstrip(), "```", "",
        "```", started.rstrip(), "```", "",
        f"A first attempt, in `{path}`: both bodies written, dL/db of `Div` without its minus "
        "sign:", "",
        "```python", first.rstrip(), "```", "",
        "```", failing.rstrip(), "```", "",
        f"The fix, `{FIX}`, and the check again:", "",
        "```", passing.rstrip(), "```",
    ])


def split_page(text):
    """(before, the section, after) of the page."""
    before, rest = text.split(START, 1)
    section, after = rest.split(END, 1)
    return before, section.strip("\n"), after


def main(argv=()):
    section = cycle()
    if "--write" in argv:
        before, _, after = split_page(PAGE.read_text())
        PAGE.write_text(f"{before}{START}\n{section}\n{END}{after}")
    else:
        print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
