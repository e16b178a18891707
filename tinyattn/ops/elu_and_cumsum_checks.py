"""Chapter 2. What makes the running sum's input bad (ops/elu_and_cumsum.py names it in one line)."""
from tinyattn.arrays import INTEGERS, checked_axes


def cumsum_axis(a, axis):
    """One axis, an int in range (0 or -1 for a 0-d tensor, as in PyTorch)."""
    if isinstance(axis, bool) or not isinstance(axis, INTEGERS):
        raise TypeError(f"axis must be an int, got {axis!r}")
    if a.ndim == 0 and axis not in (0, -1):
        raise ValueError(f"axis {axis} is out of range for a 0-d tensor (0 or -1)")
    if a.ndim > 0:
        checked_axes((axis,), a.ndim, f"axis {axis}")
