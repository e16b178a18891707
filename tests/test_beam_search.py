"""Greedy and beam search (tinyattn/beam_search.py) on a toy translator whose next-token
probabilities are written out by hand: beam search escapes greedy's dead end, the length penalty
chooses between a short and a long hypothesis, rows are padded as transformers pads them, and
the cache's rows follow the beams. (Their tokens equal transformers' `generate` on real models
in tests/test_t5.py.)"""
import numpy as np
import pytest

from tinyattn import tensor
from tinyattn.beam_search import beam_search, best, greedy_search, log_softmax

START, EOS, A, B = 0, 1, 2, 3
VOCAB = 8                       # tokens 4-7 are almost never chosen
# P[input][last token] -> the next token's probabilities over START, EOS, A, B
TABLES = {
    0: {START: {A: 0.5, B: 0.4, EOS: 0.1},        # greedy takes A, a dead end:
        A: {A: 0.34, B: 0.32, EOS: 0.30},         # nothing after A is likely
        B: {EOS: 0.9, A: 0.05, B: 0.04}},         # B ends well
    1: {START: {EOS: 0.9, A: 0.05, B: 0.04},      # the second input ends at once
        A: {EOS: 0.9, A: 0.05, B: 0.04},
        B: {EOS: 0.9, A: 0.05, B: 0.04}},
}

AFTER_THE_END = {A: 0.5, B: 0.5}    # what greedy search feeds a row that ended (eos, pad) gets


def logits_row(table):
    probabilities = np.full(VOCAB, 1e-6)
    for token, p in table.items():
        probabilities[token] = p
    return np.log(probabilities)


class ToyCache:
    """Which input each row decodes, and every row's tokens so far (as a self-attention cache
    holds its keys): beam search must keep both in step with its beams."""

    def __init__(self, inputs):
        self.inputs = np.asarray(inputs)
        self.history = np.zeros((len(inputs), 0), dtype=np.int64)
        self.reorders = []

    @property
    def batch_size(self):
        return len(self.inputs)

    def repeated(self, n):
        self.beams = n
        self.inputs = np.repeat(self.inputs, n)
        self.history = np.repeat(self.history, n, axis=0)

    def reorder(self, rows):
        self.reorders.append(rows)
        self.history = self.history[rows]


def decode(ids, cache):
    """The toy's logits (rows, 1, VOCAB) for the last tokens `ids` (rows, 1); it checks that the
    cache's history ends where the beam's tokens do."""
    cache.history = np.concatenate([cache.history, ids], axis=1)
    rows = [logits_row(TABLES[int(i)].get(int(last), AFTER_THE_END))
            for i, last in zip(cache.inputs, ids[:, 0])]
    return tensor(np.array(rows, dtype=np.float32)[:, None, :])


def log_probability(sequence, which=0):
    """log p of a sequence's tokens after the start, up to its first eos."""
    total, last = 0.0, START
    for token in sequence[1:]:
        total += float(log_softmax(logits_row(TABLES[which][last]))[token])
        if token == EOS:
            break
        last = token
    return total


def test_beam_search_escapes_greedys_dead_end():
    greedy = greedy_search(decode, ToyCache([0]), 3, START, EOS, 0)
    beams = beam_search(decode, ToyCache([0]), 3, 2, 1.0, START, EOS, 0)
    assert greedy.tolist() == [[START, A, A, A]]
    assert beams.tolist() == [[START, B, EOS]]
    assert log_probability(beams[0]) > log_probability(greedy[0])


@pytest.mark.parametrize("length_penalty, expected", [
    (-1.0, [START, B, EOS]),            # score * length: shorter wins
    (0.0, [START, B, EOS]),             # the plain log-probability: -1.02 against -1.93
    (2.0, [START, A, B, EOS]),          # score / length^2: -1.02 / 4 < -1.93 / 9
])
def test_the_length_penalty_divides_by_the_generated_length(length_penalty, expected):
    beams = beam_search(decode, ToyCache([0]), 3, 2, length_penalty, START, EOS, 0)
    assert beams.tolist() == [expected]


@pytest.mark.parametrize("pad_id, fill", [(0, EOS), (5, 5)])
def test_rows_are_padded_to_the_longest_best_hypothesis(pad_id, fill):
    """transformers fills with `pad_token_id or eos_token_id`: eos when the pad id is 0 (T5)."""
    beams = beam_search(decode, ToyCache([0, 1]), 3, 2, 1.0, START, EOS, pad_id)
    assert beams.tolist() == [[START, B, EOS], [START, EOS, fill]]
    greedy = greedy_search(decode, ToyCache([0, 1]), 3, START, EOS, pad_id)
    assert greedy.tolist() == [[START, A, A, A], [START, EOS, pad_id, pad_id]]


def test_the_cache_follows_the_beams_within_each_input():
    cache = ToyCache([0, 1])
    beam_search(decode, cache, 3, 2, 1.0, START, EOS, 0)
    assert cache.beams == 2 and cache.reorders
    for rows in cache.reorders:         # a beam is replaced by a beam of the same input only
        np.testing.assert_array_equal(rows // 2, np.arange(4) // 2)


@pytest.mark.parametrize("shape, k", [((3, 50), 8), ((2, 7), 7), ((2, 5), 8), ((4, 1000), 4)])
@pytest.mark.parametrize("ties", [False, True])
def test_best_is_a_stable_sort_cut_to_k(shape, k, ties):
    """The partition that spares best() a full sort picks what the sort picks, ties included
    (rounded scores tie often; the first of equals comes first), and -inf and -1e9 too."""
    scores = np.random.default_rng(k).standard_normal(shape).astype(np.float32)
    if ties:
        scores = np.round(scores)
        scores[:, ::3] = -np.inf
        scores[:, 1::5] = np.float32(-1e9)
    np.testing.assert_array_equal(best(scores, k),
                                  np.argsort(-scores, axis=-1, kind="stable")[:, :k])
