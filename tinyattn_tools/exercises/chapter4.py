"""Chapter 4 of the exercises, in the README's reading order: direct logit attribution, then LoRA's
adapter. Read chapter1.py first: the entries are written the same way.

What the learner writes, in tinyattn/circuits.py: direct_logit_attribution, what each piece of the
residual stream adds to a logit through the final LayerNorm (its scale held) and the head. In
tinyattn/nn/lora.py: the forward and the backward of LowRankUpdate,
the op that computes a LoRALinear's update (alpha / r) x A^T B^T (tinyattn's LoRALinear runs it,
so its backward is the learner's, not the engine's chain of matmuls), and LoRALinear.__init__,
where the adapter is made: the Linear frozen, A random, B zero, the scale alpha / r.
"""
import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import circuits
from tinyattn.nn.lora import LowRankUpdate
from tinyattn_tools.checklist.lora import SCALE
from tinyattn_tools.exercises.checks import float32, forward_rows, gradient_rows, same
from tinyattn_tools.exercises.exercise import Exercise, WrongVersion as Wrong

# ------------------------------------------------------------------------------------------------
# Direct logit attribution

def attributed_model(tied_head, dtype=np.float64):
    """A 2-layer CausalTransformer (vocabulary 13, width 16, 4 heads) in eval mode, its final
    LayerNorm's weight and bias drawn at random (at their start, 1 and 0, leaving either out
    would change nothing), and an untied head's bias too; and its cache on two sequences of 7."""
    ta.manual_seed(3)
    model = nn.CausalTransformer(13, 16, 4, num_layers=2, max_len=8, dtype=dtype,
                                 tied_head=tied_head).eval()
    random = np.random.default_rng(7)
    model.ln.weight.data[...] = random.uniform(0.5, 1.5, 16)
    model.ln.bias.data[...] = random.standard_normal(16)
    if model.head.bias is not None:
        model.head.bias.data[...] = random.standard_normal(13)
    ids = random.integers(0, 13, (2, 7))
    logits, cache = model.run_with_cache(ids, names=circuits.attribution_names(model))
    return model, cache, logits


ATTRIBUTED = [      # (which model, position, the tokens (B,) whose logits are attributed)
    ("a head with a bias", -1, [3, 8]), ("a head with a bias", 0, [12, 0]),
    ("a head with a bias", 4, [5, 5]), ("a tied head without bias", -1, [1, 9]),
    ("a tied head without bias", 2, [7, 4]),
]


def attributions(dtype=np.float64):
    """[(case, its attributions, the logits attributed)] for every case of ATTRIBUTED."""
    models = {"a head with a bias": attributed_model(False, dtype),
              "a tied head without bias": attributed_model(True, dtype)}
    found = []
    for which, position, tokens in ATTRIBUTED:
        model, cache, logits = models[which]
        found.append((f"{which}, position {position}, tokens {tokens}",
                      circuits.direct_logit_attribution(model, cache, np.array(tokens), position),
                      logits.data[[0, 1], position, tokens]))
    return found


def the_sums():
    """The entries' sum, for each case: tinyattn's is the logit (within 1e-15)."""
    return {f"{case}: the sum of the entries": sum(entries.values())
            for case, entries, _ in attributions()}


def each_entry():
    return {f"{case}: {name}": value for case, entries, _ in attributions()
            for name, value in entries.items()}


def the_keys():
    return {f"{case}: the keys": list(entries) for case, entries, _ in attributions()}


def in_float32():
    """A float32 model's entries: their shapes and dtypes, and their numbers (within float32's
    rounding of tinyattn's in float32)."""
    found = {}
    for case, entries, _ in attributions(np.float32):
        found[f"{case}: shapes and dtypes"] = [f"{name} {value.shape} {value.dtype}"
                                               for name, value in entries.items()]
        found.update({f"{case}: {name}": value for name, value in entries.items()})
    return found


AXIS_MINUS_ONE = (     # the lines, as they read in circuits.py, whose axis=-1 may be axis=1
    "centred = stream - stream.mean(axis=-1, keepdims=True)                       # (B, E)",
    "inv_sigma = 1.0 / np.sqrt((centred * centred).mean(axis=-1, keepdims=True)",
    "attributions[name] = (centred_piece * inv_sigma * read).sum(axis=-1)      # (B,)",
    "centred_piece = piece - piece.mean(axis=-1, keepdims=True)                # (B, E)",
    'attributions["ln.bias"] = (model.ln.bias.data * directions).sum(axis=-1)      # (B,)',
)
ON_B_BY_E = "every array there is (B, E), one position's, so its axis 1 is its last axis, -1"

DIRECT_LOGIT_ATTRIBUTION = Exercise(
    "direct_logit_attribution", 4, "direct logit attribution: what each piece of the residual "
    "stream adds to a logit", "tinyattn.circuits", ("direct_logit_attribution",),
    read_first="the top of tinyattn/circuits.py (the residual stream as a sum, and why the final "
               "LayerNorm's scale must be held fixed for the sum to split), residual_components "
               "above the function, and LayerNorm in tinyattn/ops/layer_norm.py",
    checks=(
        same("the entries add up to the logit, at 5 positions and tokens of two models (random "
             "LayerNorm weight and bias; a head with a bias, a tied one without)", the_sums),
        same("each entry vs tinyattn's: every head's result, the attention biases, the "
             "feed-forwards, the embeddings, ln.bias and head.bias", each_entry),
        same("the keys, in order: residual_components' pieces, then \"ln.bias\", then "
             "\"head.bias\" when the head has a bias", the_keys, 0),
        same("in float32: shapes (B,), float32 entries (no upcast), close to tinyattn's",
             in_float32, 1e-5),
    ),
    equivalent_mutants=tuple((f"direct_logit_attribution: {line} :: -1 -> 1", ON_B_BY_E)
                             for line in AXIS_MINUS_ONE),
    hints=(
        "Re-read the top of circuits.py: logit_t = sum over pieces c of ((c - mean(c)) / sigma "
        "* w) . u_t + b . u_t + head.bias_t, with sigma the final LayerNorm's scale of the whole "
        "stream, read from the cache.",
        "sigma is the stream's: take the last block's resid_post at `position` (B, E), centre it, "
        "and sigma = sqrt(mean(centred^2) + eps), one number per sequence (keepdims). u_t is the "
        "head's row for token t: weight_of(model.head) works for a tied head too.",
        "Each piece of residual_components (B, T, E), at `position`: centred by its own mean, "
        "divided by the stream's sigma (not its own), times the LayerNorm's weight, dotted with "
        "u_t: one number per sequence. Then the two constant terms, b . u_t as \"ln.bias\" and "
        "head.bias[t] as \"head.bias\" if the head has a bias.",
    ),
    wrong_versions=(
        Wrong("the LayerNorm scale recomputed per piece",
              (("(centred_piece * inv_sigma * read)",
                "(centred_piece / np.sqrt((centred_piece * centred_piece).mean(axis=-1, "
                "keepdims=True) + model.ln.eps) * read)"),)),
        Wrong("the head's bias counted in each piece",
              (("attributions[name] = (centred_piece * inv_sigma * read).sum(axis=-1)",
                "attributions[name] = (centred_piece * inv_sigma * read).sum(axis=-1) + (\n"
                "            0.0 if model.head.bias is None else model.head.bias.data[tokens])"),
               ("""    if model.head.bias is not None:
        attributions["head.bias"] = model.head.bias.data[tokens]                  # (B,)
""", ""))),
        Wrong("the pieces not centred",
              (("centred_piece = piece - piece.mean(axis=-1, keepdims=True)",
                "centred_piece = piece"),)),
        Wrong("the LayerNorm's weight left out",
              (("read = model.ln.weight.data * directions", "read = directions"),)),
        Wrong("the LayerNorm's bias term left out",
              (('    attributions["ln.bias"] = (model.ln.bias.data * directions).sum(axis=-1)'
                '      # (B,)\n', ""),)),
        Wrong("sigma without the LayerNorm's eps",
              (("+ model.ln.eps)", ")"),)),
        Wrong("sigma taken at the last position, whatever the position",
              (('resid_post"][:, position]', 'resid_post"][:, -1]'),)),
        Wrong("the cached stream centred in place (every later reader of the cache sees it)",
              (("    centred = stream - stream.mean(axis=-1, keepdims=True)",
                "    stream -= stream.mean(axis=-1, keepdims=True)\n    centred = stream"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# LoRA

UPDATE_ROWS = ("lora update", "lora update, one row", "lora update, rank 1, 4-d x")
LAYER_ROWS = ("LoRALinear (rank 2, alpha 5)", "LoRALinear, no bias",
              "TransformerBlock with LoRA on q, k, v, out (adapters only)")


def x_and_linear(dtype=np.float64):
    ta.manual_seed(0)
    x = np.random.default_rng(0).standard_normal((2, 3, 6)).astype(dtype)
    return ta.tensor(x), nn.Linear(6, 4, dtype=dtype)


def a_new_adapter():
    """A new LoRALinear's output minus its Linear's (B = 0 makes the update zero), its rank,
    alpha and scale; and alpha left out, as most calls leave it."""
    x, linear = x_and_linear()
    before = linear(x).data
    layer, default = nn.LoRALinear(linear, rank=2, alpha=8), nn.LoRALinear(linear, rank=4)
    return {"output minus the Linear's": layer(x).data - before,
            "rank, alpha and scale": [layer.rank, layer.alpha, layer.scale],
            "rank 4, alpha not given: rank, alpha and scale": [default.rank, default.alpha,
                                                               default.scale]}


def the_frozen_linear():
    """After a backward and an AdamW step (with weight decay) over trainable_parameters(): the
    Linear's weight and bias, what got a gradient, what requires grad, and what the layer's
    state_dict and add_lora's summary (trainable / total) count: the frozen weight and bias must
    stay its parameters."""
    x, linear = x_and_linear()
    layer = nn.LoRALinear(linear, rank=2)
    optimizer = ta.optim.AdamW(layer.trainable_parameters(), lr=0.1, weight_decay=0.5)
    for _ in range(2):
        layer(x).backward(np.random.default_rng(1).standard_normal((2, 3, 4)))
        optimizer.step()
    ta.manual_seed(0)
    block = nn.TransformerBlock(8, 2, hidden_dim=16)
    summary = nn.add_lora(block, rank=2)
    return {"weight": layer.weight, "bias": layer.bias,
            "parameters: requires grad, has a gradient": [
                f"{name}: {p.requires_grad}, {p.grad is not None}"
                for name, p in layer.named_parameters()],
            "state_dict": sorted(layer.state_dict()),
            "add_lora's summary of a TransformerBlock": [summary.trainable, summary.total]}


def the_adapters_drawn():
    """lora_A under ta.manual_seed(0), drawn from tinyattn's generator as a Linear(in, rank)'s
    weight is, and the adapters' dtypes on a float32 Linear without bias."""
    _, linear = x_and_linear()
    ta.manual_seed(0)
    A = nn.LoRALinear(linear, rank=3).lora_A
    single = nn.LoRALinear(nn.Linear(6, 4, bias=False, dtype=np.float32), rank=2)
    return {"lora_A": A, "on a float32 Linear: lora_A, lora_B's dtypes": [single.lora_A.dtype,
                                                                          single.lora_B.dtype]}


def lora_update(x, A, B):
    return LowRankUpdate.apply(x, A, B, scale=SCALE)


LORA = Exercise(
    "lora", 4, "LoRA's adapter: the low-rank update's forward and backward, and a new LoRALinear",
    "tinyattn.nn.lora", ("LowRankUpdate.forward", "LowRankUpdate.backward", "LoRALinear.__init__"),
    read_first="the top of tinyattn/nn/lora.py (the idea, and why B starts at zero), the "
               "docstrings of LowRankUpdate and LoRALinear, Matmul in tinyattn/ops/matmul.py, "
               "and section 4.1 of Hu et al. 2021, \"LoRA: Low-Rank Adaptation of Large "
               "Language Models\"",
    checks=(
        forward_rows(*UPDATE_ROWS).named(
            "the update's outputs vs NumPy, scale * x A^T B^T: 3 rows of the checklist"),
        gradient_rows(*UPDATE_ROWS, *LAYER_ROWS).named(
            "gradients vs tinyattn's: the update, LoRALinear, an adapted TransformerBlock (6 "
            "rows of the checklist)"),
        same("a new LoRALinear computes exactly what its Linear did (B starts at zero); its "
             "rank, alpha and scale, alpha defaulting to the rank", a_new_adapter, 0.0),
        same("the Linear's weight and bias are frozen, and stay its parameters: no gradient, not "
             "moved by AdamW, in state_dict and in add_lora's count; only lora_A and lora_B train",
             the_frozen_linear, 0.0),
        same("lora_A is drawn from tinyattn's generator (ta.manual_seed repeats it) as a "
             "Linear(in, rank)'s weight; a float32 Linear gets float32 adapters",
             the_adapters_drawn, 0.0),
        float32(lora_update, (2, 3, 5), (2, 5), (4, 2)),
    ),
    hints=(
        "Re-read LowRankUpdate's docstring: h = x A^T is the input brought down to r numbers per "
        "row, and each gradient is the matmul adjoint applied to out = scale * h B^T, then to "
        "h = x A^T.",
        "Fold x's leading axes into rows first, x.reshape(-1, in): then dL/dA and dL/dB are each "
        "one 2-D product summed over all rows. Save what backward needs (the rows, h, A, B, the "
        "scale, x's shape) and reshape dL/dx back to x's shape.",
        "Do not forget dL/dx: x is no parameter, but every layer below, and its adapters, learn "
        "through it. The scale multiplies the output, so it multiplies dL/dh and dL/dB too.",
        "In __init__: take the Linear's weight and bias as they are and set their requires_grad "
        "to False; lora_A starts as a Linear(in, rank)'s weight would (`uniform`, bound "
        "1/sqrt(in)), lora_B as zeros of (out, rank), both in the weight's dtype; the scale is "
        "alpha / rank, with alpha = rank when not given.",
    ),
    equivalent_mutants=(
        ("LowRankUpdate.forward: rows = x.reshape(-1, x.shape[-1])"
         "                                # (N, in) :: 1 -> 2",
         "NumPy's reshape takes any negative size, -2 as well as -1, for 'the rest'"),
        ("LowRankUpdate.backward: grad = grad.reshape(-1, B.shape[0])"
         "                              # (N, out) :: 1 -> 2",
         "NumPy's reshape takes any negative size, -2 as well as -1, for 'the rest'"),
    ),
    wrong_versions=(
        Wrong("the alpha / r scale forgotten",
              (("out = scale * (h @ B.T)", "out = h @ B.T"),
               ("grad_h = scale * (grad @ B)", "grad_h = grad @ B"),
               ("grad_B = scale * (grad.T @ h)", "grad_B = grad.T @ h"))),
        Wrong("the frozen weight trained: the Linear's weight and bias left requiring grad",
              (("""        for parameter in (self.weight, self.bias):
            if parameter is not None:
                parameter.requires_grad = False
""", ""),)),
        Wrong("both factors initialised randomly: B drawn as A is",
              (("self.lora_B = Parameter(np.zeros((self.out_features, rank), dtype))",
                "self.lora_B = uniform((self.out_features, rank), 1.0 / math.sqrt(rank), dtype)"),
               )),
        Wrong("no gradient for x: it is no parameter",
              (("grad_x = (grad_h @ A).reshape(x_shape)", "grad_x = None"),)),
        Wrong("the scale left out of dL/dA and dL/dx (kept in the output and in dL/dB)",
              (("grad_h = scale * (grad @ B)", "grad_h = grad @ B"),)),
        Wrong("alpha defaulting to 1 (loralib's default), not to the rank",
              (("self.alpha = float(rank if alpha is None else alpha)",
                "self.alpha = float(1 if alpha is None else alpha)"),)),
        Wrong("lora_A drawn from NumPy's global generator: ta.manual_seed no longer repeats it",
              (("self.lora_A = uniform((rank, self.in_features), 1.0 / math.sqrt(self.in_features)"
                ", dtype)", "bound = 1.0 / math.sqrt(self.in_features)\n        self.lora_A = "
                "Parameter(np.random.uniform(-bound, bound, (rank, self.in_features)).astype("
                "dtype))"),)),
        Wrong("the frozen weight and bias replaced by detached copies: they leave state_dict",
              (("self.weight, self.bias = linear.weight, linear.bias",
                "self.weight = linear.weight.detach()\n        self.bias = (None if linear.bias "
                "is None else linear.bias.detach())"),)),
    ),
)


EXERCISES = (DIRECT_LOGIT_ATTRIBUTION, LORA)
