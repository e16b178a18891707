"""The exercise commands, and the learner's progress.

    python -m tinyattn exercises [--dir DIR]
    python -m tinyattn exercise start|check|hint|solution NAME [--dir DIR]
    (`python -m tinyattn exercises start NAME` and the like work too)

The learner's files live in a workspace folder (tinyattn-exercises/ by default), with
progress.json beside them: for each exercise started, its state (started, failing, passing) and
how many hints were shown. Nothing is written into tinyattn.
"""
import argparse
import difflib
import json
import pathlib
import sys
import textwrap

from tinyattn_tools.exercises import BY_NAME, EXERCISES
from tinyattn_tools.exercises.cutting import compose
from tinyattn_tools.exercises.grader import (LearnerFileError, passed, report_line, run_checks,
                                             summary)

WORKSPACE = "tinyattn-exercises"
SECONDS_PER_CHECK = 30       # a learner's loop that never ends is stopped, and told so
WIDTH = 99


def header(exercise, folder=WORKSPACE):
    """The docstring at the top of a learner's file: what to write, what to read, how to check."""
    number = EXERCISES.index(exercise) + 1
    option = "" if str(folder) == WORKSPACE else f" --dir {folder}"
    units = " and ".join(exercise.units) if len(exercise.units) < 3 else \
        ", ".join(exercise.units[:-1]) + " and " + exercise.units[-1]
    paragraphs = [
        f"Exercise {number} of {len(EXERCISES)}, {exercise.name} (chapter {exercise.chapter}): "
        f"{exercise.title}.",
        f"Write {units}, cut from {exercise.file}: each body that raises NotImplementedError. The "
        "rest of this file is tinyattn's own code, given for reading; only those bodies are "
        "checked, put in place of tinyattn's.",
        f"Read first: {exercise.read_first}.",
    ]
    text = "\n\n".join(textwrap.fill(p, WIDTH - 3) for p in paragraphs)
    return (f'"""{text}\n\n'
            f"Check: python -m tinyattn exercise check {exercise.name}{option}\n"
            f"Hint:  python -m tinyattn exercise hint {exercise.name}{option}\n"
            '"""')


def learner_file(exercise, folder=WORKSPACE):
    return compose(exercise, dict.fromkeys(exercise.units, "blank"), header(exercise, folder))


def solution_file(exercise, folder=WORKSPACE):
    return compose(exercise, dict.fromkeys(exercise.units, "solution"), header(exercise, folder))


# ------------------------------------------------------------------------------------------------
# Progress: progress.json in the workspace

def read_progress(folder):
    try:
        return json.loads((pathlib.Path(folder) / "progress.json").read_text())
    except (OSError, ValueError):
        return {}


def write_progress(folder, progress):
    path = pathlib.Path(folder) / "progress.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(progress, indent=1, sort_keys=True) + "\n")


def state_of(exercise, folder, progress):
    entry = progress.get(exercise.name)
    if entry is None:
        return "started" if (pathlib.Path(folder) / f"{exercise.name}.py").exists() \
            else "not started"
    hints = entry.get("hints_shown", 0)
    return entry["state"] + (f", {hints} of {len(exercise.hints)} hints" if hints else "")


def next_hint(exercise, folder):
    """The first hint not yet shown, counted as shown now; None when all were."""
    progress = read_progress(folder)
    entry = progress.setdefault(exercise.name, {"state": "started"})
    shown = entry.get("hints_shown", 0)
    if shown >= len(exercise.hints):
        return None
    entry["hints_shown"] = shown + 1
    write_progress(folder, progress)
    return hint_text(exercise, shown)


def record(exercise, folder, state):
    progress = read_progress(folder)
    progress.setdefault(exercise.name, {})["state"] = state
    write_progress(folder, progress)


# ------------------------------------------------------------------------------------------------
# The commands

ACTIONS = ("start", "check", "hint", "solution")


def list_main(argv=()):
    """`python -m tinyattn exercises`: one line per exercise, with the learner's progress; with
    an action first (`exercises start NAME`), that action, as `exercise` does it."""
    if argv and argv[0] in ACTIONS:
        return main(argv)
    parser = argparse.ArgumentParser(prog="python -m tinyattn exercises",
                                     description="the exercises, with your progress")
    parser.add_argument("--dir", default=WORKSPACE, help="your workspace (default %(default)s)")
    folder = parser.parse_args(argv).dir
    progress = read_progress(folder)
    rows = [(e.name, str(e.chapter), f"{e.file.removeprefix('tinyattn/')}: {', '.join(e.units)}",
             state_of(e, folder, progress)) for e in EXERCISES]
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    print(f"{'exercise':<{widths[0]}}  ch  {'what you write, in tinyattn/':<{widths[2]}}  state")
    for name, chapter, units, state in rows:
        print(f"{name:<{widths[0]}}  {chapter:>2}  {units:<{widths[2]}}  {state}")
    print(f"\nStart one with `python -m tinyattn exercise start NAME`; files go to {folder}/.")
    return 0


ACTION_HELP = {
    "start": "write the exercise's file into your workspace (never over a file that exists)",
    "check": "run the exercise's checks on your file, one line per check, then a hint",
    "hint": "show the next hint (all of them, once all were shown)",
    "solution": "print your file as it would pass: tinyattn's own code in place of the blanks",
}


def main(argv=()):
    """`python -m tinyattn exercise start|check|hint|solution NAME [--dir DIR]`."""
    parser = argparse.ArgumentParser(prog="python -m tinyattn exercise",
                                     description="start, check, get a hint for, or see the "
                                                 "solution of an exercise")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    for action in ACTIONS:
        one = actions.add_parser(action, help=ACTION_HELP[action],
                                 description=ACTION_HELP[action])
        one.add_argument("name", metavar="NAME",
                         help="the exercise (`python -m tinyattn exercises` lists them)")
        one.add_argument("--dir", default=WORKSPACE, help="your workspace (default %(default)s)")
    args = parser.parse_args(argv)
    exercise = BY_NAME.get(args.name)
    if exercise is None:
        near = similar_names(args.name)
        print(f"python -m tinyattn exercise: no exercise named {args.name!r}; "
              + (f"did you mean {' or '.join(near)}? " if near else "")
              + "`python -m tinyattn exercises` lists them", file=sys.stderr)
        return 2
    return {"start": start, "check": check, "hint": hint, "solution": solution}[args.action](
        exercise, args.dir)


def similar_names(name, count=3):
    """The exercises' names that look like a misspelled `name`: close ones, then those that
    contain it."""
    close = difflib.get_close_matches(name.replace("-", "_"), BY_NAME, n=count, cutoff=0.6)
    containing = [other for other in BY_NAME if name.lower() in other and other not in close]
    return (close + containing)[:count]


def start(exercise, folder):
    path = pathlib.Path(folder) / f"{exercise.name}.py"
    if path.exists():
        print(f"{path} exists already, and is left as it is (delete it to start again).")
        return 1
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(learner_file(exercise, folder))
    progress = read_progress(folder)
    progress.setdefault(exercise.name, {"state": "started"})
    write_progress(folder, progress)
    option = "" if str(folder) == WORKSPACE else f" --dir {folder}"
    print(f"Wrote {path}: write {', '.join(exercise.units)} there, then run\n"
          f"  python -m tinyattn exercise check {exercise.name}{option}")
    return 0


def check(exercise, folder):
    path = pathlib.Path(folder) / f"{exercise.name}.py"
    if not path.exists():
        print(f"There is no {path}: start the exercise with `python -m tinyattn exercise start "
              f"{exercise.name}`.")
        return 2
    print(f"Checking {path}: your {' and '.join(exercise.units)} in place of tinyattn's.",
          flush=True)
    shown = []                     # each check's line is printed as soon as it is judged

    def printed(check, measured):
        shown.append(check)
        print(report_line(check, measured), flush=True)
    try:
        results = run_checks(exercise, path, seconds=SECONDS_PER_CHECK, on_result=printed)
    except LearnerFileError as error:
        print(f"  FAIL  {error}")
        record(exercise, folder, "failing")
        return 1
    except KeyboardInterrupt:
        running = (f"the check {exercise.checks[len(shown)].what!r}"
                   if len(shown) < len(exercise.checks) else "the checks")
        print(f"  stopped (Ctrl-C) during {running}")
        return 130
    print(summary(results))
    if passed(exercise, results):
        record(exercise, folder, "passing")
        print(f"Passing. tinyattn's own version: `python -m tinyattn exercise solution "
              f"{exercise.name}`.")
        return 0
    record(exercise, folder, "failing")
    print()
    print(next_hint(exercise, folder) or no_hints_left(exercise))
    return 1


def hint(exercise, folder):
    """The next hint; once all were shown, all of them again."""
    text = next_hint(exercise, folder)
    if text is None:
        text = "\n".join(hint_text(exercise, i) for i in range(len(exercise.hints)))
        text += f"\n{no_hints_left(exercise)}"
    print(text)
    return 0


def hint_text(exercise, i):
    return textwrap.fill(exercise.hints[i], WIDTH,
                         initial_indent=f"Hint {i + 1} of {len(exercise.hints)}: ",
                         subsequent_indent="  ")


def no_hints_left(exercise):
    return (f"No hints left (`python -m tinyattn exercise hint {exercise.name}` shows them "
            f"all); `python -m tinyattn exercise solution {exercise.name}` prints tinyattn's "
            "own code.")


def solution(exercise, folder):
    sys.stdout.write(solution_file(exercise, folder))
    return 0
