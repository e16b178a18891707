"""Chapter 2. Linear attention: Katharopoulos et al. 2020, "Transformers are RNNs: Fast
Autoregressive Transformers with Linear Attention".

Softmax attention weighs value j for query i by exp(q_i . k_j), normalised over the keys. Linear
attention puts a dot product of features in place of the exponential, sim(q, k) = phi(q) . phi(k),
with phi(x) = elu(x) + 1 (positive, so that every weight is):

    out_i = sum_j (phi(q_i) . phi(k_j)) v_j / sum_j phi(q_i) . phi(k_j)
          = phi(q_i) @ S / (phi(q_i) @ z + eps),   S = sum_j phi(k_j) v_j^T  (E, Ev)
                                                   z = sum_j phi(k_j)        (E,)

Moving the brackets is the whole trick: S and z do not depend on i, so they are computed once, in
L E Ev work, and no (L, L) matrix of weights ever exists. (eps keeps the denominator away from 0,
as in the authors' code.) The result is a different function from softmax attention, not an
approximation of it computed faster.

Causal: query i may use only the keys j <= i, so S and z become prefix sums. In one line:

    S_i = cumsum_j phi(k_j) v_j^T                      (L, E, Ev): S_i = sum_{j <= i} phi(k_j) v_j^T
    z_i = cumsum_j phi(k_j)                            (L, E)
    out_i = phi(q_i) @ S_i / (phi(q_i) @ z_i + eps)

That is the definition, and the tests compare with it; but it holds an (L, E, Ev) array, Ev times
the size of the keys. `linear_attention` computes the same numbers by chunks of C positions: it
takes the prefix sums over chunks instead of over positions, which gives the running state (S, z)
before each chunk, and inside a chunk it takes the chunk's own keys as softmax attention would,
through a causal C x C matrix. For chunk c, with Q_c, K_c, V_c its C rows:

    S_c   = sum_{c' < c} phi(K_c')^T V_c'                         (E, Ev)  the state before c
    z_c   = sum_{c' < c} phi(K_c')^T 1                            (E, 1)
    A_c   = tril(phi(Q_c) phi(K_c)^T)                             (C, C)   j <= i in the chunk
    out_c = (phi(Q_c) S_c + A_c V_c) / (phi(Q_c) z_c + A_c 1 + eps)

All chunks are computed at once, as one batch of matrix products; the states are a cumsum over the
chunks (`Tensor.cumsum`). The largest arrays are the states, (L / C, E, Ev), and the weights
within the chunks, (L / C, C, C): nothing of size (L, E, Ev) or (L, L). With C = 1 and the state
carried from one token to the next, this is an RNN whose state does not grow:
`linear_attention_step`, which is how a linear transformer generates.

In this file S is the paper's state; the number of keys, which SDPA's docstring calls S, is Lk.
"""
import numpy as np

from tinyattn.arguments import any_tensor, at_least, between, door, number
from tinyattn.functional import linear_attention_checks
from tinyattn.functional.sliding_window import chunked
from tinyattn.ops.elu_and_cumsum import Elu


@door(x=any_tensor, alpha=number)
def elu(x, alpha=1.0):
    """x where x > 0, alpha (e^x - 1) elsewhere, elementwise (as PyTorch's `F.elu`)."""
    return Elu.apply(x, alpha=float(alpha))


def feature_map(x):
    """phi(x) = elu(x) + 1, the paper's feature map: x + 1 above 0, e^x below, always positive."""
    return elu(x) + 1.0


@door(linear_attention_checks.causal_needs_L_keys, query="(..., L, E)", key="(..., Lk, E)",
      value="(..., Lk, Ev)", is_causal=bool, eps=between(0), chunk_size=at_least(1))
def linear_attention(query, key, value, is_causal=False, eps=1e-6, chunk_size=64):
    """phi(q_i) @ S / (phi(q_i) @ z + eps) for each query, S and z summed over all keys, or over
    the keys j <= i when causal (see the top of this file).

    Shapes: query (..., L, E), key (..., Lk, E), value (..., Lk, Ev) -> (..., L, Ev), Lk keys; the
    leading axes broadcast; causal needs L == Lk. `chunk_size` (causal only) is the C of the
    chunked form: any positive int gives the same numbers, and only speed and memory depend on it.
    """
    eps = float(eps)
    if is_causal:
        return causal_linear_attention(query, key, value, eps, chunk_size)
    phi_q, phi_k = feature_map(query), feature_map(key)     # (..., L, E), (..., Lk, E)
    S = phi_k.mT @ value                                    # (..., E, Ev)  sum_j phi(k_j) v_j^T
    z = phi_k.mT.sum(axis=-1, keepdims=True)                # (..., E, 1)   sum_j phi(k_j)
    return (phi_q @ S) / (phi_q @ z + eps)                  # (..., L, Ev) / (..., L, 1)


def causal_linear_attention(query, key, value, eps, C):
    """The chunked causal form: query, key (..., L, E) and value (..., L, Ev), as many keys as
    queries."""
    L = query.shape[-2]
    n = -(-L // C)                                  # number of chunks, the last one padded to C
    # 1. Cut the positions into n chunks of C. The padding comes after every real position, so
    #    causality hides it from the real queries; its own outputs are dropped at the end.
    Q, K, V = (chunked(x, n, C) for x in (query, key, value))   # (..., n, C, E|Ev)
    phi_Q, phi_K = feature_map(Q), feature_map(K)               # (..., n, C, E)
    # 2. Across chunks: the state before chunk c sums phi(k) v^T and phi(k) over earlier chunks.
    KV = phi_K.mT @ V                               # (..., n, E, Ev)  chunk c's sum phi(k_j) v_j^T
    k_sum = phi_K.mT.sum(axis=-1, keepdims=True)    # (..., n, E, 1)   chunk c's sum phi(k_j)
    S = KV.cumsum(axis=-3) - KV                     # (..., n, E, Ev)  sum over chunks before c
    z = k_sum.cumsum(axis=-3) - k_sum               # (..., n, E, 1)
    # 3. Within a chunk: the causal C x C form.
    A = (phi_Q @ phi_K.mT) * np.tril(np.ones((C, C), query.dtype))   # (..., n, C, C)  j <= i
    numerator = phi_Q @ S + A @ V                   # (..., n, C, Ev)
    denominator = phi_Q @ z + A.sum(axis=-1, keepdims=True) + eps   # (..., n, C, 1)
    out = numerator / denominator                   # (..., n, C, Ev)
    # 4. The chunks back in a row, without the padding.
    out = out.reshape(*out.shape[:-3], n * C, out.shape[-1])         # (..., n C, Ev)
    return out[..., :L, :]                          # (..., L, Ev)


@door(linear_attention_checks.state_fits, query="(..., E)", key="(..., E)", value="(..., Ev)",
      eps=between(0))
def linear_attention_step(query, key, value, state=None, eps=1e-6):
    """Causal linear attention for one position, as a step of an RNN (the paper's section 3.4):

        S_i = S_{i-1} + phi(k_i) v_i^T,   z_i = z_{i-1} + phi(k_i)
        out_i = phi(q_i) @ S_i / (phi(q_i) @ z_i + eps)

    query (..., E), key (..., E), value (..., Ev) are one position's; `state` is the (S, z) that
    the previous step returned, (..., E, Ev) and (..., E), or None at the first position. Returns
    (out (..., Ev), (S, z)). Stepping through a sequence gives `linear_attention(...,
    is_causal=True)` position by position, with a state whose size does not grow.
    """
    eps = float(eps)
    phi_q, phi_k = feature_map(query), feature_map(key)    # (..., E), (..., E)
    outer = phi_k[..., :, None] * value[..., None, :]      # (..., E, Ev)  phi(k_i) v_i^T
    S = outer if state is None else state[0] + outer       # (..., E, Ev)
    z = phi_k if state is None else state[1] + phi_k       # (..., E)
    numerator = (phi_q[..., None, :] @ S)[..., 0, :]       # (..., Ev)
    denominator = (phi_q * z).sum(axis=-1, keepdims=True) + eps   # (..., 1)
    return numerator / denominator, (S, z)
