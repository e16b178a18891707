"""Positions (tinyattn/functional/positions.py and where layers use them): rotary embeddings
against the formula and their relative-position property, ALiBi's slopes and bias, attention with
rope and with a KVCache, the causal model's positional options, and what a model without
positions cannot see. (Gradients: the rows of tinyattn_tools/checklist/positions.py.)"""
import math

import numpy as np
import pytest
from references import arrays

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.nn.causal_transformer import POSITIONAL
from tinyattn_tools.checklist.ops import np_attention


def rope_by_the_formula(x, offset=0, base=10000.0):
    """The definition, one pair at a time: (x0 cos - x1 sin, x0 sin + x1 cos) at angle p theta_i."""
    out = np.empty_like(x)
    T, D = x.shape[-2:]
    for t in range(T):
        for i in range(D // 2):
            angle = (offset + t) * base ** (-2 * i / D)
            x0, x1 = x[..., t, 2 * i], x[..., t, 2 * i + 1]
            out[..., t, 2 * i] = x0 * math.cos(angle) - x1 * math.sin(angle)
            out[..., t, 2 * i + 1] = x0 * math.sin(angle) + x1 * math.cos(angle)
    return out


@pytest.mark.parametrize("offset, base", [(0, 10000.0), (5, 10000.0), (3, 50.0)])
def test_rope_is_the_formula(offset, base):
    x = arrays((2, 3, 6, 8))[0]
    np.testing.assert_allclose(F.rope(ta.tensor(x), offset, base).data,
                               rope_by_the_formula(x, offset, base), rtol=1e-12, atol=1e-12)


def test_rope_keeps_float32_and_lengths():
    x = arrays((4, 6))[0].astype(np.float32)
    rotated = F.rope(ta.tensor(x), offset=2)
    assert rotated.dtype == np.float32
    np.testing.assert_allclose(rotated.data, rope_by_the_formula(x, 2), rtol=1e-5, atol=1e-5)
    # a rotation: every pair keeps its length
    pairs = rotated.data.reshape(4, 3, 2)
    np.testing.assert_allclose(np.hypot(pairs[..., 0], pairs[..., 1]),
                               np.hypot(x[:, 0::2], x[:, 1::2]), rtol=1e-6)


def test_rope_with_an_offset_continues_the_sequence():
    x = ta.tensor(arrays((2, 7, 8))[0])
    np.testing.assert_allclose(F.rope(x[:, 4:], offset=4).data, F.rope(x).data[:, 4:],
                               rtol=1e-12, atol=1e-12)


def test_a_rotated_score_depends_only_on_the_distance():
    """q . k after rotating q to position m and k to position n: the same for every (m, n) at
    one distance m - n, and different at another distance."""
    q, k = arrays((1, 16), (1, 16))

    def score(m, n):
        return (F.rope(ta.tensor(q), offset=m).data @ F.rope(ta.tensor(k), offset=n).data.T).item()

    for distance in (0, 3, -5):
        scores = [score(n + distance, n) for n in (5, 17, 40, 1000)]
        assert max(scores) - min(scores) < 1e-11
    assert abs(score(3, 0) - score(4, 0)) > 1e-3


def test_rope_rejects_what_it_cannot_rotate():
    with pytest.raises(ValueError, match=r"rope: .*must be even; got x of shape \(2, 3, 5\)"):
        F.rope(ta.tensor(np.ones((2, 3, 5))))
    with pytest.raises(ValueError, match=r"rope: offset must be at least 0, got -1"):
        F.rope(ta.tensor(np.ones((3, 4))), offset=-1)
    with pytest.raises(TypeError, match=r"rope: x must hold floating-point numbers"):
        F.rope(ta.tensor(np.ones((3, 4), int)))
    with pytest.raises(TypeError, match=r"rope: x must be a Tensor"):
        F.rope(np.ones((3, 4)))
    with pytest.raises(ValueError, match=r"rope: x must have shape \(\.\.\., T, D\), got \(4,\)"):
        F.rope(ta.tensor(np.ones(4)))


def test_alibi_slopes_are_the_papers():
    np.testing.assert_array_equal(F.alibi_slopes(8), [1 / 2 ** h for h in range(1, 9)])
    # 6 heads: the 4 slopes of 4 heads, then every other slope of 8 heads
    np.testing.assert_array_equal(F.alibi_slopes(6),
                                  [1 / 4, 1 / 16, 1 / 64, 1 / 256, 1 / 2, 1 / 8])
    np.testing.assert_array_equal(F.alibi_slopes(1), [1 / 256])
    np.testing.assert_allclose(F.alibi_slopes(16), 2.0 ** (-0.5 * np.arange(1, 17)))
    np.testing.assert_allclose(F.alibi_slopes(12)[8:], 2.0 ** -np.array([0.5, 1.5, 2.5, 3.5]))


def test_alibi_bias_penalises_distance():
    bias = F.alibi_bias(6, 5)
    assert bias.shape == (6, 5, 5) and bias.dtype == np.float64
    slopes = F.alibi_slopes(6)
    for h, i, j in [(0, 0, 0), (1, 4, 0), (5, 2, 3), (3, 1, 4)]:
        assert bias[h, i, j] == -slopes[h] * abs(i - j)
    assert F.alibi_bias(2, 3, np.float32).dtype == np.float32
    # with an offset: the last rows of the square bias of the whole sequence
    np.testing.assert_array_equal(F.alibi_bias(4, 2, offset=5), F.alibi_bias(4, 7)[:, 5:])


def test_alibi_through_attention_is_the_bias_added_to_the_scores():
    q, k, v = arrays((2, 4, 5, 6), (2, 4, 5, 6), (2, 4, 5, 3))
    bias = F.alibi_bias(4, 5)
    out = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v),
                                         attn_mask=bias, is_causal=True)
    scores = q @ k.swapaxes(-1, -2) / math.sqrt(6) + bias
    scores = np.where(np.tril(np.ones((5, 5), bool)), scores, -np.inf)
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    expected = weights / weights.sum(-1, keepdims=True) @ v
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("call, error, message", [
    (lambda: F.alibi_bias(0, 4), ValueError, r"alibi_bias: num_heads must be at least 1, got 0"),
    (lambda: F.alibi_bias(2.0, 4), TypeError, r"alibi_bias: num_heads must be an int"),
    (lambda: F.alibi_bias(2, -1), ValueError, r"alibi_bias: length must be at least 0, got -1"),
    (lambda: F.alibi_bias(2, 3, np.int32), TypeError, r"alibi_bias: dtype must be a floating"),
    (lambda: F.alibi_slopes(0), ValueError, r"alibi_slopes: num_heads must be at least 1"),
])
def test_alibi_names_bad_arguments(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_the_sinusoidal_table_moved_but_stays_importable():
    table = F.sinusoidal_positions(10, 6)
    angle = 7 / 10000 ** (2 * 2 / 6)
    assert table[7, 4] == pytest.approx(math.sin(angle))
    x = ta.tensor(np.zeros((1, 3, 6)))
    np.testing.assert_array_equal(nn.PositionalEncoding(6, 10)(x, offset=4).data[0], table[4:7])


# ------------------------------------------------------------------------------------------------
# attention with rope, and with a cache

def np_rope_attention(mha, x, allowed):
    """MultiHeadAttention(rope=True) by hand: project, split, rotate each head, attend, merge."""
    def project(linear, x):
        return x @ linear.weight.data.T + linear.bias.data
    B, T, E = x.shape
    H, D = mha.num_heads, mha.head_dim
    q, k, v = (project(p, x).reshape(B, T, H, D).transpose(0, 2, 1, 3)
               for p in (mha.q_proj, mha.k_proj, mha.v_proj))
    heads, _ = np_attention(rope_by_the_formula(q), rope_by_the_formula(k), v, allowed)
    return project(mha.out_proj, heads.transpose(0, 2, 1, 3).reshape(B, T, E))


def test_attention_with_rope_rotates_every_heads_queries_and_keys():
    mha = nn.MultiHeadAttention(12, 3, rope=True)
    x = arrays((2, 5, 12))[0]
    out, _ = mha(ta.tensor(x), is_causal=True)
    expected = np_rope_attention(mha, x, np.tril(np.ones((5, 5), bool)))
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)
    assert "rope=True" in repr(mha)


@pytest.mark.parametrize("rope", [False, True])
def test_a_cached_attention_step_is_the_uncached_one(rope):
    """Tokens fed through a cache in chunks (3, then 1, then 2) give the outputs and weights of
    the whole sequence at once: the cache puts the earlier keys and values first, rope's
    positions continue from them (start), and is_causal, like the causal mask aligned at the
    end, lets the new queries see them."""
    mha = nn.MultiHeadAttention(8, 2, rope=rope)
    x = ta.tensor(arrays((2, 6, 8))[0])
    whole, whole_weights = mha(x, is_causal=True)
    for masked in (True, False):
        cache = nn.LayerCache()
        for start, stop in [(0, 3), (3, 4), (4, 6)]:
            mask = causal_mask(stop - start, stop, offset=start) if masked else None
            out, weights = mha(x[:, start:stop], attn_mask=mask, is_causal=not masked,
                               start=start, cache=cache)
            assert cache.keys.shape == (2, 2, stop, 4) and weights.shape == (2, 2, stop - start,
                                                                             stop)
            np.testing.assert_allclose(out.data, whole.data[:, start:stop], rtol=1e-12,
                                       atol=1e-12)
            np.testing.assert_allclose(weights.data, whole_weights.data[:, :, start:stop, :stop],
                                       rtol=1e-12, atol=1e-12)
    assert mha.hooked is None               # nothing attached: the cache is an argument


def test_a_cached_attention_step_has_the_gradients_of_the_uncached_one():
    """The new tokens' gradient flows into the cached keys and values too (they are tensors of
    the same graph): a loss on the chunks' outputs gives x the gradient of the whole."""
    mha = nn.MultiHeadAttention(8, 2, rope=True)
    x, upstream = arrays((1, 5, 8), (1, 5, 8))
    whole_input = ta.tensor(x, requires_grad=True)
    (mha(whole_input, is_causal=True)[0] * ta.tensor(upstream)).sum().backward()
    chunked_input, cache = ta.tensor(x, requires_grad=True), nn.LayerCache()
    first, _ = mha(chunked_input[:, :3], is_causal=True, cache=cache)
    second, _ = mha(chunked_input[:, 3:], is_causal=True, start=3, cache=cache)
    ((first * ta.tensor(upstream[:, :3])).sum() + (second * ta.tensor(upstream[:, 3:])).sum()
     ).backward()
    np.testing.assert_allclose(chunked_input.grad, whole_input.grad, rtol=1e-12, atol=1e-12)


def test_rope_turns_queries_and_keys_by_start():
    """start = p puts the tokens at positions p, p + 1, ...: with rope, the queries and keys the
    hooks see are those of the same tokens at the end of a longer sequence; without, start
    changes nothing."""
    x = ta.tensor(arrays((1, 3, 8))[0])
    for rope in (False, True):
        mha, seen = nn.MultiHeadAttention(8, 2, rope=rope), {}
        with mha.hooks({"q": lambda q: seen.setdefault("q", []).append(q.data)}):
            mha(x, start=0)
            mha(x, start=5)
        at_zero, at_five = seen["q"]
        unrotated = mha.q_proj(x).data.reshape(1, 3, 2, 4).transpose(0, 2, 1, 3)  # (B, H, T, D)
        np.testing.assert_allclose(at_zero, rope_by_the_formula(unrotated) if rope else unrotated,
                                   rtol=1e-12, atol=1e-12)
        expected = rope_by_the_formula(unrotated, offset=5) if rope else unrotated
        np.testing.assert_allclose(at_five, expected, rtol=1e-12, atol=1e-12)


def test_the_causal_mask_after_a_cache_is_aligned_at_the_end():
    np.testing.assert_array_equal(causal_mask(2, 4, offset=2), [[1, 1, 1, 0], [1, 1, 1, 1]])
    np.testing.assert_array_equal(causal_mask(2, 4), [[1, 0, 0, 0], [1, 1, 0, 0]])   # SDPA's
    padding = np.array([False, True, True, True])
    np.testing.assert_array_equal(causal_mask(2, 4, padding, offset=2),
                                  [[0, 1, 1, 0], [0, 1, 1, 1]])
    bias = -np.arange(8.0).reshape(2, 4)
    np.testing.assert_array_equal(causal_mask(2, 4, bias, offset=2),
                                  [[0, -1, -2, -np.inf], [-4, -5, -6, -7]])
    learned = ta.tensor(np.zeros((2, 4), np.float32), requires_grad=True)
    combined = causal_mask(2, 4, learned, offset=2)
    assert isinstance(combined, ta.Tensor) and combined.dtype == np.float32


def test_rope_needs_an_even_head_dim():
    with pytest.raises(ValueError, match=r"MultiHeadAttention: rope .* even head_dim; got "
                                         r"embed_dim 15 / num_heads 3 = 5"):
        nn.MultiHeadAttention(15, 3, rope=True)


# ------------------------------------------------------------------------------------------------
# the causal model's positions

def small_model(positional, num_layers=2):
    ta.manual_seed(0)
    return nn.CausalTransformer(vocab_size=11, embed_dim=16, num_heads=2, num_layers=num_layers,
                                max_len=8, positional=positional)


@pytest.mark.parametrize("positional", POSITIONAL)
def test_a_model_fed_through_its_cache_gives_the_logits_of_the_whole_sequence(positional):
    model = small_model(positional)
    ids = np.random.default_rng(0).integers(0, 11, (3, 7))
    whole = model(ids).data
    cache = model.empty_cache()
    chunks = [model(ids[:, start:stop], cache=cache).data
              for start, stop in [(0, 4), (4, 5), (5, 7)]]
    np.testing.assert_allclose(np.concatenate(chunks, axis=1), whole, rtol=1e-12, atol=1e-12)
    assert len(cache) == 7 and [layer.keys.shape for layer in cache.layers] == [(3, 2, 7, 8)] * 2
    assert cache.nbytes == 2 * 2 * 3 * 2 * 7 * 8 * 8        # 2 * layers * B * H * T * D * 8 bytes


def test_each_positional_option_holds_what_it_needs():
    names = {p: {name for name, _ in small_model(p).named_parameters()} for p in POSITIONAL}
    assert names["learned"] - names["none"] == {"positions.weight"}
    assert all(names[p] == names["none"] for p in ("sinusoidal", "rope", "alibi"))
    assert small_model("learned").positions.weight.shape == (8, 16)
    assert all(block.attn.rope for block in small_model("rope").blocks)
    assert not any(block.attn.rope for p in POSITIONAL if p != "rope"
                   for block in small_model(p).blocks)


def test_alibi_adds_the_bias_to_every_layers_scores():
    """With the query and key projections at zero, every score is 0 but for the bias: each
    head's weights are then softmax(alibi bias) over the keys it may see."""
    model = small_model("alibi")
    for block in model.blocks:
        for projection in (block.attn.q_proj, block.attn.k_proj):
            projection.weight.data[:] = 0.0
            projection.bias.data[:] = 0.0
    _, weights = model(np.array([[1, 2, 3, 4, 5]]), return_weights=True)
    scores = np.where(np.tril(np.ones((5, 5), bool)), F.alibi_bias(2, 5), -np.inf)
    expected = np.exp(scores - scores.max(-1, keepdims=True))
    expected /= expected.sum(-1, keepdims=True)
    for layer_weights in weights:
        np.testing.assert_allclose(layer_weights.data[0], expected, rtol=1e-12, atol=1e-12)


def test_absolute_positions_stop_at_max_len_and_relative_ones_do_not():
    long_ids = np.zeros((1, 12), dtype=int)
    for positional in ("sinusoidal", "learned"):
        with pytest.raises(ValueError, match=rf"CausalTransformer: a sequence of 12 tokens is "
                                             rf"longer than max_len 8, .* {positional}"):
            small_model(positional)(long_ids)
    model = small_model("learned")
    cache = model.empty_cache()
    model(long_ids[:, :6], cache=cache)
    with pytest.raises(ValueError, match=r"a sequence of 9 tokens is longer than max_len 8"):
        model(long_ids[:, :3], cache=cache)
    for positional in ("rope", "alibi", "none"):
        assert small_model(positional)(long_ids).shape == (1, 12, 11)


def filled_cache():
    """A LayerCache of an attention (8 wide, 2 heads) that has seen 3 tokens of 2 sequences."""
    cache = nn.LayerCache()
    nn.MultiHeadAttention(8, 2)(ta.tensor(np.ones((2, 3, 8))), cache=cache)
    return cache


@pytest.mark.parametrize("call, error, message", [
    (lambda: small_model("rope")(np.zeros((1, 2), int), cache=nn.KVCache(small_model("rope"))),
     TypeError, r"CausalTransformer: cache must be a KVCache of this model"),
    (lambda: small_model("none")(np.zeros(5, int)), ValueError,
     r"CausalTransformer: ids must be \(B, T\) with T >= 1, got shape \(5,\)"),
    (lambda: small_model("none")(np.array([[0, 11]])), IndexError,
     r"CausalTransformer: ids must lie in \[0, 11\)"),
    (lambda: nn.PositionalEncoding(4, max_len=6)(ta.tensor(np.ones((1, 3, 4))), offset=4),
     ValueError, r"PositionalEncoding: sequence length 7 exceeds max_len 6"),
    (lambda: nn.MultiHeadAttention(8, 2)(ta.tensor(np.ones((1, 3, 8))), cache={}), TypeError,
     r"^MultiHeadAttention: cache must be an nn.LayerCache \(one layer's keys and values\) or "
     r"None, got dict$"),
    (lambda: nn.MultiHeadAttention(8, 2)(ta.tensor(np.ones((1, 3, 8))), start=-1), ValueError,
     r"^MultiHeadAttention: start must be at least 0, got -1$"),
    (lambda: nn.MultiHeadAttention(8, 2)(ta.tensor(np.ones((1, 1, 8))), cache=filled_cache()),
     ValueError, r"^MultiHeadAttention: the cache holds keys \(2, 2, 3, 4\) of float64, but the "
                 r"new ones are \(B, H, T, D\) = \(1, 2, 1, 4\) of float64: a cache serves one "
                 r"layer and one batch of sequences$"),
    (lambda: nn.MultiHeadAttention(8, 2)(ta.tensor(np.ones((2, 1, 8))), cache=filled_cache(),
                                         attn_mask=np.ones((1, 3), bool)),
     ValueError, r"^MultiHeadAttention: attn_mask of shape \(1, 3\) does not broadcast to the "
                 r"scores' shape \(2, 2, 1, 4\)"),
    (lambda: nn.CausalBlock(8, 2)(ta.tensor(np.ones((1, 1, 8))), cache=filled_cache()),
     ValueError, r"^CausalBlock: the cache holds keys \(2, 2, 3, 4\)"),
    (lambda: nn.CausalBlock(8, 3), ValueError,
     r"^CausalBlock: embed_dim 8 is not divisible by num_heads 3$"),
])
def test_bad_input_to_the_layers_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_an_unknown_positional_lists_the_options():
    with pytest.raises(ValueError, match=r"CausalTransformer: positional must be one of "
                                         r"'sinusoidal', 'learned', 'rope', 'alibi', 'none', "
                                         r"got 'relative'"):
        small_model("relative")


# ------------------------------------------------------------------------------------------------
# without positions

def test_without_positions_a_layer_is_permutation_equivariant():
    block = nn.TransformerBlock(8, 2)
    x = arrays((2, 6, 8))[0]
    permutation = np.random.default_rng(1).permutation(6)
    out, out_of_permuted = block(ta.tensor(x)).data, block(ta.tensor(x[:, permutation])).data
    assert np.abs(out_of_permuted - out[:, permutation]).max() < 1e-13
    with_rope = nn.CausalBlock(8, 2, rope=True)     # its attention rotates queries and keys
    out, out_of_permuted = (with_rope(ta.tensor(x)).data,
                            with_rope(ta.tensor(x[:, permutation])).data)
    assert np.abs(out_of_permuted - out[:, permutation]).max() > 1e-2


def test_without_positions_one_causal_layer_sees_a_multiset_of_earlier_tokens():
    """The last position's logits do not change when the tokens before it are reordered, with one
    layer. From the second layer on they do: an earlier token's output of layer 1 depends on the
    tokens before IT, so the causal mask lets the order leak in."""
    ids = np.random.default_rng(0).integers(0, 11, (4, 7))
    shuffled = np.concatenate([ids[:, :-1][:, ::-1], ids[:, -1:]], axis=1)   # same last token

    def change(positional, num_layers):
        model = small_model(positional, num_layers=num_layers)
        return np.abs(model(shuffled).data[:, -1] - model(ids).data[:, -1]).max()
    assert change("none", num_layers=1) < 1e-13
    assert change("none", num_layers=2) > 1e-3
    assert change("sinusoidal", num_layers=1) > 1e-2


def test_numpy_integers_are_head_counts_too():
    """np.int64 is what a loop over np.arange or a config read with NumPy gives: it must work
    where an int does (it has no bit_length)."""
    np.testing.assert_array_equal(F.alibi_slopes(np.int64(6)), F.alibi_slopes(6))
    ta.manual_seed(0)
    model = nn.CausalTransformer(11, 12, np.int64(6), 1, positional="alibi")
    assert model(np.array([[1, 2, 3]])).shape == (1, 3, 11)
