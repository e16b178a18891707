"""The exercises' grader is honest: for every exercise the blank fails every check, tinyattn's own
code passes every check (each of which ran the code put in place), and each classic wrong version
fails, the honest mistakes of issue 30 by a check that names them; the learner's file is cut from
the current source; a sample of single-token mutants is caught, and every mutant recorded as
equivalent still is one; and a file that tries to dodge the checks (ends the process, replaces
the check runner, patches the measurement, reaches for tinyattn's own code) fails."""
import ast
import importlib
import inspect
import random

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import engine
from tinyattn.ops import elementwise
from tinyattn_tools.exercises import BY_NAME, EXERCISES, cli
import exercise_mutants as mutants
from tinyattn_tools.exercises.checks import compared, gradient_rows
from tinyattn_tools.exercises.cutting import BLANK, source_of, unit_node
from tinyattn_tools.exercises.exercise import apply_edits
from tinyattn_tools.exercises.grader import LearnerFileError, judged_one, passed, run_checks

WRONG = [(exercise, wrong) for exercise in EXERCISES for wrong in exercise.wrong_versions]


def checked(exercise, text, folder, fail_fast=False):
    """[(check, Measured)] for the learner's file `text`."""
    path = folder / f"{exercise.name}.py"
    path.write_text(text)
    return run_checks(exercise, path, fail_fast=fail_fast)


def chapter_of(module):
    """The chapter a book module's docstring begins with ("Chapter 1. ...")."""
    return int(inspect.getdoc(importlib.import_module(module)).split(".")[0].split()[1])


def test_at_least_twenty_exercises_each_with_its_parts_none_before_its_modules_chapter():
    """An exercise comes in its module's chapter, or later when its checks need a later chapter
    (causal_mask's, in a chapter-1 file, feed chapter 2's key/value cache); adamw's optim.py is
    chapter 1, and so is its exercise."""
    assert len(EXERCISES) >= 20
    assert len({e.name for e in EXERCISES}) == len(EXERCISES)
    assert [e.chapter for e in EXERCISES] == sorted(e.chapter for e in EXERCISES)
    for exercise in EXERCISES:
        assert len(exercise.wrong_versions) >= 3, exercise.name
        assert len(exercise.hints) >= 3 and exercise.hints[0].startswith("Re-read"), exercise.name
        assert exercise.read_first and exercise.checks, exercise.name
        assert chapter_of(exercise.module) <= exercise.chapter, exercise.name
    assert BY_NAME["adamw"].chapter == chapter_of("tinyattn.optim") == 1


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_tinyattns_own_code_passes_every_check(exercise, tmp_path):
    results = checked(exercise, cli.solution_file(exercise), tmp_path)
    failed = [(check.what if check else "", measured) for check, measured in results
              if not measured.passed]
    assert not failed
    assert len(results) == len(exercise.checks)


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_blank_fails_every_check_in_the_learners_code(exercise, tmp_path):
    results = checked(exercise, cli.learner_file(exercise), tmp_path)
    assert len(results) == len(exercise.checks)
    for check, measured in results:
        assert not measured.passed, check.what
        assert measured.detail.startswith("not written yet: NotImplementedError"), check.what
        assert f"{exercise.name}.py, line" in measured.detail


@pytest.mark.parametrize("exercise, wrong", WRONG,
                         ids=[f"{e.name}: {w.mistake}" for e, w in WRONG])
def test_each_classic_wrong_version_fails(exercise, wrong, tmp_path):
    text = apply_edits(cli.solution_file(exercise), wrong.edits, wrong.mistake)
    results = checked(exercise, text, tmp_path, fail_fast=True)
    assert not passed(exercise, results)


HONEST_MISTAKES = [     # issue 30's mistakes that passed an earlier grader, and the check naming it
    ("layer_norm", "a frozen weight (needs no gradient) left out of dL/dx",
     "a frozen weight (it needs no gradient) still scales dL/dx"),
    ("lora", "alpha defaulting to 1", "alpha defaulting to the rank"),
    ("lora", "lora_A drawn from NumPy's global generator", "drawn from tinyattn's generator"),
    ("lora", "the frozen weight and bias replaced by detached copies", "stay its parameters"),
    ("adamw", "the moments kept in float64", "and so do their moments m and v"),
    ("matmul", "b's column dropped with squeeze()", "(row 'matmul length-1 vector': RuntimeError: "
                                                    "matmul: backward returned a gradient of "
                                                    "shape () for an input of shape (1,)"),
]


@pytest.mark.parametrize("name, mistake, named", HONEST_MISTAKES,
                         ids=[mistake for _, mistake, _ in HONEST_MISTAKES])
def test_an_honest_mistake_fails_by_a_check_that_names_it(name, mistake, named, tmp_path):
    exercise = BY_NAME[name]
    wrong = next(w for w in exercise.wrong_versions if w.mistake.startswith(mistake))
    results = checked(exercise, apply_edits(cli.solution_file(exercise), wrong.edits), tmp_path)
    failed = [cli.report_line(check, measured) for check, measured in results
              if not measured.passed]
    assert len(failed) == 1 and named in failed[0], failed


@pytest.mark.parametrize("exercise", EXERCISES, ids=[e.name for e in EXERCISES])
def test_the_files_are_cut_from_the_current_source(exercise):
    """The solution's units are tinyattn's functions, token for token; the blank keeps their
    decorators, signatures and docstrings, with one `raise NotImplementedError` for a body."""
    _, _, source = source_of(exercise.module)
    solution = ast.parse(cli.solution_file(exercise))
    blank = ast.parse(cli.learner_file(exercise))
    for unit in exercise.units:
        original = unit_node(source, unit, exercise.module)
        assert ast.dump(unit_node(solution, unit, "the solution")) == ast.dump(original)
        cut = unit_node(blank, unit, "the blank")
        assert ast.dump(cut.args) == ast.dump(original.args)
        assert [ast.dump(d) for d in cut.decorator_list] == \
            [ast.dump(d) for d in original.decorator_list]
        assert ast.get_docstring(cut) == ast.get_docstring(original)
        assert ast.unparse(cut.body[-1]) == BLANK and len(cut.body) <= 2
    assert cli.solution_file(exercise).startswith(cli.header(exercise))


def test_a_check_that_does_not_run_the_learners_code_fails():
    """A grader that checked tinyattn's own code instead would pass anything: a check whose
    numbers are right but during which the learner's code never ran fails."""
    check = gradient_rows("add")
    measured = judged_one(check, {"raw": check.run(), "calls": {"Mul.backward": 0}})
    assert not measured.passed and "did not run your code" in measured.detail
    assert judged_one(check, {"raw": check.run(), "calls": {"Mul.backward": 1}}).passed


def test_a_run_without_a_check_is_a_failure():
    assert not passed(BY_NAME["mul_div"], [])


def test_a_check_run_changes_no_object_of_tinyattn(tmp_path):
    """The learner's code runs in a process of its own, in a copy of tinyattn: here, the methods,
    the doors' functions and the module's names are the ones they were."""
    before = (vars(elementwise.Mul)["backward"], F.attention.__wrapped__, engine.unbroadcast,
              [cell.cell_contents for cell in F.attention.__closure__])
    exercise = BY_NAME["mul_div"]
    text = cli.learner_file(exercise).replace("raise NotImplementedError", "return 1 / 0")
    assert not passed(exercise, checked(exercise, text, tmp_path))
    assert before == (vars(elementwise.Mul)["backward"], F.attention.__wrapped__,
                      engine.unbroadcast, [cell.cell_contents for cell in F.attention.__closure__])


def test_a_sample_of_single_token_mutants_is_caught(tmp_path):
    """The full count is `python dev/exercise_mutants.py` (docs/exercise_mutants.txt:
    every mutant that computes another function is caught); here, 16 of them drawn at random."""
    every = [(exercise, key, unit, source) for exercise in EXERCISES
             for key, unit, source in mutants.mutations(exercise)
             if key not in dict(exercise.equivalent_mutants)]
    sample = random.Random(0).sample(every, 16)
    survived = [key for exercise, key, unit, source in sample if not mutants.caught(
        exercise, mutants.mutant_file(exercise, unit, source), tmp_path)]
    assert not survived


def test_every_mutant_recorded_as_equivalent_is_still_a_mutant():
    for exercise in EXERCISES:
        keys = {key for key, _, _ in mutants.mutations(exercise)}
        assert set(dict(exercise.equivalent_mutants)) <= keys, exercise.name


def test_a_mutant_changes_one_token():
    keys = [key for key, _, _ in mutants.mutations(BY_NAME["softmax"])]
    assert any(key.endswith(":: grad - (grad * out).sum(axis=axis, keepdims=True) -> "
                            "grad + (grad * out).sum(axis=axis, keepdims=True)") for key in keys)
    assert any(key.endswith(":: True -> False")
               for key, _, _ in mutants.mutations(BY_NAME["log_softmax"]))


def edited(exercise, *edits):
    """The solution file with `edits`, and the line (1-based) where the last edit's new text
    ends."""
    text = apply_edits(cli.solution_file(exercise), edits)
    old, new = edits[-1]
    return text, text[:text.index(new) + len(new)].count("\n") + 1


@pytest.mark.parametrize("name, edit, says", [
    ("mul_div", ("        return (grad * b if self.needs_grad(0) else None,\n"
                 "                grad * a if self.needs_grad(1) else None)",
                 "        grad_b = grad * a\n        grad *= b\n        return grad, grad_b"),
     "Mul.backward wrote into grad (the upstream gradient), which another op may share; make a "
     "new array instead (`grad_a = grad * b`, not `grad *= b`) (mul_div.py, line {line}"),
    ("exp_log", ("        return (grad * out,)", "        out *= grad\n        return (out,)"),
     "Exp.backward wrote into out (self.saved[0]), which forward saved and may be a tensor's own "
     "data; make a new array instead (`grad_a = grad * b`, not `grad *= b`) (exp_log.py, line "
     "{line}"),
    ("flash_forward", ("        L, S, Ev = Q.shape[-2], K.shape[-2], V.shape[-1]",
                       "        Q *= 1.0\n"
                       "        L, S, Ev = Q.shape[-2], K.shape[-2], V.shape[-1]"),
     "FlashAttention.forward wrote into Q (input 0), a tensor's own data; make a new array "
     "instead (`grad_a = grad * b`, not `grad *= b`) (flash_forward.py, line {line}"),
])
def test_a_write_into_an_array_forward_or_backward_was_given_is_named(name, edit, says, tmp_path):
    """The upstream gradient may be shared (Add passes one array to both inputs) and the saved
    arrays may be tensors' data: a rule writing into them is right on the checks' inputs alone.
    The line named is the one with the in-place operator."""
    exercise = BY_NAME[name]
    text = apply_edits(cli.solution_file(exercise), [edit])
    written = next(code for code in edit[1].splitlines() if " *= " in code)
    line = text.splitlines().index(written) + 1
    measured = checked(exercise, text, tmp_path)[0][1]
    assert not measured.passed and says.format(line=line) in measured.detail, measured.detail


@pytest.mark.parametrize("name, edit, blamed", [
    ("unbroadcast", ("grad.sum(axis=broadcast_axes(grad.shape, shape, op))",
                     "grad.sum(axis=broadcast_axes(grad.shape, shape, op), dtype=float)"),
     "unbroadcast"),
    ("attention", ("scores = ops.where(allowed, scores, -math.inf)",
                   "scores = scores + ops.where(allowed, 0.0, -math.inf)"), "attention_weights"),
])
def test_a_wrong_dtype_blames_the_learners_function_not_a_later_op(name, edit, blamed, tmp_path):
    exercise = BY_NAME[name]
    results = checked(exercise, edited(exercise, edit)[0], tmp_path)
    float32_checks = [m for check, m in results if check.what.startswith("float32 in")]
    assert float32_checks[0].detail == f"your {blamed} returned float64 for float32 input"


def test_a_nan_is_traced_to_the_learners_line_that_made_it(tmp_path):
    flash = BY_NAME["flash_forward"]
    text, line = edited(flash, ("P_ij = np.exp(S_ij - m_safe)", "P_ij = np.exp(S_ij - m_new)"))
    failed = [m for _, m in checked(flash, text, tmp_path) if not m.passed]
    assert failed and all(np.isnan(m.error) for m in failed)
    assert (f"the first NaN came from your FlashAttention.forward (flash_forward.py, line {line}"
            in failed[0].detail)
    assert "invalid value encountered in subtract, on (2, 2, 6, 3), (2, 2, 6, 3)" in \
        failed[0].detail
    entropy = BY_NAME["cross_entropy"]
    text, line = edited(entropy, ("log_softmax(logits, axis=-1)[rows, targets[rows]]",
                                  "(logits - logits.exp().sum(axis=-1, keepdims=True).log())"
                                  "[rows, targets[rows]]"))
    large = next(m for check, m in checked(entropy, text, tmp_path)
                 if check.what.startswith("logits of size 1e4"))
    assert (f"the first inf came from your cross_entropy (cross_entropy.py, line {line}"
            in large.detail) and "overflow encountered in exp" in large.detail


def test_a_failing_check_of_several_cases_names_the_worst_and_its_tolerance(tmp_path):
    got = {"first": np.ones(2), "second": np.zeros(2), "third": np.full(1, 0.5)}
    expected = {"first": np.ones(2), "second": np.ones(2), "third": np.zeros(1)}
    assert compared(got, expected, 1e-10) == (False, 1.0, "2 of 3 cases fail, the worst 'second'; "
                                              "each held to 1e-10, relative to tinyattn's "
                                              "largest number")
    assert compared({"dtype": "float64"}, {"dtype": "float32"}, 0) == (
        False, None, "case 'dtype': yours 'float64', tinyattn's 'float32'")
    attention = BY_NAME["attention"]
    text, _ = edited(attention, ("allowed = causal_mask(L, S, allowed)",
                                 "allowed = causal_mask(L, S, allowed, offset=-1)"))
    detail = checked(attention, text, tmp_path)[0][1].detail
    assert detail.endswith("cases fail, the worst 'causal: output'; each held to 1e-10, "
                           "relative to tinyattn's largest number")


# ------------------------------------------------------------------------------------------------
# Files that try to pass without the code: each fails, in one line

MUL_DIV = BY_NAME["mul_div"]
RUNNER_REPLACED = """
from tinyattn_tools.exercises import child
child.run_check = lambda check, job: {"raw": {}, "calls": {"Mul.backward": 1}}
"""
MEASUREMENT_PATCHED = """
from tinyattn_tools.exercises import checks
from tinyattn_tools.exercises.exercise import Measured
for kind in (checks.GradientRows, checks.Float32, checks.Same):
    kind.judge = lambda self, raw: Measured(True, 0.0)
checks.compared = checks.judged_rows = lambda *arguments, **options: Measured(True, 0.0)
"""
KEPT_BEFORE_THE_SWAP = """
import tinyattn.ops.elementwise as tinyattns
KEPT = tinyattns.Mul.backward
"""
LOADED_FROM_ITS_FILE = """
import importlib.util, pathlib, tinyattn_tools
own = pathlib.Path(tinyattn_tools.__file__).parents[1] / "tinyattn" / "ops" / "elementwise.py"
spec = importlib.util.spec_from_file_location("own_elementwise", own)
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
"""
COMPILED_CODE_READ = """
import importlib.util, marshal, pathlib, tinyattn.ops.shape as beside
own = pathlib.Path(beside.__file__).with_name("elementwise.py")
marshal.loads(open(importlib.util.cache_from_source(str(own)), "rb").read()[16:])
"""
FROM_ANOTHER_PROCESS = """
import subprocess, sys
subprocess.run([sys.executable, "-c", "import tinyattn"])
"""
DODGES = {   # name: (what is added to the blank, or a body for Mul.backward; what the FAIL says)
    "os._exit(0) inside backward": (
        ("body", "import os\n        os._exit(0)"),
        "mul_div.py ended the check process during the check \"gradients vs tinyattn's: 9 rows "
        "of the checklist\" (exit status 0: sys.exit, os._exit or a crash): only checks that "
        "report count, so it fails"),
    "a module-level line replacing the check runner": (
        ("module", RUNNER_REPLACED), "what came back is not what the check computes (KeyError"),
    "patching the grader's measurement": (
        ("module", MEASUREMENT_PATCHED), "not written yet: NotImplementedError"),
    "tinyattn's own backward kept before the swap": (
        ("both", KEPT_BEFORE_THE_SWAP), "RecursionError: maximum recursion depth exceeded"),
    "tinyattn's own backward imported over the learner's": (
        ("module", "from tinyattn.ops.elementwise import Mul, Div\n"),
        "mul_div.py, line {line}: `from tinyattn.ops.elementwise import Mul, Div` puts tinyattn's "
        "own code in place of yours: only your own code is graded; remove the import"),
    "tinyattn's own module loaded from its file": (
        ("module", LOADED_FROM_ITS_FILE),
        "mul_div.py stopped while loading: your code opened tinyattn's own elementwise.py"),
    "tinyattn's own module's compiled code read": (
        ("module", COMPILED_CODE_READ),
        "mul_div.py stopped while loading: your code opened tinyattn's own elementwise.cpython-"),
    "another process": (
        ("body", FROM_ANOTHER_PROCESS.strip().replace("\n", "\n        ")),
        "started a process (subprocess.Popen): only your own code is graded"),
}


@pytest.mark.parametrize("dodge", DODGES)
def test_a_file_that_dodges_the_checks_fails_in_one_line(dodge, tmp_path):
    (where, code), says = DODGES[dodge]
    blank = cli.learner_file(MUL_DIV)
    if where in ("body", "both"):
        blank = blank.replace("        raise NotImplementedError",
                              "        " + ("return KEPT(self, grad)" if where == "both" else code),
                              1)
    text = blank + code if where in ("module", "both") else blank
    line = next((n for n, text_line in enumerate(text.splitlines(), 1)
                 if "tinyattn.ops.elementwise import" in text_line or "exec_module" in text_line
                 or "marshal.loads" in text_line),
                None)
    try:
        results = checked(MUL_DIV, text, tmp_path)
    except LearnerFileError as error:
        lines = [str(error)]
    else:
        assert not passed(MUL_DIV, results)
        lines = [cli.report_line(check, measured) for check, measured in results
                 if not measured.passed]
    assert says.format(line=line) in lines[0], lines
    assert all("\n" not in text_line and len(text_line) < 400 for text_line in lines)


def test_the_attention_hint_on_the_scale_says_what_numpy_and_tinyattn_do():
    """A NumPy float64 scalar keeps a float32 tensor float32 in tinyattn (its ops take NumPy
    scalars as Python numbers, as PyTorch does); a float64 array does not."""
    hint = BY_NAME["attention"].hints[1]
    scores = ta.tensor(np.ones((2, 3), np.float32))
    assert (scores * np.float64(0.5)).dtype == np.float32
    assert (scores * np.full((1,), 0.5)).dtype == np.float64
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        assert (scores.data * np.float64(0.5)).dtype == np.float64
    assert "a float64 array would not" in hint and "plain NumPy 2" in hint


def test_flash_attentions_hints_give_the_code_that_passes():
    """Hints 2 and 3 give the exponents against m_safe, as the code takes them: against m_new, a
    query whose keys so far were all hidden gets exp(-inf + inf) = NaN (a wrong version)."""
    flash = BY_NAME["flash_forward"]
    _, source, _ = source_of(flash.module)
    assert "P_ij = exp(S_ij - m_safe)" in flash.hints[1] and "np.exp(S_ij - m_safe)" in source
    assert "exp(m_old - m_safe)" in flash.hints[2] and "np.exp(m_i - m_safe)" in source
    assert any("m_new, not m_safe" in wrong.mistake for wrong in flash.wrong_versions)


def test_the_learners_code_sees_the_learners_imports_not_the_modules(tmp_path):
    """A method the learner adds to the unit's class, and a helper of the learner's own, read the
    names of the learner's file: `np` used without importing it fails as it would anywhere (the
    module imports numpy as np), and passes once the file imports it."""
    exercise = BY_NAME["mul_div"]
    helper = ("    def backward(self, grad):\n        a, b = self.saved\n        return (grad * b",
              "    def twice(self, x):\n        return np.multiply(x, 1.0)\n\n"
              "    def backward(self, grad):\n        a, b = self.saved\n"
              "        return (self.twice(grad) * b")
    text = apply_edits(cli.solution_file(exercise), [helper])
    failed = [m for _, m in checked(exercise, text, tmp_path) if not m.passed]
    assert failed and "NameError: name 'np' is not defined (mul_div.py, line" in failed[0].detail
    imported = text.replace("from tinyattn.engine import Function",
                            "import numpy as np\n\nfrom tinyattn.engine import Function")
    assert passed(exercise, checked(exercise, imported, tmp_path))
