"""tinyattn/nn/routed_experts.py (and the sigmoid, ops/sigmoid.py): the layer against a NumPy
reference written as transformers' routers are (Qwen3MoeTopKRouter, DeepseekV3TopkRouter:
scores, then a mask of groups, then the top k); the bias chooses without weighing; a token's
experts lie in its best groups; chapter 2's mixture is the softmax router with norm_topk_prob;
the checklist's rows route far from any tie; no gradient reaches the bias; bad arguments are
named."""
import warnings

import numpy as np
import pytest
from references import arrays

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn_tools.checklist.latent_and_experts import (DEEPSEEK_V3, QWEN3_MOE,
                                                         routed_experts_and_tokens,
                                                         routing_margin,
                                                         two_softmax_routed_layers)
from tinyattn_tools.checklist.ops import np_softmax


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def reference_routing(layer, tokens):
    """(weights (N, n), zero for the experts not chosen) as transformers computes them: scores;
    for choosing, the scores plus the bias, each group scored by its two best, the groups
    outside the top_groups masked to -inf; the top_k of what is left; the weights gathered from
    the scores, normalised (+ 1e-20 in DeepSeek's code), scaled."""
    logits = tokens @ layer.router.weight.data.T                        # (N, n)
    scores = np_softmax(logits) if layer.scoring == "softmax" else np_sigmoid(logits)
    for_choice = scores + (0.0 if layer.choice_bias is None else layer.choice_bias.data)
    N, n = scores.shape
    G = layer.num_groups
    group_scores = np.sort(for_choice.reshape(N, G, n // G), axis=-1)[..., -2:].sum(-1) \
        if G > 1 else np.zeros((N, 1))
    kept_groups = np.argsort(-group_scores, axis=-1)[:, :layer.top_groups]     # (N, top_groups)
    kept = np.zeros((N, G), dtype=bool)
    kept[np.arange(N)[:, None], kept_groups] = True
    masked = np.where(np.repeat(kept, n // G, axis=1), for_choice, -np.inf)
    chosen = np.argsort(-masked, axis=-1)[:, :layer.top_k]              # (N, k)
    picked = np.take_along_axis(scores, chosen, axis=-1)                # (N, k)
    if layer.norm_topk_prob:
        picked = picked / (picked.sum(axis=-1, keepdims=True) + 1e-20)
    weights = np.zeros_like(scores)
    np.put_along_axis(weights, chosen, picked * layer.routed_scaling_factor, axis=-1)
    return weights


def every_expert(layer, tokens):
    with ta.no_grad():
        return np.stack([expert(ta.tensor(tokens)).data for expert in layer.experts], axis=1)


@pytest.mark.parametrize("options", [QWEN3_MOE, dict(QWEN3_MOE, norm_topk_prob=True),
                                     DEEPSEEK_V3, dict(DEEPSEEK_V3, norm_topk_prob=False)],
                         ids=["qwen3_moe", "qwen3_moe normed", "deepseek_v3",
                              "deepseek_v3 not normed"])
def test_the_output_is_transformers_routing_of_every_expert(options):
    layer, x = routed_experts_and_tokens(options)
    tokens = x.data.reshape(-1, 6)
    weights = reference_routing(layer, tokens)                          # (N, n)
    expected = (weights[:, :, None] * every_expert(layer, tokens)).sum(axis=1)      # (N, E)
    if layer.shared is not None:
        with ta.no_grad():
            expected = expected + layer.shared(ta.tensor(tokens)).data
    out = layer(x)
    np.testing.assert_allclose(out.data, expected.reshape(x.shape), rtol=0, atol=1e-12)
    assert ((weights > 0).sum(axis=1) == layer.top_k).all()
    np.testing.assert_array_equal(np.sort(layer.selected_experts.reshape(-1, layer.top_k)),
                                  np.sort(np.argsort(-weights, axis=-1)[:, :layer.top_k]))


def test_the_bias_chooses_but_does_not_weigh():
    """A bias of 10 on expert 5 makes every token choose it, with the weight of its score."""
    layer, x = routed_experts_and_tokens(dict(DEEPSEEK_V3, shared_hidden_dim=None,
                                              num_groups=1, top_groups=1))
    layer.choice_bias.data[...] = 0.0
    layer.choice_bias.data[5] = 10.0
    tokens = x.data.reshape(-1, 6)
    layer(x)
    assert (layer.selected_experts.reshape(-1, 3) == 5).any(axis=1).all()
    weights = reference_routing(layer, tokens)
    scores = np_sigmoid(tokens @ layer.router.weight.data.T)
    chosen = layer.selected_experts.reshape(-1, 3)
    picked = np.take_along_axis(scores, chosen, axis=-1)
    np.testing.assert_allclose(weights[:, 5], 2.5 * scores[:, 5] / picked.sum(axis=-1),
                               rtol=1e-12)


def test_the_bias_update_is_the_papers_sign_rule():
    """b_i + speed * sign(c - c_i): up for the experts below the mean load N k / n, down for
    those above, unchanged for one exactly at it; the load counted over every token of the batch."""
    layer, x = routed_experts_and_tokens(dict(DEEPSEEK_V3, num_groups=1, top_groups=1))
    layer.selected_experts = np.array([[[0, 1, 2], [0, 1, 3]], [[0, 4, 5], [0, 1, 6]]])  # (2, 2, 3)
    before = layer.choice_bias.data.copy()
    layer.update_choice_bias(speed=0.25)
    # loads 4, 3, 1, 1, 1, 1, 1, 0 against a mean of 12 / 8 = 1.5
    np.testing.assert_array_equal(layer.choice_bias.data - before,
                                  0.25 * np.array([-1, -1, 1, 1, 1, 1, 1, 1]))
    layer.selected_experts = np.array([[0, 1], [2, 3], [0, 1], [2, 3]])  # 4 tokens, top 2, n 4
    layer.num_experts, layer.choice_bias.data = 4, np.zeros(4)
    layer.update_choice_bias()
    np.testing.assert_array_equal(layer.choice_bias.data, np.zeros(4))     # every load the mean


def test_the_bias_update_balances_a_skewed_router():
    """A router that sends every token to experts 0-2 (loads 64, 64, 64, 0, ..., a mean of 24):
    600 updates of the bias, the gradient never asked, spread the same tokens nearly evenly,
    while the weights stay the scores of the chosen experts. The sign rule moves each bias by
    `speed` whatever the imbalance, so it ends in a cycle about as wide as `speed`: a decreasing
    speed (0.01, then 0.003, then 0.001, 200 updates each) gets closer than any one of them."""
    layer, x = routed_experts_and_tokens(dict(DEEPSEEK_V3, shared_hidden_dim=None,
                                              num_groups=1, top_groups=1))
    layer.choice_bias.data[...] = 0.0
    tokens = np.random.default_rng(1).standard_normal((64, 6))
    tokens[:, 0] = 2.0                                  # a feature every token has ...
    layer.router.weight.data[:3, 0] += 2.0              # ... that experts 0-2 score highly
    tokens = ta.tensor(tokens)

    def busiest_share():
        with ta.no_grad():
            layer(tokens)
        return np.bincount(layer.selected_experts.ravel(), minlength=8).max() / (64 * 3 / 8)
    skewed = busiest_share()
    for speed in (0.01, 0.003, 0.001):
        for _ in range(200):
            busiest_share()
            layer.update_choice_bias(speed=speed)
    assert skewed == 64 / 24 and busiest_share() < 1.25, (skewed, busiest_share())
    weights = reference_routing(layer, tokens.data)
    chosen = layer.selected_experts
    picked = np_sigmoid(tokens.data @ layer.router.weight.data.T)[np.arange(64)[:, None], chosen]
    np.testing.assert_allclose(np.take_along_axis(weights, chosen, -1),
                               2.5 * picked / picked.sum(-1, keepdims=True), rtol=1e-12)


def test_a_bias_update_without_a_bias_or_a_forward_is_named():
    layer, x = routed_experts_and_tokens(QWEN3_MOE)
    layer(x)
    with pytest.raises(ValueError, match=r"^RoutedExperts.update_choice_bias: these experts have "
                                         r"no choice bias \(choice_bias=False, as Qwen3-MoE's\)"):
        layer.update_choice_bias()
    layer, x = routed_experts_and_tokens(DEEPSEEK_V3)
    with pytest.raises(ValueError, match=r"^RoutedExperts.update_choice_bias: no forward has "
                                         r"chosen experts yet"):
        layer.update_choice_bias()
    layer(x)
    with pytest.raises(ValueError, match=r"^RoutedExperts.update_choice_bias: speed must be >= 0, "
                                         r"got -0.1"):
        layer.update_choice_bias(speed=-0.1)


def test_a_tokens_experts_lie_in_its_best_groups():
    layer, x = routed_experts_and_tokens(DEEPSEEK_V3)
    layer(ta.tensor(arrays((4, 16, 6))[0]))
    groups = layer.selected_experts.reshape(-1, 3) // 2                 # 4 groups of 2
    assert max(len(set(row)) for row in groups.tolist()) <= 2
    layer.top_groups = 4                                                # every group counts
    layer(ta.tensor(arrays((4, 16, 6))[0]))
    assert max(len(set(row)) for row in (layer.selected_experts.reshape(-1, 3) // 2).tolist()) == 3


def test_the_softmax_router_with_normed_weights_is_chapter_2s_mixture():
    """Qwen3-MoE's router with norm_topk_prob weighs the chosen experts by the softmax of their
    logits, as nn.MixtureOfExperts (Mixtral) does; the experts differ (SwiGLU here)."""
    layer, x = routed_experts_and_tokens(dict(QWEN3_MOE, norm_topk_prob=True))
    tokens = x.data.reshape(-1, 6)
    logits = tokens @ layer.router.weight.data.T
    chosen = np.argsort(-logits, axis=-1)[:, :2]
    gates = np_softmax(np.take_along_axis(logits, chosen, axis=-1))
    np.testing.assert_allclose(np.take_along_axis(reference_routing(layer, tokens), chosen, -1),
                               gates, rtol=1e-12)


@pytest.mark.parametrize("options", [QWEN3_MOE, DEEPSEEK_V3], ids=["qwen3_moe", "deepseek_v3"])
def test_the_checklists_rows_route_far_from_any_tie(options):
    layer, x = routed_experts_and_tokens(options)
    margin, step = routing_margin(layer, x)
    assert margin > 1e3 * step


def test_the_balance_loss_rows_layers_route_far_from_any_tie():
    first, second, x = two_softmax_routed_layers()
    for layer in (first, second):
        margin, step = routing_margin(layer, x)
        assert margin > 1e3 * step


def test_no_gradient_reaches_the_bias_and_float32_stays_float32():
    layer, x = routed_experts_and_tokens(DEEPSEEK_V3)
    layer.to(np.float32)
    x32 = ta.tensor(x.data.astype(np.float32), requires_grad=True)
    out = layer(x32)
    out.sum().backward()
    assert out.dtype == x32.grad.dtype == layer.router.weight.grad.dtype == np.float32
    assert not layer.choice_bias.requires_grad and layer.choice_bias.grad is None
    assert layer.choice_bias.dtype == np.float32


def test_the_sigmoid_never_overflows():
    for dtype in (np.float32, np.float64):
        x = np.array([-1000.0, -88.5, -20.0, 0.0, 3.0, 1000.0], dtype)
        t = ta.tensor(x, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")               # an overflow in exp would warn
            out = F.sigmoid(t)
            out.backward(np.ones_like(x))
        assert out.dtype == t.grad.dtype == dtype
        expected = 1 / (1 + np.exp(-np.clip(x.astype(np.float64), -700, 700)))
        np.testing.assert_allclose(out.data, expected, rtol=1e-6, atol=1e-30)
        np.testing.assert_allclose(t.grad[[0, 3, 5]], [0.0, 0.25, 0.0], atol=1e-30)


@pytest.mark.parametrize("options, message", [
    (dict(num_experts=4, top_k=5), r"top_k 5 is more than num_experts 4$"),
    (dict(num_experts=6, top_k=2, num_groups=4), r"num_groups 4 must divide num_experts 6"),
    (dict(num_experts=8, top_k=2, num_groups=2, top_groups=3),
     r"top_groups 3 is more than num_groups 2$"),
    (dict(num_experts=4, top_k=1, num_groups=4, top_groups=2),
     r"a group's score is the sum of its two best experts' scores, but num_groups 4 leaves 1 "
     r"expert in each$"),
    (dict(num_experts=8, top_k=5, num_groups=4, top_groups=2),
     r"top_k 5 is more than the 4 experts of the top_groups 2 groups kept$"),
    (dict(num_experts=4, top_k=2, scoring="relu"),
     r"scoring must be one of 'softmax', 'sigmoid', got 'relu'$"),
])
def test_bad_arguments_are_named(options, message):
    with pytest.raises(ValueError, match=r"^RoutedExperts: " + message):
        nn.RoutedExperts(6, hidden_dim=4, **options)


def test_no_tokens_is_named():
    layer, _ = routed_experts_and_tokens(QWEN3_MOE)
    with pytest.raises(ValueError, match=r"^RoutedExperts: needs at least one token, got an input "
                                         r"of shape \(0, 6\)"):
        layer(ta.tensor(np.zeros((0, 6))))
