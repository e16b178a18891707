"""Chapter 1. How a Tensor behaves as a Python object and next to NumPy, which `engine.py` needs but
a first reading can skip: len, iteration, np.asarray(t), bool and float, comparisons, copying and
pickling, its repr. The Tensor inherits them (`class Tensor(ArrayProtocols)`)."""
import numpy as np


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
        return type(self)(self.data == _data(other))

    def __ne__(self, other):
        return type(self)(self.data != _data(other))

    def __lt__(self, other):
        return type(self)(self.data < _data(other))

    def __le__(self, other):
        return type(self)(self.data <= _data(other))

    def __gt__(self, other):
        return type(self)(self.data > _data(other))

    def __ge__(self, other):
        return type(self)(self.data >= _data(other))

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


def _data(value):
    """The NumPy array behind a tensor; any other value as it is."""
    return value.data if isinstance(value, ArrayProtocols) else value
