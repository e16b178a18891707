"""tinyattn.nn.experts: the mixture of experts against a dense reference, the tokens each expert
computes, the balance loss against NumPy, and gradients with the routing held fixed."""
import numpy as np
import pytest
from references import arrays, assert_refused_before_any_node

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn_tools.checklist import ATOL, RTOL
from tinyattn_tools.checklist.decoder_experts import experts_and_tokens, routing_margin
from tinyattn_tools.checklist.ops import np_softmax


def experts(num_experts=4, top_k=2, embed_dim=6):
    ta.manual_seed(0)
    return nn.MixtureOfExperts(embed_dim, num_experts, top_k=top_k, hidden_dim=12)


def np_routing(moe, tokens):
    """(gates (N, n) with zeros for the experts not chosen, full softmax (N, n)) in NumPy."""
    logits = tokens @ moe.router.weight.data.T                       # (N, n)
    chosen = np.argsort(-logits, axis=-1)[:, :moe.top_k]             # (N, k)
    rows = np.arange(len(tokens))[:, None]
    gates = np.zeros_like(logits)
    gates[rows, chosen] = np_softmax(logits[rows, chosen])
    return gates, np_softmax(logits)


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_output_is_the_dense_mixture_of_every_expert_on_every_token(top_k):
    moe = experts(top_k=top_k)
    x = arrays((2, 5, 6))[0]
    out = moe(ta.tensor(x))
    tokens = x.reshape(-1, 6)
    gates, _ = np_routing(moe, tokens)
    with ta.no_grad():
        every_expert = np.stack([expert(ta.tensor(tokens)).data for expert in moe.experts], 1)
    expected = (gates[:, :, None] * every_expert).sum(axis=1)        # (N, n, E) -> (N, E)
    assert out.shape == x.shape
    np.testing.assert_allclose(out.data, expected.reshape(x.shape), rtol=1e-12, atol=1e-12)
    assert ((gates > 0).sum(axis=1) == top_k).all()
    np.testing.assert_array_equal(moe.selected_experts.shape, (2, 5, top_k))


def test_each_expert_computes_exactly_its_own_tokens():
    moe = experts(top_k=2)
    x = arrays((3, 7, 6))[0]
    seen = {}
    for e, expert in enumerate(moe.experts):
        def recording(tokens, e=e, forward=expert.forward):
            seen[e] = tokens.data.copy()
            return forward(tokens)
        expert.forward = recording
    moe(ta.tensor(x))
    chosen = moe.selected_experts.reshape(-1, 2)
    tokens = x.reshape(-1, 6)
    counts = [int((chosen == e).any(axis=1).sum()) for e in range(4)]
    assert sum(counts) == len(tokens) * 2                            # every token, twice
    for e in range(4):
        if counts[e] == 0:
            assert e not in seen                                     # an idle expert is not run
        else:
            np.testing.assert_array_equal(seen[e], tokens[(chosen == e).any(axis=1)])
    assert sum(len(rows) for rows in seen.values()) == len(tokens) * 2


def test_aux_loss_is_the_switch_transformer_formula():
    moe = experts(num_experts=5, top_k=2)
    assert moe.aux_loss is None                                      # before the first forward
    x = arrays((4, 6, 6))[0]
    moe(ta.tensor(x))
    gates, probabilities = np_routing(moe, x.reshape(-1, 6))
    share = (gates > 0).sum(axis=0) / (gates > 0).sum()              # f_e
    expected = 5 * np.sum(share * probabilities.mean(axis=0))        # n * sum_e f_e P_e
    assert moe.aux_loss.shape == ()
    assert moe.aux_loss.item() == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_hugging_face_mixtrals_balance_loss_is_top_k_times_this_one(top_k):
    """The docstring's warning. Hugging Face's `load_balancing_loss_func` (Mixtral), written out
    in NumPy from the same routing: tokens_per_expert counts each token's top_k experts over the
    number of tokens, so it sums to top_k where f sums to 1; the rest is the same formula."""
    moe = experts(num_experts=5, top_k=top_k)
    x = arrays((4, 6, 6))[0]
    moe(ta.tensor(x))
    routing_weights = np_routing(moe, x.reshape(-1, 6))[1]                      # (N, n) softmax
    selected_experts = np.argsort(-routing_weights, axis=-1)[:, :top_k]         # (N, k)
    tokens_per_expert = np.bincount(selected_experts.ravel(), minlength=5) / len(x.reshape(-1, 6))
    router_prob_per_expert = routing_weights.mean(axis=0)                       # (n,)
    hugging_face = 5 * np.sum(tokens_per_expert * router_prob_per_expert)
    assert tokens_per_expert.sum() == pytest.approx(top_k, rel=1e-15)
    assert hugging_face == pytest.approx(top_k * moe.aux_loss.item(), rel=1e-12)


@pytest.mark.parametrize("top_k", [1, 2])
def test_aux_loss_is_one_for_perfectly_balanced_routing(top_k):
    """Token i is the unit vector e_i and the router's weight a circulant matrix: token i's
    largest logits are experts i, i + 1, ..., so every expert gets the same number of
    assignments (f uniform), and by symmetry every softmax column has the same mean (P uniform)."""
    moe = experts(num_experts=4, top_k=top_k, embed_dim=4)
    moe.router.weight.data[...] = sum(np.roll(np.eye(4), -shift, axis=0) * (3.0 - shift)
                                      for shift in range(4))
    moe(ta.tensor(np.eye(4)))
    assert (np.bincount(moe.selected_experts.ravel(), minlength=4) == top_k).all()
    assert moe.aux_loss.item() == pytest.approx(1.0, abs=1e-12)
    moe.router.weight.data[...] = 0.0
    moe.router.weight.data[0] = 5.0                                  # expert 0 first for all
    moe(ta.tensor(np.eye(4)))
    assert moe.aux_loss.item() > 1.5


@pytest.mark.parametrize("top_k", [1, 2])
def test_gradients_with_routing_that_no_step_can_flip(top_k):
    """The checklist's rows keep the routing fixed: two logits of a token are never closer than
    a thousand times what one finite-difference step can move a logit, and no call of the check
    routes a token differently. (Here only x and the router are checked, the two inputs that the
    routing depends on; the checklist row checks every parameter.)"""
    moe, x = experts_and_tokens(top_k)
    moe(x)
    routing = moe.selected_experts.copy()
    margin, largest_step = routing_margin(moe, x)
    assert margin > 1e3 * largest_step
    counts = np.bincount(routing.ravel(), minlength=moe.num_experts)
    assert counts.min() > 0 and counts.max() > counts.min()          # all used, unevenly

    def output_and_aux_loss(x, *parameters):
        out = moe(x)
        assert np.array_equal(moe.selected_experts, routing)         # no step flipped a choice
        return out, moe.aux_loss
    assert ta.gradcheck(output_and_aux_loss, [x, moe.router.weight], atol=ATOL, rtol=RTOL)


def test_with_top_1_the_router_learns_from_the_balance_loss_only():
    """The gate of a single chosen expert is softmax of one logit, always 1: the output passes
    no gradient to the router; the balance loss does."""
    moe = experts(top_k=1)
    x = ta.tensor(arrays((2, 5, 6))[0])
    moe(x).backward(arrays((2, 5, 6), seed=1)[0])
    assert np.abs(moe.router.weight.grad).max() < 1e-15
    moe.zero_grad()
    moe(x)
    moe.aux_loss.backward()
    assert np.abs(moe.router.weight.grad).max() > 1e-3
    assert all(p.grad is None for expert in moe.experts for p in expert.parameters())


def test_float32_stays_float32_and_inputs_may_have_any_leading_axes():
    moe = experts().to(np.float32)
    x = ta.tensor(arrays((6,))[0].astype(np.float32), requires_grad=True)
    out = moe(x)
    out.backward(np.ones(6, np.float32))
    assert out.shape == (6,) and moe.selected_experts.shape == (2,)
    assert out.dtype == x.grad.dtype == moe.aux_loss.dtype == np.float32
    assert moe(ta.tensor(np.ones((2, 1, 3, 6), np.float32))).shape == (2, 1, 3, 6)


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.MixtureOfExperts(4, 2, top_k=3), ValueError,
     r"MixtureOfExperts: top_k 3 is more than num_experts 2"),
    (lambda: nn.MixtureOfExperts(4, 2, top_k=0), ValueError,
     r"MixtureOfExperts: top_k must be at least 1, got 0"),
    (lambda: nn.MixtureOfExperts(4, 0), ValueError,
     r"MixtureOfExperts: num_experts must be at least 1, got 0"),
    (lambda: nn.MixtureOfExperts(4, 2, top_k=1.5), TypeError,
     r"MixtureOfExperts: top_k must be an int, got 1.5"),
    (lambda: nn.MixtureOfExperts(4, 2, hidden_dim=0), ValueError,
     r"MixtureOfExperts: hidden_dim must be at least 1, got 0"),
    (lambda: nn.MixtureOfExperts(4.0, 2), TypeError,
     r"MixtureOfExperts: embed_dim must be an int, got 4.0"),
    (lambda: nn.MixtureOfExperts(4, 2, dtype="banana"), TypeError,
     r"MixtureOfExperts: dtype must be a floating-point type, got 'banana'"),
    (lambda: experts()(ta.tensor(np.ones((2, 6), np.float32))), TypeError,
     r"MixtureOfExperts: x has dtype float32 but the layer's parameters are float64"),
    (lambda: experts()(np.ones((2, 6))), TypeError,
     r"MixtureOfExperts: x must be a Tensor, got ndarray"),
])
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize("shape, message", [
    ((2, 3, 5), r"MixtureOfExperts: x must have shape \(\.\.\., 6\), got \(2, 3, 5\)"),
    ((2, 0, 6), r"MixtureOfExperts: needs at least one token, got an input of shape \(2, 0, 6\)"),
])
def test_a_refused_input_builds_nothing_and_keeps_the_last_aux_loss(shape, message):
    moe = experts()
    moe(ta.tensor(np.ones((2, 6))))
    aux_loss, selected = moe.aux_loss, moe.selected_experts
    assert_refused_before_any_node(moe, [shape], {}, ValueError, message)
    assert moe.aux_loss is aux_loss and moe.selected_experts is selected
