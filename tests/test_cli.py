"""The command line, `python -m tinyattn`: its commands, its help, and an unknown command (the
download command's own tests: tests/test_download.py)."""
import subprocess
import sys

from tinyattn_tools import cli


def test_help_lists_the_commands(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert "check" in out and "bench" in out
    assert "download gpt2|qwen3-0.6b|smollm2-135m [FOLDER]" in out


def test_help_lists_every_part_of_the_bench(capsys):
    from tinyattn_tools import bench
    cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for number, (title, _) in bench.PARTS.items():
        assert f"{number} {title}" in out


def test_an_unknown_command_is_named(capsys):
    assert cli.main(["foo"]) == 2
    assert "unknown command 'foo'" in capsys.readouterr().err


def test_python_dash_m_runs_the_checks():
    done = subprocess.run([sys.executable, "-m", "tinyattn", "check", "-k", "F.relu"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 checks pass" in done.stdout
