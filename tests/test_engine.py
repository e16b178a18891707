"""The graph and the backward sweep: reuse, accumulation, no_grad, depth, memory, constants."""
import gc
import warnings
import weakref

import numpy as np
import pytest

import tinyattn as ta
from tinyattn import ops
from tinyattn.engine import Function


def test_reused_tensor_gets_the_sum_of_its_gradients():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    b = a + a
    (b * a).sum().backward()          # d/da sum(2a * a) = 4a
    np.testing.assert_allclose(a.grad, [4.0, 8.0])


def test_diamond_graph():
    x = ta.tensor(3.0, requires_grad=True)
    y = x * 2
    z = y.exp() + y.tanh() * y        # y feeds three ops
    z.backward()
    y0 = 6.0
    expected = 2 * (np.exp(y0) + (1 - np.tanh(y0) ** 2) * y0 + np.tanh(y0))
    np.testing.assert_allclose(x.grad, expected)


def test_gradients_accumulate_across_backward_calls():
    a = ta.tensor([1.0, -2.0], requires_grad=True)
    (a * 3).sum().backward()
    (a * a).sum().backward()
    np.testing.assert_allclose(a.grad, [3 + 2, 3 - 4])
    a.grad = None
    (a * 3).sum().backward()
    np.testing.assert_allclose(a.grad, [3, 3])


def test_backward_twice_through_one_graph_needs_retain_graph():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    y = (a.exp() * a).sum()
    y.backward(retain_graph=True)
    first = a.grad.copy()
    y.backward()
    np.testing.assert_allclose(a.grad, 2 * first)
    with pytest.raises(RuntimeError, match="retain_graph"):
        y.backward()


def test_only_leaves_keep_grad_unless_retained():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    hidden = a * 3
    kept = hidden.exp()
    kept.retain_grad()
    kept.sum().backward()
    assert hidden.grad is None
    np.testing.assert_allclose(kept.grad, [1.0, 1.0])
    with ta.retain_grads():
        hidden = a * 3
        out = (hidden * hidden).sum()
    out.backward()
    np.testing.assert_allclose(hidden.grad, 2 * hidden.data)


def test_leaf_gradient_is_a_copy_the_leaf_owns():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    b = ta.tensor([5.0, 6.0], requires_grad=True)
    seed = np.array([1.0, 1.0])
    (a + b).backward(seed)
    assert a.grad is not b.grad and a.grad is not seed
    a.grad += 1
    np.testing.assert_array_equal(b.grad, [1.0, 1.0])
    np.testing.assert_array_equal(seed, [1.0, 1.0])


def test_no_grad_records_nothing():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    with ta.no_grad():
        b = a * 2
    assert not b.requires_grad and b.is_leaf
    assert (a * 2).requires_grad

    @ta.no_grad()
    def double(x):
        return x * 2
    assert not double(a).requires_grad


def test_detach_cuts_the_graph():
    a = ta.tensor([1.0, 2.0], requires_grad=True)
    b = (a * a).detach()
    assert not b.requires_grad
    (b * a).sum().backward()
    np.testing.assert_allclose(a.grad, [1.0, 4.0])


def test_constants_get_no_gradient_and_no_backward_work(monkeypatch):
    calls = []
    original = ops.Exp.backward
    monkeypatch.setattr(ops.Exp, "backward", lambda self, g: calls.append(1) or original(self, g))
    constant = ta.tensor([1.0, 2.0])
    x = ta.tensor([3.0, 4.0], requires_grad=True)
    y = (constant.exp() * x).sum()          # exp of a constant: no node, never differentiated
    y.backward()
    assert constant.grad is None and calls == []
    np.testing.assert_allclose(x.grad, np.exp([1.0, 2.0]))


def test_a_constant_input_is_not_differentiated(monkeypatch):
    """Mul with a constant operand computes only the gradient that is needed."""
    seen = []
    original = ops.Mul.backward

    def spy(self, grad):
        grads = original(self, grad)
        seen.append([g is None for g in grads])
        return grads
    monkeypatch.setattr(ops.Mul, "backward", spy)
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    (x * ta.tensor([3.0, 4.0])).sum().backward()
    assert seen == [[False, True]]


def test_deep_chain_backpropagates_without_recursion():
    x = ta.tensor(0.5, requires_grad=True)
    y = x
    for _ in range(20_000):
        y = y * 1.0001
    y.backward()
    np.testing.assert_allclose(x.grad, 1.0001 ** 20_000)


def test_backward_releases_saved_arrays_but_keeps_the_structure():
    x = ta.tensor(np.ones((100, 100)), requires_grad=True)
    hidden = x.exp()
    alive = weakref.ref(hidden.data)
    y = (hidden * 2).tanh().sum()
    del hidden
    gc.collect()
    assert alive() is not None          # saved by Mul and Exp for the backward pass
    y.backward()
    gc.collect()
    assert alive() is None              # released, although y and its graph are still here
    assert y._node.name == "sum" and y._node.parents[0].name == "tanh"


def test_seed_gradient_sets_the_weights():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x * x).backward(np.array([1.0, 0.0, -1.0]))
    np.testing.assert_allclose(x.grad, [2.0, 0.0, -6.0])


def test_backward_of_a_leaf():
    x = ta.tensor(2.0, requires_grad=True)
    x.backward()
    assert x.grad == 1.0


def test_backward_seeds_in_the_output_dtype():
    x = ta.tensor(np.ones(3, np.float32), requires_grad=True)
    (x * 2).backward(np.ones(3))        # a float64 seed for a float32 output
    assert x.grad.dtype == np.float32


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_a_python_number_takes_the_dtype_of_a_0d_tensor(dtype):
    """NumPy 1.26 turned a 0-d float32 array times 0.5 into a float64 (NumPy 2 does not): a loss
    scaled or shifted by a number must keep its dtype on both (CI runs the tests on each)."""
    x = ta.tensor(np.ones(3, dtype), requires_grad=True)
    loss = x.sum()                                                      # () float32
    for result in [loss * 0.5, 4 * loss, loss / 3, 1 - loss, loss + 0.01, loss ** 2, 2.0 ** loss,
                   -loss * np.float64(0.5)]:
        assert result.dtype == dtype
    (loss * 0.5).backward()
    assert x.grad.dtype == dtype
    assert (ta.tensor(np.arange(3)) * 0.5).dtype == np.float64          # ints with a float: float64


def test_broadcast_leaf_gets_its_own_shape():
    bias = ta.tensor(np.zeros((1, 3)), requires_grad=True)
    x = ta.tensor(np.ones((4, 2, 3)))
    (x + bias).backward(np.ones((4, 2, 3)))
    assert bias.grad.shape == (1, 3)
    np.testing.assert_allclose(bias.grad, np.full((1, 3), 8.0))


def test_requires_grad_only_on_floating_leaves():
    with pytest.raises(TypeError, match="floating"):
        ta.tensor([1, 2], requires_grad=True)
    x = ta.tensor([1.0], requires_grad=True)
    with pytest.raises(ValueError, match="leaf"):
        (x * 2).requires_grad = False
    x.requires_grad = False
    assert not (x * 2).requires_grad


def test_tensor_basics():
    t = ta.tensor([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
    assert t.shape == (2, 3) and t.ndim == 2 and t.size == 6 and len(t) == 2
    assert t.dtype == np.float32 and t.numpy() is t.data
    assert np.asarray(t) is t.data and ta.tensor(7.5).item() == 7.5
    source = np.zeros(3)
    assert ta.tensor(source).data is not source          # ta.tensor copies
    assert ta.Tensor(source).data is source              # ta.Tensor wraps
    assert "requires_grad=True" in repr(ta.tensor([1.0], requires_grad=True))
    assert "grad_fn=<mul>" in repr(ta.tensor([1.0], requires_grad=True) * 2)
    with pytest.raises(TypeError):
        ta.tensor(["a", "b"])


def test_deepcopy_and_pickle_make_independent_leaves():
    import copy
    import pickle
    layer = ta.nn.Linear(3, 2)
    twin = copy.deepcopy(layer)
    x = ta.tensor(np.ones((1, 3)))
    twin(x).sum().backward()
    assert layer.weight.grad is None and twin.weight.grad is not None    # gradients stay apart
    restored = pickle.loads(pickle.dumps(twin))
    np.testing.assert_array_equal(restored.weight.data, twin.weight.data)
    np.testing.assert_array_equal(restored.weight.grad, twin.weight.grad)
    assert restored.weight.requires_grad and isinstance(restored.weight, ta.nn.Parameter)
    with pytest.raises(RuntimeError, match="only leaf tensors"):
        copy.deepcopy(layer.weight * 2)


def test_comparisons_are_elementwise_constants():
    x = ta.tensor([1.0, 2.0, 3.0], requires_grad=True)
    np.testing.assert_array_equal((x == 2).data, [False, True, False])
    np.testing.assert_array_equal((x != 2).data, [True, False, True])
    np.testing.assert_array_equal((x >= 2).data, [False, True, True])
    assert not (x == 2).requires_grad
    assert len({x, x}) == 1                  # still hashable, by identity


def test_an_op_that_saved_none_still_backpropagates():
    """Index saves its index, which is None for x[None]; releasing the graph is marked apart."""
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    x[None].backward(np.array([[3.0, 5.0]]))
    np.testing.assert_array_equal(x.grad, [3.0, 5.0])


def test_max_over_a_nonempty_axis_of_a_tensor_with_an_empty_one():
    x = ta.tensor(np.ones((0, 3)), requires_grad=True)
    out = x.max(axis=1)
    assert out.shape == (0,)
    out.backward(np.ones(0))
    assert x.grad.shape == (0, 3)


def test_an_intermediate_can_be_reused_after_backward_unless_it_saved_arrays():
    """As in PyTorch: add saves nothing, so its node can take part in a second backward; exp
    saved its output, which the first backward released."""
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    h = x + 1.0
    h.sum().backward()
    (h * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad, [4.0, 4.0])
    first_row = ta.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)[0]   # index keeps its index
    first_row.sum().backward()
    (first_row * 2.0).sum().backward()
    e = x.exp()
    e.sum().backward()
    with pytest.raises(RuntimeError, match="the exp node's saved arrays were released"):
        (e * 3.0).sum().backward()


def test_a_retained_gradient_adds_up_across_backward_passes():
    x = ta.tensor([1.0, 2.0], requires_grad=True)
    h = x + 1.0
    h.retain_grad()
    h.sum().backward()
    (h * 2.0).sum().backward()
    np.testing.assert_array_equal(h.grad, [3.0, 3.0])


def test_a_backward_rule_may_return_none_for_no_gradient():
    class Half(ops.Mul):
        """out = a * b, whose backward sends nothing to b (as if b were a constant)."""

        def backward(self, grad):
            return super().backward(grad)[0], None

    a, b = ta.tensor([1.0, 2.0], requires_grad=True), ta.tensor([3.0, 4.0], requires_grad=True)
    Half.apply(a, b).backward(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(a.grad, [3.0, 4.0])
    assert b.grad is None


def test_matmul_of_a_batch_and_a_matrix_with_an_empty_axis():
    for k, n in ((0, 4), (5, 0)):
        a = ta.tensor(np.ones((2, 3, k)), requires_grad=True)
        b = ta.tensor(np.ones((k, n)), requires_grad=True)
        (a @ b).backward(np.ones((2, 3, n)))
        assert a.grad.shape == (2, 3, k) and b.grad.shape == (k, n)
        np.testing.assert_array_equal(a.grad, np.zeros((2, 3, k)))    # n = 0: nothing flows back


def test_no_grad_as_a_decorator_keeps_the_function_name():
    @ta.no_grad()
    def evaluate(x):
        return x * 2

    assert evaluate.__name__ == "evaluate"
    assert not evaluate(ta.tensor([1.0], requires_grad=True)).requires_grad


def test_T_of_a_batch_warns_and_points_at_mT():
    """`q @ k.T` on (B, L, E) tensors, the formula as learners copy it, reverses all three axes:
    NumPy's rule, kept, but with PyTorch's warning naming .mT."""
    k = ta.tensor(np.ones((2, 3, 4)))
    with pytest.warns(UserWarning, match=r"T: reversing all 3 axes .* \(2, 3, 4\).*use \.mT"):
        assert k.T.shape == (4, 3, 2)
    assert k.mT.shape == (2, 4, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                   # a matrix or a vector: no warning
        assert ta.tensor(np.ones((3, 4))).T.shape == (4, 3)
        assert ta.tensor(np.ones(3)).T.shape == (3,)


class Twice(Function):
    """A custom op as a learner writes it; `returned` says what its backward returns."""

    def forward(self, a, b, returned):
        self.saved = (returned,)
        return 2 * a + b

    def backward(self, grad):
        returned, = self.saved
        return {"bare array": 2 * grad, "list": [2 * grad, grad], "one of two": (2 * grad,),
                "tuple": (2 * grad, grad)}[returned]


@pytest.mark.parametrize("returned, got", [("bare array", r"an array of shape \(3, 5\)"),
                                           ("list", "a list"), ("one of two", "a tuple of 1")])
def test_a_backward_must_return_one_gradient_per_input(returned, got):
    a = ta.tensor(np.ones((3, 5)), requires_grad=True)
    b = ta.tensor(np.ones((3, 5)), requires_grad=True)
    out = Twice.apply(a, b, returned=returned)
    with pytest.raises(TypeError, match=r"^twice: backward must return a tuple with one gradient "
                                        r"\(an array, or None\) per input, 2 here, .* it returned "
                                        + got):
        out.backward(np.ones((3, 5)))
    assert a.grad is None and b.grad is None
    Twice.apply(a, b, returned="tuple").backward(np.ones((3, 5)))
    np.testing.assert_array_equal(a.grad, np.full((3, 5), 2.0))


def test_a_gradient_of_the_wrong_shape_names_the_op():
    class Wrong(Function):
        def forward(self, a):
            return a.sum(axis=0)

        def backward(self, grad):
            return (grad,)                               # (5,): not a's (3, 5), nor broadcast

    a = ta.tensor(np.ones((5, 3)), requires_grad=True)
    with pytest.raises(RuntimeError, match=r"^wrong: backward returned a gradient of shape \(3,\) "
                                           r"for an input of shape \(5, 3\)"):
        Wrong.apply(a).backward(np.ones(3))
