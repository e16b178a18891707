"""Property tests over broadcastable shapes: for any shapes NumPy can broadcast, every binary op
gives each input a gradient of its own shape that matches finite differences."""
import numpy as np
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import mutually_broadcastable_shapes

import tinyattn as ta

BINARY_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / b,
    "where": lambda a, b: ta.where(a.data > 0, a, b),
}
SHAPES = mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=3)


@settings(max_examples=40, deadline=None)
@given(shapes=SHAPES, op=st.sampled_from(sorted(BINARY_OPS)), seed=st.integers(0, 2**16))
def test_binary_ops_under_broadcasting(shapes, op, seed):
    random = np.random.default_rng(seed)
    a, b = (random.uniform(0.5, 1.5, s) * random.choice([-1, 1], s) for s in shapes.input_shapes)
    ta_a, ta_b = ta.tensor(a, requires_grad=True), ta.tensor(b, requires_grad=True)
    out = BINARY_OPS[op](ta_a, ta_b)
    assert out.shape == shapes.result_shape
    assert ta.gradcheck(BINARY_OPS[op], [ta_a, ta_b], atol=1e-7, rtol=1e-5)
    out.backward(np.ones(out.shape))
    assert ta_a.grad.shape == a.shape and ta_b.grad.shape == b.shape


@settings(max_examples=25, deadline=None)
@given(shapes=mutually_broadcastable_shapes(signature="(m,k),(k,n)->(m,n)",
                                            max_dims=2, max_side=3),
       seed=st.integers(0, 2**16))
def test_matmul_under_batch_broadcasting(shapes, seed):
    random = np.random.default_rng(seed)
    a, b = (ta.tensor(random.standard_normal(s), requires_grad=True) for s in shapes.input_shapes)
    np.testing.assert_allclose((a @ b).data, a.data @ b.data)
    assert ta.gradcheck(lambda x, y: x @ y, [a, b], atol=1e-7, rtol=1e-5)


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 3), min_size=1, max_size=4),
       data=st.data(), keepdims=st.booleans())
def test_reductions_over_any_axes(shape, data, keepdims):
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))))
    x = ta.tensor(np.random.default_rng(len(shape)).standard_normal(shape), requires_grad=True)
    for name in ("sum", "mean", "max"):
        reduce = lambda t: getattr(t, name)(axis=axes, keepdims=keepdims)  # noqa: E731
        np.testing.assert_allclose(reduce(x).data, getattr(x.data, name)(axis=axes,
                                                                         keepdims=keepdims))
        assert ta.gradcheck(reduce, [x], atol=1e-7, rtol=1e-5)
