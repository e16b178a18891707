"""Chapter 2 of the exercises: positions, the causal mask of a cache, FlashAttention forward and
backward, causal linear attention (chunked, and one token at a time), and the experts' routing.
Read chapter1.py first: the entries are written the same way."""
import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn import engine
from tinyattn.functional import positions
from tinyattn.functional import scaled_dot_product as sdpa
from tinyattn_tools.checklist.efficient_attention import linear_attention_by_steps
from tinyattn_tools.exercises.checks import float32, forward_rows, gradient_rows, leaves, same
from tinyattn_tools.exercises.exercise import Exercise, WrongVersion as Wrong


# ------------------------------------------------------------------------------------------------
# Positions

def sinusoidal_tables():
    found = {f"the table of {length} positions, width {dim}": F.sinusoidal_positions(length, dim)
             for length, dim in ((7, 8), (5, 7), (1, 1), (0, 4), (40, 16), (3, 2))}
    found.update({f"frequencies({dim}, {base:g})": positions.frequencies(dim, base)
                  for dim, base in ((8, 10000.0), (7, 10000.0), (6, 100.0))})
    encoding = nn.PositionalEncoding(6, max_len=8)
    x = np.random.default_rng(0).standard_normal((2, 5, 6))
    return {**found, "PositionalEncoding, offset 3": encoding(ta.tensor(x), offset=3)}


SINUSOIDAL = Exercise(
    "sinusoidal", 2, "the sinusoidal position table of \"Attention Is All You Need\"",
    "tinyattn.functional.positions", ("frequencies", "sinusoidal_positions"),
    read_first="the top of tinyattn/functional/positions.py (why positions, and the frequencies "
               "the table shares with rope); section 3.5 of \"Attention Is All You Need\"",
    checks=(
        same("the table and the frequencies, odd widths included; PositionalEncoding",
             sinusoidal_tables, 1e-12),
        forward_rows("F.rope", "F.rope, offset 7", "F.rope, offset 2, base 100").named(
            "rope with your frequencies vs NumPy: 3 rows of the checklist"),
    ),
    hints=(
        "Re-read the docstring of sinusoidal_positions: column 2i holds sin, column 2i + 1 cos, "
        "of the same angle pos / 10000^(2i/dim).",
        "frequencies gives one angular frequency per pair of columns, 10000^(-2i/dim) for "
        "i = 0 ... ceil(dim / 2) - 1: np.arange over the even columns does it.",
        "The angles are an outer product, positions (length, 1) times frequencies: fill the even "
        "columns with their sines and the odd ones with cosines (an odd dim has one cosine "
        "column fewer).",
    ),
    equivalent_mutants=(
        ("sinusoidal_positions: table = np.zeros((length, dim)) :: np.zeros -> np.ones",
         "every entry of the table is written, sines in the even columns and cosines in the odd "
         "ones, so what it starts as is never read"),
    ),
    wrong_versions=(
        Wrong("sin and cos swapped",
              (("table[:, 0::2] = np.sin(angles)", "table[:, 0::2] = np.cos(angles)"),
               ("table[:, 1::2] = np.cos(", "table[:, 1::2] = np.sin("))),
        Wrong("the exponent's sign: frequencies above 1",
              (("base ** (-np.arange(0, dim, 2) / dim)", "base ** (np.arange(0, dim, 2) / dim)"),)),
        Wrong("10000^(i/dim) with i counting pairs: no factor 2",
              (("base ** (-np.arange(0, dim, 2) / dim)",
                "base ** (-np.arange(0, (dim + 1) // 2) / dim)"),)),
        Wrong("an odd width given as many cosine columns as sine columns",
              (("np.cos(angles[:, : dim // 2])", "np.cos(angles)"),)),
    ),
)


ROPE = Exercise(
    "rope", 2, "rotary position embedding (RoPE), interleaved pairs",
    "tinyattn.functional.positions", ("rope",),
    read_first="the docstring of rope in tinyattn/functional/positions.py (why a rotated score "
               "depends only on the distance), frequencies above it, and ta.stack",
    checks=(
        forward_rows("F.rope", "F.rope, offset 7", "F.rope, offset 2, base 100"),
        gradient_rows("F.rope", "F.rope, offset 7", "F.rope, offset 2, base 100"),
        float32(lambda x: F.rope(x, offset=3), (2, 5, 6)),
    ),
    hints=(
        "Re-read rope's docstring: the pair (x[..., t, 2i], x[..., t, 2i+1]) at position "
        "offset + t turns by the angle (offset + t) * theta_i, to (x0 cos - x1 sin, x0 sin + "
        "x1 cos).",
        "The angles are (T, D/2): positions offset ... offset + T - 1 times frequencies(D, base). "
        "Take cos and sin in x's dtype; x[..., 0::2] and x[..., 1::2] are each pair's two.",
        "Put each pair back side by side: stack the two rotated halves on a new last axis "
        "(..., T, D/2, 2), then reshape to x's shape, which interleaves them.",
    ),
    wrong_versions=(
        Wrong("rotated by the opposite angle",
              (("[x0 * cos - x1 * sin, x0 * sin + x1 * cos]",
                "[x0 * cos + x1 * sin, x1 * cos - x0 * sin]"),)),
        Wrong("the offset ignored: every call starts at position 0",
              (("np.arange(offset, offset + T)", "np.arange(T)"),)),
        Wrong("Llama's rotate-half pairs (i, i + D/2), not interleaved ones",
              (("x0, x1 = x[..., 0::2], x[..., 1::2]",
                "x0, x1 = x[..., :D // 2], x[..., D // 2:]"),)),
        Wrong("the rotated pairs put back as two halves, not interleaved",
              (("x0 * sin + x1 * cos], axis=-1)", "x0 * sin + x1 * cos], axis=-2)"),)),
    ),
)


def causal_masks():
    found = {f"L = {L}, S = {S}, offset {offset}": sdpa.causal_mask(L, S, offset=offset)
             for L, S, offset in ((4, 4, 0), (3, 5, 0), (5, 3, 0), (2, 6, 4), (1, 7, 6), (3, 3, 2))}
    random = np.random.default_rng(0)
    allowed, bias = random.random((2, 1, 4, 6)) < 0.7, random.standard_normal((3, 4, 6))
    return {**found,
            "and-ed with a boolean mask (2, 1, 4, 6), offset 2": sdpa.causal_mask(4, 6, allowed,
                                                                                   offset=2),
            "added to a float mask (3, 4, 6), offset 1": sdpa.causal_mask(4, 6, bias, offset=1),
            "a float32 float mask's dtype": sdpa.causal_mask(3, 4, np.zeros((3, 4), np.float32),
                                                             offset=1).dtype}


def a_learned_mask():
    """A float mask that is a tensor (learned, as a bias can be) comes back a tensor: the
    gradient reaches it where the causal mask lets the pair take part, and nowhere else."""
    bias = leaves((3, 5))[0]
    masked = sdpa.causal_mask(3, 5, bias, offset=1)
    ta.where(np.isfinite(masked.data), masked, 0.0).sum().backward()
    return {"dL/dbias": bias.grad}


CAUSAL_MASK = Exercise(
    "causal_mask", 2, "the causal mask, aligned for a key/value cache",
    "tinyattn.functional.scaled_dot_product", ("causal_mask",),
    read_first="the docstring of causal_mask in tinyattn/functional/scaled_dot_product.py; "
               "CausalTransformer.forward in tinyattn/nn/causal_transformer.py, where a step "
               "after a key/value cache calls it; NumPy's np.tril and its k",
    checks=(
        same("masks: square, L < S, L > S, offsets; and-ed with a boolean mask, added to a float "
             "one (whose dtype stays)", causal_masks, 0),
        same("a learned float mask (a tensor) keeps its gradient", a_learned_mask, 0),
        gradient_rows("attention: sdpa, causal", "attention: sdpa, causal and mask",
                      "attention: sdpa, ALiBi bias, causal", "attention: sdpa, learned float mask, "
                      "causal", "MultiHeadAttention, cached step (rope, random directions)"),
    ),
    hints=(
        "Re-read causal_mask's docstring: True where key j <= offset + i, for query i.",
        "That is a lower triangle of an (L, S) array of booleans whose diagonal is shifted by "
        "`offset`: np.tril takes the shift as its k.",
        "With a mask given: a boolean one is and-ed with the causal one; a float one gets -inf "
        "added where the causal mask is False (0 elsewhere), in the float mask's dtype.",
    ),
    wrong_versions=(
        Wrong("a causal mask off by one: the diagonal hidden", (("k=offset)", "k=offset - 1)"),)),
        Wrong("a causal mask off by one: one future key seen", (("k=offset)", "k=offset + 1)"),)),
        Wrong("the offset ignored: a cached step aligned at the start", (("k=offset)", "k=0)"),)),
        Wrong("the upper triangle: keys after the query", (("np.tril(", "np.triu("),)),
        Wrong("a boolean mask replaced, not and-ed", (("return mask & causal", "return causal"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# FlashAttention

FLASH_CASES = [    # (query, key, value shapes), flash_attention's keyword arguments
    (((2, 5, 3), (2, 5, 3), (2, 5, 4)), dict(block_size=2)),
    (((2, 5, 3), (2, 5, 3), (2, 5, 4)), dict(block_size=2, is_causal=True)),
    (((2, 7, 3), (2, 4, 3), (2, 4, 2)), dict(block_size=3, is_causal=True)),
    (((1, 4, 3), (1, 7, 3), (1, 7, 2)), dict(block_size=3, is_causal=True)),
    (((2, 1, 3, 4), (1, 2, 5, 4), (2, 5, 3)), dict(block_size=2, is_causal=True)),
    (((2, 3, 4), (2, 5, 4), (2, 5, 2)), dict(block_size=8, scale=1.0)),
    (((1, 3, 4), (2, 1, 5, 4), (5, 3)), dict(block_size=2, is_causal=True)),
    (((3, 4), (5, 4), (2, 5, 3)), dict(block_size=2)),
    (((2, 3, 4), (2, 0, 4), (2, 0, 3)), dict(block_size=2)),
]


def flash_case(shapes, kwargs):
    """"query (2, 5, 3), key (2, 5, 3), block_size=2": which input a case was."""
    return ", ".join([f"query {shapes[0]}", f"key {shapes[1]}"] +
                     [f"{name}={value}" for name, value in kwargs.items()])


def flash_outputs():
    """Flash's output, and the logsumexp it saves for backward."""
    found = {}
    for shapes, kwargs in FLASH_CASES:
        out = F.flash_attention(*leaves(*shapes), **kwargs)
        found[f"{flash_case(shapes, kwargs)}: output"] = out
        found[f"{flash_case(shapes, kwargs)}: logsumexp"] = out._node.saved[4]
    return found


def large_scores():
    """Scores in the thousands: e^score overflows, unless each block is shifted by the running
    maximum, as the online softmax does."""
    q, k, v = (x.data for x in leaves((2, 6, 4), (2, 6, 4), (2, 6, 3)))
    return {"output": F.flash_attention(ta.tensor(30 * q), ta.tensor(30 * k), ta.tensor(v),
                                        scale=1.0, block_size=2, is_causal=True)}


def per_head_layout():
    """Block-sparse attention with a layout per head: head 0 sees the first key block from every
    query block, head 1 only its own block, so head 1's first visited block hides all its keys
    (a running maximum of -inf to carry through)."""
    q, k, v = (ta.tensor(x.data) for x in leaves((2, 2, 6, 3), (2, 2, 6, 3), (2, 2, 6, 4)))
    layout = np.eye(3, dtype=bool)[np.newaxis].repeat(2, axis=0)             # (H, Lb, Sb)
    layout[0, :, 0] = True
    return {"output": F.block_sparse_attention(q, k, v, layout, 2, is_causal=True)}


FLASH_ROWS = ("attention: flash", "attention: flash, causal", "attention: flash, causal, L > S",
              "attention: flash, causal, L < S", "attention: flash, L != S, scale=1",
              "attention: flash, causal, broadcast batch", "attention: flash, causal, block 1")
HIDDEN_BLOCKS = gradient_rows(
    "block-sparse = SDPA under its layout's mask: an empty row",
    "block-sparse = SDPA under its layout's mask: a layout per head, broadcast batch").named(
    "blocks that hide every key from some queries (block-sparse layouts): output and "
    "gradients = SDPA under the mask, no NaN")


FLASH_FORWARD = Exercise(
    "flash_forward", 2, "FlashAttention's forward: the online softmax, block by block",
    "tinyattn.ops.flash_attention", ("FlashAttention.forward",),
    given=("blocks", "visited_pairs", "block_scores"),
    read_first="the docstring of FlashAttention in tinyattn/ops/flash_attention.py (Forward, and "
               "the erratum), the helpers above it, and Algorithm 1 of the FlashAttention-2 paper",
    checks=(
        same("outputs, and the logsumexp saved for backward: causal, L != S, short last blocks, "
             "broadcast batches, no keys", flash_outputs),
        same("scores in the thousands: no overflow (the running maximum)", large_scores),
        same("a block layout per head, one head's first visited block all hidden",
             per_head_layout),
        gradient_rows(*FLASH_ROWS).named(
            "gradients (the given backward, from what your forward saved): 7 rows"),
        HIDDEN_BLOCKS,
        float32(lambda q, k, v: F.flash_attention(q, k, v, is_causal=True, block_size=2),
                (2, 5, 3), (2, 5, 3), (2, 5, 4)),
    ),
    hints=(
        "Re-read the docstring's Forward: for each block of queries, walk the key blocks keeping "
        "per query the running maximum m, the running sum l of exp(score - m), and an output O_i "
        "not yet divided by l.",
        "For each visible key block: S_ij from block_scores, m_new = max(m, row max of S_ij). "
        "A query that has seen no key yet (a layout may hide a whole block from it) has m_new = "
        "-inf, and exp(-inf - (-inf)) is NaN: take the exponents against m_safe, m_new with -inf "
        "put to 0, so P_ij = exp(S_ij - m_safe) is 0 there. Walk only the key blocks "
        "`visited_pairs` marks for this block of queries.",
        "When the maximum grows, what was gathered against the old one is too large by "
        "e^(m_new - m_old): multiply l and O_i by exp(m_old - m_safe) (0 while no key was seen) "
        "before adding this block's sum of P_ij and P_ij @ V_j (the paper's line 10, without its "
        "misprinted inverse).",
        "After the last key block divide O_i by l once (l = 0 only where a query saw no key: "
        "use 1 there), and save logsumexp = m + log l per query (+inf where no key was seen, so "
        "that backward's exp(S - logsumexp) is 0), with Q, K, V, O and the settings, in the "
        "order backward unpacks them.",
    ),
    equivalent_mutants=(
        ("FlashAttention.forward: l_i = np.where(sees_none, 1, l_i)                                "
         "# (..., Br, 1) :: 1 -> 2",
         "l is replaced only where the query saw no key: there O_i is 0, and 0 / 2 = 0 / 1, and "
         "the logsumexp is +inf whatever l is"),
        ("FlashAttention.forward: m_safe = np.where(m_new == -np.inf, 0, m_new)   # (..., Br, 1) "
         "no key seen yet :: 0 -> 1",
         "m_safe replaces m_new only where the query has seen no key yet: there every score is "
         "-inf and so is m_old, so P_ij = exp(-inf - m_safe) and the rescale exp(-inf - m_safe) "
         "are 0 for any finite m_safe"),
    ),
    wrong_versions=(
        Wrong("the running-max rescale forgotten",
              (("l_i = rescale * l_i +", "l_i = l_i +"), ("O_i = rescale * O_i +", "O_i = O_i +"))),
        Wrong("the paper's misprint: divided by the rescale factor",
              (("l_i = rescale * l_i +", "l_i = l_i / rescale +"),
               ("O_i = rescale * O_i +", "O_i = O_i / rescale +"))),
        Wrong("the logsumexp saved without the maximum: log l only",
              (("m_i + np.log(l_i))[..., 0]", "np.log(l_i))[..., 0]"),)),
        Wrong("the running maximum never updated", (("m_i = m_new  ", "pass  "),)),
        Wrong("exponents against m_new, not m_safe: NaN where a block hides all of a query's keys",
              (("P_ij = np.exp(S_ij - m_safe)", "P_ij = np.exp(S_ij - m_new)"),
               ("rescale = np.exp(m_i - m_safe)", "rescale = np.exp(m_i - m_new)"))),
    ),
)


FLASH_BACKWARD = Exercise(
    "flash_backward", 2, "FlashAttention's backward: recompute, D = rowsum(dO * O), block by block",
    "tinyattn.ops.flash_attention", ("FlashAttention.backward",),
    given=("blocks", "visited_pairs", "block_scores"),
    read_first="the docstring of FlashAttention in tinyattn/ops/flash_attention.py (Backward, "
               "why D = rowsum(dO * O), what differs from the paper), the forward, and "
               "Softmax.backward in tinyattn/ops/softmax.py",
    checks=(
        gradient_rows(*FLASH_ROWS),
        HIDDEN_BLOCKS,
        float32(lambda q, k, v: F.flash_attention(q, k, v, is_causal=True, block_size=2),
                (2, 5, 3), (2, 5, 3), (2, 5, 4)),
    ),
    hints=(
        "Re-read the docstring's Backward: D = rowsum(dO * O), then per pair of blocks P_ij, "
        "dV_j, dP_ij, dS_ij, dQ_i and dK_j, in that order.",
        "P_ij comes back from the saved logsumexp: exp(S_ij - logsumexp_i), with S_ij from "
        "block_scores, so no maximum is needed. Visit only the pairs `visited_pairs` marks.",
        "dS_ij = P_ij * (dP_ij - D_i) is Softmax's backward with D in place of its sum; the "
        "scores were scale * Q K^T, so dQ and dK carry the scale.",
        "dQ, dK and dV are sums over block pairs: allocate them with zeros and add each block's "
        "share in place, through views (dK[..., cols, :]); `=` would keep only the last one.",
    ),
    wrong_versions=(
        Wrong("the scale missing from dQ and dK",
              (("dQ_i += scale * (dS_ij @ K_j)", "dQ_i += dS_ij @ K_j"),
               ("dK_j += scale * (dS_ij.swapaxes(-1, -2) @ Q_i)",
                "dK_j += dS_ij.swapaxes(-1, -2) @ Q_i"))),
        Wrong("softmax's subtraction term forgotten: dS = P * dP",
              (("P_ij * (dP_ij - D[..., rows, np.newaxis])", "P_ij * dP_ij"),)),
        Wrong("`=` where gradients must add, in dV",
              (("dV_j += P_ij.swapaxes(-1, -2) @ dO_i", "dV_j = P_ij.swapaxes(-1, -2) @ dO_i"),)),
        Wrong("P recomputed without the logsumexp",
              (("np.exp(S_ij - logsumexp[..., rows, np.newaxis])", "np.exp(S_ij)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# Linear attention

def chunked_outputs():
    found = {}
    for shapes, chunk_size, eps in ((((2, 5, 3), (2, 5, 3), (2, 5, 2)), 2, 1e-6),
                                    (((2, 7, 3), (2, 7, 3), (2, 7, 4)), 3, 1e-6),
                                    (((1, 6, 2), (1, 6, 2), (1, 6, 3)), 1, 0.5),
                                    (((2, 4, 3), (2, 4, 3), (2, 4, 2)), 8, 0.0),
                                    (((2, 1, 5, 3), (1, 3, 5, 3), (3, 5, 2)), 2, 1e-6)):
        found[f"query {shapes[0]}, key {shapes[1]}, chunks of {chunk_size}, eps {eps:g}"] = \
            F.linear_attention(*leaves(*shapes), is_causal=True, eps=eps, chunk_size=chunk_size)
    return found


def causal_linear(q, k, v):
    return F.linear_attention(q, k, v, is_causal=True, chunk_size=2)


LINEAR_ATTENTION = Exercise(
    "linear_attention", 2, "causal linear attention, chunk by chunk",
    "tinyattn.functional.linear_attention", ("causal_linear_attention",),
    given=("feature_map",),
    read_first="the top of tinyattn/functional/linear_attention.py (the cumsum definition, then "
               "the chunked form, line by line), linear_attention, and `chunked` in "
               "tinyattn/functional/sliding_window.py",
    checks=(
        same("outputs: chunks of 1, 2, 3 and more than L, eps 0, broadcast batch",
             chunked_outputs),
        gradient_rows("linear attention: causal, chunks of 2", "linear attention: causal, chunks "
                      "of 1", "linear attention: causal, C > L, eps 0",
                      "linear attention: causal, broadcast batch"),
        float32(causal_linear, (2, 5, 3), (2, 5, 3), (2, 5, 2)),
    ),
    hints=(
        "Re-read the chunked form at the top of the file: the state before chunk c (S_c, z_c), "
        "then A_c within the chunk, then out_c; the four steps of the function follow it.",
        "chunked(x, n, C) cuts (..., L, D) into (..., n, C, D), padding the end. Each chunk's "
        "own sums are phi(K_c)^T V_c and phi(K_c)^T 1; the states before each chunk are their "
        "running sums over the chunks (cumsum on the chunk axis) minus the chunk's own.",
        "Within a chunk, A = (phi(Q) phi(K)^T) times a lower triangle of ones that keeps its "
        "diagonal (j <= i). The denominator has A's row sums as well as phi(Q) z, plus eps.",
        "Put the chunks back in a row with a reshape to (..., n C, Ev), and drop the padding: "
        "the first L positions.",
    ),
    wrong_versions=(
        Wrong("the state counts the chunk's own keys twice",
              (("S = KV.cumsum(axis=-3) - KV", "S = KV.cumsum(axis=-3)"),
               ("z = k_sum.cumsum(axis=-3) - k_sum", "z = k_sum.cumsum(axis=-3)"))),
        Wrong("a causal mask off by one within the chunk: the diagonal hidden",
              (("np.tril(np.ones((C, C), query.dtype))",
                "np.tril(np.ones((C, C), query.dtype), k=-1)"),)),
        Wrong("no mask within the chunk: later keys of the chunk seen",
              (("(phi_Q @ phi_K.mT) * np.tril(np.ones((C, C), query.dtype))",
                "(phi_Q @ phi_K.mT)"),)),
        Wrong("the denominator without the chunk's own keys",
              (("phi_Q @ z + A.sum(axis=-1, keepdims=True) + eps", "phi_Q @ z + eps"),)),
    ),
)


def steps_and_states():
    """The output and the state (S, z) at each step."""
    found = {}
    for shapes in (((2, 5, 3), (2, 5, 3), (2, 5, 4)), ((2, 2, 3, 3), (2, 2, 3, 3), (2, 2, 3, 2))):
        q, k, v = (x.data for x in leaves(*shapes))
        state = None
        for t in range(q.shape[-2]):
            out, state = F.linear_attention_step(ta.tensor(q[..., t, :]), ta.tensor(k[..., t, :]),
                                                 ta.tensor(v[..., t, :]), state)
            found.update({f"query {shapes[0]}, step {t}: {name}": value for name, value in
                          (("output", out), ("S", state[0]), ("z", state[1]))})
    return found


LINEAR_ATTENTION_STEP = Exercise(
    "linear_attention_step", 2, "linear attention as an RNN: one token, one state update",
    "tinyattn.functional.linear_attention", ("linear_attention_step",),
    given=("feature_map",),
    read_first="the docstring of linear_attention_step and the top of "
               "tinyattn/functional/linear_attention.py; section 3.4 of Katharopoulos et al. 2020",
    checks=(
        same("outputs and the state (S, z) at each step", steps_and_states),
        gradient_rows("linear attention: one step at a time"),
        float32(linear_attention_by_steps, (2, 4, 3), (2, 4, 3), (2, 4, 2)),
    ),
    hints=(
        "Re-read the docstring: S_i = S_{i-1} + phi(k_i) v_i^T, z_i = z_{i-1} + phi(k_i), "
        "out_i = phi(q_i) @ S_i / (phi(q_i) @ z_i + eps).",
        "phi(k_i) v_i^T is an outer product (..., E, Ev): give phi(k) a last axis of size 1 and v "
        "an axis of size 1 before its last, and multiply. At the first step (state None) S and z "
        "are this step's alone.",
        "phi(q) @ S for a batch of vectors: make phi(q) a row (..., 1, E), multiply, and take "
        "the row out again. The denominator is a dot product, kept as (..., 1). Return "
        "(out, (S, z)).",
    ),
    wrong_versions=(
        Wrong("the outer product the wrong way round: v k^T",
              (("phi_k[..., :, None] * value[..., None, :]",
                "value[..., :, None] * phi_k[..., None, :]"),)),
        Wrong("z never updated", (("z = phi_k if state is None else state[1] + phi_k",
                                   "z = phi_k"),)),
        Wrong("the feature map forgotten for the query",
              (("phi_q, phi_k = feature_map(query), feature_map(key)",
                "phi_q, phi_k = query, feature_map(key)"),)),
        Wrong("eps forgotten in the denominator",
              (("(phi_q * z).sum(axis=-1, keepdims=True) + eps",
                "(phi_q * z).sum(axis=-1, keepdims=True)"),)),
    ),
)


# ------------------------------------------------------------------------------------------------
# The experts' routing

def experts_layer(top_k, dtype=None):
    ta.manual_seed(0)
    return nn.MixtureOfExperts(6, 4, top_k=top_k, hidden_dim=8, dtype=dtype)


def experts_outputs():
    found, x = {}, ta.tensor(np.random.default_rng(0).standard_normal((2, 5, 6)))
    for top_k in (1, 2, 3):
        layer = experts_layer(top_k)
        found[f"top-{top_k}: output"] = layer(x)
        found[f"top-{top_k}: aux_loss"] = layer.aux_loss
        found[f"top-{top_k}: selected_experts"] = layer.selected_experts
    return found


def experts_with_aux_loss(x):
    """(output, aux_loss) of a top-2 layer of x's dtype."""
    layer = experts_layer(2, x.dtype)
    return layer(x), layer.aux_loss


class ExpertCalls(engine.Watcher):
    """The tokens each expert of `layer` is called on (an engine watcher: told of every layer
    called)."""

    def __init__(self, layer):
        self.experts, self.tokens = list(layer.experts), {}

    def called(self, module, args, kwargs):
        if any(module is expert for expert in self.experts):
            index = next(i for i, expert in enumerate(self.experts) if expert is module)
            self.tokens.setdefault(f"expert {index}'s calls", []).append(args[0].data.copy())


def experts_see_their_own_tokens():
    """Each expert runs once, on exactly the tokens routed to it: N * k rows in all; and one
    token, which leaves two of the four experts without tokens: those are not called at all."""
    layer = experts_layer(2)
    found = {}
    for name, shape in (("12 tokens", (3, 4, 6)), ("one token", (1, 1, 6))):
        with engine.watching(ExpertCalls(layer)) as calls:
            layer(ta.tensor(np.random.default_rng(1).standard_normal(shape)))
        found.update({f"{name}: {what}": rows for what, rows in calls.tokens.items()})
        found[f"{name}: the experts called"] = np.array(
            [e for e in range(4) if f"expert {e}'s calls" in calls.tokens])
    return found


def tied_routing():
    """Router logits that tie: experts 1 and 3 get a router row of zeros, so their logits are 0
    for every token (a tie whenever experts 0 and 2 score below 0), and a token of zeros ties all
    four. Ties go to the lower expert id, where a stable argsort of -logits puts them."""
    x = np.random.default_rng(5).standard_normal((2, 4, 6))
    x[0, 0] = 0.0
    found = {}
    for top_k in (1, 2):
        layer = experts_layer(top_k)
        layer.router.weight.data[[1, 3]] = 0.0
        found[f"top-{top_k}: output"] = layer(ta.tensor(x))
        found[f"top-{top_k}: selected_experts"] = layer.selected_experts
    return found


EXPERTS = Exercise(
    "experts", 2, "a mixture of experts: top-k routing, each expert on its own tokens",
    "tinyattn.nn.experts", ("MixtureOfExperts.forward", "dispatch"),
    read_first="the top of tinyattn/nn/experts.py (the five steps) and MixtureOfExperts' "
               "docstring (how gradients get through the routing, and the balance loss); "
               "dispatch, below it, is step 3 (chapter 5's RoutedExperts calls it too)",
    checks=(
        same("outputs, aux_loss and selected_experts, top-1, 2 and 3", experts_outputs),
        same("each expert runs once, on exactly its own tokens", experts_see_their_own_tokens, 0),
        same("tied router logits: ties go to the lower expert id, as a stable argsort puts them",
             tied_routing),
        gradient_rows("MixtureOfExperts top-1, fixed routing",
                      "MixtureOfExperts top-2, fixed routing"),
        float32(experts_with_aux_loss, (2, 3, 6)),
    ),
    hints=(
        "Re-read the five steps at the top of experts.py, and the formulas of the docstring: "
        "logits, chosen, gates, output, aux_loss.",
        "The choice is a constant (no gradient): argsort the negated logits' data, stably, and "
        "keep the first k columns. The gates are the softmax of the k chosen logits only, picked "
        "by integer-array indexing so that their gradient reaches the router.",
        "dispatch: expert e runs on the tokens where chosen == e (np.nonzero gives the tokens "
        "and which choice it was); concatenate all outputs, then index with the inverse "
        "permutation of their slots (token * k + choice) to put them in token order, (N, k, E).",
        "aux_loss = n * sum_e f_e P_e: f from np.bincount of the choices over N * k, a constant "
        "in x's dtype; P the mean over tokens of the softmax of all n logits.",
    ),
    equivalent_mutants=tuple(
        (f"MixtureOfExperts.forward: {line} :: -1 -> 1",
         "the logits are (N, n), tokens by experts: axis 1 is axis -1")
        for line in ('chosen = np.argsort(-logits.data, axis=-1, kind="stable")[:, :k]   # (N, '
                     'k), constant',
                     "gates = F.softmax(logits[np.arange(N)[:, None], chosen], axis=-1)  # (N, k)",
                     "mean_probability = F.softmax(logits, axis=-1).mean(axis=0)  # (n,) P")),
    wrong_versions=(
        Wrong("the softmax over all experts, then the top k picked (not renormalised)",
              (("F.softmax(logits[np.arange(N)[:, None], chosen], axis=-1)",
                "F.softmax(logits, axis=-1)[np.arange(N)[:, None], chosen]"),)),
        Wrong("the k smallest logits", (("np.argsort(-logits.data,", "np.argsort(logits.data,"),)),
        Wrong("the experts' outputs left in expert order, not put back in token order",
              (("grouped[np.argsort(np.concatenate(slots))]", "grouped"),)),
        Wrong("aux_loss without the factor n", (("self.aux_loss = n * (", "self.aux_loss = ("),)),
        Wrong("the k largest by an ascending argsort read backwards: ties go to the higher id",
              (('np.argsort(-logits.data, axis=-1, kind="stable")[:, :k]',
                'np.argsort(logits.data, axis=-1, kind="stable")[:, ::-1][:, :k]'),)),
    ),
)


EXERCISES = (SINUSOIDAL, ROPE, CAUSAL_MASK, FLASH_FORWARD, FLASH_BACKWARD, LINEAR_ATTENTION,
             LINEAR_ATTENTION_STEP, EXPERTS)
