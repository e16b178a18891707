"""Demo 1: one gradient three ways, and the three agree; it draws nothing, so it writes nothing."""
import importlib


def test_first_gradient_three_ways_agree_and_no_folder_is_made(tmp_path, capsys):
    folder = tmp_path / "pictures"
    numbers = importlib.import_module("01_first_gradient").main([str(folder), "--quick"])
    assert numbers["worst_difference"] < 1e-8
    printed = capsys.readouterr().out
    assert "finite differences" in printed and "they agree" in printed
    assert not folder.exists()
