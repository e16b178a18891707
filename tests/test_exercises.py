"""The exercises' grader is honest: for every exercise the blank fails every check, tinyattn's own
code passes every check (each of which ran the code put in place), and each classic wrong version
fails; the learner's file is cut from the current source; a sample of single-token mutants is
caught, and every mutant recorded as equivalent still is one."""
import ast
import random

import pytest

import tinyattn.functional as F
from tinyattn import engine
from tinyattn.ops import elementwise
from tinyattn.tools.exercises import EXERCISES, cli, mutants
from tinyattn.tools.exercises.checks import gradient_rows
from tinyattn.tools.exercises.cutting import BLANK, source_of, unit_node
from tinyattn.tools.exercises.exercise import apply_edits
from tinyattn.tools.exercises.running import load, run_checks

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
    """The full count is `python -m tinyattn.tools.exercises.mutants` (docs/exercise_mutants.txt:
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
