"""Chapter 2. Sliding-window (local) attention, computed chunk by chunk so that its cost grows as L
* window.

Query i sees only the keys near it:

    causal, as Mistral 7B (Jiang et al. 2023):        i - window < j <= i    (window keys)
    not causal, as Longformer (Beltagy et al. 2020):  |i - j| < window       (2 window - 1 keys)

How many keys a window of W holds differs between sources. Here, as in Hugging Face transformers'
sliding-window mask (`kv_idx > q_idx - sliding_window`, causal), W keys, i itself included.
Mistral's paper ("positions between i - W and i") and its reference code (`triu(tril(ones),
diagonal=-W)`) keep W + 1 keys, positions i - W ... i, when the prompt is run whole; while
generating, that code's rolling cache of W entries holds W. So Mistral's W is window = W + 1 here.

SDPA with this band as its mask (`sparse_patterns.local_mask`) gives the same result, but it
scores all L x L pairs and throws most of them away. Here the positions are cut into chunks of C =
window positions (the last one padded), and every key that a query of chunk c may see lies in
chunk c - 1 or c (or c + 1, when not causal). So each chunk of C queries is scored against those
2C (3C) keys only, and the band is masked inside them:

    queries of chunk c:  positions [c C, (c + 1) C)
    their keys:          positions [(c - 1) C, (c + 1) C), or up to (c + 2) C when not causal

L / C chunks of (C, 2C) scores: 2 L window scores in all instead of L^2, and as much work.
Longformer's code has the same idea ("sliding_chunks_no_overlap"), there without the mask: each
query sees its three chunks whole, between w and 2w keys on each side.
"""
import math

import numpy as np

from tinyattn import ops
from tinyattn.arguments import at_least, door, number, optional
from tinyattn.functional import checks
from tinyattn.functional.basics import softmax
from tinyattn.functional.sparse_patterns import in_band


@door(checks.default_scale, query="(..., L, E)", key="(..., L, E)", value="(..., L, Ev)",
      window=at_least(1), is_causal=bool, scale=optional(number))
def sliding_window_attention(query, key, value, window, is_causal=True, scale=None):
    """Attention of each query to the keys within `window` positions of it (see the top of this
    file): the same result as `F.scaled_dot_product_attention(query, key, value,
    attn_mask=local_mask(L, window, is_causal))`, in work and memory that grow as L * window.

    Shapes: query (..., L, E), key (..., L, E), value (..., L, Ev) -> (..., L, Ev), as many keys
    as queries; the leading axes broadcast. `window` is a positive int (L or more: plain causal
    attention, or plain attention when not causal); `scale` defaults to 1 / sqrt(E).
    """
    L, E = query.shape[-2:]
    scale = 1.0 / math.sqrt(E) if scale is None else float(scale)
    C = max(1, min(window, L))              # chunk size: a query's keys lie in its neighbour chunks
    n = -(-L // C)                          # number of chunks, the last one padded to C positions
    spans = 2 if is_causal else 3           # chunks of keys per chunk of queries

    # 1. Cut the queries into chunks; scaling them here costs L E products, not 2 L C.
    queries = chunked(query * scale, n, C)                         # (..., n, C, E)
    # 2. Each chunk's keys and values: chunks c - 1, c (and c + 1), side by side.
    keys = neighbour_chunks(key, C, n, spans)                      # (..., n, spans C, E)
    values = neighbour_chunks(value, C, n, spans)                  # (..., n, spans C, Ev)
    # 3. Score the chunks, keep the band: query i = c C + a, key j = (c - 1) C + b.
    i = np.arange(n * C).reshape(n, C, 1)                          # (n, C, 1)
    j = (np.arange(n).reshape(n, 1, 1) - 1) * C + np.arange(spans * C)   # (n, 1, spans C)
    allowed = in_band(i, j, window, is_causal) & (0 <= j) & (j < L)      # (n, C, spans C)
    scores = queries @ keys.mT                                     # (..., n, C, spans C)
    scores = ops.where(allowed, scores, -math.inf)                 # (..., n, C, spans C)
    weights = softmax(scores, axis=-1)                             # (..., n, C, spans C)
    # 4. Average the values, put the chunks back in a row, drop the padding.
    out = weights @ values                                         # (..., n, C, Ev)
    out = out.reshape(*out.shape[:-3], n * C, out.shape[-1])       # (..., n C, Ev)
    return out[..., :L, :]                                         # (..., L, Ev)


def neighbour_chunks(x, C, n, spans):
    """For each chunk c of x's positions, chunks c - 1 .. c + spans - 2 side by side: x (..., L, D)
    -> (..., n, spans C, D). Positions before 0 and past L are zeros (the mask hides them)."""
    chunks = chunked(x, n + spans - 1, C, before=C)                # (..., n + spans - 1, C, D)
    return ops.concatenate([chunks[..., s:s + n, :, :] for s in range(spans)],
                           axis=-2)                                # (..., n, spans C, D)


def chunked(x, n, C, before=0):
    """x (..., L, D) cut into n chunks of C positions: (..., n, C, D). `before` rows of zeros go
    in front, and as many behind as fill the last chunk (also used by linear attention)."""
    *leading, L, D = x.shape
    after = n * C - before - L
    x = ops.concatenate([np.zeros((*leading, before, D), x.dtype), x,
                         np.zeros((*leading, after, D), x.dtype)], axis=-2)   # (..., n C, D)
    return x.reshape(*leading, n, C, D)
