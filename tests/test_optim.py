"""tinyattn.optim: SGD, Adam and AdamW against their formulas, dtypes and step counts; gradient
clipping and the learning-rate schedule. PyTorch, when installed, is an extra reference."""
import math

import numpy as np
import pytest

import tinyattn.nn as nn
from tinyattn import engine, optim


def parameter_with_grad(value, grad, dtype=np.float64):
    p = nn.Parameter(np.array(value, dtype=dtype))
    p.grad = np.array(grad, dtype=dtype)
    return p


def test_sgd_with_momentum_and_weight_decay():
    p = parameter_with_grad([1.0, -2.0], [0.5, 0.5])
    sgd = optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=0.01)
    sgd.step()                                  # v = g + wd p
    v = np.array([0.5, 0.5]) + 0.01 * np.array([1.0, -2.0])
    expected = np.array([1.0, -2.0]) - 0.1 * v
    np.testing.assert_allclose(p.data, expected)
    sgd.step()                                  # v = 0.9 v + g + wd p
    v = 0.9 * v + np.array([0.5, 0.5]) + 0.01 * expected
    np.testing.assert_allclose(p.data, expected - 0.1 * v)


def adam_by_hand(start, grads, lr, betas, weight_decay, decoupled, eps=1e-8):
    """Adam's formula step by step; `decoupled`: AdamW's weight decay, else Adam's L2 form."""
    (b1, b2), p, m, v = betas, start, 0.0, 0.0
    for t, g in enumerate(grads, start=1):
        if decoupled:
            p = p * (1 - lr * weight_decay)
        else:
            g = g + weight_decay * p
        m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g ** 2
        p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    return p


@pytest.mark.parametrize("kind, weight_decay", [("Adam", 0.0), ("Adam", 0.1), ("AdamW", 0.1)])
def test_adam_and_adamw_match_their_formulas(kind, weight_decay):
    """Adam adds weight_decay * p to the gradient (so it is divided by sqrt(v) like the rest);
    AdamW shrinks p by (1 - lr weight_decay) and follows the plain gradient."""
    start = np.array([1.0, -2.0, 3.0])
    grads = [np.array([0.1, -3.0, 0.0]), np.array([0.2, 1.0, 1.0])]
    p = parameter_with_grad(start, grads[0])
    optimizer = getattr(optim, kind)([p], lr=0.01, betas=(0.9, 0.99), weight_decay=weight_decay)
    optimizer.step()
    if weight_decay == 0.0:  # step 1: m / (1 - b1) = g, v / (1 - b2) = g^2: p moves by lr sign(g)
        np.testing.assert_allclose(p.data, [0.99, -1.99, 3.0], rtol=1e-6)
    p.grad = grads[1].copy()
    optimizer.step()
    expected = adam_by_hand(start, grads, 0.01, (0.9, 0.99), weight_decay, kind == "AdamW")
    np.testing.assert_allclose(p.data, expected, rtol=1e-12)


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9),
                                  lambda ps: optim.Adam(ps, lr=0.1),
                                  lambda ps: optim.AdamW(ps, lr=0.1, weight_decay=0.1)])
def test_optimizers_keep_float32_and_clear_gradients(make):
    p = parameter_with_grad([1.0, 2.0], [0.5, -0.5], np.float32)
    optimizer = make([p])
    optimizer.step()
    optimizer.step()
    assert p.dtype == np.float32
    optimizer.zero_grad()
    assert p.grad is None


def test_adam_counts_steps_per_parameter():
    """A parameter that first gets a gradient at the third step takes Adam's first step then (its
    bias correction starts from 1), as in PyTorch; one without a gradient does not move."""
    late, idle = parameter_with_grad([1.0], [0.0]), nn.Parameter(np.array([5.0]))
    early = parameter_with_grad([1.0], [0.5])
    adam = optim.Adam([early, late, idle], lr=0.1)
    late.grad = None
    adam.step()
    adam.step()
    late.grad = np.array([2.0])
    adam.step()
    np.testing.assert_allclose(late.data, [1.0 - 0.1 * 2.0 / (2.0 + 1e-8)])
    np.testing.assert_array_equal(idle.data, [5.0])


def test_adamw_has_pytorchs_defaults():
    adamw = optim.AdamW([nn.Parameter(np.ones(2))])
    assert (adamw.lr, adamw.beta1, adamw.beta2, adamw.eps, adamw.weight_decay) == \
        (1e-3, 0.9, 0.999, 1e-8, 1e-2)


def test_clip_grad_norm_scales_all_gradients_by_one_factor():
    a, b = parameter_with_grad([0.0, 0.0], [3.0, 0.0]), parameter_with_grad([0.0], [4.0])
    idle = nn.Parameter(np.zeros(3))                       # no gradient: left out
    norm = optim.clip_grad_norm([a, idle, b], max_norm=1.0)
    assert type(norm) is float and norm == 5.0               # sqrt(3^2 + 4^2)
    factor = 1.0 / (5.0 + 1e-6)
    np.testing.assert_allclose(a.grad, [3.0 * factor, 0.0], rtol=1e-15)
    np.testing.assert_allclose(b.grad, [4.0 * factor], rtol=1e-15)
    assert idle.grad is None
    assert optim.clip_grad_norm([a, b], max_norm=2.0) == pytest.approx(1.0)   # below: unchanged
    np.testing.assert_allclose(b.grad, [4.0 * factor], rtol=1e-15)


def test_clip_grad_norm_keeps_float32():
    p = parameter_with_grad(np.zeros((10, 10)), np.full((10, 10), 2.0), np.float32)
    grad = p.grad
    assert optim.clip_grad_norm([p], max_norm=0.5) == pytest.approx(20.0)
    assert p.grad is grad and p.grad.dtype == np.float32                  # scaled in place
    np.testing.assert_allclose(np.linalg.norm(p.grad), 0.5, rtol=1e-6)


def test_clip_grad_norm_takes_a_single_tensor_as_pytorch_does():
    p = parameter_with_grad(np.zeros((2, 3)), np.full((2, 3), 10.0))
    first_probe = next(engine._node_counter)
    assert optim.clip_grad_norm(p, max_norm=1.0) == pytest.approx(math.sqrt(600.0))
    np.testing.assert_allclose(np.linalg.norm(p.grad), 1.0, rtol=1e-6)   # clipped, as a whole
    assert next(engine._node_counter) == first_probe + 1     # no indexing node: rows not iterated


def nonfinite_gradients(bad):
    """Two gradients, one holding `bad`, and what PyTorch's clipping makes of them (a NaN norm
    makes every gradient NaN; an infinite one makes them 0, the infinite element NaN)."""
    grads = [np.array([1.0, bad, 2.0]), np.array([5.0])]
    clipped = ([np.full(3, np.nan), np.array([np.nan])] if np.isnan(bad)
               else [np.array([0.0, np.nan, 0.0]), np.array([0.0])])
    return grads, clipped


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_clip_grad_norm_with_a_nonfinite_gradient_does_what_pytorch_does(bad):
    grads, clipped = nonfinite_gradients(bad)
    params = [parameter_with_grad(np.zeros_like(g), g) for g in grads]
    norm = optim.clip_grad_norm(params, max_norm=100.0)
    assert math.isnan(norm) if np.isnan(bad) else norm == math.inf
    for p, expected in zip(params, clipped):
        np.testing.assert_array_equal(p.grad, expected)
    params = [parameter_with_grad(np.zeros_like(g), g) for g in grads]
    with pytest.raises(RuntimeError, match=rf"clip_grad_norm: the total norm of the gradients is "
                                           rf"{bad}, so it cannot be clipped; "
                                           rf"error_if_nonfinite=False scales them"):
        optim.clip_grad_norm(params, max_norm=100.0, error_if_nonfinite=True)
    for p, grad in zip(params, grads):
        np.testing.assert_array_equal(p.grad, grad)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_pytorch_clips_nonfinite_gradients_so_too(bad):
    """The reference for the test above (skipped when torch is not installed)."""
    torch = pytest.importorskip("torch", reason="torch is not installed: no reference to compare")
    grads, clipped = nonfinite_gradients(bad)
    params = [torch.zeros(len(g), dtype=torch.float64, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = torch.tensor(g)
    torch.nn.utils.clip_grad_norm_(params, 100.0)
    for p, expected in zip(params, clipped):
        np.testing.assert_array_equal(p.grad.numpy(), expected)


@pytest.mark.parametrize("kind", ["SGD", "Adam", "AdamW"])
def test_an_optimizer_refuses_a_single_tensor(kind):
    """Iterating over a tensor gives its rows, new tensors that no step would reach the
    parameter through: PyTorch refuses it, and so does tinyattn, naming the optimizer."""
    p = parameter_with_grad(np.zeros((2, 3)), np.ones((2, 3)))
    first_probe = next(engine._node_counter)
    with pytest.raises(TypeError, match=rf"^{kind}: params must be an iterable of tensors, got a "
                                        r"single Tensor of shape \(2, 3\)"):
        getattr(optim, kind)(p, lr=0.1)
    assert next(engine._node_counter) == first_probe + 1


def test_adamw_decays_only_the_parameters_that_take_a_step():
    stepping, idle = parameter_with_grad([2.0], [0.0]), nn.Parameter(np.array([2.0]))
    adamw = optim.AdamW([stepping, idle], lr=0.1, weight_decay=0.5)
    adamw.step()        # a zero gradient: Adam's step is 0, the decay alone moves the weight
    np.testing.assert_allclose(stepping.data, [2.0 * (1 - 0.1 * 0.5)], rtol=1e-15)
    assert idle.data[0] == 2.0 and adamw.gradient(stepping) is stepping.grad


def test_warmup_cosine_lr():
    lrs = [optim.warmup_cosine_lr(step, 1.0, warmup_steps=4, total_steps=14, min_lr=0.1)
           for step in range(16)]
    np.testing.assert_allclose(lrs[:4], [0.25, 0.5, 0.75, 1.0])           # linear warm-up
    assert lrs[4] == 1.0 and lrs[9] == pytest.approx(0.55)                # half-way: the mean
    assert lrs[7] == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * 0.3)) / 2)
    assert all(later < earlier for earlier, later in zip(lrs[4:14], lrs[5:14]))
    assert lrs[14:] == [0.1, 0.1]                                         # then the floor


def test_warmup_cosine_lr_differs_from_nanogpts_get_lr_in_the_warmup_only():
    """What demo 11 and the docstring say: nanoGPT's get_lr, written out, warms up as
    lr * (it + 1) / (warmup + 1); after the warm-up the two agree."""
    lr, warmup, total, min_lr = 1e-3, 100, 2000, 1e-4

    def nanogpt_get_lr(it):
        if it < warmup:
            return lr * (it + 1) / (warmup + 1)
        if it > total:
            return min_lr
        coefficient = 0.5 * (1.0 + math.cos(math.pi * (it - warmup) / (total - warmup)))
        return min_lr + coefficient * (lr - min_lr)

    ours = [optim.warmup_cosine_lr(step, lr, warmup, total, min_lr) for step in range(total + 5)]
    theirs = [nanogpt_get_lr(step) for step in range(total + 5)]
    np.testing.assert_allclose(np.array(theirs[:warmup]) / ours[:warmup], warmup / (warmup + 1),
                               rtol=1e-14)
    assert ours[warmup - 1] == lr and theirs[warmup - 1] < lr
    np.testing.assert_allclose(ours[warmup:], theirs[warmup:], rtol=1e-14)


def test_adamw_and_clipping_match_pytorch():
    """An extra check against PyTorch (skipped when it is not installed)."""
    torch = pytest.importorskip("torch")
    random = np.random.default_rng(0)
    start = random.standard_normal((2, 3, 4))
    grads = [10 * random.standard_normal(start.shape) for _ in range(3)]
    ours = nn.Parameter(start.copy())
    theirs = torch.tensor(start.copy(), requires_grad=True)
    adamw = optim.AdamW([ours], lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)
    reference = torch.optim.AdamW([theirs], lr=0.01, betas=(0.9, 0.99), weight_decay=0.1)
    for grad in grads:
        ours.grad, theirs.grad = grad.copy(), torch.tensor(grad.copy())
        norm = optim.clip_grad_norm([ours], max_norm=1.0)
        np.testing.assert_allclose(norm, torch.nn.utils.clip_grad_norm_([theirs], 1.0).item(),
                                   rtol=1e-12)
        adamw.step()
        reference.step()
        np.testing.assert_allclose(ours.data, theirs.detach().numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("arguments, message", [
    (dict(warmup_steps=10, total_steps=5), r"total_steps 5 must be at least warmup_steps 10"),
    (dict(warmup_steps=1, total_steps=5, min_lr=2.0), r"min_lr 2.0 must be at most lr 1.0"),
])
def test_warmup_cosine_lr_refuses_a_schedule_that_cannot_be(arguments, message):
    with pytest.raises(ValueError, match="^warmup_cosine_lr: " + message):
        optim.warmup_cosine_lr(0, 1.0, **arguments)
