"""Python and NumPy plumbing for the Tensor: what `engine.py` needs but a first reading can skip.

    ArrayProtocols   how a Tensor behaves as a Python object and next to NumPy: len, iteration,
                     np.asarray(t), bool and float, comparisons, copying and pickling, its repr
    numeric_array    turning lists, numbers and arrays into NumPy arrays of numbers
    operand_arrays   what an op computes on: each tensor's data, and each constant (a number,
    output_array     an array) as NumPy should meet it; and what it computed, as an array of
                     the dtype NumPy 2 gives it, on NumPy 1.26 too
    checked_axes     NumPy's rules for the axes of a reduction or a permutation
    keep_freed_memory  the one speed setting of the whole library (`import tinyattn` applies it)
    extends          how a later chapter adds a method to a class of an earlier one
"""
import ctypes

import numpy as np

INTEGERS = (int, np.integer)


class TensorIndexError(IndexError, ValueError):
    """An index out of range: an IndexError as in NumPy and PyTorch, and a ValueError like every
    other bad input to tinyattn."""


def named(error, op):
    """`error` (an IndexError, ValueError or TypeError) said again with the op's name in front; an
    IndexError as a TensorIndexError, which is also a ValueError."""
    kind = TensorIndexError if isinstance(error, IndexError) else type(error)
    return kind(f"{op}: {error}")


def data_of(value):
    """The NumPy array behind a tensor; any other value as it is."""
    return value.data if isinstance(value, ArrayProtocols) else value


def numeric_array(data, op, dtype=None):
    """`data` (an array, a list, a number) as a NumPy array of numbers: bool, int or float.

    NumPy's complaint about it (a ragged list, strings) is passed on as a tinyattn error naming
    `op`, the operation that received it.
    """
    try:
        array = np.asarray(data, dtype=dtype)
    except (ValueError, TypeError) as error:
        raise type(error)(f"{op}: {error}") from None
    if array.dtype.kind not in "biuf":
        raise TypeError(f"{op}: expected numbers, got an array of dtype {array.dtype}")
    return array


def operand_arrays(inputs, op):
    """The arrays `op` computes on: each tensor's `.data`, each constant made an operand
    (`as_operand`); on NumPy 1.26, numbers then take the arrays' dtype (`numbers_in_dtype`)."""
    arrays = [x.data if isinstance(x, ArrayProtocols) else as_operand(x, op) for x in inputs]
    return numbers_in_dtype(arrays) if LEGACY_PROMOTION else arrays


def as_operand(value, op):
    """A non-tensor operand, as NumPy should see it.

    Numbers stay Python numbers, because NumPy lets a Python number take the dtype of the array it
    meets: `x * 0.5` stays float32 for a float32 `x`. A NumPy scalar would not (`np.sqrt(2.0)` is a
    float64 and would upcast), so it is turned into a Python number first, as PyTorch does.
    """
    if isinstance(value, (np.ndarray, list, tuple)):
        return numeric_array(value, op)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (int, float)):
        return value
    raise TypeError(f"{op}: cannot use a {type(value).__name__} as an operand")


# NumPy 2 lets a Python number take the dtype of the array it meets, 0-d arrays included (NEP 50).
# NumPy 1.26, the oldest tinyattn runs on, does that only for arrays of one axis or more: there
# a 0-d float32 loss times 0.5 is a float64. On it, Function.apply gives numbers their dtype.
LEGACY_PROMOTION = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def output_array(data, operands):
    """What an op's forward returned, as an array: NumPy returns a scalar, not a 0-d array, for 0-d
    inputs. On NumPy 1.26 also in the dtype NumPy 2 would give it: there a 0-d float32 array
    times a Python float, inside a forward (`0.5 * x` in GELU's), is a float64, so a float64
    result of float32 operands alone is turned back into float32."""
    data = data if type(data) is np.ndarray else np.asarray(data)
    if LEGACY_PROMOTION and data.dtype == np.float64:
        floating = [a.dtype for a in operands if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
        if floating and np.float64 not in floating:
            data = data.astype(np.result_type(*floating))
    return data


def numbers_in_dtype(operands):
    """The operands, with each Python number made a 0-d array of the floating dtype of the arrays
    among them (when they have one), as NumPy 2 would treat it."""
    floating = [a.dtype for a in operands if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    if not floating:
        return operands
    dtype = np.result_type(*floating)
    return [np.asarray(a, dtype) if isinstance(a, (int, float)) else a for a in operands]


def checked_axes(axes, ndim, shown, op=None):
    """`axes` checked against NumPy's rules for the axes of a reduction or a permutation: ints
    (else a TypeError), each in [-ndim, ndim), none twice; returned as they are. `shown` is how a
    message names them ("axis 2", "axes 0 and 2"); `op`, when given, starts the message (inside an
    op, `Function.apply` puts the op's name there)."""
    prefix = f"{op}: " if op else ""
    if not all(isinstance(a, INTEGERS) and not isinstance(a, bool) for a in axes):
        raise TypeError(f"{prefix}axes must be ints, got {tuple(axes)}")
    if not all(-ndim <= a < ndim for a in axes):
        verb = "are" if shown.startswith("axes") else "is"
        raise ValueError(f"{prefix}{shown} {verb} out of range for a tensor with {ndim} dimensions")
    if len({a % ndim for a in axes}) != len(axes):
        raise ValueError(f"{prefix}{shown} repeats an axis")
    return axes


class ArrayProtocols:
    """The Tensor's Python and NumPy protocols. Everything here reads `self.data`."""

    __slots__ = ()

    def numpy(self):
        """The data itself (a view: writing to it changes the tensor)."""
        return self.data

    def item(self):
        return self.data.item()

    def __len__(self):
        return len(self.data)

    def __iter__(self):
        """The sub-tensors along the first axis, t[0], t[1], ... (each an indexing op)."""
        if self.ndim == 0:
            raise TypeError(f"iter: cannot iterate over a 0-d tensor (shape {self.shape})")
        return (self[i] for i in range(len(self)))

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self.data, dtype=dtype)
        return self.data if dtype is None else self.data.astype(dtype, copy=False)

    def __bool__(self):
        return bool(self.data)

    def __float__(self):
        return float(self.data)

    # Comparisons are elementwise, as in NumPy, and give boolean constants (for masks and
    # `ta.where`; no gradient flows through a comparison). Tensors stay hashable by identity.
    __hash__ = object.__hash__

    def __eq__(self, other):
        return type(self)(self.data == data_of(other))

    def __ne__(self, other):
        return type(self)(self.data != data_of(other))

    def __lt__(self, other):
        return type(self)(self.data < data_of(other))

    def __le__(self, other):
        return type(self)(self.data <= data_of(other))

    def __gt__(self, other):
        return type(self)(self.data > data_of(other))

    def __ge__(self, other):
        return type(self)(self.data >= data_of(other))

    def __reduce__(self):
        """Pickling and copy.deepcopy: a leaf is rebuilt as a fresh leaf with copies of its data
        and grad (the graph's weak references cannot be copied); a tensor made by an op refuses,
        as in PyTorch."""
        if not self.is_leaf:
            raise RuntimeError("only leaf tensors (made by the user, not by an op) can be copied "
                               "or pickled; detach() it first")
        return type(self), (self.data, self.requires_grad), (None, {"grad": self.grad,
                                                                    "name": self.name})

    def __repr__(self):
        body = np.array2string(self.data, separator=", ", prefix="tensor(")
        extra = ""
        if self.data.dtype != np.float64 and self.data.dtype.kind == "f":
            extra += f", dtype={self.data.dtype}"
        if not self.is_leaf:
            extra += f", grad_fn=<{self._node.name}>"
        elif self.requires_grad:
            extra += ", requires_grad=True"
        return f"tensor({body}{extra})"


def keep_freed_memory():
    """Ask the C allocator (glibc's malloc, on Linux) to keep the memory NumPy frees, for the
    arrays allocated next, instead of giving it back to the system.

    A training step allocates and frees arrays of the same sizes over and over: activations,
    gradients, and the temporaries of every formula written plainly (`0.5 * x * (1.0 + t)` makes
    three arrays as large as x). By default, glibc returns large freed blocks to the system, and
    the next allocations have the system hand them back page by page, each 4 KB page zero-filled
    on a page fault: processor time that is no part of the model's work. Raising both thresholds
    keeps that memory in the process (arrays up to 32 MB come from the heap, and up to 512 MB of
    it stays free for reuse), so the ops can be written as their formulas and still run at
    NumPy's speed; `dev/measure_tricks.py` measures what it saves on a training step. Elsewhere
    (macOS, Windows, another C library) nothing changes.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, 32 * 2**20)
    mallopt(M_TRIM_THRESHOLD, 512 * 2**20)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3        # glibc's names for mallopt's parameters


def extends(cls):
    """A decorator that adds the function below it to `cls` as a method, under its own name
    (d2l's `add_to_class`): how a later chapter gives a class of an earlier one a new method
    without the earlier file knowing of it. `@extends(CausalTransformer)` above `def generate`
    in nn/generation.py makes `model.generate(...)` work, `@extends(Tensor)` above `def cumsum`
    `t.cumsum(axis)`; a classmethod or staticmethod is added as one."""
    def add(function):
        inner = getattr(function, "__func__", function)        # a classmethod's function
        wrapped = inner
        while wrapped is not None:          # it, and what decorators (a door) wrapped, are named
            wrapped.__qualname__ = f"{cls.__name__}.{inner.__name__}"    # as methods in errors
            wrapped = getattr(wrapped, "__wrapped__", None)
        setattr(cls, inner.__name__, function)
        return function
    return add
