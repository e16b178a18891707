"""Shared by every test file: the demos' folder is importable, so that a test loads a demo script
as a module, `importlib.import_module("04_sqrt_dk")`, calls its `main` and reads its numbers (the
demos themselves import `demo_tools` from that folder); so are the maintainer's scripts in dev/
(regenerate, the exercises' mutants and transcript), which tests keep in step with the docs."""
import os
import pathlib
import sys

# Small matrices gain nothing from BLAS threads, and on a busy machine threads that wait for each
# other make the tests several times slower: one thread, set before NumPy loads its BLAS.
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "demos"))
sys.path.insert(0, str(ROOT / "dev"))       # the maintainer's scripts, which some tests check
