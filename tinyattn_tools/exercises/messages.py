"""What the check process and the grader say to each other: one JSON object per line.

Numbers go as JSON; an array as its dtype, its shape and its bytes (base64), for dtypes of
booleans, integers and floats only. Never a pickle: unpickling what the check process sent would
run whatever code the learner's file put there, in the grader.
"""
import base64
import json

import numpy as np

KINDS = "biuf"             # the dtypes an array may have: bool, int, unsigned, float


def encoded(value):
    """`value` (arrays, NumPy scalars, numbers, strings, None, lists, tuples and dicts of them)
    as what json.dumps can write."""
    if isinstance(value, (np.ndarray, np.generic)):
        array = np.asarray(value)
        if array.dtype.kind not in KINDS:
            raise TypeError(f"an array of dtype {array.dtype} cannot be sent")
        return {"__array__": base64.b64encode(np.ascontiguousarray(array).tobytes()).decode(),
                "dtype": array.dtype.str, "shape": list(array.shape)}
    if isinstance(value, dict):
        return {str(key): encoded(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [encoded(item) for item in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"a {type(value).__name__} cannot be sent")


def decoded(value):
    """The inverse of `encoded`, after json.loads: arrays back as arrays (lists stay lists)."""
    if isinstance(value, dict):
        if "__array__" in value:
            dtype = np.dtype(value["dtype"])
            if dtype.kind not in KINDS:
                raise TypeError(f"an array of dtype {dtype} was sent")
            data = base64.b64decode(value["__array__"])
            return np.frombuffer(data, dtype).reshape(value["shape"]).copy()
        return {key: decoded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decoded(item) for item in value]
    return value


def line(message):
    """A message as one line of text."""
    return json.dumps(encoded(message)) + "\n"


def read(text):
    """The message of one line, or None for a line that is not one."""
    try:
        message = decoded(json.loads(text))
    except (ValueError, TypeError, KeyError):
        return None
    return message if isinstance(message, dict) else None


def same_as_sent(value):
    """`value` as the grader would receive it (tuples become lists): the grader compares what it
    computes itself in this form, so that a tuple and the list it arrives as agree."""
    return decoded(json.loads(json.dumps(encoded(value))))
