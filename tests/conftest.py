"""Shared by every test file: the demos' folder is importable, so that a test loads a demo script
as a module, `importlib.import_module("04_sqrt_dk")`, calls its `main` and reads its numbers (the
demos themselves import `demo_tools` from that folder)."""
import os
import pathlib
import sys

# Small matrices gain nothing from BLAS threads, and on a busy machine threads that wait for each
# other make the tests several times slower: one thread, set before NumPy loads its BLAS.
for variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(variable, "1")

DEMOS = pathlib.Path(__file__).resolve().parent.parent / "demos"
sys.path.insert(0, str(DEMOS))
