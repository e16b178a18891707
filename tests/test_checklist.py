"""The checklist (`python -m tinyattn check`): every row of its tables passes, and the command
prints a table and fails on a wrong gradient."""
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn_tools import checklist as check
from tinyattn_tools.checklist.cases import LayerCase


@pytest.mark.parametrize("case", check.LAYER_CASES, ids=[c.name for c in check.LAYER_CASES])
def test_whole_layer_gradients_match_finite_differences(case):
    fn, inputs = case.build()
    result = check.run(case.name, fn, inputs, case.directions)
    assert result.compared >= len(inputs)
    assert result.passed, result


@pytest.mark.parametrize("case", check.FUSED_CASES, ids=[c.name for c in check.FUSED_CASES])
def test_fused_ops_match_the_primitive_ops_they_replace(case):
    result = check.run_fused(case)
    assert result.compared > 0 and result.max_abs < 1e-12, result


def test_a_fused_op_with_a_wrong_gradient_fails_its_row():
    def wrong_layer_norm(x):
        """The right values (x - x.detach() is 0), but the gradient of every element is 1 more."""
        return F.layer_norm(x) + (x - x.detach())
    case = next(case for case in check.FUSED_CASES if case.name == "layer_norm = composed, no "
                "weight or bias")._replace(fused=wrong_layer_norm)
    assert not check.run_fused(case).passed


def test_check_command_prints_a_table_and_passes(capsys):
    assert check.main(["-k", "sdpa, causal"]) == 0
    out = capsys.readouterr().out
    assert "sdpa, causal and mask" in out and "pass" in out and "2 of 2 checks pass" in out


def test_check_command_fails_on_a_wrong_gradient(monkeypatch, capsys):
    def gelu_with_a_wrong_gradient():
        x = ta.tensor(np.linspace(-2, 2, 6), requires_grad=True)
        # right forward value, but the gradient of a detached factor is lost
        return (lambda x: x * F.gelu(x).detach() / x.detach()), [x]
    monkeypatch.setattr(check, "LAYER_CASES", [LayerCase("broken", gelu_with_a_wrong_gradient)])
    assert check.main(["-k", "broken"]) == 1
    assert "FAIL" in capsys.readouterr().out


def test_the_table_fits_100_columns_with_its_longest_names_wrapped(monkeypatch, capsys):
    longest = max(check.OP_CASES + check.LAYER_CASES + check.FUSED_CASES,
                  key=lambda case: len(case.name))
    assert len(longest.name) > check.NAME_WIDTH                  # the wrapping is exercised
    monkeypatch.setattr(check, "all_checks", lambda pattern: [
        (longest.name, lambda: check.Result(longest.name, "(2,1,5,4) (1,3,5,4) (3,5,3) vs "
                                            "composed", 235, 2e-16, 1.7e-14, True))])
    assert check.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert " ".join(" ".join(line.split()) for line in lines[1:4]).startswith(
        " ".join(longest.name.split()[:3]))
