"""Chapter 5 of the exercises, in the README's reading order: the pieces that today's open models
changed since GPT-2. RMSNorm's forward and backward, SiLU's, grouped-query attention's groups,
the gated feed-forward, and Llama 3's split pattern; then part 3's caches: latent attention's
absorbed scores on the cached latents, and StreamingLLM's sink-keeping cache. Read chapter1.py
first: the entries are written the same way.
"""
import random

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn import engine, split_patterns
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
                      "Qwen3Attention (QK-norm, q, k, v and out biases)").named(
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
    kind: one for every head (L, S), and (1, S) and (S,) that only broadcast to it (a key-padding
    mask), one per head (B, H, L, S), (H, 1, S) and (1, H, L, S), one per sequence (B, 1, L, S),
    a float mask; groups of 3 with B, K and G all different; K = H (multi-head attention) and
    K = 1 (multi-query)."""
    random_numbers = np.random.default_rng(4)
    per_head = random_numbers.random((2, 4, 5, 5)) < 0.6
    per_head[..., 0] = True                                        # every query sees a key
    some_heads = random_numbers.random((4, 1, 5)) < 0.8
    some_heads[..., 0] = True
    six_heads = random_numbers.random((1, 6, 4, 4)) < 0.6
    six_heads[..., 0] = True
    padding = np.array([[True, True, True, False, True]])          # (1, S): key 3 is padding
    per_sequence = random_numbers.random((2, 1, 5, 5)) < 0.6
    per_sequence[..., 0] = True
    cases = {
        "key-padding mask (1, S) for every head": (GQA, dict(attn_mask=padding)),
        "mask (S,) for every head, causal": (GQA, dict(attn_mask=padding[0], is_causal=True)),
        "per-sequence mask (B, 1, L, S)": (GQA, dict(attn_mask=per_sequence)),
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
        same("outputs and gradients, each shared head's summed over its group: masks per head, "
             "per sequence and for all heads ((L, S), (1, S), (S,)), a float mask, K = H and "
             "K = 1", masks_and_groups),
        gradient_rows("Qwen3Attention (QK-norm, q, k, v and out biases)",
                      "Gemma3Attention, window 2 (Gemma's norms, scale and local base)",
                      "Qwen3Attention, cached sliding step (random directions)").named(
            "gradients vs tinyattn's: the attention of Qwen3's and Gemma 3's pages, a cached "
            "sliding step too (3 rows of the checklist)"),
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
        Wrong("a mask for every head tiled as it came, not broadcast to (L, S) first: a (1, S) "
              "key-padding mask tiles to (G, S), not (G L, S)",
              (("attn_mask = np.tile(np.broadcast_to(attn_mask, (L, S)), (G, 1))",
                "attn_mask = np.tile(attn_mask, (G, 1))"),)),
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
                      "Llama (random directions)", "Gemma 3 (random directions)").named(
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
    "a\u0345b",     # U+0345 is a mark, not \p{L}, but its capital (Greek iota) is a letter:
]                   # [{L}] takes it where the whole pattern ignores case


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
             "contractions in either case, a symbol before a word, line breaks, a mark whose "
             "capital is a letter",
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
        Wrong("the whole pattern compiled with re.IGNORECASE, where only the contractions' group "
              "ignores case", (('rf"|[{S}]+")', 'rf"|[{S}]+", re.IGNORECASE)'),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# Latent attention's absorbed scores

# sizes all different, so that a shape says which axes it has: width, heads, r, d_R, d_C, d_v
LATENT_SIZES = dict(embed_dim=10, num_heads=3, kv_lora_rank=8, qk_rope_head_dim=4,
                    qk_nope_head_dim=5, v_head_dim=6)
LATENT_LAYOUTS = {                  # the queries' two ways, DeepSeek's interleaved rotary, biases
    "q_proj": dict(),
    "q_lora_rank 7, interleaved rotary": dict(q_lora_rank=7, rope_interleave=True),
    "q_lora_rank 7, biases": dict(q_lora_rank=7, bias=True),
}


def latent_layer(dtype=None, **options):
    """A LatentAttention of LATENT_SIZES and `options`, drawn after ta.manual_seed(0)."""
    ta.manual_seed(0)
    return nn.LatentAttention(**LATENT_SIZES, **options, dtype=dtype)


def latent_tokens(B, T, dtype=np.float64, requires_grad=False):
    """Tokens x (B, T, embed_dim), seeded."""
    x = np.random.default_rng(5).standard_normal((B, T, LATENT_SIZES["embed_dim"]))
    return ta.tensor(x.astype(dtype), requires_grad=requires_grad)


def in_pieces(layer, x, lengths):
    """[(start, output, weights, heads)] of x (B, T, E) fed to `layer` through one LatentCache in
    pieces of these lengths: the heads (B, H, T, d_v) as the layer's hook "heads" names them."""
    cache, found, start = nn.LatentCache(), [], 0
    for length in lengths:
        (out, weights), named = layer.run_with_cache(x[:, start:start + length], start, cache,
                                                     names=["heads"])
        found.append((start, out, weights, named["heads"]))
        start += length
    return found


def absorbed_outputs():
    """Outputs, weights and heads on a cache: 9 tokens at once (T = S), then a token at a time
    after a prompt and chunks of several (T != S, the causal mask offset by the cache), batch 2,
    for the queries' two ways, interleaved rotary and biases; tinyattn's are expanded's to
    1e-12."""
    found, x = {}, latent_tokens(2, 9)
    for name, options in LATENT_LAYOUTS.items():
        layer = latent_layer(**options)
        for lengths in ([9], [4, 1, 1, 3]):
            for start, out, weights, heads in in_pieces(layer, x, lengths):
                case = f"{name}, pieces {lengths}, from token {start}"
                found[f"{case}: output"], found[f"{case}: weights"] = out, weights
                found[f"{case}: heads"] = heads
    return found


def absorbed_gradients():
    """dL/dx and every parameter's gradient, the prompt's 4 tokens and the next 3 through the
    cache (q_lora_rank, biases, interleaved rotary): through W_UK and W_UV, and through the
    cached latents to the prompt."""
    layer = latent_layer(q_lora_rank=7, bias=True, rope_interleave=True)
    x = latent_tokens(2, 7, requires_grad=True)
    pieces = in_pieces(layer, x, [4, 3])
    out = ta.concatenate([pieces[0][1], pieces[1][1]], axis=1)             # (2, 7, E)
    out.backward(np.random.default_rng(1).standard_normal(out.shape))
    return {"output": out, "dL/dx": x.grad,
            **{f"dL/d{name}": p.grad for name, p in layer.named_parameters()}}


class Shapes(engine.Watcher):
    """The shape of every op's output while it watches (an engine watcher: told of every op)."""

    def __init__(self):
        self.shapes = []

    def applied(self, node, arrays, params, out):
        self.shapes.append(out.shape)


def holds_head_keys_or_values(shape, S):
    """Whether `shape` holds S positions of some head's keys or values: an axis of S with one
    of d_C, d_v, d_C + d_R or d_C + d_v features a head (or H times as many, the heads side by
    side, as kv_up's output is), or with the heads and r or r + d_R (the latent copied for every
    head)."""
    H, r, d_R = (LATENT_SIZES[k] for k in ("num_heads", "kv_lora_rank", "qk_rope_head_dim"))
    d_C, d_v = LATENT_SIZES["qk_nope_head_dim"], LATENT_SIZES["v_head_dim"]
    per_head = {d_C, d_v, d_C + d_R, d_C + d_v}
    side_by_side = {H * d for d in per_head | {r, r + d_R}}
    axes = set(shape)
    return S in axes and bool(axes & (per_head | side_by_side) or
                              H in axes and axes & {r, r + d_R})


def no_expanded_keys():
    """The arrays one new token builds on a cache of 12 (batch 2): none holds the 13 positions'
    keys or values of a head, and the latents (2, 13, r + d_R) are what it reads."""
    found = {}
    for name, options in LATENT_LAYOUTS.items():
        layer, x, cache = latent_layer(**options), latent_tokens(2, 13), nn.LatentCache()
        layer(x[:, :12], 0, cache)
        with engine.watching(Shapes()) as step:
            layer(x[:, 12:], 12, cache)
        found[f"{name}: arrays of a head's keys or values over the 13 positions"] = [
            str(shape) for shape in step.shapes if holds_head_keys_or_values(shape, 13)]
        found[f"{name}: the latents (2, 13, 12) read"] = (2, 13, 12) in step.shapes
    return found


def absorbed_layer(x):
    """The outputs and weights of a LatentAttention (q_lora_rank 7) in x's dtype: x (B, 5, E), its
    first 3 tokens, then the last 2, through a LatentCache."""
    pieces = in_pieces(latent_layer(x.dtype, q_lora_rank=7), x, [3, 2])
    return tuple(tensor for _, out, weights, _ in pieces for tensor in (out, weights))


LATENT_ABSORBED = Exercise(
    "latent_absorbed", 5, "latent attention's absorbed scores: attention on the cached latents",
    "tinyattn.nn.latent_attention", ("LatentAttention.up_projections", "LatentAttention.absorbed"),
    read_first="the top of tinyattn/nn/latent_attention.py (the absorption, and why the rotary "
               "key is decoupled), LatentAttention's docstring and its `expanded`, the paper's "
               "equations, which `absorbed` must equal; grouped_weights and grouped_values in "
               "tinyattn/functional/grouped_query.py; section 2.1 of DeepSeek-AI 2024, "
               "\"DeepSeek-V2\"",
    checks=(
        same("heads, weights and outputs on a cache: a prompt at once (T = S), then chunks and "
             "single tokens (T != S, the causal mask offset), q_proj and q_lora_rank, "
             "interleaved rotary, biases (tinyattn's equal expanded's to 1e-12)",
             absorbed_outputs),
        gradient_rows(
            "LatentAttention, absorbed on a cache (no q_lora_rank)",
            "DeepSeek-V3, cached step (random directions)").named(
            "gradients vs tinyattn's: the layer on a cache, and a DeepSeek-V3 decoder's cached "
            "step (2 rows of the checklist)"),
        same("gradients through the cache (q_lora_rank, biases, interleaved rotary): dL/dx and "
             "every parameter's, W_UK's and W_UV's in kv_up among them", absorbed_gradients),
        same("a new token builds no head's keys or values over the cached positions: it reads "
             "the latents (B, S, r + d_R)", no_expanded_keys, 0),
        float32(absorbed_layer, (2, 5, 10)),
    ),
    hints=(
        "Re-read the absorption at the top of latent_attention.py: q_C . (W_UK c_kv) = "
        "(W_UK^T q_C) . c_kv, and sum_s a_s W_UV c_kv_s = W_UV (sum_s a_s c_kv_s).",
        "up_projections: kv_up's weight (H (d_C + d_v), r) is head by head, each head's d_C rows "
        "of W_UK then its d_v rows of W_UV; reshape it to (H, d_C + d_v, r) and split the "
        "middle axis.",
        "absorbed: the query (B, H, T, r + d_R) is q_C times W_UK (a row times (d_C, r) gives "
        "r numbers per head) beside q_R; the key is the latents as one key/value head (B, 1, S, "
        "r + d_R), for grouped_weights with the causal visible_keys(T, S) and the heads' scale "
        "(d_C + d_R)^(-1/2), not the default of the wider query.",
        "The values are the latents' first r columns (c_kv, not k_R): grouped_values mixes them "
        "(B, H, T, r), and W_UV^T turns each head's into its d_v numbers, after the sum.",
    ),
    wrong_versions=(
        Wrong("W_UK transposed: the query multiplied by W_UK^T's rows, not by W_UK (the sizes "
              "do not fit, r != d_C: a shape error)",
              (("query = concatenate([q_C @ W_UK, q_R], axis=-1)",
                "query = concatenate([(W_UK @ q_C.mT).mT, q_R], axis=-1)"),)),
        Wrong("content keys rebuilt per head, W_UK c_kv (B, H, S, d_C), and scored as the "
              "expanded path scores: right numbers, the expanded keys built",
              (("weights = grouped_weights(query, key, visible_keys(T, S), self.scale)",
                "k_C = key[..., :r] @ W_UK.mT                                  # (B, H, S, d_C)\n"
                "        scores = (q_C @ k_C.mT + q_R @ key[..., r:].mT) * self.scale\n"
                "        seen = visible_keys(T, S)\n"
                "        if seen is not None:\n"
                "            scores = where(seen, scores, -math.inf)\n"
                "        weights = F.softmax(scores, axis=-1)"),)),
        Wrong("W_UV applied to every cached latent before the weighted sum: right numbers, "
              "(B, H, S, d_v) values rebuilt per head",
              (("mixed = grouped_values(weights, key[..., :r])                   # (B, H, T, r)\n"
                "        return mixed @ W_UV.mT, weights",
                "values = key[..., :r] @ W_UV.mT                               # (B, H, S, d_v)\n"
                "        return grouped_values(weights, values), weights"),)),
        Wrong("W_UV applied to the cached latents before the weighted sum, averaged over the "
              "heads to keep one value head (B, 1, S, d_v): every head's value the same",
              (("mixed = grouped_values(weights, key[..., :r])                   # (B, H, T, r)\n"
                "        return mixed @ W_UV.mT, weights",
                "values = key[..., :r] @ W_UV.mean(axis=0).mT                  # (B, 1, S, d_v)\n"
                "        return grouped_values(weights, values), weights"),)),
        Wrong("the rotary part of the query dropped: scores of the content alone",
              (("query = concatenate([q_C @ W_UK, q_R], axis=-1)", "query = q_C @ W_UK"),
               ("weights = grouped_weights(query, key, visible_keys(T, S), self.scale)",
                "weights = grouped_weights(query, key[..., :r], visible_keys(T, S), "
                "self.scale)"))),
        Wrong("the scale forgotten: grouped_weights' default, 1 / sqrt(r + d_R) of the absorbed "
              "query's width, not the heads' 1 / sqrt(d_C + d_R)",
              (("grouped_weights(query, key, visible_keys(T, S), self.scale)",
                "grouped_weights(query, key, visible_keys(T, S))"),)),
        Wrong("the scale applied twice: on the query, and in grouped_weights",
              (("query = concatenate([q_C @ W_UK, q_R], axis=-1)",
                "query = concatenate([q_C @ W_UK, q_R], axis=-1) * self.scale"),)),
        Wrong("the values read from the latent's last r columns: the rotary key's d_R among "
              "them, c_kv's first d_R left out",
              (("mixed = grouped_values(weights, key[..., :r])",
                "mixed = grouped_values(weights, key[..., -r:])"),)),
        Wrong("the causal mask left out: a chunk's tokens see the later ones of the chunk",
              (("grouped_weights(query, key, visible_keys(T, S), self.scale)",
                "grouped_weights(query, key, None, self.scale)"),)),
        Wrong("W_UK and W_UV swapped: the split read as v's rows first, then k_C's",
              (("return per_head[:, :d_C], per_head[:, d_C:]",
                "return per_head[:, d_v:], per_head[:, :d_v]"),)),
        Wrong("kv_up's rows read as every head's W_UK, then every head's W_UV, not head by head",
              (("per_head = self.kv_up.weight.reshape(H, d_C + d_v, self.kv_lora_rank)",
                "weight = self.kv_up.weight\n"
                "        per_head = concatenate([weight[:H * d_C].reshape(H, d_C, -1),\n"
                "                                weight[H * d_C:].reshape(H, d_v, -1)], axis=1)"),
               )),
    ),
)


# ------------------------------------------------------------------------------------------------
# The sink-keeping cache

SINK_SETTINGS = nn.DecoderSettings(vocab_size=11, hidden_size=16, intermediate_size=20,
                                   num_layers=2, num_heads=4, num_kv_heads=2, head_dim=4,
                                   qk_norm=True, rope_theta=100.0, model_type="qwen3")
SINK_IDS = np.random.default_rng(0).integers(0, 11, (3, 20))   # batch 3 (not K = 2), 20 tokens
# (window, sinks); 20 tokens run through each: over 3 of the widest window
WINDOWS_AND_SINKS = ((5, 2), (4, 0), (1, 3), (1, 0), (6, 1))


def sink_decoder(dtype=None):
    """A Qwen3 of SINK_SETTINGS (2 layers of grouped-query attention), drawn after
    ta.manual_seed(0)."""
    ta.manual_seed(0)
    return nn.Qwen3(SINK_SETTINGS, dtype=dtype)


def through_a_sink_cache(window, sinks, prompt=1, dtype=None):
    """What each call of a sink_decoder fed SINK_IDS through SinkCache(window, sinks) left, the
    first `prompt` tokens at once, then one at a time: [{"logits", and after the call the cache's
    "nbytes", "len", and each layer's "keys" and "values" kept}]."""
    model = sink_decoder(dtype)
    cache, found = nn.SinkCache(model, window, sinks), []
    for start, stop in [(0, prompt), *((t, t + 1) for t in range(prompt, SINK_IDS.shape[1]))]:
        logits = model(SINK_IDS[:, start:stop], cache=cache)
        found.append({"logits": logits.data, "nbytes": cache.nbytes, "len": len(cache),
                      "keys": [layer.keys.data.copy() for layer in cache.layers],
                      "values": [layer.values.data.copy() for layer in cache.layers]})
    return found


def sink_logits():
    """The logits at every step, 20 tokens a token at a time, for windows 1 to 6 with 0 to 3
    sinks; and after a prompt of 10 tokens read at once (the sinks moved past 4 evicted at
    once)."""
    found = {}
    for window, sinks, prompt in [*((w, s, 1) for w, s in WINDOWS_AND_SINKS), (5, 2, 10)]:
        steps = through_a_sink_cache(window, sinks, prompt)
        found[f"window {window}, {sinks} sinks, prompt {prompt}: the logits"] = np.concatenate(
            [step["logits"] for step in steps], axis=1)
    return found


def kept_keys_and_values():
    """What each layer keeps after every step: the sinks' keys turned by the count of tokens
    evicted (so that they sit just before the window), the window's keys as they were cached,
    and the values of the same tokens."""
    found = {}
    for window, sinks, prompt in ((5, 2, 1), (1, 3, 1), (4, 0, 1), (5, 2, 10)):
        for n, step in enumerate(through_a_sink_cache(window, sinks, prompt)):
            for i, (keys, values) in enumerate(zip(step["keys"], step["values"])):
                case = f"window {window}, {sinks} sinks, prompt {prompt}, call {n}, layer {i}"
                found[f"{case}: keys"], found[f"{case}: values"] = keys, values
    return found


def memory_at_each_step():
    """cache.nbytes, the tokens each layer keeps and len(cache) after every step: they stop
    growing at sinks + window - 1 tokens a layer, and len counts every token seen."""
    found = {}
    for window, sinks in WINDOWS_AND_SINKS:
        steps = through_a_sink_cache(window, sinks)
        found[f"window {window}, {sinks} sinks: nbytes"] = [step["nbytes"] for step in steps]
        found[f"window {window}, {sinks} sinks: tokens kept"] = [
            [keys.shape[2] for keys in step["keys"]] for step in steps]
        found[f"window {window}, {sinks} sinks: len(cache)"] = [step["len"] for step in steps]
    return found


def in_float32():
    """A float32 model through a SinkCache (window 3, 2 sinks): its logits and what it keeps stay
    float32."""
    last = through_a_sink_cache(3, 2, dtype=np.float32)[-1]
    return {"logits": last["logits"].dtype, "keys": [keys.dtype for keys in last["keys"]],
            "values": [values.dtype for values in last["values"]]}


SINK_CACHE = Exercise(
    "sink_cache", 5, "StreamingLLM's cache: the sinks kept, the window slid, the sinks moved",
    "tinyattn.nn.sink_cache", ("SinkLayerCache.extended", "SinkLayerCache.moved"),
    read_first="the top of tinyattn/nn/sink_cache.py (what is kept, and the positions within the "
               "cache) and SinkCache's docstring; F.rope_rotate_half in "
               "tinyattn/functional/rotate_half.py; LatentCache.extended in "
               "tinyattn/nn/latent_attention.py, a cache that keeps everything; section 3.2 of "
               "Xiao et al. 2023, \"Efficient Streaming Language Models with Attention Sinks\"",
    checks=(
        same("the logits at every step, far past the window (20 tokens, windows 1 to 6, 0 to 3 "
             "sinks, batch 3), and after a prompt read at once", sink_logits),
        same("what each layer keeps after every step: the sinks' keys moved by the tokens "
             "evicted, the window's as cached, their values", kept_keys_and_values),
        same("memory stops growing at sinks + window - 1 tokens a layer: nbytes, the tokens "
             "kept, len(cache)", memory_at_each_step, 0),
        same("float32 stays float32: the logits, the keys and values kept", in_float32, 0),
    ),
    equivalent_mutants=(
        ("SinkLayerCache.extended: if evicted > 0: :: evicted > 0 -> evicted >= 0",
         "with none evicted, the sinks turned by 0 positions (cos 0 = 1, sin 0 = 0: the same "
         "numbers) and the two slices [:s] and [s + 0:] are all of the keys and values"),
    ),
    hints=(
        "Re-read the top of sink_cache.py: kept are the first `sinks` tokens and the window - 1 "
        "newest; the new tokens' queries see all that was kept and the new keys themselves.",
        "extended: the kept keys and values, then the new ones, along the positions (axis 2); "
        "that is what it returns. What stays is the sinks, then the newest window - 1: the "
        "tokens between them are evicted, if there are any.",
        "When tokens are evicted, the sinks' keys are turned by as many positions as there "
        "were evicted (each eviction by its own count: the kept keys already carry the earlier "
        "turns); the window's keys and all values are kept as they are.",
        "moved: rope_rotate_half turns a sequence's rows by offset, offset + 1, ...; give each "
        "key a sequence of its own (an axis of 1 before D), so that every one is turned by "
        "`positions`, with the layer's frequencies.",
    ),
    wrong_versions=(
        Wrong("the sinks evicted too: a plain sliding window",
              (("s = self.sinks", "s = 0"),)),
        Wrong("the window newest kept, not window - 1: one token too many",
              (("evicted = keys.shape[2] - s - (self.window - 1)",
                "evicted = keys.shape[2] - s - self.window"),)),
        Wrong("the sinks' keys not turned: they keep the positions they were cached at",
              (("sinks = self.moved(keys[:, :, :s], evicted)", "sinks = keys[:, :, :s]"),)),
        Wrong("the sinks turned by every token evicted so far at each eviction: the earlier "
              "turns counted twice",
              (("sinks = self.moved(keys[:, :, :s], evicted)",
                "self.evicted = getattr(self, \"evicted\", 0) + evicted\n"
                "            sinks = self.moved(keys[:, :, :s], self.evicted)"),)),
        Wrong("the sinks turned back, by -evicted",
              (("sinks = self.moved(keys[:, :, :s], evicted)",
                "sinks = self.moved(keys[:, :, :s], -evicted)"),)),
        Wrong("the values evicted from the front (the sinks' among them), the keys after the "
              "sinks: keys and values of other tokens",
              (("self.values = concatenate([values[:, :, :s], values[:, :, s + evicted:]], "
                "axis=2)", "self.values = values[:, :, evicted:]"),)),
        Wrong("the pruned keys and values returned: the new queries miss the token evicted now",
              (("        return keys, values", "        return self.keys, self.values"),)),
        Wrong("the old cache not concatenated: the new tokens see themselves alone",
              (("            keys = concatenate([self.keys, keys], axis=2)               "
                "# (B, K, S + T, D)\n"
                "            values = concatenate([self.values, values], axis=2)         "
                "# (B, K, S + T, D)\n", "            pass\n"),)),
        Wrong("each sink turned by its own index too: by evicted + i",
              (("turned = rope_rotate_half(one_row_each, positions, frequencies=self.frequencies)",
                "turned = rope_rotate_half(keys, positions, frequencies=self.frequencies)"),)),
    ),
)


EXERCISES = (RMS_NORM, SILU, GROUPED_QUERY, GATED_FEED_FORWARD, LLAMA3_SPLIT,
             LATENT_ABSORBED, SINK_CACHE)
