"""Chapter 5 of the exercises, in the README's reading order: the pieces that today's open models
changed since GPT-2. RMSNorm's forward and backward, SiLU's, grouped-query attention's groups,
the gated feed-forward, and Llama 3's split pattern. Read chapter1.py first: the entries are
written the same way.
"""
import random

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn import split_patterns
from tinyattn_tools.checklist.chapter5 import GQA
from tinyattn_tools.exercises.checks import (float32, forward_rows, gradient_rows, leaves, raises,
                                             same)
from tinyattn_tools.exercises.exercise import Exercise, WrongVersion as Wrong


def named_gradients(out, upstream_seed=1, **inputs):
    """{"output": out, "dL/d<name>": the gradient of each input} after one backward of a random
    upstream gradient."""
    out.backward(np.random.default_rng(upstream_seed).standard_normal(out.shape))
    return {"output": out, **{f"dL/d{name}": x.grad for name, x in inputs.items()}}


# ------------------------------------------------------------------------------------------------
# RMSNorm

def rows_of_small_numbers():
    """Rows whose mean square (about 1e-6) is as large as eps: there the backward's r must be
    the forward's, eps inside the root."""
    random_numbers = np.random.default_rng(3)
    x = ta.tensor(1e-3 * random_numbers.standard_normal((3, 6)), requires_grad=True)
    weight = ta.tensor(random_numbers.uniform(0.5, 1.5, 6), requires_grad=True)
    return named_gradients(F.rms_norm(x, weight, eps=1e-6), x=x, weight=weight)


RMS_NORM = Exercise(
    "rms_norm", 5, "RMSNorm as one fused op: its forward, and its backward derived",
    "tinyattn.ops.rms_norm", ("RMSNorm.forward", "RMSNorm.backward"),
    read_first="the docstring of RMSNorm in tinyattn/ops/rms_norm.py, its derivation line by "
               "line; LayerNorm's in tinyattn/ops/layer_norm.py, for the term RMSNorm does not "
               "have; nn.RMSNorm in tinyattn/nn/open_layers.py, which passes Gemma's 1 + w",
    checks=(
        forward_rows("rms_norm", "rms_norm, no weight", "rms_norm, eps 0.5, rows of one"),
        gradient_rows("rms_norm", "rms_norm, no weight", "rms_norm, eps 0.5, rows of one",
                      "RMSNorm", "RMSNorm, Gemma's 1 + weight",
                      "GroupedQueryAttention (QK-norm, Qwen2's biases)").named(
            "gradients vs tinyattn's: the op, nn.RMSNorm (Gemma's 1 + w too), QK-norm in "
            "attention (6 rows of the checklist)"),
        gradient_rows("rms_norm = composed", "rms_norm = composed, no weight").named(
            "output and gradients vs the same formula in primitive ops: 2 rows"),
        same("rows whose mean square is as small as eps: eps inside the root, in backward too",
             rows_of_small_numbers),
        float32(F.rms_norm, (2, 3, 5), (5,)),
    ),
    hints=(
        "Re-read RMSNorm's docstring: out = xhat * weight with xhat = x r, r = 1 / sqrt(mean(x^2) "
        "+ eps), one r per row (the last axis); backward gives dL/dx and dL/dweight.",
        "forward: r with keepdims=True, so that it is (..., 1) and divides every element of its "
        "row; save what backward needs (xhat, r and the weight), not x: xhat and r are both used "
        "there.",
        "backward: g = grad * weight is dL/dxhat; dL/dx = r (g - xhat mean(g xhat)), the mean "
        "over the last axis with keepdims. dL/dweight is grad * xhat, of x's shape: the sweep "
        "sums it over the rows. Without a weight (`weight` is 1.0, needs_grad(1) False), return "
        "None for it.",
        "Compare with LayerNorm's backward: no - mean(g) term, since nothing is centred. And "
        "r depends on every x of its row, so it is no constant: the xhat mean(g xhat) term is "
        "its part.",
    ),
    wrong_versions=(
        Wrong("the mean's term forgotten: r treated as a constant",
              (("grad_x = r * (g - xhat * mean_g_xhat)", "grad_x = r * g"),)),
        Wrong("LayerNorm's rule: a - mean(g) term, for a centring RMSNorm does not do",
              (("grad_x = r * (g - xhat * mean_g_xhat)",
                "grad_x = r * (g - g.mean(axis=-1, keepdims=True) - xhat * mean_g_xhat)"),)),
        Wrong("eps left out of the rms that backward uses",
              (("self.saved = (xhat, r, weight)",
                "self.saved = (xhat, 1.0 / np.sqrt((x * x).mean(axis=-1, keepdims=True)), "
                "weight)"),)),
        Wrong("the weight's gradient summed over the features, not (by the sweep) over the rows",
              (("grad * xhat if self.needs_grad(1)",
                "(grad * xhat).sum(axis=-1, keepdims=True) if self.needs_grad(1)"),)),
        Wrong("Gemma's 1 + w forgotten in dL/dx: g = grad * w, where the norm scaled by 1 + w "
              "(the op is given 1 + w, so w is weight - 1 here)",
              (("g = grad * weight  ", "g = grad * (weight - 1.0)  "),)),
        Wrong("the weight left out of dL/dx: g = grad",
              (("g = grad * weight  ", "g = grad  "),)),
        Wrong("a float64 upcast: the mean taken in float64",
              (("(g * xhat).mean(axis=-1, keepdims=True)",
                "(g * xhat).mean(axis=-1, keepdims=True, dtype=np.float64)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# SiLU

EXTREMES = (-800.0, -100.0, -40.0, -1.0, 0.0, 2.5, 40.0, 800.0)


def far_from_zero():
    """SiLU and its derivative where the sigmoid overflows or rounds, each x a case of its own
    (held to its own size): x * sigmoid(x) is tiny, not 0, for x = -40 (float64) and -100
    (float32), and nothing overflows into a NaN."""
    found = {}
    for dtype in (np.float64, np.float32):
        for x in EXTREMES:
            leaf = ta.tensor(np.array([x], dtype), requires_grad=True)
            out = F.silu(leaf)
            out.backward(np.ones(1, dtype))
            found[f"{np.dtype(dtype)}, x = {x:g}: silu(x)"] = out
            found[f"{np.dtype(dtype)}, x = {x:g}: its derivative"] = leaf.grad
    return found


SILU = Exercise(
    "silu", 5, "SiLU (swish), the activation of the SwiGLU gate: forward and backward",
    "tinyattn.ops.silu", ("Silu.forward", "Silu.backward"),
    read_first="the docstring of Silu in tinyattn/ops/silu.py (its derivative, and how the "
               "sigmoid is computed without overflow); Tanh in tinyattn/ops/elementwise.py, "
               "another op that saves what its backward reads",
    checks=(
        forward_rows("silu", "silu, large inputs"),
        gradient_rows("silu", "silu, large inputs", "GatedFeedForward, SwiGLU").named(
            "gradients vs tinyattn's: silu, and the SwiGLU feed-forward (3 rows of the "
            "checklist)"),
        gradient_rows("silu = composed", "silu = composed, large inputs").named(
            "output and gradients vs x * 1 / (1 + exp(-x)) in primitive ops: 2 rows"),
        same("far from 0 (x = -800 ... 800, float64 and float32): no overflow, no NaN, and the "
             "tiny values of a very negative x kept", far_from_zero, 1e-6),
        float32(F.silu, (3, 4)),
    ),
    equivalent_mutants=(
        ("Silu.forward: s = np.where(x >= 0, 1.0, e) / (1.0 + e)                         "
         "# sigmoid(x) :: x >= 0 -> x > 0",
         "at x = 0 both branches give 1 / (1 + e) with e = exp(0) = 1, so where 0 goes does not "
         "matter"),
    ),
    hints=(
        "Re-read Silu's docstring: out = x s with s = sigmoid(x), and dout/dx = s + x s (1 - s), "
        "the product rule with d sigmoid / dx = s (1 - s).",
        "forward: take e = exp(-|x|), which never overflows, and s = 1 / (1 + e) where x >= 0, "
        "e / (1 + e) where x < 0 (np.where). Save x and s for backward.",
        "backward: dL/dx = grad * s (1 + x (1 - s)); return it as a tuple of one.",
    ),
    wrong_versions=(
        Wrong("SiLU's derivative as the sigmoid alone",
              (("grad * (s * (1.0 + x * (1.0 - s)))", "grad * s"),)),
        Wrong("the sigmoid's derivative s (1 - s) alone",
              (("grad * (s * (1.0 + x * (1.0 - s)))", "grad * (s * (1.0 - s))"),)),
        Wrong("s + s (1 - s): the x of x s (1 - s) dropped",
              (("grad * (s * (1.0 + x * (1.0 - s)))", "grad * (s * (1.0 + (1.0 - s)))"),)),
        Wrong("the sigmoid as 0.5 (1 + tanh(x / 2)), which rounds a very negative x's to 0",
              (("s = np.where(x >= 0, 1.0, e) / (1.0 + e)", "s = 0.5 * (1.0 + np.tanh(0.5 * x))"),
               )),
        Wrong("the output as the sigmoid, not x times it", (("return x * s", "return s"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# Grouped-query attention

def masks_and_groups():
    """Outputs and gradients (the shared key/value heads' sums among them) for masks of every
    kind: one for every head (L, S), one per head (B, H, L, S), (H, 1, S) and (1, H, L, S), a
    float mask; groups of 3 with B, K and G all different; K = H (multi-head attention) and K = 1
    (multi-query)."""
    random_numbers = np.random.default_rng(4)
    per_head = random_numbers.random((2, 4, 5, 5)) < 0.6
    per_head[..., 0] = True                                        # every query sees a key
    some_heads = random_numbers.random((4, 1, 5)) < 0.8
    some_heads[..., 0] = True
    six_heads = random_numbers.random((1, 6, 4, 4)) < 0.6
    six_heads[..., 0] = True
    cases = {
        "per-head mask (B, H, L, S)": (GQA, dict(attn_mask=per_head)),
        "per-head mask (H, 1, S), causal": (GQA, dict(attn_mask=some_heads,
                                                               is_causal=True)),
        "float mask (L, S), scale 0.5": (GQA, dict(
            attn_mask=random_numbers.standard_normal((5, 5)), scale=0.5)),
        "B = 3, H = 6 on K = 2, per-head mask (1, H, L, S)": (
            ((3, 6, 4, 5), (3, 2, 4, 5), (3, 2, 4, 3)), dict(attn_mask=six_heads)),
        "K = H, causal": (((2, 3, 4, 6), (2, 3, 4, 6), (2, 3, 4, 2)), dict(is_causal=True)),
        "K = 1, L != S": (((1, 6, 3, 4), (1, 1, 5, 4), (1, 1, 5, 3)), dict()),
    }
    found = {}
    for name, (shapes, options) in cases.items():
        query, key, value = leaves(*shapes, seed=5)
        numbers = named_gradients(F.grouped_query_attention(query, key, value, **options),
                                        query=query, key=key, value=value)
        found.update({f"{name}: {what}": array for what, array in numbers.items()})
    return found


def causal_grouped_query(query, key, value):
    return F.grouped_query_attention(query, key, value, is_causal=True)


GROUPED_QUERY = Exercise(
    "grouped_query", 5, "grouped-query attention: a group of query heads on one key/value head",
    "tinyattn.functional.grouped_query", ("grouped_weights", "grouped_values"),
    read_first="the top of tinyattn/functional/grouped_query.py (why, how the group's queries "
               "are stacked, and why the shared head's gradient is the sum over its group), "
               "attention_weights in tinyattn/functional/scaled_dot_product.py, and "
               "grouped_query_attention (given in this file), which calls both",
    given=("grouped_query_attention",),
    checks=(
        gradient_rows("F.grouped_query_attention, causal",
                      "F.grouped_query_attention, multi-query, mask, scale 0.3"),
        gradient_rows("grouped_query_attention = SDPA on repeated heads, causal",
                      "grouped_query_attention = SDPA on repeated heads, MQA, mask").named(
            "output and gradients vs SDPA on key/value heads repeated by indexing "
            "(transformers' repeat_kv): 2 rows of the checklist"),
        same("outputs and gradients, each shared head's summed over its group: masks per head "
             "and for all heads, a float mask, K = H and K = 1", masks_and_groups),
        gradient_rows("GroupedQueryAttention (QK-norm, Qwen2's biases)",
                      "GroupedQueryAttention, window 2, Gemma's norms and scale",
                      "GroupedQueryAttention, cached sliding step (random directions)").named(
            "gradients vs tinyattn's: the layer nn.GroupedQueryAttention, a cached sliding "
            "step too (3 rows of the checklist)"),
        float32(causal_grouped_query, *GQA),
    ),
    equivalent_mutants=(
        ("grouped_weights: if attn_mask.ndim <= 2:                          # one mask for every "
         "head :: attn_mask.ndim <= 2 -> attn_mask.ndim < 2",
         "a 2-d mask then takes the other branch, broadcast to (B, H, L, S) and reshaped, which "
         "stacks it the same way (the tiled one is only smaller)"),
    ),
    hints=(
        "Re-read the top of grouped_query.py: query head h reads key/value head h // G, G = H / "
        "K, so the G heads of a group are neighbours: heads j G ... j G + G - 1 share key/value "
        "head j.",
        "Stack a group's queries as rows: query.reshape(B, K, G L, E) puts row g L + i = query i "
        "of the group's head g. One attention_weights of those rows on the group's keys (B, K, "
        "S, E) scores them all, and no key is copied; reshape the weights back to (B, H, L, S).",
        "A mask must be stacked the same way: one (L, S) for every head is tiled G times down "
        "the rows (np.tile), a per-head one broadcast to (B, H, L, S) and reshaped as the "
        "queries were.",
        "grouped_values is the same stacking on the weights, (B, K, G L, S) @ value (B, K, S, "
        "Ev), reshaped back to (B, H, L, Ev). The gradient of the shared head needs nothing more: "
        "the matmul's backward over the stacked rows sums the group's.",
    ),
    wrong_versions=(
        Wrong("groups formed by interleaving: head h on key/value head h % K, not h // (H / K)",
              (("stacked = query.reshape(B, K, G * L, E)",
                "stacked = query.reshape(B, G, K, L, E).transpose(0, 2, 1, 3, 4).reshape("
                "B, K, G * L, E)"),
               ("return weights.reshape(B, H, L, S)",
                "return weights.reshape(B, K, G, L, S).transpose(0, 2, 1, 3, 4).reshape("
                "B, H, L, S)"),
               ("stacked = weights.reshape(B, K, (H // K) * L, S)",
                "stacked = weights.reshape(B, H // K, K, L, S).transpose(0, 2, 1, 3, 4).reshape("
                "B, K, (H // K) * L, S)"),
               ("return (stacked @ value).reshape(B, H, L, Ev)",
                "return (stacked @ value).reshape(B, K, H // K, L, Ev).transpose(0, 2, 1, 3, "
                "4).reshape(B, H, L, Ev)"))),
        Wrong("the key/value heads copied with NumPy (their .data, as np.repeat(key.data, G, "
              "axis=1) copies them): outside the graph, so no gradient is summed back to them",
              (("weights = attention_weights(stacked, key, attn_mask, scale=scale)",
                "weights = attention_weights(stacked, type(key)(key.data), attn_mask, "
                "scale=scale)"),
               ("return (stacked @ value).reshape(B, H, L, Ev)",
                "return (stacked @ type(value)(value.data)).reshape(B, H, L, Ev)"))),
        Wrong("only the first head of a group sends its key/value head a gradient (the others' "
              "copies detached)",
              (("import numpy as np\n", "import numpy as np\nimport tinyattn as ta\n"),
               ("weights = attention_weights(stacked, key, attn_mask, scale=scale)",
                "first = np.arange(G * L)[:, None] < L                     # (G L, 1)\n"
                "    weights = ta.where(first, attention_weights(stacked, key, attn_mask, "
                "scale=scale),\n"
                "                       attention_weights(stacked, key.detach(), attn_mask, "
                "scale=scale))"
                ),)),
        Wrong("the shared head's gradient averaged over its group, not summed",
              (("weights = attention_weights(stacked, key, attn_mask, scale=scale)",
                "shared = key * (1.0 / G) + key.detach() * (1.0 - 1.0 / G)\n"
                "    weights = attention_weights(stacked, shared, attn_mask, scale=scale)"),
               ("return (stacked @ value).reshape(B, H, L, Ev)",
                "G = H // K\n"
                "    shared = value * (1.0 / G) + value.detach() * (1.0 - 1.0 / G)\n"
                "    return (stacked @ shared).reshape(B, H, L, Ev)"))),
        Wrong("a mask for every head repeated row by row (np.repeat), where the stacked rows "
              "need it tiled",
              (("attn_mask = np.tile(np.broadcast_to(attn_mask, (L, S)), (G, 1))",
                "attn_mask = np.repeat(np.broadcast_to(attn_mask, (L, S)), G, axis=0)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# The gated feed-forward

def gated_layer(x):
    """A GatedFeedForward(4, 6) in x's dtype, drawn after ta.manual_seed(0), applied to x."""
    ta.manual_seed(0)
    return nn.GatedFeedForward(4, 6, dtype=x.dtype)(x)


def a_wrong_width():
    nn.GatedFeedForward(4, 6)(ta.tensor(np.ones((2, 3, 5))))


def the_layers_parameters():
    """What a checkpoint reads: the parameters' names, shapes and numbers (drawn from tinyattn's
    generator in the order gate, up, down), with and without biases, and the layer as printed."""
    ta.manual_seed(0)
    layer = nn.GatedFeedForward(4, 6)
    biased = nn.GatedFeedForward(3, 5, "gelu_tanh", bias=True)
    return {"GatedFeedForward(4, 6).state_dict()": layer.state_dict(),
            "GatedFeedForward(3, 5, 'gelu_tanh', bias=True): names and shapes": [
                f"{name} {parameter.shape}" for name, parameter in biased.named_parameters()],
            "the two, printed": [repr(layer), repr(biased)]}


GATED_FEED_FORWARD = Exercise(
    "gated_feed_forward", 5, "the gated feed-forward of Llama, Qwen and Gemma (SwiGLU, GeGLU)",
    "tinyattn.nn.open_layers", ("GatedFeedForward.__init__", "GatedFeedForward.forward"),
    read_first="the docstring of GatedFeedForward in tinyattn/nn/open_layers.py and ACTIVATIONS "
               "above it; chapter 1's FeedForward in tinyattn/nn/layers.py, the block it "
               "replaces; section 2 of Shazeer 2020, \"GLU Variants Improve Transformer\"",
    given=("ACTIVATIONS",),
    checks=(
        gradient_rows("GatedFeedForward, SwiGLU", "GatedFeedForward, GeGLU, biases",
                      "OpenDecoder, Llama 3's switches (random directions)",
                      "OpenDecoder, Gemma 3's switches (random directions)").named(
            "gradients vs tinyattn's: the layer (SwiGLU, GeGLU with biases), and decoders of "
            "Llama 3 and Gemma 3 built on it (4 rows of the checklist)"),
        same("the parameters a checkpoint reads: gate, up (E -> hidden) and down (hidden -> E), "
             "their names, shapes and numbers (drawn in that order), biases when asked",
             the_layers_parameters, 0.0),
        raises("an input whose last axis is not embed_dim is refused by the layer's door",
               a_wrong_width, ValueError, "GatedFeedForward: x must have shape (..., 4)"),
        float32(gated_layer, (2, 3, 4)),
    ),
    hints=(
        "Re-read GatedFeedForward's docstring: down(act(gate(x)) * up(x)), where gate and up are "
        "Linear(E, hidden) and down is Linear(hidden, E).",
        "__init__: keep embed_dim and the activation's name (extra_repr prints it), then make "
        "gate, up and down in that order (the generator draws them so), each with the bias and "
        "dtype asked for.",
        "forward: the activation, looked up in ACTIVATIONS by its name, goes on the gate's "
        "projection only; up's projection multiplies it element by element, and down brings the "
        "product back to E.",
    ),
    wrong_versions=(
        Wrong("the gate and up swapped: the activation on up(x)",
              (("ACTIVATIONS[self.activation](self.gate(x)) * self.up(x)",
                "self.gate(x) * ACTIVATIONS[self.activation](self.up(x))"),)),
        Wrong("the product replaced by a sum",
              (("ACTIVATIONS[self.activation](self.gate(x)) * self.up(x)",
                "ACTIVATIONS[self.activation](self.gate(x)) + self.up(x)"),)),
        Wrong("the activation on the product: act(gate(x) * up(x))",
              (("ACTIVATIONS[self.activation](self.gate(x)) * self.up(x)",
                "ACTIVATIONS[self.activation](self.gate(x) * self.up(x))"),)),
        Wrong("chapter 1's feed-forward: no gate, down(act(up(x)))",
              (("ACTIVATIONS[self.activation](self.gate(x)) * self.up(x)",
                "ACTIVATIONS[self.activation](self.up(x))"),)),
        Wrong("SiLU whatever the activation asked for: Gemma's GeGLU made SwiGLU",
              (("ACTIVATIONS[self.activation](self.gate(x))", 'ACTIVATIONS["silu"](self.gate(x))'),
               )),
        Wrong("up drawn before the gate: the same shapes, other numbers for a seed",
              (("        self.gate = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)\n"
                "        self.up = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)\n",
                "        self.up = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)\n"
                "        self.gate = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)\n"),)),
        Wrong("the Linears made without the dtype: float64 weights in a float32 layer",
              (("self.gate = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)",
                "self.gate = Linear(embed_dim, hidden_dim, bias=bias)"),
               ("self.up = Linear(embed_dim, hidden_dim, bias=bias, dtype=dtype)",
                "self.up = Linear(embed_dim, hidden_dim, bias=bias)"),
               ("self.down = Linear(hidden_dim, embed_dim, bias=bias, dtype=dtype)",
                "self.down = Linear(hidden_dim, embed_dim, bias=bias)"))),
    ),
)


# ------------------------------------------------------------------------------------------------
# Llama 3's split pattern

CORPUS = [       # prose, code, numbers, scripts, emoji, whitespace of every kind
    "I'm sure he's here, they've gone, we'll see, you'd know, it's 'tis",
    "SHE'S HERE, I'M, WE'LL, 'S 'T 'Re", "I'M HERE, YOU'RE, WE'LL, SHE'D, THEY'VE, IT'S, DON'T",
    "i'M yOu'Re wE'lL tHeY'vE", "'S'T'RE'VE'M'LL'D", "'ſ 'K 'İ", "x's y'S ''s '",
    "rock'n'roll o'clock", "'s's's ''s", "  'll",
    "a  b   c    d", "trailing spaces   ", "   leading", " ", "  ", "\n", "\n\n\n", "x\n \n y",
    "\ttabs\t\tand  \t mixed \n\t", "\r\n windows\r\n", "\x0b\x0c\x1c\x1d\x1e\x1f x",
    "\u3000ideographic\u00a0no-break\u2028line\u2029para\u0085next\u200bzero-width",
    *["".join(str(n % 10) for n in range(1, length + 1)) for length in range(1, 11)],
    "0 12 345 6789 1,000,000.50 3.14159 -42 1e10", " 1 22 333 4444 55555 666666",
    "a1b22c333d4444", "0x1F 0b1010 0o777 1_000_000", "² ½ ¼ ⅷ Ⅻ ٣٤٥ ۱۲ १२३ 𝟙𝟚",
    "٠١٢٣٤٥٦٧٨٩ ۰۱۲ ०१२३ ໑໒໓ 𝟎𝟏𝟐𝟑𝟒 ²³¹ ½¾ ⅠⅡⅢ",
    "def f(x):\r\n\tif x.y:\n\t\treturn {'a': [1, 2]}\n\n\n    # done\n",
    "}\n\n    x", "\r\n\r\n  ", "a.b", "x = 2024!;\n", "!!!??? ... --- ***", "Ω≈ç√∫˜µ≤≥÷",
    "😀 👍🏽 👩‍👩‍👧‍👦 🏳️‍🌈 🇫🇷 ❤️", "e\u0301 n\u0303 a\u030a\u0323 \u0301alone",
    "中文字符测试 日本語のテキスト 한국어 텍스트", "العربية עברית हिन्दी ไทย ελληνικά кириллица",
    "a\x00b\x00\x00 \x00", "\x7f\x80\x9f", "text<|endoftext|>more <|end", "Ġ Ċ ĠĠ",
    "In 1969, 600 million people watched; by 2024 the tapes (12,345 of them) were lost.",
]


def random_texts(count=200, seed=0):
    """Texts of 0 to 30 characters drawn from every plane (surrogates aside), mixed with the
    characters the pattern treats specially: spaces, line breaks, apostrophes, digits."""
    generator = random.Random(seed)
    special = " \n\r\t'sSdD0 9.٣"

    def character():
        if generator.random() < 0.5:
            return generator.choice(special)
        code = generator.choice([generator.randrange(0x80), generator.randrange(0x80, 0x3000),
                                 generator.randrange(0x3000, 0xd800),
                                 generator.randrange(0xe000, 0x110000)])
        return chr(code)
    return ["".join(character() for _ in range(generator.randrange(31))) for _ in range(count)]


def compiled_anew():
    """llama3_pre_tokenizer(), its cache cleared first: so that each check runs the function."""
    getattr(split_patterns.llama3_pre_tokenizer, "cache_clear", lambda: None)()
    return split_patterns.llama3_pre_tokenizer()


def words_of(texts):
    """{text: Llama 3's words of it}."""
    pattern = compiled_anew()
    return {ascii(text): pattern.findall(text) for text in texts}


WHERE_THEY_DIFFER = [     # from GPT-2's pattern, from Qwen's, and from the near misses
    "1234567", "x 2024!", "12 345 6789", "DON'T", "O'REILLY", "YOU'LLAMA", "'ſx", "a.b", "\tif",
    ";\n",
    "}\n\n    x", "\r\n\r\n  ", "Ⅻ٣٤٥६७८९", "𝟙𝟚𝟛𝟜", "²³⁴⁵", "٣٤٥٦",
]


def words_where_they_differ():
    return words_of(WHERE_THEY_DIFFER)


def words_of_the_corpus():
    return words_of(CORPUS + random_texts())


def texts_not_covered():
    """The texts whose words, joined, are not the text: each character must be in a word."""
    pattern = compiled_anew()
    return {"texts whose words do not join back into them": [
        ascii(text) for text in CORPUS + random_texts(seed=1)
        if "".join(pattern.findall(text)) != text]}


LLAMA3_SPLIT = Exercise(
    "llama3_split", 5, "Llama 3's split pattern, written for Python's re",
    "tinyattn.split_patterns", ("llama3_pre_tokenizer",),
    read_first="the top of tinyattn/split_patterns.py (what changed since GPT-2's pattern, "
               "shown on one text), LLAMA3 as tokenizer.json writes it (given in this file), "
               "and chapter 3's pre_tokenizer in tinyattn/tokenizer.py (GPT-2's pattern for re, "
               "its classes spelled out by unicode_ranges)",
    given=("LLAMA3",),
    checks=(
        same("words where the patterns differ (GPT-2's, Qwen's, near misses): digits in threes, "
             "contractions in either case, a symbol before a word, line breaks",
             words_where_they_differ, 0),
        same("Llama 3's words vs tinyattn's on a corpus: prose, code, numbers in many scripts, "
             "emoji, whitespace of every kind, 200 random texts from every plane",
             words_of_the_corpus, 0),
        same("every character in a word: the words joined are the text", texts_not_covered, 0),
    ),
    hints=(
        "Re-read LLAMA3, the pattern as tokenizer.json writes it, and the top of "
        "split_patterns.py: your function returns it compiled with Python's re, which has no "
        "\\p{L} or \\p{N}.",
        "Spell the classes out as chapter 3 does: L = unicode_ranges(\"L\"), N = "
        "unicode_ranges(\"N\"), S = WHITESPACE, and write each alternative of LLAMA3 with them: "
        "\\p{L} becomes [{L}], [^\\s\\p{L}\\p{N}] becomes [^{S}{L}{N}], \\s becomes [{S}].",
        "In an rf-string a regex's braces are doubled: {{1,3}}, or Python reads {1,3} as the "
        "tuple (1, 3). (?i:...) makes the contractions case-insensitive in re as in regex; "
        "(?!\\S) is (?![^{S}]) once \\s is spelled out.",
    ),
    wrong_versions=(
        Wrong("a run of digits kept whole", (('rf"|[{N}]{{1,3}}"', 'rf"|[{N}]+"'),)),
        Wrong("one digit at a time (Qwen's)", (('rf"|[{N}]{{1,3}}"', 'rf"|[{N}]"'),)),
        Wrong("digits in twos", (('rf"|[{N}]{{1,3}}"', 'rf"|[{N}]{{1,2}}"'),)),
        Wrong("digits in threes only", (('rf"|[{N}]{{1,3}}"', 'rf"|[{N}]{{3}}"'),)),
        Wrong("the space before a number kept with it, as GPT-2 keeps it",
              (('rf"|[{N}]{{1,3}}"', 'rf"| ?[{N}]{{1,3}}"'),)),
        Wrong("a lazy {1,3}?: one digit at a time",
              (('rf"|[{N}]{{1,3}}"', 'rf"|[{N}]{{1,3}}?"'),)),
        Wrong("ASCII digits only: [0-9] for \\p{N}",
              (('rf"|[{N}]{{1,3}}"', 'rf"|[0-9]{{1,3}}"'),)),
        Wrong("groups of three from the right, wrongly: no digit may follow a group",
              (('rf"|[{N}]{{1,3}}"', 'rf"|[{N}]{{1,3}}(?![{N}])"'),)),
        Wrong("the braces not doubled: {1,3} in an rf-string is the tuple (1, 3)",
              (('rf"|[{N}]{{1,3}}"', 'rf"|[{N}]{1,3}"'),)),
        Wrong("contractions made case-sensitive, as GPT-2's", (('rf"(?i:\'s|', 'rf"(?:\'s|'),)),
    ),
)


EXERCISES = (RMS_NORM, SILU, GROUPED_QUERY, GATED_FEED_FORWARD, LLAMA3_SPLIT)
