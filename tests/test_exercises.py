"""The exercises' grader is honest: for every exercise the blank fails every check, tinyattn's own
code passes every check (each of which ran the code put in place), and each classic wrong version
fails; the learner's file is cut from the current source; a sample of single-token mutants is
caught, and every mutant recorded as equivalent still is one."""
import ast
import random

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn import engine
from tinyattn.ops import elementwise
from tinyattn_tools.exercises import EXERCISES, cli
import exercise_mutants as mutants
from tinyattn_tools.exercises.checks import gradient_rows, matches
from tinyattn_tools.exercises.cutting import BLANK, source_of, unit_node
from tinyattn_tools.exercises.exercise import apply_edits
from tinyattn_tools.exercises.running import load, run_checks

WRONG = [(exercise, wrong) for exercise in EXERCISES for wrong in exercise.wrong_versions]


def checked(exercise, text, folder, fail_fast=False):
    """[(check, Measured)] for the learner's file `text`."""
    path = folder / f"{exercise.name}.py"
    path.write_text(text)
    return run_checks(exercise, load(exercise, path), path, fail_fast=fail_fast)


def test_at_least_twenty_exercises_in_two_chapters_each_with_its_parts():
    assert len(EXERCISES) >= 20
    assert len({e.name for e in EXERCISES}) == len(EXERCISES)
    assert [e.chapter for e in EXERCISES] == sorted(e.chapter for e in EXERCISES)
    for exercise in EXERCISES:
        assert len(exercise.wrong_versions) >= 3, exercise.name
        assert len(exercise.hints) >= 3 and exercise.hints[0].startswith("Re-read"), exercise.name
        assert exercise.read_first and exercise.checks, exercise.name


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
    assert not all(measured.passed for _, measured in results)


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


def test_a_check_that_does_not_run_the_learners_code_fails(tmp_path):
    """A grader that checked tinyattn's own code instead would pass anything: such a check fails."""
    mul_div = next(e for e in EXERCISES if e.name == "mul_div")
    blind = mul_div._replace(checks=(gradient_rows("add"),))
    results = checked(blind, cli.solution_file(mul_div), tmp_path)
    assert not results[0][1].passed and "did not run your code" in results[0][1].detail


@pytest.mark.parametrize("name, original", [
    ("mul_div", lambda: vars(elementwise.Mul)["backward"]),          # a method
    ("attention", lambda: F.attention.__closure__),                 # below a door
    ("unbroadcast", lambda: (engine.unbroadcast, engine.__dict__["unbroadcast"])),
])
def test_tinyattns_code_is_back_in_place_after_a_check_that_failed(name, original, tmp_path):
    exercise = next(e for e in EXERCISES if e.name == name)
    before = original()
    cells = [cell.cell_contents for cell in before] if name == "attention" else None
    text = cli.learner_file(exercise).replace("raise NotImplementedError", "return 1 / 0")
    assert not all(measured.passed for _, measured in checked(exercise, text, tmp_path))
    assert original() == before
    if cells is not None:
        assert [cell.cell_contents for cell in original()] == cells


def test_a_sample_of_single_token_mutants_is_caught(tmp_path):
    """The full count is `python dev/exercise_mutants.py` (docs/exercise_mutants.txt:
    every mutant that computes another function is caught); here, 24 of them drawn at random."""
    every = [(exercise, key, unit, source) for exercise in EXERCISES
             for key, unit, source in mutants.mutations(exercise)
             if key not in dict(exercise.equivalent_mutants)]
    sample = random.Random(0).sample(every, 24)
    survived = [key for exercise, key, unit, source in sample if not mutants.caught(
        exercise, mutants.mutant_file(exercise, unit, source), tmp_path)]
    assert len(survived) <= 1, survived


def test_every_mutant_recorded_as_equivalent_is_still_a_mutant():
    for exercise in EXERCISES:
        keys = {key for key, _, _ in mutants.mutations(exercise)}
        assert set(dict(exercise.equivalent_mutants)) <= keys, exercise.name


def test_a_mutant_changes_one_token():
    exercise = next(e for e in EXERCISES if e.name == "softmax")
    keys = [key for key, _, _ in mutants.mutations(exercise)]
    assert any(key.endswith(":: grad - (grad * out).sum(axis=axis, keepdims=True) -> "
                            "grad + (grad * out).sum(axis=axis, keepdims=True)") for key in keys)
    log_softmax = next(e for e in EXERCISES if e.name == "log_softmax")
    assert any(key.endswith(":: True -> False") for key, _, _ in mutants.mutations(log_softmax))


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
    exercise = next(e for e in EXERCISES if e.name == name)
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
    exercise = next(e for e in EXERCISES if e.name == name)
    results = checked(exercise, edited(exercise, edit)[0], tmp_path)
    float32_checks = [m for check, m in results if check.what.startswith("float32 in")]
    assert float32_checks[0].detail == f"your {blamed} returned float64 for float32 input"


def test_a_nan_is_traced_to_the_learners_line_that_made_it(tmp_path):
    flash = next(e for e in EXERCISES if e.name == "flash_forward")
    text, line = edited(flash, ("P_ij = np.exp(S_ij - m_safe)", "P_ij = np.exp(S_ij - m_new)"))
    failed = [m for _, m in checked(flash, text, tmp_path) if not m.passed]
    assert failed and all(np.isnan(m.error) for m in failed)
    assert (f"the first NaN came from your FlashAttention.forward (flash_forward.py, line {line}"
            in failed[0].detail)
    assert "invalid value encountered in subtract, on (2, 2, 6, 3), (2, 2, 6, 3)" in \
        failed[0].detail
    entropy = next(e for e in EXERCISES if e.name == "cross_entropy")
    text, line = edited(entropy, ("log_softmax(logits, axis=-1)[rows, targets[rows]]",
                                  "(logits - logits.exp().sum(axis=-1, keepdims=True).log())"
                                  "[rows, targets[rows]]"))
    large = next(m for check, m in checked(entropy, text, tmp_path)
                 if check.what.startswith("logits of size 1e4"))
    assert (f"the first inf came from your cross_entropy (cross_entropy.py, line {line}"
            in large.detail) and "overflow encountered in exp" in large.detail


def test_a_failing_check_of_several_cases_names_the_worst_and_its_tolerance(tmp_path):
    check = matches("three cases", lambda: [("first", np.ones(2), np.ones(2)),
                                            ("second", np.ones(2), np.zeros(2)),
                                            ("third", np.zeros(1), np.full(1, 0.5))])
    assert check.measure() == (False, 1.0, "2 of 3 cases fail, the worst 'second'; each held "
                                           "to 1e-10")
    attention = next(e for e in EXERCISES if e.name == "attention")
    text, _ = edited(attention, ("allowed = causal_mask(L, S, allowed)",
                                 "allowed = causal_mask(L, S, allowed, offset=-1)"))
    detail = checked(attention, text, tmp_path)[0][1].detail
    assert detail.endswith("cases fail, the worst 'causal: output'; each held to 1e-10")


def test_the_attention_hint_on_the_scale_says_what_numpy_and_tinyattn_do():
    """A NumPy float64 scalar keeps a float32 tensor float32 in tinyattn (its ops take NumPy
    scalars as Python numbers, as PyTorch does); a float64 array does not."""
    hint = next(e for e in EXERCISES if e.name == "attention").hints[1]
    scores = ta.tensor(np.ones((2, 3), np.float32))
    assert (scores * np.float64(0.5)).dtype == np.float32
    assert (scores * np.full((1,), 0.5)).dtype == np.float64
    if np.lib.NumpyVersion(np.__version__) >= "2.0.0":
        assert (scores.data * np.float64(0.5)).dtype == np.float64
    assert "a float64 array would not" in hint and "plain NumPy 2" in hint


def test_flash_attentions_hints_give_the_code_that_passes():
    """Hints 2 and 3 give the exponents against m_safe, as the code takes them: against m_new, a
    query whose keys so far were all hidden gets exp(-inf + inf) = NaN (a wrong version)."""
    flash = next(e for e in EXERCISES if e.name == "flash_forward")
    _, source, _ = source_of(flash.module)
    assert "P_ij = exp(S_ij - m_safe)" in flash.hints[1] and "np.exp(S_ij - m_safe)" in source
    assert "exp(m_old - m_safe)" in flash.hints[2] and "np.exp(m_i - m_safe)" in source
    assert any("m_new, not m_safe" in wrong.mistake for wrong in flash.wrong_versions)
