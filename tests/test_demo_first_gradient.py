"""Demo 1: one gradient three ways, and the three agree."""
import importlib


def test_first_gradient_three_ways_agree(capsys):
    worst = importlib.import_module("01_first_gradient").main([])
    assert worst < 1e-8
    printed = capsys.readouterr().out
    assert "finite differences" in printed
    assert "h = tanh(W @ x)" in printed and "dL/dW = outer(dL/dz, x)" in printed
