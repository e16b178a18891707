"""Every demo runs, in a quick mode where it has one, and its numbers say what the demo claims."""
import importlib.util
import pathlib

DEMOS = pathlib.Path(__file__).resolve().parent.parent / "demos"


def load(name):
    spec = importlib.util.spec_from_file_location(name, DEMOS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_first_gradient_three_ways_agree(capsys):
    worst = load("01_first_gradient").main([])
    assert worst < 1e-8
    assert "finite differences" in capsys.readouterr().out
