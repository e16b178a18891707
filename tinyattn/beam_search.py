"""Chapter 6. How a translator decodes: greedy search and beam search over an encoder-decoder's
next-token distributions, step by step with a cache.

Greedy search takes the likeliest token at each step. It can walk into a dead end: a first word
slightly likelier than another may leave only unlikely continuations. Beam search (as machine
translation has used it since the statistical systems, and Sutskever et al. 2014 for neural
ones) keeps the K best partial outputs, the beams, each with its score: the sum of its tokens'
log-probabilities, log p(y_1 ... y_t | x). Each step:

    1. score    every continuation of every beam: score(beam) + log p(token | beam, x),
                K x vocab candidates per input
    2. choose   the 2K best candidates (2K so that K remain even if K of them just ended)
    3. finish   a candidate that ends (with eos, or at the length limit) is a hypothesis; among
                the K best of step 2, those that end compete with the finished hypotheses so far
                by score / length^alpha (the length penalty alpha: without it, every token added
                lowers a score, and search prefers short outputs; alpha > 0 favours longer
                ones, alpha < 0 shorter ones). The K best hypotheses are kept.
    4. continue the K best candidates that did not end are the next step's beams; the cache's
                self-attention keys and values are reordered to follow them (a beam may have two
                children, and another none)
    5. stop     when no beam can end better than the worst kept hypothesis, or at the limit

The answer is the best hypothesis; a batch's rows are padded to one length.

This file reproduces transformers' `generate(do_sample=False, num_beams=K, length_penalty=alpha,
early_stopping=False)` decision for decision (generation/utils.py, `_beam_search`, 5.x):

    length      the hypothesis' generated tokens, its eos included, the decoder's start token
                not: score / (tokens generated)^alpha
    stop        (early_stopping=False) an input is done once all K hypothesis slots are filled
                and its best running beam's score divided by (tokens so far)^alpha is not above
                the worst kept hypothesis (a heuristic: with alpha > 0 a beam's score divided by
                a longer length later might still have won); search stops when every input is
                done, or when every candidate has ended (the length limit)
    arithmetic  in float32 (transformers casts the logits to float32), with -1e9 for "never":
                the beams other than the first start at -1e9, so the first step expands one beam
    columns     the start token and the longest best hypothesis' tokens; shorter rows are padded
                with pad_token_id, or eos_token_id when pad_token_id is 0 (T5's: transformers
                writes `pad_token_id or eos_token_id`, and 0 is false)

Greedy search (one beam) is transformers' greedy `generate`: a row that has emitted eos goes on
with pad_token_id (0 for T5: greedy does not replace it); it stops when every row has ended, or
after max_new_tokens.

Both take `decode(ids, cache) -> logits (rows, T, vocab)` and a cache whose encoder already ran
(T5.start: the encoder once, and the cross-attention keys and values once per input); beam
search repeats the cache's rows once per beam (`cache.repeated`) and reorders its
self-attention keys and values after each step (`cache.reorder`).
"""
import numpy as np

NEVER = np.float32(-1e9)        # transformers' "minus infinity" for scores, in float32


def greedy_search(decode, cache, max_new_tokens, start_id, eos_id, pad_id):
    """(B, columns) int64: the start token, then each row's likeliest next token until every row
    has emitted eos_id (a row that did continues with pad_id) or max_new_tokens."""
    rows = cache.batch_size
    ids = np.full((rows, 1), start_id, dtype=np.int64)                  # (B, 1)
    ended = np.zeros(rows, dtype=bool)                                  # (B,)
    for _ in range(max_new_tokens):
        logits = decode(ids[:, -1:], cache).data[:, -1]                 # (B, vocab)
        chosen = np.where(ended, pad_id, logits.argmax(axis=-1))        # (B,)
        ids = np.concatenate([ids, chosen[:, None]], axis=1)            # (B, t + 1)
        ended |= chosen == eos_id
        if ended.all():
            break
    return ids


def log_softmax(logits):
    """log softmax over the last axis, in the logits' dtype."""
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def best(scores, k):
    """The indices of the k largest of each row of `scores`, largest first (ties: the first):
    what `np.argsort(-scores, axis=-1, kind="stable")[:, :k]` gives.

    Speed: a full sort of a row of K x vocab candidates (128,512 at t5-small's vocabulary and 4
    beams) cost a quarter of a beam search's time (bench part 12). np.partition finds each row's
    k-th largest score in linear time; only the scores at least as large (k of them, more on a
    tie) are sorted, in their order in the row, so ties keep the first."""
    if scores.shape[-1] <= k:
        return np.argsort(-scores, axis=-1, kind="stable")[:, :k]
    kth = -np.partition(-scores, k - 1, axis=-1)[:, k - 1]              # (rows,)
    chosen = []
    for row, threshold in zip(scores, kth):
        at_least = np.flatnonzero(row >= threshold)                     # k or more, in order
        chosen.append(at_least[np.argsort(-row[at_least], kind="stable")[:k]])
    return np.stack(chosen)                                             # (rows, k)


def beam_search(decode, cache, max_new_tokens, num_beams, length_penalty, start_id, eos_id,
                pad_id):
    """(B, columns) int64: each input's best hypothesis after beam search with num_beams beams
    and the length penalty `length_penalty` (see the top of this file)."""
    B, K, length = cache.batch_size, num_beams, 1 + max_new_tokens
    fill = pad_id or eos_id
    cache.repeated(K)                                                   # B K rows, beam-major
    beams = np.full((B, K, length), fill, dtype=np.int64)               # (B, K, length)
    beams[:, :, 0] = start_id
    scores = np.zeros((B, K), dtype=np.float32)                         # log p of each beam
    scores[:, 1:] = NEVER                       # one beam at first: the others are copies of it
    kept = beams.copy()                                                 # hypotheses (B, K, len)
    kept_scores = np.full((B, K), NEVER, dtype=np.float32)              # score / len^alpha
    kept_lengths = np.zeros((B, K), dtype=np.int64)                     # tokens generated
    kept_filled = np.zeros((B, K), dtype=bool)                          # a real hypothesis?
    undecided = np.ones(B, dtype=bool)          # may a beam still beat a kept hypothesis?
    first_half = np.arange(2 * K) < K                                   # (2K,)

    for t in range(1, length):                  # the new token goes to column t: t generated
        # 1. score every continuation of every beam
        logits = decode(beams[:, :, t - 1].reshape(B * K, 1), cache).data[:, -1]   # (B K, V)
        log_p = log_softmax(logits.astype(np.float32)).reshape(B, K, -1)           # (B, K, V)
        V = log_p.shape[-1]
        candidates = (log_p + scores[:, :, None]).reshape(B, K * V)                # (B, K V)
        # 2. choose the 2K best: which beam each continues, and with which token
        top = best(candidates, 2 * K)                                   # (B, 2K)
        top_scores = np.take_along_axis(candidates, top, axis=1)        # (B, 2K)
        parent, token = top // V, top % V                               # (B, 2K) each
        grown = np.take_along_axis(beams, parent[:, :, None], axis=1)   # (B, 2K, length)
        grown[:, :, t] = token
        ends = (token == eos_id) | (t + 1 >= length)                    # (B, 2K)
        # 3. finish: the ending candidates among the K best, by score / length^alpha
        penalised = top_scores / float(t) ** length_penalty             # (B, 2K)
        penalised = penalised + NEVER * ~undecided[:, None]             # a done input: none
        penalised = penalised + NEVER * ~(ends & first_half)            # not ending: none
        merged = np.concatenate([kept_scores, penalised], axis=1)       # (B, 3K)
        order = best(merged, K)                                         # (B, K)
        kept = np.take_along_axis(np.concatenate([kept, grown], axis=1), order[:, :, None], 1)
        kept_scores = np.take_along_axis(merged, order, axis=1)         # (B, K)
        kept_lengths = np.take_along_axis(np.concatenate(
            [kept_lengths, np.full((B, 2 * K), t)], axis=1), order, axis=1)         # (B, K)
        kept_filled = np.take_along_axis(np.concatenate(
            [kept_filled, ends & first_half], axis=1), order, axis=1)   # (B, K)
        # 4. continue the K best that did not end; the cache follows them
        running = top_scores + NEVER * ends                             # (B, 2K)
        chosen = best(running, K)                                       # (B, K)
        beams = np.take_along_axis(grown, chosen[:, :, None], axis=1)   # (B, K, length)
        scores = np.take_along_axis(running, chosen, axis=1)            # (B, K)
        rows = np.arange(B)[:, None] * K + np.take_along_axis(parent, chosen, axis=1)
        cache.reorder(rows.reshape(-1))                                 # (B K,)
        # 5. stop: can the best beam, at today's length, still beat the worst hypothesis?
        worst = np.where(kept_filled, kept_scores.min(axis=1, keepdims=True), NEVER)  # (B, K)
        hope = scores[:, :1] / float(t) ** length_penalty               # (B, 1)
        undecided &= (hope > worst).any(axis=1)
        if not undecided.any() or ends.all():
            break
    return kept[:, 0, :1 + kept_lengths[:, 0].max()]                    # (B, columns)
