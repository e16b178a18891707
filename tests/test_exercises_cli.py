"""The exercise commands: the list with the learner's progress, start (never overwriting, also as
`exercises start`), check (one line per check, the next hint, the exit code), hint, solution; a
learner's file that cannot be checked gets one line, never a traceback, naming the function as
Python 3.11 does on 3.10 too; a loop that never ends is stopped; and the README's cycle and its
recipe for a new op are what the code prints and does."""
import math
import re
import subprocess
import sys
import types

import pytest

from tinyattn_tools import cli as tinyattn_cli
from tinyattn_tools.exercises import BY_NAME, EXERCISES, child, cli
import exercise_transcript as transcript
from tinyattn_tools.exercises.grader import LearnerFileError, run_checks

MUL_DIV = BY_NAME["mul_div"]


def run(capsys, *argv):
    """(exit code, what was printed) of `python -m tinyattn *argv`, in this process."""
    code = tinyattn_cli.main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_the_list_names_every_exercise_with_its_state(tmp_path, capsys):
    folder = str(tmp_path)
    code, out = run(capsys, "exercises", "--dir", folder)
    lines = out.splitlines()[1:len(EXERCISES) + 1]
    assert code == 0 and [line.split()[0] for line in lines] == [e.name for e in EXERCISES]
    assert all(line.endswith("not started") for line in lines)
    assert "ops/elementwise.py: Mul.backward, Div.backward" in lines[0]
    run(capsys, "exercise", "start", "mul_div", "--dir", folder)
    run(capsys, "exercise", "check", "mul_div", "--dir", folder)
    (tmp_path / "softmax.py").write_text(cli.solution_file(BY_NAME["softmax"], folder))
    run(capsys, "exercise", "check", "softmax", "--dir", folder)
    _, out = run(capsys, "exercises", "--dir", folder)
    states = {line.split()[0]: line for line in out.splitlines()[1:len(EXERCISES) + 1]}
    assert states["mul_div"].endswith("failing, 1 of 3 hints")
    assert states["softmax"].endswith("passing")


def test_start_writes_the_blank_once_and_never_overwrites(tmp_path, capsys):
    folder = tmp_path / "work"
    code, out = run(capsys, "exercise", "start", "mul_div", "--dir", str(folder))
    path = folder / "mul_div.py"
    assert code == 0 and str(path) in out
    assert path.read_text() == cli.learner_file(MUL_DIV, str(folder))
    assert f"exercise check mul_div --dir {folder}" in path.read_text()
    path.write_text("# my work\n")
    code, out = run(capsys, "exercise", "start", "mul_div", "--dir", str(folder))
    assert code == 1 and "left as it is" in out and path.read_text() == "# my work\n"


def test_check_prints_a_line_per_check_then_the_next_hint(tmp_path, capsys):
    folder = str(tmp_path)
    run(capsys, "exercise", "start", "mul_div", "--dir", folder)
    code, out = run(capsys, "exercise", "check", "mul_div", "--dir", folder)
    lines = out.splitlines()
    assert code == 1 and len([line for line in lines if line.startswith("  FAIL  ")]) == 3
    assert "0 of 3 checks pass" in out and "Hint 1 of 3: Re-read" in out
    code, out = run(capsys, "exercise", "hint", "mul_div", "--dir", folder)
    assert code == 0 and out.startswith("Hint 2 of 3")
    _, out = run(capsys, "exercise", "check", "mul_div", "--dir", folder)
    assert "Hint 3 of 3" in out
    _, out = run(capsys, "exercise", "check", "mul_div", "--dir", folder)
    assert "No hints left" in out
    _, out = run(capsys, "exercise", "hint", "mul_div", "--dir", folder)
    assert "Hint 1 of 3" in out and "Hint 3 of 3" in out        # all of them again
    (tmp_path / "mul_div.py").write_text(cli.solution_file(MUL_DIV, folder))
    code, out = run(capsys, "exercise", "check", "mul_div", "--dir", folder)
    assert code == 0 and "3 of 3 checks pass" in out and "Hint" not in out
    assert cli.read_progress(folder)["mul_div"] == {"state": "passing", "hints_shown": 3}


def test_exercises_with_an_action_does_what_exercise_does(tmp_path, capsys):
    """`python -m tinyattn exercises start NAME`, as a learner types it after the list."""
    code, out = run(capsys, "exercises", "start", "mul_div", "--dir", str(tmp_path))
    assert code == 0 and (tmp_path / "mul_div.py").exists() and "exercise check mul_div" in out
    code, out = run(capsys, "exercises", "hint", "mul_div", "--dir", str(tmp_path))
    assert code == 0 and out.startswith("Hint 1 of 3")


@pytest.mark.parametrize("action", cli.ACTIONS)
def test_each_action_has_its_own_help(action, capsys):
    with pytest.raises(SystemExit):
        tinyattn_cli.main(["exercise", action, "--help"])
    out = capsys.readouterr().out
    assert out.startswith(f"usage: python -m tinyattn exercise {action} [-h] [--dir DIR] NAME")
    assert cli.ACTION_HELP[action] in " ".join(out.split())


def test_solution_prints_the_file_and_nothing_else(capsys):
    code, out = run(capsys, "exercise", "solution", "flash_backward")
    assert code == 0 and out == cli.solution_file(BY_NAME["flash_backward"])


def test_an_unknown_exercise_or_a_missing_file_is_named(tmp_path, capsys):
    code, out = run(capsys, "exercise", "check", "mul", "--dir", str(tmp_path))
    assert code == 2 and "no exercise named 'mul'" in out
    _, out = run(capsys, "exercise", "start", "mul-div", "--dir", str(tmp_path))
    assert "no exercise named 'mul-div'; did you mean mul_div? `python -m tinyattn exercises`" \
        in out
    _, out = run(capsys, "exercise", "hint", "flash")
    assert "did you mean flash_forward or flash_backward?" in out
    code, out = run(capsys, "exercise", "check", "mul_div", "--dir", str(tmp_path))
    assert code == 2 and "exercise start mul_div" in out


BAD_FILES = {     # what the learner's file does: (edit of the blank, what the one line says)
    "a syntax error": (("        raise NotImplementedError\n", "        return (grad *\n"),
                       "mul_div.py, line {line}: '(' was never closed (a SyntaxError"),
    "the wrong method name": (("    def backward(self, grad):\n",
                               "    def backwards(self, grad):\n"),
                              "mul_div.py has no Mul.backward: it must keep class Mul with a "
                              "method backward"),
    "an error while loading": (("from tinyattn.engine import Function\n",
                                "from tinyattn.engine import Function\nFunction = Funtion\n"),
                               "mul_div.py stopped while loading: NameError: name 'Funtion' is "
                               "not defined (mul_div.py, line {line}, in <module>)"),
    "an exception": (("        raise NotImplementedError\n", "        return 1 / 0\n"),
                     "ZeroDivisionError: division by zero (mul_div.py, line {line}, in "
                     "Mul.backward)"),
    "a wrong return shape": (("        raise NotImplementedError\n",
                              "        return grad.sum(axis=0), grad\n"),
                             "RuntimeError: mul: backward returned a gradient of shape"),
    "a list, not a tuple": (("        raise NotImplementedError\n",
                             "        a, b = self.saved\n        return [grad * b, grad * a]\n"),
                            "TypeError: mul: backward must return a tuple"),
    "sys.exit() while loading": (("from tinyattn.engine import Function\n",
                                  "import sys\nfrom tinyattn.engine import Function\nsys.exit()\n"),
                                 "  FAIL  mul_div.py calls sys.exit() or exit() (mul_div.py, line "
                                 "{line}, in <module>) while loading: that would end the grader "
                                 "too, before it says anything; remove the call"),
    "exit() in a backward": (("        raise NotImplementedError\n", "        exit()\n"),
                             "  FAIL  mul_div.py calls sys.exit() or exit() (mul_div.py, line "
                             "{line}, in Mul.backward) in the check \"gradients vs tinyattn's: "
                             "9 rows of the checklist\": that would end the grader"),
}


@pytest.mark.parametrize("what", BAD_FILES)
def test_a_file_that_cannot_pass_gets_one_clear_line_and_no_traceback(what, tmp_path, capsys):
    (old, new), says = BAD_FILES[what]
    blank = cli.learner_file(MUL_DIV, str(tmp_path))
    edited = blank.replace(old, new, 1)
    line = blank[:blank.index(old)].count("\n") + 1 + new.count("\n") - 1   # the edit's last line
    (tmp_path / "mul_div.py").write_text(edited)
    code, out = run(capsys, "exercise", "check", "mul_div", "--dir", str(tmp_path))
    assert code == 1 and says.format(line=line) in out, out
    assert "Traceback" not in out and 'File "' not in out
    assert all(len(line) < 400 for line in out.splitlines())


NESTED = """\
def function():
    def inner():
        return lambda x: x
    return inner


@decorated
@twice
class Outer:
    @staticmethod
    def method():
        pass

    class Inner:
        async def method(self):
            pass
    square = lambda self: self * self
"""


def code_objects(code):
    """`code` and every code object defined in it, at any depth."""
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from code_objects(constant)


def test_the_qualified_name_is_found_in_the_source_as_python_311_gives_it():
    """Python 3.10's code objects lack co_qualname: the grader's messages find it in the
    learner's source, the same on every Python (checked against co_qualname where it exists)."""
    found = {}
    for code in list(code_objects(compile(NESTED, "nested.py", "exec")))[1:]:    # not <module>
        found[code] = child.qualified_name_in(NESTED, code.co_firstlineno, code.co_name)
        assert found[code] == getattr(code, "co_qualname", found[code])
    assert sorted(found.values()) == ["Outer", "Outer.<lambda>", "Outer.Inner",
                                      "Outer.Inner.method", "Outer.method", "function",
                                      "function.<locals>.inner",
                                      "function.<locals>.inner.<locals>.<lambda>"]


def test_on_python_3_10_the_learners_functions_are_named_from_their_source():
    """Without co_qualname, a function of the learner's is named from the learner's file: at its
    own line when it runs from there (the rest of the file), at the line the copy of the module
    maps to when it was spliced in."""
    job = types.SimpleNamespace(file="/learner/mul_div.py", module_file="/copy/elementwise.py",
                                source=NESTED, lines={40: 7, 41: 8})
    from_the_file = types.SimpleNamespace(co_filename=job.file, co_firstlineno=11, co_name="method")
    spliced = types.SimpleNamespace(co_filename=job.module_file, co_firstlineno=41,
                                    co_name="Outer")
    assert child.qualified_name(from_the_file, job) == "Outer.method"
    assert child.qualified_name(spliced, job) == "Outer"


def test_a_loop_that_never_ends_is_stopped_and_the_checks_after_it_are_not_run(tmp_path):
    """(The time limit covers the loading of the copy of tinyattn too: 2 s, not less.)"""
    path = tmp_path / "mul_div.py"
    path.write_text(cli.learner_file(MUL_DIV).replace(
        "        raise NotImplementedError\n", "        while True:\n            pass\n", 1))
    results = run_checks(MUL_DIV, path, seconds=2)
    assert "stopped after 2 s: does every loop of yours end? (mul_div.py, line" in \
        results[0][1].detail
    assert [measured.detail for _, measured in results[1:]] == [
        "not run: the check \"gradients vs tinyattn's: 9 rows of the checklist\" ran out of "
        "time"] * 2
    path.write_text(cli.learner_file(MUL_DIV) + "while True:\n    pass\n")
    with pytest.raises(LearnerFileError, match=r"mul_div.py stopped while loading: stopped after "
                                               r"2 s: does every loop of yours end\? \(mul_div"):
        run_checks(MUL_DIV, path, seconds=2)


def test_ctrl_c_says_which_check_was_running(tmp_path, capsys):
    (tmp_path / "mul_div.py").write_text(cli.learner_file(MUL_DIV).replace(
        "        raise NotImplementedError\n", "        raise KeyboardInterrupt\n", 1))
    code, out = run(capsys, "exercise", "check", "mul_div", "--dir", str(tmp_path))
    assert code == 130 and out.splitlines()[-1] == (
        "  stopped (Ctrl-C) during the check \"gradients vs tinyattn's: 9 rows of the "
        "checklist\"")


def test_a_file_that_imports_tinyattns_own_code_over_the_blanks_is_refused(tmp_path, capsys):
    (tmp_path / "mul_div.py").write_text(cli.learner_file(MUL_DIV, str(tmp_path))
                                         + "from tinyattn.ops.elementwise import *\n")
    code, out = run(capsys, "exercise", "check", "mul_div", "--dir", str(tmp_path))
    line = len(cli.learner_file(MUL_DIV, str(tmp_path)).splitlines()) + 1
    assert code == 1 and out.splitlines()[1:] == [
        f"  FAIL  mul_div.py, line {line}: `from tinyattn.ops.elementwise import *` puts "
        "tinyattn's own code in place of yours: only your own code is graded; remove the import"]


def test_the_list_piped_into_head_ends_quietly():
    """A reader that stops early (`python -m tinyattn exercises | head`): no BrokenPipeError."""
    with subprocess.Popen([sys.executable, "-m", "tinyattn", "exercises"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE) as listing:
        listing.stdout.close()              # before the listing is written: the pipe is broken
        errors = listing.stderr.read().decode()
        assert listing.wait(timeout=120) == 1 and errors == ""


def test_python_dash_m_runs_a_check_in_a_fresh_process(tmp_path):
    (tmp_path / "exp_log.py").write_text(cli.solution_file(BY_NAME["exp_log"], str(tmp_path)))
    done = subprocess.run([sys.executable, "-m", "tinyattn", "exercise", "check", "exp_log",
                           "--dir", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 of 2 checks pass" in done.stdout


NUMBER = re.compile(r"\d\.\de[+-]\d\d")


def same_but_rounding(got, recorded):
    """The texts agree, except numbers below 1e-6 (a passing check's rounding errors, which
    differ between machines and BLAS libraries): those need only both be below 1e-6."""
    if NUMBER.sub("#", got) != NUMBER.sub("#", recorded):
        return False
    pairs = zip(NUMBER.findall(got), NUMBER.findall(recorded))
    return all(a == b or max(float(a), float(b)) < 1e-6 and math.isfinite(float(a))
               for a, b in pairs)


def test_the_exercises_page_shows_the_cycle_as_it_prints():
    _, section, _ = transcript.split_page(transcript.PAGE.read_text())
    assert same_but_rounding(transcript.cycle(), section), \
        "run `python dev/exercise_transcript.py --write`"
    assert "Hint 1 of 3" in section and "3 of 3 checks pass" in section


def test_the_readme_recipe_for_a_new_op_runs():
    readme = (transcript.PAGE.parents[1] / "README.md").read_text()
    recipe = readme.split("### Write and check your own op", 1)[1]
    code = recipe.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {}
    exec(compile(code, "README: Write and check your own op", "exec"), namespace)
    assert namespace["checked"] is True
