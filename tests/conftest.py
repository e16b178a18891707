"""Shared by every test file: the demos' folder is importable, so that a test loads a demo script
as a module, `importlib.import_module("04_sqrt_dk")`, calls its `main` and reads its numbers (the
demos themselves import `demo_tools` from that folder)."""
import pathlib
import sys

DEMOS = pathlib.Path(__file__).resolve().parent.parent / "demos"
sys.path.insert(0, str(DEMOS))
