"""tinyattn/nn/latent_attention.py: the absorbed path (on a LatentCache) gives what expanding every
head's keys and values gives, without building them; the cache holds the latents alone, of the
size cache.nbytes promises; DeepSeek's interleaved rotary is chapter 2's F.rope up to a
permutation; a token at a time gives what the whole sequence gives; float32 stays float32; bad
arguments are named. (Gradients: the checklist's rows,
tinyattn_tools/checklist/latent_and_experts.py.)"""
import numpy as np
import pytest
from references import arrays

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.engine import Watcher, watching

# sizes all different, so that a shape says which axes it has
E, H, R, D_R, D_C, D_V = 10, 3, 8, 4, 5, 6          # width, heads, r, d_R, d_C, d_v


def latent_attention(dtype=None, **options):
    ta.manual_seed(0)
    return nn.LatentAttention(E, H, kv_lora_rank=R, qk_rope_head_dim=D_R, qk_nope_head_dim=D_C,
                              v_head_dim=D_V, dtype=dtype, **options)


class Shapes(Watcher):
    """The shape of every op's output while it watches."""

    def __init__(self):
        self.shapes = []

    def applied(self, node, arrays, params, out):
        self.shapes.append(out.shape)


def expanded_keys_or_values(shapes, S):
    """The shapes among `shapes` that hold S positions of some head's keys or values: an axis
    of S together with one of d_C, d_v, d_C + d_R or H (d_C + d_v) features."""
    return [shape for shape in shapes if S in shape and
            {D_C, D_V, D_C + D_R, H * (D_C + D_V)} & set(shape)]


def in_steps(attention, x, steps):
    """The outputs and weights of x (B, T, E) run through a LatentCache in pieces of the given
    lengths, and the cache."""
    cache, outputs, start = nn.LatentCache(), [], 0
    for length in steps:
        outputs.append(attention(x[:, start:start + length], start, cache)[0].data)
        start += length
    return np.concatenate(outputs, axis=1), cache


@pytest.mark.parametrize("options", [dict(), dict(q_lora_rank=7, bias=True, rope_interleave=True)],
                         ids=["q_proj", "q_lora_rank, biases, interleaved"])
def test_the_absorbed_path_is_the_expanded_one_without_expanded_keys(options):
    """Float64, 1e-12: the whole sequence of S = 11 tokens with a cache (absorbed) and without
    (expanded), and the last token on a cache of the first 10. That step builds no array of the
    S positions' keys or values of a head, which the expanded path builds (so the check can
    fail)."""
    attention = latent_attention(**options)
    S = 11
    x = ta.tensor(arrays((2, S, E))[0])
    with watching(Shapes()) as expanded_call:
        expanded, expanded_weights = attention(x)
    absorbed, absorbed_weights = attention(x, 0, nn.LatentCache())
    np.testing.assert_allclose(absorbed.data, expanded.data, rtol=0, atol=1e-12)
    np.testing.assert_allclose(absorbed_weights.data, expanded_weights.data, rtol=0, atol=1e-12)

    cache = nn.LatentCache()
    attention(x[:, :S - 1], 0, cache)
    with watching(Shapes()) as step:
        last, last_weights = attention(x[:, S - 1:], S - 1, cache)
    np.testing.assert_allclose(last.data, expanded.data[:, S - 1:], rtol=0, atol=1e-12)
    np.testing.assert_allclose(last_weights.data, expanded_weights.data[:, :, S - 1:], rtol=0,
                               atol=1e-12)
    assert (2, H, S, D_C) in expanded_keys_or_values(expanded_call.shapes, S)
    assert (2, S, R + D_R) in step.shapes                 # the latents it reads
    assert expanded_keys_or_values(step.shapes, S) == []


def test_the_cache_holds_the_latents_alone_and_nbytes_says_their_size():
    """c_kv and the turned rotary key, side by side: B * S * (r + d_R) * itemsize (cache.nbytes)."""
    attention = latent_attention(dtype=np.float32)
    x = ta.tensor(arrays((2, 7, E))[0].astype(np.float32))
    with ta.no_grad():
        _, cache = in_steps(attention, x, [4, 1, 2])
        named = attention.run_with_cache(x)[1]
    assert list(vars(cache)) == ["latents"] and cache.latents.shape == (2, 7, R + D_R)
    assert cache.nbytes == 2 * 7 * (R + D_R) * 4 and cache.batch_size == 2
    np.testing.assert_allclose(cache.latents.data[..., :R], named["c_kv"], rtol=0, atol=1e-6)
    np.testing.assert_allclose(cache.latents.data[..., R:], named["k_rope"], rtol=0, atol=1e-6)
    c_kv = attention.kv_norm(attention.kv_down(x)[..., :R]).data
    np.testing.assert_allclose(named["c_kv"], c_kv, rtol=0, atol=1e-6)


@pytest.mark.parametrize("steps", [[9], [1] * 9, [5, 1, 3]])
def test_a_token_at_a_time_gives_what_the_whole_sequence_gives(steps):
    attention = latent_attention(q_lora_rank=4)
    x = ta.tensor(arrays((2, 9, E))[0])
    stepped, cache = in_steps(attention, x, steps)
    np.testing.assert_allclose(stepped, attention(x)[0].data, rtol=0, atol=1e-12)
    assert len(cache.latents.data[0]) == 9


def test_deepseeks_interleaved_rotary_is_chapter_2s_rope_reordered():
    """De-interleaving (evens, then odds) and turning the halves is F.rope on the interleaved
    pairs, its output in the same order: the scores are chapter 2's."""
    attention = latent_attention(rope_interleave=True)
    x, = arrays((2, 6, D_R))
    order = np.concatenate([np.arange(0, D_R, 2), np.arange(1, D_R, 2)])
    turned = attention.turned(ta.tensor(x), 3).data
    interleaved = F.rope(ta.tensor(x), offset=3, base=10000.0).data
    np.testing.assert_allclose(turned, interleaved[..., order], rtol=0, atol=1e-14)
    plain = latent_attention()
    np.testing.assert_allclose(plain.turned(ta.tensor(x), 3).data,
                               F.rope_rotate_half(ta.tensor(x), 3).data, rtol=0, atol=0)


def test_float32_stays_float32_on_both_paths():
    attention = latent_attention(dtype=np.float32, q_lora_rank=4)
    x = ta.tensor(arrays((1, 5, E))[0].astype(np.float32), requires_grad=True)
    expanded, weights = attention(x)
    absorbed, _ = attention(x, 0, nn.LatentCache())
    assert expanded.dtype == absorbed.dtype == weights.dtype == np.float32
    expanded.sum().backward()
    assert x.grad.dtype == np.float32
    np.testing.assert_allclose(absorbed.data, expanded.data, rtol=0, atol=1e-5)


def test_it_names_its_activations():
    attention = latent_attention()
    _, cache = attention.run_with_cache(ta.tensor(arrays((2, 5, E))[0]))
    assert {name: value.shape for name, value in cache.items()} == {
        "c_kv": (2, 5, R), "k_rope": (2, 5, D_R), "weights": (2, H, 5, 5),
        "heads": (2, H, 5, D_V), "out": (2, 5, E)}


@pytest.mark.parametrize("call, error, message", [
    (lambda: nn.LatentAttention(8, 2, 4, 3, 2, 2), ValueError,
     r"^LatentAttention: the rotary key turns pairs of features, so qk_rope_head_dim must be "
     r"even; got 3$"),
    (lambda: nn.LatentAttention(8, 2, 4, 2, 2, 2, q_lora_rank=0), ValueError,
     r"^LatentAttention: q_lora_rank must be at least 1, got 0$"),
    (lambda: nn.LatentAttention(8, 2, 4, 2, 2, 2, rope_scaling={"rope_type": "yarn"}),
     ValueError, r"^LatentAttention: scaling must be None or a dict with a rope_type of "
                 r"'default', 'linear', 'llama3', got 'yarn'$"),
    (lambda: latent_attention()(ta.tensor(np.zeros((2, 3, E))), 0, nn.kv_cache.LayerCache()),
     TypeError, r"^LatentAttention: cache must be a LatentCache \(nn/latent_attention.py\), got "
                r"LayerCache$"),
    (lambda: latent_attention()(ta.tensor(np.zeros((1, 3, 7)))), ValueError,
     r"^LatentAttention: x must have shape \(B, T, 10\), got \(1, 3, 7\)$"),
])
def test_bad_arguments_are_named(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_a_cache_of_other_sequences_is_named():
    attention, cache = latent_attention(), nn.LatentCache()
    attention(ta.tensor(np.zeros((2, 3, E))), 0, cache)
    with pytest.raises(ValueError, match=r"^LatentAttention: the cache holds the latents of 2 "
                                         r"sequences, but x is a batch of 1 \(shape \(1, 1, "
                                         r"10\)\)"):
        attention(ta.tensor(np.zeros((1, 1, E))), 3, cache)
