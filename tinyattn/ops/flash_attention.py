"""Chapter 2. FlashAttention-2: the attention of `F.scaled_dot_product_attention`, computed block by
block as one fused op, so that the (L, S) scores are never held at once; over the pairs of blocks
that a block layout marks visible, so that block-sparse attention skips the work its mask hides."""
import numpy as np

from tinyattn.engine import Function


def blocks(length, block_size):
    """Slices cutting range(length) into blocks of `block_size` (the last one may be shorter)."""
    return [slice(start, min(start + block_size, length)) for start in range(0, length, block_size)]


def visited_pairs(layout, is_causal):
    """(Lb, Sb) booleans: the pairs (query block i, key block j) that some query of the batch sees,
    from a layout (..., Lb, Sb). When causal, key block j must also start before query block i
    ends, which with one block size for both means j <= i: the blocks wholly above the diagonal
    are never visited."""
    pairs = layout.any(axis=tuple(range(layout.ndim - 2)))          # (Lb, Sb)
    if is_causal:
        pairs = pairs & np.tri(*pairs.shape, dtype=bool)             # (Lb, Sb) j <= i
    return pairs


def block_scores(Q_i, K_j, rows, cols, scale, is_causal, seen):
    """S_ij = scale * Q_i K_j^T, the scores of the queries `rows` against the keys `cols`; -inf
    where a pair is hidden: in the (batch, head) entries whose layout hides this pair of blocks
    (`seen`, the layout's (...) entries for it), and when causal above the diagonal (only a block
    crossing it has such pairs)."""
    S_ij = Q_i @ K_j.swapaxes(-1, -2)                               # (..., Br, Bc)
    S_ij *= scale                                                   # (..., Br, Bc)
    if not seen.all():                                              # a per-(batch, head) layout
        S_ij = np.where(seen[..., np.newaxis, np.newaxis], S_ij, -np.inf)   # (..., Br, Bc)
    if is_causal and cols.stop - 1 > rows.start:                    # a key after a query
        query = np.arange(rows.start, rows.stop)[:, np.newaxis]     # (Br, 1)
        hidden = query < np.arange(cols.start, cols.stop)           # (Br, Bc)
        S_ij[..., hidden] = -np.inf                                 # (..., Br, Bc)
    return S_ij


class FlashAttention(Function):
    """O = softmax(scale * Q K^T) V, block by block (Tri Dao, "FlashAttention-2: Faster Attention
    with Better Parallelism and Work Partitioning", 2023: Algorithms 1 (forward) and 2 (backward)),
    over the pairs of blocks that `layout` marks visible.

    Q (..., L, E), K (..., S, E), V (..., S, Ev) -> O (..., L, Ev). The steps below carry the
    paper's numbers and symbols: blocks Q_i of queries (rows) and K_j, V_j of keys (columns),
    scores S_ij, weights P_ij, the running row max m and row sum l, the logsumexp (the paper's L,
    called `logsumexp` here because L is the number of queries) and D. In the shape comments, Br
    and Bc are the lengths of the current query and key blocks: block_size, or less for a last
    block.

    Forward (Algorithm 1; its line numbers mark the code). For each block of queries (line 3),
    walk the blocks of keys it sees (line 6), keeping, per query, the largest score m seen so far,
    the sum l of exp(score - m) and an unnormalised output O_i (lines 8-10). When a new block
    raises the maximum from m_old to m_new, the sums and outputs gathered so far were computed
    against m_old and are multiplied by exp(m_old - m_new) <= 1; after the last block, O_i is
    divided by l once (line 12). Saved for backward: Q, K, V, O and one number per query,
    logsumexp = m + log l (line 13), from which any block of weights comes back as
    P_ij = exp(S_ij - logsumexp_i).

    Backward (Algorithm 2; its line numbers mark the code). With dO = dL/dO, the softmax rule for
    the scores needs, per query, the number D = rowsum(P * dP), which computed so would need the
    query's whole row of P and dP; it equals rowsum(dO * O), from arrays of one row per query:

        rowsum(P * dP)_i = sum_j P_ij dP_ij = sum_j P_ij (dO_i . V_j)      (dP = dO V^T)
                         = dO_i . (sum_j P_ij V_j) = dO_i . O_i             (O = P V)

    so D costs one pass over O (line 4). Then, for each block of keys (line 5), for each block of
    queries that sees it (line 8): recompute S_ij (line 10) and P_ij = exp(S_ij - logsumexp_i)
    (line 11), then dV_j += P_ij^T dO_i (line 12), dP_ij = dO_i V_j^T (line 13),
    dS_ij = P_ij * (dP_ij - D_i) (line 14, the softmax backward of `Softmax`),
    dQ_i += scale * dS_ij K_j (line 15) and dK_j += scale * dS_ij^T Q_i (line 16).

    Why the keys are the outer loop of the backward, where the queries are the forward's. Each
    of the three gradients is a sum over block pairs: dK_j and dV_j over the query blocks i, dQ_i
    over the key blocks j. With the keys outside, the sums of dK_j and dV_j are finished in the
    inner loop, where the paper keeps them on chip (line 7: zeros; line 18: written once), and
    only dQ_i is added to from several outer steps: the paper loads it, adds, and writes it back
    (line 15), which on a GPU, where the key blocks run in parallel, are atomic adds. The other
    order would do the same for two gradients instead of one. Here nothing runs in parallel, so
    the order changes no number: dK_j and dV_j are views into dK and dV, added to in place, and
    dQ_i, a view into dQ, is added to in place as the key blocks pass; the loop keeps the
    paper's order so that its lines can be read beside it.

    The layout: which pairs of blocks are visited. `layout` (..., Lb, Sb) holds one boolean per
    (query block, key block) pair, Lb = ceil(L / block_size) and Sb = ceil(S / block_size), and
    the op computes softmax over the keys of the visible blocks only: the attention of SDPA under
    the mask kron(layout, ones(block_size, block_size))[:L, :S]. Both passes loop over the visible
    pairs and nothing else, so a layout with a tenth of the pairs costs about a tenth of the work.
    `F.flash_attention` is this op with every pair visible; `F.block_sparse_attention` passes the
    user's layout. One op serves both because sparsity changes only which pairs the two loops
    visit: the online softmax, the saved logsumexp and the backward are the same, and a second op
    would repeat them line for line. A layout with leading (batch, head) axes is visited where any
    entry sees a pair, and the entries that do not see it get -inf scores in that block.

    What differs from the paper:
    * The scale: the paper writes S = Q K^T; here S = scale * Q K^T, so dQ and dK carry the scale.
    * `is_causal` (key j seen by query i when j <= i, for L != S too, as in SDPA): blocks wholly
      above the diagonal are skipped, in both passes; a block crossing it gets -inf scores there.
    * One `block_size` for both the query blocks (the paper's B_r) and the key blocks (B_c); the
      last block of each may be shorter. Leading (batch, head) axes broadcast as in SDPA.
    * "On chip" (SRAM) and "HBM" become small and large NumPy arrays (lines 6-7, 9 and 18 of
      Algorithm 2, the loads and writes, have no code of their own: see why the keys are the
      outer loop, above).
    * A query that sees no key (every block of its row hidden, or S = 0) gets a zero output, as in
      SDPA. Its row of scores may be all -inf in a visited block, so exponents are taken against
      m_safe, its running max or 0 while that is still -inf: exp(-inf - 0) = 0, never
      exp(-inf + inf) = NaN. Its sum l stays 0, so its logsumexp is log 0 = -inf; what is saved is
      +inf, the logsumexp that makes every recomputed weight exp(S_ij - inf) = 0, which is what a
      zero output row means: its gradients are 0 too.
    * Erratum: Algorithm 1, line 10 of the paper reads O_i = diag(e^(m_old - m_new))^-1 O_i + ...
      The inverse is a misprint (flash-attention GitHub issue 991): the old accumulator is
      multiplied by e^(m_old - m_new) <= 1, as the authors' code does; the inverse belongs to
      the final normalisation only, O_i = diag(l_i)^-1 O_i (line 12).

    Its memory, its speed against plain attention and the choice of block size are measured in
    docs/flash_attention.md.
    """

    def forward(self, Q, K, V, scale, is_causal, block_size, layout):
        L, S, Ev = Q.shape[-2], K.shape[-2], V.shape[-1]
        batch = np.broadcast_shapes(Q.shape[:-2], K.shape[:-2], V.shape[:-2])    # the "..." axes
        O = np.empty(batch + (L, Ev), Q.dtype)                               # (..., L, Ev)
        logsumexp = np.empty(batch + (L,), Q.dtype)                          # (..., L)
        key_blocks = blocks(S, block_size)
        pairs = visited_pairs(layout, is_causal)                             # (Lb, Sb)
        for i, rows in enumerate(blocks(L, block_size)):  # line 3: a block of queries at a time
            Q_i = Q[..., rows, :]                                            # (..., Br, E)
            Br = rows.stop - rows.start                       # block_size, or fewer at the end
            O_i = np.zeros(batch + (Br, Ev), Q.dtype)         # (..., Br, Ev) not normalised yet
            l_i = np.zeros(batch + (Br, 1), Q.dtype)          # (..., Br, 1)  running row sum
            m_i = np.full(batch + (Br, 1), -np.inf, Q.dtype)  # (..., Br, 1)  running row max
            for j in np.flatnonzero(pairs[i]):                # line 6: each key block it sees
                cols = key_blocks[j]
                K_j, V_j = K[..., cols, :], V[..., cols, :]          # (..., Bc, E), (..., Bc, Ev)
                S_ij = block_scores(Q_i, K_j, rows, cols, scale, is_causal,
                                    layout[..., i, j])               # (..., Br, Bc) line 8
                m_new = np.maximum(m_i, S_ij.max(axis=-1, keepdims=True))    # (..., Br, 1) line 9
                m_safe = np.where(m_new == -np.inf, 0, m_new)   # (..., Br, 1) no key seen yet
                P_ij = np.exp(S_ij - m_safe)                                 # (..., Br, Bc)
                rescale = np.exp(m_i - m_safe)        # (..., Br, 1) e^(m_old - m_new), line 10
                l_i = rescale * l_i + P_ij.sum(axis=-1, keepdims=True)       # (..., Br, 1)
                O_i = rescale * O_i + P_ij @ V_j                    # (..., Br, Ev) line 10
                m_i = m_new                                                  # (..., Br, 1)
            sees_none = l_i == 0                      # (..., Br, 1) no key seen: O_i stays 0
            l_i = np.where(sees_none, 1, l_i)                                # (..., Br, 1)
            O[..., rows, :] = O_i / l_i               # line 12: normalise once (..., Br, Ev)
            logsumexp[..., rows] = np.where(sees_none, np.inf,
                                            m_i + np.log(l_i))[..., 0]  # (..., Br) line 13
        self.saved = (Q, K, V, O, logsumexp, scale, is_causal, block_size, layout)
        return O

    def backward(self, grad):
        Q, K, V, O, logsumexp, scale, is_causal, block_size, layout = self.saved
        (L, E), (S, Ev) = Q.shape[-2:], V.shape[-2:]
        dO = grad                                                            # (..., L, Ev)
        batch = dO.shape[:-2]                                                # the "..." axes
        D = (dO * O).sum(axis=-1)                 # line 4: D = rowsum(dO * O) (..., L)
        dQ = np.zeros(batch + (L, E), Q.dtype)                               # (..., L, E)
        dK = np.zeros(batch + (S, E), Q.dtype)                               # (..., S, E)
        dV = np.zeros(batch + (S, Ev), Q.dtype)                              # (..., S, Ev)
        query_blocks = blocks(L, block_size)
        pairs = visited_pairs(layout, is_causal)                             # (Lb, Sb)
        for j, cols in enumerate(blocks(S, block_size)):  # line 5: a block of keys at a time
            K_j, V_j = K[..., cols, :], V[..., cols, :]              # (..., Bc, E), (..., Bc, Ev)
            dK_j, dV_j = dK[..., cols, :], dV[..., cols, :]  # line 7: views into dK, dV (zeros)
            for i in np.flatnonzero(pairs[:, j]):             # line 8: the query blocks seeing it
                rows = query_blocks[i]
                Q_i, dO_i = Q[..., rows, :], dO[..., rows, :]        # (..., Br, E), (..., Br, Ev)
                dQ_i = dQ[..., rows, :]                              # (..., Br, E) a view into dQ
                S_ij = block_scores(Q_i, K_j, rows, cols, scale, is_causal,
                                    layout[..., i, j])              # (..., Br, Bc) line 10
                P_ij = np.exp(S_ij - logsumexp[..., rows, np.newaxis])  # (..., Br, Bc) line 11
                dV_j += P_ij.swapaxes(-1, -2) @ dO_i                 # (..., Bc, Ev) line 12
                dP_ij = dO_i @ V_j.swapaxes(-1, -2)                  # (..., Br, Bc) line 13
                dS_ij = P_ij * (dP_ij - D[..., rows, np.newaxis])    # (..., Br, Bc) line 14
                dQ_i += scale * (dS_ij @ K_j)                         # (..., Br, E) line 15
                dK_j += scale * (dS_ij.swapaxes(-1, -2) @ Q_i)        # (..., Bc, E) line 16
        return dQ, dK, dV
