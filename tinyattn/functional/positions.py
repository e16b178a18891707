"""Chapter 2. Where a token is: the position encodings.

Attention alone does not know where a token is. Permute the tokens of a sequence and the outputs
of a transformer layer come out permuted alike, and one causal layer sees, before each position,
only the multiset of the tokens there (demo 8 measures both). Four ways to tell it, in the order
they came:

    sinusoidal  "Attention Is All You Need" (2017): a fixed table of sines and cosines, added to
                the token embeddings
    learned     GPT (2018): a table of max_len vectors learned like any weight (an nn.Embedding),
                added to the token embeddings
    rope        RoFormer (Su et al. 2021): every query and key rotated by angles proportional to
                its position, in every attention layer
    alibi       ALiBi (Press et al. 2022): a penalty proportional to the distance between query
                and key, added to the scores of every attention layer

The first two are absolute: a position is a row of a table, and a sequence longer than the table
has no encoding. With the last two, the score of query i and key j depends on i and j only through
i - j, and nothing limits the length (how well a model does beyond the length it was trained on
is another question, which demo 8 measures).

The sinusoidal table and rope share their frequencies: pair i of the D features turns by
base**(-2i/D) radians per position, from 1 down to about 1/base, so that some pairs tell
neighbours apart and others far-apart positions. (The table holds the sines and cosines of the
very angles rope rotates by.)
"""
import numpy as np

from tinyattn.arguments import at_least, between, door, floating_dtype
from tinyattn.functional import positions_checks
from tinyattn.ops import stack


def frequencies(dim, base=10000.0):
    """base**(-2i/dim) for i = 0, 1, ..., ceil(dim / 2) - 1: one angular frequency per pair."""
    return base ** (-np.arange(0, dim, 2) / dim)


@door(length=at_least(0), dim=at_least(0))
def sinusoidal_positions(length, dim):
    """The table of "Attention Is All You Need", (length, dim):

        P[pos, 2i] = sin(pos / 10000^(2i/dim)),   P[pos, 2i+1] = cos(pos / 10000^(2i/dim))

    Each pair of columns is a sinusoid of its own wavelength, so every position gets a distinct
    pattern and nearby positions get similar ones.
    """
    angles = np.arange(length)[:, None] * frequencies(dim)       # (length, ceil(dim / 2))
    table = np.zeros((length, dim))
    table[:, 0::2] = np.sin(angles)
    table[:, 1::2] = np.cos(angles[:, : dim // 2])
    return table


@door(positions_checks.pairs_of_features, x="(..., T, D)", offset=at_least(0), base=between(1))
def rope(x, offset=0, base=10000.0):
    """Rotary position embedding (RoFormer, Su et al. 2021), on interleaved pairs of features.

    x is (..., T, D) with D even: queries or keys, one row per position. The pair
    (x[..., t, 2i], x[..., t, 2i+1]) of the token at position p = offset + t is rotated by the
    angle p * theta_i, with theta_i = base**(-2i/D):

        (x0, x1)  ->  (x0 cos - x1 sin,  x0 sin + x1 cos)

    `offset` is the position of the first row: with a key/value cache, the new tokens come after
    the cached ones.

    Why a score then depends only on the distance. Write a pair as a complex number, z = x0 + i x1:
    the rotation by angle a is z -> z e^{ia}, and the dot product of two pairs is Re(z w*) (w* the
    conjugate). A query pair q at position m and a key pair k at position n add to the score

        Re( q e^{i m theta} (k e^{i n theta})* ) = Re( q k* e^{i (m - n) theta} )

    in which m and n appear only as m - n. Summed over the D/2 pairs, so does the whole score
    q . k. (The values are not rotated: positions change where a query looks, not what it takes.)

    The gradient is the rotation by the opposite angle, as for any rotation (its transpose is its
    inverse); here it comes out of the ops the rotation is written with.

    Other layouts: Llama's "rotate half" pairs feature i with feature i + D/2 instead of 2i with
    2i + 1. The rotations are the same, applied to the features in another order, so a model's
    query and key weights can be permuted from one layout to the other.
    """
    T, D = x.shape[-2:]
    angles = np.arange(offset, offset + T)[:, None] * frequencies(D, base)    # (T, D/2)
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    x0, x1 = x[..., 0::2], x[..., 1::2]                          # (..., T, D/2): each pair's two
    rotated = stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], axis=-1)      # (..., T, D/2, 2)
    return rotated.reshape(x.shape)                              # (..., T, D), pairs interleaved


@door(num_heads=at_least(1))
def alibi_slopes(num_heads):
    """ALiBi's slope m_h for each head h = 1 ... H (Press et al. 2022, section 3).

    For H a power of two, the geometric sequence m_h = 2**(-8h/H): 1/2, 1/4, ..., 1/256 for 8
    heads. Otherwise the paper's rule: the slopes of the nearest lower power of two n, then every
    other slope of 2n heads (those 2n slopes interleave with the first n) until there are H.
    """
    n = 1 << (int(num_heads).bit_length() - 1)         # the largest power of two <= num_heads
    slopes = geometric_slopes(n)
    if n < num_heads:
        slopes = np.concatenate([slopes, geometric_slopes(2 * n)[0::2][: num_heads - n]])
    return slopes


def geometric_slopes(n):
    """2**(-8h/n) for h = 1 ... n."""
    return 2.0 ** (-8.0 * np.arange(1, n + 1) / n)


@door(num_heads=at_least(1), length=at_least(0), dtype=floating_dtype,
      offset=at_least(0))
def alibi_bias(num_heads, length, dtype=np.float64, offset=0):
    """ALiBi's bias (Press et al. 2022), to pass as a float `attn_mask`: (num_heads, length, S)

        bias[h, i, j] = -m_h * |p_i - j|,   p_i = offset + i the position of query i

    with m_h the head's slope (`alibi_slopes`). The keys are the positions 0 ... S - 1, with
    S = offset + length: the cached tokens, then the new ones (offset = 0: a square bias). Every
    head penalises a key by its distance from the query, each at its own rate, so that some heads
    look near and others far.

    The paper's causal models add -m_h (p_i - j) for j <= p_i and mask the rest, which is this
    bias under a causal mask. (Its code adds m_h * j instead, which differs from that by m_h p_i,
    the same along a row, so it gives the same softmax.)
    """
    slopes = alibi_slopes(num_heads)                                   # (H,)
    query_positions = np.arange(offset, offset + length)               # (L,)
    key_positions = np.arange(offset + length)                         # (S,)
    distance = np.abs(query_positions[:, None] - key_positions)        # (L, S)
    return (-slopes[:, None, None] * distance).astype(dtype)           # (H, L, S)
