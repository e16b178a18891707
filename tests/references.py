"""Random inputs shared by the test files, probes of what a tinyattn computation gives and
keeps, and a demo's quick run. (The NumPy references of softmax, attention, layer norm, ... live
with the checklist's tables, in tinyattn_tools/checklist/, which the benchmarks use too.)"""
import contextlib
import io
import tracemalloc

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import engine


def arrays(*shapes, seed=0):
    random = np.random.default_rng(seed)
    return [random.standard_normal(shape) for shape in shapes]


def output_and_gradients(fn, arrays, upstream, **kwargs):
    """`fn(*leaves, **kwargs)` on fresh leaves holding `arrays`, then backward with `upstream`:
    [the output, then the gradient of each input], as arrays."""
    leaves = [ta.tensor(a, requires_grad=True) for a in arrays]
    out = fn(*leaves, **kwargs)
    out.backward(upstream)
    return [out.data] + [leaf.grad for leaf in leaves]


def forward_and_backward(attend, inputs, seed=1):
    """[output, dL/d(input) for each input] of `attend` on fresh leaves holding `inputs`, with a
    random upstream gradient dL/d(output) of the output's dtype."""
    leaves = [ta.tensor(x, requires_grad=True) for x in inputs]
    out = attend(*leaves)
    grad_out = np.random.default_rng(seed).standard_normal(out.shape).astype(out.dtype)
    out.backward(grad_out)
    return [out.data] + [x.grad for x in leaves]


def peak_bytes(attend, inputs):
    """The most bytes tracemalloc sees held at once during forward_and_backward(attend, inputs)."""
    tracemalloc.start()
    try:
        forward_and_backward(attend, inputs)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def largest_saved_array(tensor):
    """The most elements of any array that the graph behind `tensor` keeps for backward."""
    largest, seen, nodes = 0, set(), [tensor._node]
    while nodes:
        node = nodes.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        for item in getattr(node, "saved", None) or ():
            if isinstance(item, np.ndarray):
                largest = max(largest, item.size)
        nodes.extend(node.parents)
    return largest


def assert_refused_before_any_node(fn, shapes, kwargs, error, message):
    """fn(*leaves, **kwargs) on fresh leaves of `shapes` raises `error` matching `message`, and
    no graph node was built before it did."""
    leaves = [ta.tensor(a, requires_grad=True) for a in arrays(*shapes)]
    first_probe = next(engine._node_counter)
    with pytest.raises(error, match=message):
        fn(*leaves, **kwargs)
    assert next(engine._node_counter) == first_probe + 1     # no node was numbered in between


def run_quick(demo, folder):
    """(what demo.main returned, what it printed) for a --quick run writing into `folder`."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        result = demo.main([str(folder), "--quick"])
    return result, printed.getvalue()
