"""Checking a learner's file: the learner's code runs in a process of its own, and is judged here.

1. The file is read here: a syntax error, a function missing, or an import of tinyattn's own code
   over the learner's is refused at once, in one line.
2. A copy of tinyattn is made in a temporary folder (once per grader process, compiled), and for
   this run the exercise's module is written anew with the learner's functions spliced in place
   of tinyattn's (cutting.splice); the check process imports it in place of the copy's own.
   tinyattn's own files are not touched, and no object of tinyattn's is changed: there, the
   learner's code is simply the code of the module, so tinyattn's layers, doors and function
   tables call it. Its globals are the learner's file's, not the module's (what the file imports
   and defines: an `np` it never imported is a NameError, as anywhere else).
3. A check process (child.py) imports that copy and runs the `run` half of each check: it sends
   back what each computed, the raw numbers, one message per check. It is forked, for each run,
   by a server process that has imported NumPy but never tinyattn (`Server`), so that a run does
   not wait for Python to start and holds no object of tinyattn's own.
4. Each is judged here, by the `judge` half (checks.py), against what tinyattn's own code
   computes: nothing the learner's file does decides a verdict. A check that sent nothing fails:
   the process ended (sys.exit, os._exit, a crash), it ran past its time, or what came back is not
   what the check computes. A run passes only when every check of the exercise sent its numbers
   and passed, and a check during which the learner's code never ran fails.
"""
import ast
import atexit
import collections
import compileall
import contextlib
import functools
import math
import os
import pathlib
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import warnings

import numpy as np

import tinyattn
import tinyattn_tools
from tinyattn_tools.exercises import messages
from tinyattn_tools.exercises.cutting import CuttingError, pieces_of, splice, unit_node
from tinyattn_tools.exercises.exercise import Measured

SLACK = 20                 # seconds the grader waits for a message beyond a check's time limit
BOOTSTRAP = ("import sys; sys.path[0] = {tools!r}; "
             "from tinyattn_tools.exercises.child import serve; serve()")


class LearnerFileError(Exception):
    """A learner's file that cannot be checked: a syntax error, an error while loading it, a
    function missing or not its own, a call that ends the check process. The message is one
    line."""


def run_checks(exercise, path, fail_fast=False, seconds=None, on_result=None):
    """[(check, Measured)] for the exercise's checks on the learner's file at `path`: one per
    check, in order (fewer when `fail_fast` stops at the first failure), and a last one if a
    function of the learner's never ran. After a check that ran out of time the others fail
    unrun. `on_result(check, measured)` is called as each one is judged."""
    text, tree = read(exercise, path)
    module_text, lines, rest = splice(exercise, text, tree)
    with tempfile.TemporaryDirectory(prefix="tinyattn-check-") as folder:
        module_file = pathlib.Path(folder) / exercise.file
        module_file.parent.mkdir(parents=True)
        module_file.write_text(module_text)
        job = dict(exercise=exercise.name, module=exercise.module, file=str(path), source=text,
                   lines=lines, rest=rest, pieces=sorted(pieces_of(exercise)), seconds=seconds,
                   module_file=str(module_file),
                   original=str(pathlib.Path(compiled_packages()) / exercise.file),
                   package=str(pathlib.Path(tinyattn.__file__).parent))
        process = CheckProcess(job)
        try:
            return judged(exercise, process, path, fail_fast, seconds, on_result)
        finally:
            process.stop()


def passed(exercise, results):
    """Whether a run passed: every check of the exercise sent its numbers, and all passed."""
    return len(results) >= len(exercise.checks) and all(m.passed for _, m in results)


# ------------------------------------------------------------------------------------------------
# The learner's file, read here

def read(exercise, path):
    """(the text, its syntax tree), or LearnerFileError for a file that cannot be checked."""
    try:
        text = path.read_text()
    except OSError as error:
        raise LearnerFileError(f"cannot read {path}: {error.strerror}") from None
    try:
        tree = ast.parse(text, str(path))
    except SyntaxError as error:
        raise LearnerFileError(f"{path.name}, line {error.lineno}: {error.msg} "
                               f"(a SyntaxError: Python cannot read the file)") from None
    for unit in exercise.units:
        try:
            unit_node(tree, unit, path.name)
        except CuttingError:
            owner, _, name = unit.rpartition(".")
            where = f"class {owner} with a method {name}" if owner else f"a function {name}"
            raise LearnerFileError(f"{path.name} has no {unit}: it must keep {where}, as the "
                                   "file was given") from None
    owners = {unit.rpartition(".")[0] or unit for unit in exercise.units}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == exercise.module and \
                {alias.name for alias in node.names} & (owners | {"*"}):
            raise LearnerFileError(
                f"{path.name}, line {node.lineno}: `{ast.unparse(node)}` puts tinyattn's own "
                f"code in place of yours: only your own code is graded; remove the import")
    return text, tree


# ------------------------------------------------------------------------------------------------
# The copy of tinyattn, and the check process

@functools.lru_cache(maxsize=None)
def compiled_packages():
    """A temporary folder holding copies of tinyattn and tinyattn_tools with every module
    compiled, made once per grader process: the check processes import both from there (the
    exercise's module excepted), so that none compiles them again (Python writes no compiled
    files where PYTHONDONTWRITEBYTECODE is set)."""
    folder = tempfile.mkdtemp(prefix="tinyattn-compiled-")
    atexit.register(shutil.rmtree, folder, True)
    for package in (tinyattn, tinyattn_tools):
        shutil.copytree(pathlib.Path(package.__file__).parent, pathlib.Path(folder) /
                        package.__name__, ignore=shutil.ignore_patterns("__pycache__"))
    compileall.compile_dir(folder, quiet=1)
    return folder


class Server:
    """The process that starts check processes: a Python that has imported NumPy and the check
    process's code (child.serve), never tinyattn, and forks a check process for each job, so that
    a check run does not wait for Python and NumPy to start (where os.fork is missing it runs
    one job itself, and ends). One per grader process, started when first needed."""

    running = None

    def __init__(self):
        tools = compiled_packages()
        environment = dict(os.environ)
        for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            environment.setdefault(variable, "1")      # the checks' arrays are small
        self.process = subprocess.Popen(
            [sys.executable, "-B", "-c", BOOTSTRAP.format(tools=tools)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, text=True, env=environment)
        self.lines = queue.Queue()
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()
        atexit.register(self.close)

    @classmethod
    def started(cls):
        if cls.running is None or cls.running.process.poll() is not None:
            cls.running = cls()
        return cls.running

    def read(self):
        for text in self.process.stdout:
            self.lines.put(text)
        self.lines.put(None)

    def close(self):
        self.process.stdin.close()
        self.process.wait()
        self.reader.join()
        self.process.stdout.close()


class CheckProcess:
    """One job's check process, forked by the server: its messages, its exit status."""

    def __init__(self, job):
        self.server, self.pid, self.status = Server.started(), None, None
        self.server.process.stdin.write(messages.line(job))
        self.server.process.stdin.flush()

    def messages(self, wait):
        """The process's messages, each within `wait` seconds (else TimeoutError), until it
        ended (then `status` is its exit status)."""
        while self.status is None:
            try:
                text = self.server.lines.get(timeout=wait)
            except queue.Empty:
                raise TimeoutError from None
            message = messages.read(text) if text is not None else {"ended": None}
            if message is None:
                continue
            if "ended" in message:
                status = message["ended"] if text is not None else self.server.process.wait()
                self.status = status if type(status) is int else -1
            elif "pid" in message and self.pid is None:
                self.pid = message["pid"]
            else:
                yield message

    def stop(self):
        """End the process if it still runs, and wait for the server to say it ended."""
        if self.status is None:
            if self.pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL if hasattr(signal, "SIGKILL") else
                            signal.SIGTERM)
            else:
                self.server.process.kill()
            for _ in self.messages(SLACK):
                pass


def judged(exercise, process, path, fail_fast, seconds, on_result):
    """[(check, Measured)] from the messages of the check process."""
    results, running, stopped, calls = [], None, None, collections.Counter()

    def add(check, measured):
        results.append((check, measured))
        if on_result is not None:
            on_result(check, measured)
    try:
        for message in process.messages((seconds or 60) + SLACK):
            if "load_failed" in message:
                raise LearnerFileError(str(message["load_failed"]))
            if type(message.get("start")) is int and 0 <= message["start"] < len(exercise.checks):
                running = exercise.checks[message["start"]]
            elif message.get("index") == len(results) < len(exercise.checks):
                check = exercise.checks[len(results)]
                if "exited" in message:
                    raise LearnerFileError(str(message["exited"]))
                if "interrupted" in message:
                    raise KeyboardInterrupt
                add(check, judged_one(check, message))
                calls.update(calls_in(message))
                stopped = check.what if "out_of_time" in message else None
                if stopped or fail_fast and not results[-1][1].passed:
                    break
            elif "finished" in message:
                break
    except TimeoutError:
        if running is None or len(results) == len(exercise.checks):
            raise LearnerFileError(f"{path.name} stopped while loading: it ran past "
                                   f"{(seconds or 60) + SLACK:g} s") from None
        add(running, Measured(False, None, f"stopped after {(seconds or 60) + SLACK:g} s, with "
                                           "its process: does every loop of yours end?"))
        stopped = running.what
    if fail_fast and results and not results[-1][1].passed:
        return results
    for check in exercise.checks[len(results):]:
        if stopped is None:
            raise LearnerFileError(ended(process, path, running))
        add(check, Measured(False, None, f"not run: the check {stopped!r} ran out of time"))
    never = [unit for unit in exercise.units if not calls[unit]]
    if never and all(measured.passed for _, measured in results) and not fail_fast:
        add(None, Measured(False, None, f"no check ran {', '.join(never)} (a fault of the "
                                        "exercise: please report it)"))
    return results


def judged_one(check, message):
    """The Measured of one check's message."""
    if "failed" in message:
        return Measured(False, None, str(message["failed"]))
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            measured = check.judge(message["raw"])
    except Exception as error:
        return Measured(False, None, f"what came back is not what the check computes "
                                     f"({type(error).__name__}: {error}): did your file change "
                                     "the grader?")
    if measured.passed and not any(calls_in(message).values()):
        return Measured(False, None, "the check did not run your code (a fault of the exercise: "
                                     "please report it)")
    if measured.error is not None and math.isnan(measured.error) and message.get("nan"):
        measured = measured._replace(detail=f"{measured.detail}; {message['nan']}".lstrip("; "))
    return measured


def calls_in(message):
    """{unit: calls of the learner's function} that a check's message reports."""
    calls = message.get("calls")
    return {unit: count for unit, count in calls.items() if isinstance(count, int)} \
        if isinstance(calls, dict) else {}


def ended(process, path, running):
    """The line for a check process that ended before every check sent its numbers."""
    process.stop()
    code = process.status
    how = (f"exit status {code}" if code >= 0 else f"killed by signal {-code}")
    when = f"during the check {running.what!r}" if running is not None else "while loading"
    return (f"{path.name} ended the check process {when} ({how}: sys.exit, os._exit or a crash): "
            "only checks that report count, so it fails")


def report_line(check, measured):
    """pass or FAIL, the largest error found (or - for a check that measures no number), what it
    checks, and a few words on what was found."""
    what = check.what if check is not None else "every function of the exercise ran"
    error = f"{measured.error:.1e}" if measured.error is not None else "-"
    detail = f" ({measured.detail})" if measured.detail else ""
    return f"  {'pass' if measured.passed else 'FAIL'}  {error:>8}  {what}{detail}"


def summary(results):
    passed_count = sum(measured.passed for _, measured in results)
    return (f"{passed_count} of {len(results)} checks pass; the number after pass or FAIL is the "
            "largest error found.")
