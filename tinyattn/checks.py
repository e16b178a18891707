"""Checks of the arguments users pass, shared by functions, layers and optimizers.

Each raises the error API.md asks for, naming the operation that received the argument: a
TypeError for the wrong kind of argument (a string where a number belongs), a ValueError for a
value out of range (a negative size, a probability of 1.5).
"""
import math

import numpy as np

from tinyattn.engine import Tensor

REAL_NUMBERS = (int, float, np.integer, np.floating)


def check_tensor(op, name, value, optional=False):
    """`value` must be a Tensor (or None, when `optional`)."""
    if not (isinstance(value, Tensor) or optional and value is None):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(value).__name__}")


def check_int(op, name, value, low=None):
    """`value` must be an int (not a bool), at least `low` if given: sizes, counts."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{op}: {name} must be an int, got {value!r}")
    if low is not None and value < low:
        raise ValueError(f"{op}: {name} must be at least {low}, got {value}")


def check_number(op, name, value, low=None, high=None):
    """`value` must be a real number (not a bool, not NaN) in [low, high]; returns it as a Python
    float, so that it cannot upcast a float32 array it multiplies."""
    if isinstance(value, bool) or not isinstance(value, REAL_NUMBERS):
        raise TypeError(f"{op}: {name} must be a number, got {value!r}")
    if math.isnan(value):
        raise ValueError(f"{op}: {name} must not be NaN")
    if low is not None and value < low or high is not None and value > high:
        bounds = (f"between {low} and {high}" if low is not None and high is not None
                  else f">= {low}" if low is not None else f"<= {high}")
        raise ValueError(f"{op}: {name} must be {bounds}, got {value}")
    return float(value)
