"""The check process: a Python that had never imported tinyattn (forked by the grader's server,
`serve` below), whose tinyattn is the grader's compiled copy, with the exercise's module taken
from the grader's file that has the learner's functions in place of tinyattn's own (grader.py;
cutting.splice writes the module). It imports them, runs the rest of the learner's file (its
imports, its own helpers) among the globals the learner's functions see (the learner's file's,
not the module's: watching.LEARNERS_GLOBALS), runs each of the exercise's checks (checks.py: the
`run` half) and sends the grader what each computed, one message per line (messages.py); the
grader judges.

What it adds around the learner's code:
  * the watches of watching.py, on every call of the learner's functions;
  * a time limit per check (the learner's loop that never ends is told, with its line);
  * errors said in one line, with the line of the learner's file they went through (the copy's
    lines are mapped back to the learner's file, and named as Python 3.11 names them, on 3.10 too);
  * a refusal, from an audit hook set before any of the learner's code runs, of opening the files
    of tinyattn's own package (importing its code for the blanked function, in whatever way) and
    of starting another process.
The learner's prints go to standard error; the messages go to standard output.
"""
import ast
import builtins
import contextlib
import importlib
import importlib.util
import json
import os
import pathlib
import signal
import sys
import threading
import traceback
import warnings

import numpy as np

from tinyattn_tools.exercises import messages, watching
from tinyattn_tools.exercises.cutting import first_line
from tinyattn_tools.exercises.exercise import Worded

PREPARED = ("numpy.random", "argparse", "hashlib", "heapq", "secrets", "shutil", "zipfile")
PROCESSES = ("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
             "os.fork", "os.forkpty")


class OutOfTime(Worded):
    """A check that ran past its time limit."""


class Refused(Worded, PermissionError):
    """What the audit hook raises where the learner's code reaches for tinyattn's own code."""


class Job:
    """What the grader asked for (grader.run_checks), and how to word the learner's errors: the
    learner's file, and which lines of the copy of the module are the learner's."""

    def __init__(self, job):
        self.__dict__.update(job)
        self.lines = {int(line): mine for line, mine in job["lines"].items()}
        self.name = pathlib.Path(job["file"]).name
        self.refusals = []               # what the audit hook refused, in the learner's words


def serve():
    """The server of check processes (grader.Server): for each job, a line of standard input,
    fork a check process and say when it ended; where os.fork is missing, run one job here.
    It imports first what tinyattn and the catalogue import besides themselves, so that each
    check process finds them imported."""
    for name in PREPARED:
        importlib.import_module(name)
    for text in sys.stdin:
        if not hasattr(os, "fork"):
            return run_job(json.loads(text))
        pid = os.fork()
        if pid == 0:
            try:
                os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
                run_job(json.loads(text))
            finally:
                sys.stderr.flush()
                os._exit(0)
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        sys.stdout.write(messages.line({"ended": status}))
        sys.stdout.flush()


def run_job(job):
    """Run the job's checks, in this process, sending a message per line of standard output."""
    job = Job(job)
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                         # the learner's prints: to standard error

    def send(**message):
        channel.write(messages.line(message))
        channel.flush()
    send(pid=os.getpid())
    sys.addaudithook(guard(job))
    sys.meta_path.insert(0, Spliced(job))
    try:
        with time_limit(job.seconds):
            module = importlib.import_module(job.module)
            mine = watching.LEARNERS_GLOBALS         # the learner's file, as if it were imported
            mine.update({name: getattr(module, name) for name in job.pieces},
                        __name__=pathlib.Path(job.file).stem, __file__=job.file,
                        __builtins__=builtins)
            exec(compile(job.rest, job.file, "exec"), mine)   # the rest: its imports, its helpers
            from tinyattn_tools.exercises import catalogue
    except SystemExit as error:
        return send(load_failed=ends_the_program(error, job, "while loading"))
    except BaseException as error:
        return send(load_failed=f"{job.name} stopped while loading: {in_one_line(error, job)}")
    if module.__file__ != job.module_file:
        return send(load_failed="the grader's module with your functions was not the one imported")
    send(loaded=True)
    watching.CHANGED.update(catalogue.BY_NAME[job.exercise].changes)
    for index, check in enumerate(catalogue.BY_NAME[job.exercise].checks):
        send(start=index)
        message = run_check(check, job)
        send(**message, index=index)
        if message.keys() & {"out_of_time", "exited", "interrupted"}:
            break
    send(finished=True)


class Spliced:
    """The import of the exercise's module from the grader's spliced file, in place of the
    module of the copy of tinyattn (an entry of sys.meta_path, asked before any other)."""

    def __init__(self, job):
        self.job = job

    def find_spec(self, name, path=None, target=None):
        if name == self.job.module:
            return importlib.util.spec_from_file_location(name, self.job.module_file)
        return None


def run_check(check, job):
    """The message on one check: {"raw": what it computed, "calls": {unit: calls}} (and "nan":
    where its first NaN began, if it holds one), or {"failed": one line}."""
    before, job.refusals[:] = dict(watching.CALLS), []
    message = run_once(check, job)
    message["calls"] = {unit: count - before.get(unit, 0) for unit, count in
                        watching.CALLS.items()}
    if job.refusals:
        return {"failed": job.refusals[0], "calls": message["calls"]}
    try:
        messages.line(message)
    except TypeError as error:          # an array of objects (a None among numbers), say
        return {"failed": f"what the check computed from your code cannot be compared: {error}",
                "calls": message["calls"]}
    if "raw" in message and has_nan(message["raw"]):
        message["nan"] = first_nan(check, job)
    return message


def run_once(check, job):
    try:
        with time_limit(job.seconds), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            return {"raw": check.run()}
    except NotImplementedError as error:
        return {"failed": "not written yet: NotImplementedError" + where_in(error, job)}
    except SystemExit as error:
        return {"exited": ends_the_program(error, job, f"in the check {check.what!r}")}
    except OutOfTime as error:
        return {"failed": in_one_line(error, job), "out_of_time": True}
    except KeyboardInterrupt:
        return {"interrupted": True}
    except Exception as error:
        return {"failed": in_one_line(error, job)}


def has_nan(value):
    if isinstance(value, dict):
        return any(has_nan(item) for item in value.values())
    if isinstance(value, (list, tuple)):
        return any(has_nan(item) for item in value)
    return isinstance(value, (np.ndarray, float)) and np.asarray(value).dtype.kind == "f" and \
        bool(np.isnan(value).any())


def first_nan(check, job):
    """Where the NaN of a check began: the check run again, watching the learner's functions for
    the first NaN they make, then (if none) for the first inf."""
    for made, raising in (("NaN", dict(invalid="raise")),
                          ("inf", dict(invalid="raise", over="raise", divide="raise"))):
        with watching.watching("nans", **raising) as found:
            run_once(check, job)
        if found:
            unit, what, error = found[0]
            where = where_in(error, job) if error is not None else ""
            return f"the first {made} came from your {unit}{where}: {what}"
    return "no function of yours made a NaN or an inf: a later op made it from what yours returned"


def guard(job):
    """The audit hook: refuses to open tinyattn's own source of the exercise's module (in the copy
    the check process imports, compiled or not) or any file of tinyattn's own package, and to
    start a process, saying so in the learner's words (kept in job.refusals, for the check that
    was running)."""
    package, original = pathlib.Path(job.package).resolve(), pathlib.Path(job.original).resolve()
    compiled = original.parent / "__pycache__"

    def hook(event, arguments):
        if event == "open" and isinstance(arguments[0], (str, bytes, os.PathLike)):
            path = pathlib.Path(os.fsdecode(arguments[0])).resolve()
            if package in path.parents or path == original or \
                    path.parent == compiled and path.name.startswith(original.stem + "."):
                refuse(f"opened tinyattn's own {path.name}")
        elif event in PROCESSES:
            refuse(f"started a process ({event})")

    def refuse(what):
        text = (f"your code {what}: only your own code is graded, and nothing else runs during "
                "a check")
        job.refusals.append(text + where_in(None, job, sys._getframe(2)))
        raise Refused(text)
    return hook


# ------------------------------------------------------------------------------------------------
# Time limits

@contextlib.contextmanager
def time_limit(seconds):
    """OutOfTime after `seconds`, where a signal can interrupt (the main thread of a Unix
    process); elsewhere no limit here (the grader still stops the process after a while)."""
    if not seconds or not hasattr(signal, "setitimer") or \
            threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum, frame):
        raise OutOfTime(f"stopped after {seconds:g} s: does every loop of yours end?")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# ------------------------------------------------------------------------------------------------
# Errors, in one line, at the learner's line

def ends_the_program(error, job, when):
    """The line for a learner's file that called sys.exit() or exit() `when`."""
    return (f"{job.name} calls sys.exit() or exit(){where_in(error, job)} {when}: that would "
            "end the grader too, before it says anything; remove the call")


def in_one_line(error, job):
    """`TypeError: ... (mul_div.py, line 31, in Div.backward)`: the error, and the last line of
    the learner's file it went through (the engine may raise it later, from what the learner's
    code returned: then the message says what was wrong)."""
    message = " ".join(str(error).split())
    if len(message) > 300:
        message = message[:300] + " ..."
    if isinstance(error, Worded):
        text = message
    else:
        text = f"{type(error).__name__}: {message}" if message else type(error).__name__
    return text + where_in(error, job)


def where_in(error, job, frame=None):
    """" (mul_div.py, line 31, in Div.backward)": the last line of the learner's file that the
    error (or an error that caused it) went through, or that `frame` and its callers are at;
    "" if none."""
    chains, seen = [list(traceback.walk_stack(frame))[::-1]] if frame is not None else [], set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        chains.append(list(traceback.walk_tb(error.__traceback__)))
        error = error.__cause__ or error.__context__
    for frames in chains:
        mine = [(f.f_code, job.lines[line] if f.f_code.co_filename == job.module_file else line)
                for f, line in frames if f.f_code.co_filename == job.file or
                f.f_code.co_filename == job.module_file and line in job.lines]
        if mine:
            code, line = mine[-1]
            return f" ({job.name}, line {line}, in {qualified_name(code, job)})"
    return ""


def qualified_name(code, job):
    """`Div.backward`, the qualified name of the learner's function whose code is `code`.
    Python 3.11 and later give it (co_qualname); Python 3.10's code objects have only the bare
    name (`backward`), so there it is found in the learner's source."""
    if hasattr(code, "co_qualname"):
        return code.co_qualname
    first = (code.co_firstlineno if code.co_filename == job.file else
             job.lines.get(code.co_firstlineno))
    return code.co_name if first is None else qualified_name_in(job.source, first, code.co_name)


DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def qualified_name_in(source, line, name):
    """The qualified name Python gives the code `name` whose first line is `line` in `source`:
    the names of the classes and functions it is defined in, joined by dots, with `<locals>`
    after a function ("outer.<locals>.inner", "Mul.backward"). A definition's first line is its
    first decorator's, if it has any (or its `def` line); code that is no definition (a lambda)
    takes the name of the innermost definition whose lines hold it
    ("Mul.backward.<locals>.<lambda>")."""
    chains = list(definitions_in(ast.parse(source)))
    defined_there = [chain for chain in chains if chain[-1].name == name
                     and first_line(chain[-1]) <= line <= chain[-1].lineno]
    if defined_there:
        chain, inside = defined_there[0], []
    else:
        around = [chain for chain in chains
                  if first_line(chain[-1]) <= line <= chain[-1].end_lineno]
        chain, inside = max(around, key=len, default=()), [name]
    parts = []
    for depth, node in enumerate(chain):
        parts.append(node.name)
        if not isinstance(node, ast.ClassDef) and (depth < len(chain) - 1 or inside):
            parts.append("<locals>")
    return ".".join(parts + inside)


def definitions_in(node, chain=()):
    """Every class and function definition under `node`, each as the chain of definitions from
    the outermost to it."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, DEFINITIONS):
            yield chain + (child,)
            yield from definitions_in(child, chain + (child,))
        else:
            yield from definitions_in(child, chain)


