"""The checklist's rows for chapter 5, part 3: the sigmoid (against NumPy, finite differences and
1 / (1 + e^(-x)) in primitive ops), latent attention on both of its paths (expanded, and
absorbed on a cache), the routed experts of Qwen3-MoE and DeepSeek-V3, and the decoder with each
family's switches.

A routed layer is a smooth function of its inputs only while no token changes experts, so the
rows' inputs are seeded ones whose routing stays put under a finite-difference step: the gaps
between a token's scores, and between its groups' scores, are far larger than what a step moves
them (`routing_margin`; tests/test_routed_experts.py checks it). The choice bias of DeepSeek's
router is drawn at random, as after training, so that the rows route with it.
"""
import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.nn.routed_experts import load_balancing_loss
from tinyattn_tools.checklist.cases import FusedCase, LayerCase, OpCase, leaves
from tinyattn_tools.checklist.chapter5 import TINY, off_their_start


def np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def composed_sigmoid(x):
    """F.sigmoid written with primitive ops: 1 / (1 + exp(-x))."""
    return 1.0 / (1.0 + (-x).exp())


LATENT = dict(kv_lora_rank=6, qk_rope_head_dim=4, qk_nope_head_dim=3, v_head_dim=5)


def latent_attention(cached=False, **options):
    """A build function: LatentAttention(8, 3 heads, LATENT, options) on x (2, 6, 8), its norms
    off their start; `cached`: the last two tokens' output after the first four went into a
    LatentCache (the absorbed path, reaching the first four through the cached latents only)."""
    def build():
        ta.manual_seed(0)
        attention = off_their_start(nn.LatentAttention(8, 3, **LATENT, **options))
        x, = leaves((2, 6, 8))

        def output(x, *parameters):
            if not cached:
                return attention(x)[0]                                  # (2, 6, 8)
            cache = nn.LatentCache()
            attention(x[:, :4], 0, cache)
            return attention(x[:, 4:], 4, cache)[0]                     # (2, 2, 8)
        return output, [x, *attention.parameters()]
    return build


QWEN3_MOE = dict(num_experts=4, top_k=2, hidden_dim=5, norm_topk_prob=False)
DEEPSEEK_V3 = dict(num_experts=8, top_k=3, hidden_dim=3, scoring="sigmoid",
                   routed_scaling_factor=2.5, num_groups=4, top_groups=2, choice_bias=True,
                   shared_hidden_dim=4)


def with_random_bias(module, seed=1):
    """`module` with every RoutedExperts' choice bias drawn at random (seeded), as after
    training; returns it."""
    random = np.random.default_rng(seed)
    for layer in module.modules():
        if isinstance(layer, nn.RoutedExperts) and layer.choice_bias is not None:
            layer.choice_bias.data[...] = random.normal(0.0, 0.3, layer.choice_bias.shape)
    return module


def routed_experts_and_tokens(options):
    """RoutedExperts(6, options), its bias drawn, and tokens x (2, 3, 6)."""
    ta.manual_seed(0)
    experts = with_random_bias(nn.RoutedExperts(6, **options))
    x, = leaves((2, 3, 6))
    return experts, x


def routed_experts(options):
    def build():
        experts, x = routed_experts_and_tokens(options)
        trained = [p for p in experts.parameters() if p.requires_grad]
        return (lambda x, *parameters: experts(x)), [x, *trained]
    return build


def two_softmax_routed_layers():
    """(first, second, x): two RoutedExperts(6, QWEN3_MOE) of different weights, and tokens x
    (2, 3, 6) that both route far from any tie (tests/test_routed_experts.py checks it)."""
    first, x = routed_experts_and_tokens(QWEN3_MOE)
    ta.manual_seed(1)
    return first, nn.RoutedExperts(6, **QWEN3_MOE), x


def balanced_pair():
    """Qwen3-MoE's load-balancing loss over two softmax-routed layers that see the same tokens,
    as a function of the tokens and both routers' weights: the loss reaches the routers through
    the mean probabilities alone."""
    def build():
        first, second, x = two_softmax_routed_layers()

        def loss(x, *routers):
            first(x)
            second(x)
            return load_balancing_loss([first, second])
        return loss, [x, first.router.weight, second.router.weight]
    return build


def routing_margin(experts, x, eps=1e-6):
    """(margin, largest step): the smallest gap between two biased scores of a token and
    between two of its groups' scores, and the most a finite-difference step of size eps on one
    element of x or of the router's weight moves a router logit (the scores move less: a
    softmax's and a sigmoid's slopes are at most 1)."""
    with ta.no_grad():
        logits = experts.router(x.reshape(-1, x.shape[-1])).data        # (N, n)
    scores = F.softmax(ta.tensor(logits), axis=-1).data if experts.scoring == "softmax" \
        else 1.0 / (1.0 + np.exp(-logits))
    biased = scores + (0.0 if experts.choice_bias is None else experts.choice_bias.data)
    N, n = biased.shape
    grouped = np.sort(biased.reshape(N, experts.num_groups, -1), axis=-1)
    group_scores = grouped[..., -2:].sum(axis=-1)                      # (N, G)
    gaps = [np.diff(np.sort(values, axis=-1), axis=-1).min()
            for values in (biased, group_scores) if values.shape[-1] > 1]
    step = eps * max(np.abs(x.data).max(), np.abs(experts.router.weight.data).max())
    return float(min(gaps)), float(step)


def mixture_decoder(switches, cached=False, model_class=nn.Qwen3Moe):
    """As chapter5.py's `family_model` (5 fixed tokens; `cached`: the last two after the first
    three went into a cache), a model of `model_class` with its routers' choice biases drawn."""
    def build():
        ta.manual_seed(0)
        settings = nn.DecoderSettings(**{**TINY, **switches})
        model = with_random_bias(off_their_start(model_class(settings)))
        ids = np.array([[1, 4, 4, 2, 0], [6, 5, 1, 1, 3]])

        def logits(*parameters):
            if not cached:
                return model(ids)
            cache = model.empty_cache()
            model(ids[:, :3], cache=cache)
            return model(ids[:, 3:], cache=cache)
        return logits, model.trainable_parameters()
    return build


MIXTURE_SWITCHES = {
    "Qwen3-MoE's switches": dict(
        qk_norm=True, tied_head=True, sliding_window=3, layer_types=("sliding", "sliding"),
        experts=nn.ExpertSettings(num_experts=4, top_k=2, hidden_dim=5, dense_layers=(1,))),
    "DeepSeek-V3's switches": dict(
        num_kv_heads=4, head_dim=7, qkv_bias=True, out_bias=True,
        latent=nn.LatentSettings(kv_lora_rank=5, qk_rope_head_dim=4, qk_nope_head_dim=3,
                                 v_head_dim=3, q_lora_rank=6, rope_interleave=True),
        experts=nn.ExpertSettings(**{**DEEPSEEK_V3, "hidden_dim": 4}, dense_layers=(0,))),
}

# each family's page (nn/qwen3_moe.py, nn/deepseek_v3.py): (class, settings)
MIXTURE_FAMILIES = {
    "Qwen3-MoE": (nn.Qwen3Moe, dict(MIXTURE_SWITCHES["Qwen3-MoE's switches"],
                                    model_type="qwen3_moe")),
    "DeepSeek-V3": (nn.DeepseekV3, dict(MIXTURE_SWITCHES["DeepSeek-V3's switches"],
                                        model_type="deepseek_v3")),
}

OP_CASES = [
    OpCase("sigmoid", F.sigmoid, np_sigmoid, ((3, 4),)),
    OpCase("sigmoid, large inputs", lambda x: F.sigmoid(8.0 * x), lambda x: np_sigmoid(8.0 * x),
           ((2, 5),)),
]

LAYER_CASES = [
    LayerCase("LatentAttention, expanded (q_lora_rank, biases, interleaved rotary)",
              latent_attention(q_lora_rank=5, bias=True, rope_interleave=True)),
    LayerCase("LatentAttention, absorbed on a cache (no q_lora_rank)",
              latent_attention(cached=True)),
    LayerCase("RoutedExperts, Qwen3-MoE's softmax router", routed_experts(QWEN3_MOE)),
    LayerCase("RoutedExperts, DeepSeek-V3's router (sigmoid, bias, groups, shared)",
              routed_experts(DEEPSEEK_V3)),
    LayerCase("load_balancing_loss, two Qwen3-MoE layers", balanced_pair()),
    *[LayerCase(f"{name} (random directions)", mixture_decoder(switches, model_class=page),
                directions=4) for name, (page, switches) in MIXTURE_FAMILIES.items()],
    LayerCase("DeepSeek-V3, cached step (random directions)",
              mixture_decoder(MIXTURE_FAMILIES["DeepSeek-V3"][1], cached=True,
                              model_class=nn.DeepseekV3), directions=4),
]

FUSED_CASES = [
    FusedCase("sigmoid = composed", F.sigmoid, composed_sigmoid, ((3, 4),)),
    FusedCase("sigmoid = composed, large inputs", lambda x: F.sigmoid(6.0 * x),
              lambda x: composed_sigmoid(6.0 * x), ((2, 5),)),
]
