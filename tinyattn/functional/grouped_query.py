"""Chapter 5. Grouped-query attention: several query heads share one key/value head.

    H query heads, K key/value heads (K divides H), groups of G = H / K query heads:
    query head h reads key/value head h // G.

    K = H   multi-head attention, as in chapter 1
    K = 1   multi-query attention (Shazeer 2019, "Fast Transformer Decoding: One Write-Head is
            All You Need"): every query head reads the same keys and values
    1 < K < H   grouped-query attention (Ainslie et al. 2023, "GQA: Training Generalized
            Multi-Query Transformer Models from Multi-Head Checkpoints"): Llama 3 (8 groups),
            Mistral, Qwen, Gemma 3 (the 1B model: K = 1)

Here a group's queries are stacked on its key/value head where most codebases repeat the head G
times (transformers' `repeat_kv`); the two are equal: both compute the same products, arranged
otherwise.

Why: generating text, a model keeps every past token's keys and values (the KV cache), 2 K D
numbers per token per layer; reading them back is what each new token's step waits on. With K
heads instead of H the cache is H / K times smaller (Llama 3 8B: 32 query heads, 8 key/value
heads, a quarter), at the price of fewer distinct keys. Ainslie et al. find quality close to
multi-head attention with speed close to multi-query.

How it is computed here. The G query heads of a group are stacked, (B, H, L, E) -> (B, K, G L, E):
row g L + i is query i of the group's head g. One product with the group's keys then scores all
of them, (B, K, G L, S), and no key is copied (transformers' `repeat_kv` copies each key head G
times instead; chapter 2's broadcasting would work too, at G products per key head).

The backward: a shared key/value head gets the sum of its group's gradients. With the stacked
queries Q (G L, E), one group's scores are P = Q K^T scale (G L, S), and the matmul adjoint gives

    dL/dK = scale dP^T Q = scale sum_g dP_g^T Q_g          (dP_g, Q_g: the rows of head g)

which is the sum over the G heads of what each head would have sent to a key head of its own.
Likewise dL/dV = A^T dO = sum_g A_g^T dO_g for the weights A and the output's gradient dO. Nothing
here adds the group up: the product over the stacked rows does. (Had the key heads been copied,
the copy's backward would add the copies' gradients; had they been broadcast, the sweep's
unbroadcast would sum over the group's axis: the same sum, in another place.)
"""
import numpy as np

from tinyattn.arguments import door, number, optional
from tinyattn.functional import grouped_query_checks as checks
from tinyattn.functional.scaled_dot_product import attention_weights, causal_mask
from tinyattn.functional.sparse_patterns import in_band


def grouped_weights(query, key, attn_mask=None, scale=None):
    """softmax(query @ key^T * scale + mask) for query (B, H, L, E) and key (B, K, S, E), each
    key head shared by its group of G = H / K query heads: weights (B, H, L, S), computed with
    each group's queries stacked as the rows of one product on its key head. `attn_mask`
    (None, or a boolean or float array broadcasting to (B, H, L, S)) means what it means in SDPA.
    (No door: `grouped_query_attention` checks a user's arguments; layers call this inside
    theirs.)"""
    B, H, L, E = query.shape
    K, S = key.shape[1], key.shape[2]
    G = H // K
    stacked = query.reshape(B, K, G * L, E)              # (B, K, G L, E): a group's queries
    if attn_mask is not None:                            # each head's mask, stacked alike
        attn_mask = np.asarray(attn_mask)
        if attn_mask.ndim <= 2:                          # one mask for every head
            attn_mask = np.tile(np.broadcast_to(attn_mask, (L, S)), (G, 1))      # (G L, S)
        else:
            attn_mask = np.broadcast_to(attn_mask, (B, H, L, S)).reshape(B, K, G * L, S)
    weights = attention_weights(stacked, key, attn_mask, scale=scale)   # (B, K, G L, S)
    return weights.reshape(B, H, L, S)                   # (B, H, L, S)


def grouped_values(weights, value):
    """weights (B, H, L, S) of each query head times the values (B, K, S, Ev) of its group's
    head: (B, H, L, Ev)."""
    B, H, L, S = weights.shape
    K, Ev = value.shape[1], value.shape[3]
    stacked = weights.reshape(B, K, (H // K) * L, S)     # (B, K, G L, S)
    return (stacked @ value).reshape(B, H, L, Ev)        # (B, K, G L, Ev) -> (B, H, L, Ev)


@door(checks.heads_group_and_mask_fits, query="(B, H, L, E)", key="(B, K, S, E)",
      value="(B, K, S, Ev)", is_causal=bool, scale=optional(number))
def grouped_query_attention(query, key, value, attn_mask=None, is_causal=False, scale=None):
    """Attention of H query heads (B, H, L, E) to K key/value heads (B, K, S, E), (B, K, S, Ev),
    K dividing H, query head h reading key/value head h // (H / K): (B, H, L, Ev). The same
    result as `F.scaled_dot_product_attention` with every key/value head repeated H / K times
    (PyTorch's `enable_gqa=True`), without the copies (see the top of this file).

    `attn_mask` (None, or a boolean or float NumPy array broadcasting to (B, H, L, S)),
    `is_causal` (key j seen by query i when j <= i, aligned at the start as in SDPA) and `scale`
    (default 1 / sqrt(E)) mean what they mean in SDPA.
    """
    L, S = query.shape[2], key.shape[2]
    if is_causal:
        attn_mask = causal_mask(L, S, attn_mask)          # (..., L, S)
    weights = grouped_weights(query, key, attn_mask, scale)          # (B, H, L, S)
    return grouped_values(weights, value)                             # (B, H, L, Ev)


def visible_keys(L, S, window=None):
    """The boolean mask (L, S) of a cached step: the L new queries are the last L of the S
    positions the keys stand for, so query i, at position S - L + i, sees the keys j <= S - L + i
    (causal), and with a sliding `window` only the `window` newest of those, j > S - L + i -
    window (transformers' sliding mask, `kv_idx > q_idx - sliding_window`). None when it hides
    nothing (one new token and a window that holds every key), so that no mask is applied."""
    if L == 1 and (window is None or S <= window):
        return None
    if window is None:
        return causal_mask(L, S, offset=S - L)                         # (L, S)
    queries = np.arange(S - L, S)[:, None]                             # (L, 1) their positions
    return in_band(queries, np.arange(S), window)                      # (L, S)

