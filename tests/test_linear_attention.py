"""F.linear_attention and F.linear_attention_step (Katharopoulos et al. 2020, phi = elu + 1).

Causal: the chunked form against the one-line definition, prefix sums of phi(k_j) v_j^T by
cumsum (in NumPy for the values, in tinyattn ops for the gradients), to 1e-12 in float64 with a
random upstream gradient, for chunks of 1, of a middle size (a short last chunk included) and of
L and more. Not causal: against the quadratic form, weights phi(q_i) . phi(k_j) normalised. The
recurrent form against the causal form. Broadcast leading axes; float32 kept; a graph that keeps
nothing of size (L, E, Ev) or (L, L); bad input named before any graph node is built."""
import numpy as np
import pytest
from references import (arrays, assert_refused_before_any_node, largest_saved_array,
                        output_and_gradients)

import tinyattn as ta
import tinyattn.functional as F

EPS = 1e-6


def np_phi(x):
    return np.where(x > 0, x + 1, np.exp(x))          # elu(x) + 1


def np_causal_by_cumsum(q, k, v, eps=EPS):
    """The definition: S_i = cumsum_j phi(k_j) v_j^T (..., L, E, Ev), z_i = cumsum_j phi(k_j)."""
    phi_q, phi_k = np_phi(q), np_phi(k)
    S = np.cumsum(phi_k[..., :, :, None] * v[..., :, None, :], axis=-3)    # (..., L, E, Ev)
    z = np.cumsum(phi_k, axis=-2)                                          # (..., L, E)
    numerator = np.einsum("...le,...lef->...lf", phi_q, S)                 # (..., L, Ev)
    return numerator / ((phi_q * z).sum(axis=-1, keepdims=True) + eps)


def np_quadratic(q, k, v, eps=EPS):
    """Not causal, as attention: weights phi(q_i) . phi(k_j), each row divided by its sum."""
    weights = np_phi(q) @ np.swapaxes(np_phi(k), -1, -2)                    # (..., L, S)
    return (weights @ v) / (weights.sum(axis=-1, keepdims=True) + eps)


def causal_by_cumsum(query, key, value, eps=EPS):
    """The same definition in tinyattn ops, so that its gradients come from Tensor.cumsum."""
    phi_q, phi_k = F.elu(query) + 1.0, F.elu(key) + 1.0
    S = (phi_k[..., :, :, None] * value[..., :, None, :]).cumsum(axis=-3)   # (..., L, E, Ev)
    z = phi_k.cumsum(axis=-2)                                               # (..., L, E)
    numerator = (phi_q[..., None, :] @ S)[..., 0, :]                        # (..., L, Ev)
    return numerator / ((phi_q * z).sum(axis=-1, keepdims=True) + eps)


def quadratic(query, key, value, eps=EPS):
    weights = (F.elu(query) + 1.0) @ (F.elu(key) + 1.0).mT                  # (..., L, S)
    return (weights @ value) / (weights.sum(axis=-1, keepdims=True) + eps)


def by_steps(query, key, value):
    """The recurrent form, one position at a time, the outputs stacked along axis -2."""
    outputs, state = [], None
    for t in range(query.shape[-2]):
        out, state = F.linear_attention_step(query[..., t, :], key[..., t, :], value[..., t, :],
                                             state)
        outputs.append(out)
    return ta.stack(outputs, axis=-2)


def assert_same(got, want, tolerance=1e-12):
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize("L, chunk_size", [(1, 1), (7, 1), (7, 3), (12, 4), (12, 5), (9, 9),
                                           (6, 64)])
def test_causal_chunks_equal_the_cumsum_definition(L, chunk_size):
    inputs = arrays((2, L, 4), (2, L, 4), (2, L, 3), seed=L + chunk_size)
    upstream = arrays((2, L, 3), seed=99)[0]
    got = output_and_gradients(F.linear_attention, inputs, upstream, is_causal=True,
                               chunk_size=chunk_size)
    np.testing.assert_allclose(got[0], np_causal_by_cumsum(*inputs), rtol=1e-12, atol=1e-12)
    assert_same(got, output_and_gradients(causal_by_cumsum, inputs, upstream))


@pytest.mark.parametrize("L, S", [(5, 5), (3, 7), (6, 1)])
def test_not_causal_equals_the_quadratic_form(L, S):
    inputs = arrays((2, L, 4), (2, S, 4), (2, S, 3))
    upstream = arrays((2, L, 3), seed=1)[0]
    got = output_and_gradients(F.linear_attention, inputs, upstream)
    np.testing.assert_allclose(got[0], np_quadratic(*inputs), rtol=1e-12, atol=1e-12)
    assert_same(got, output_and_gradients(quadratic, inputs, upstream))


def test_not_causal_is_causal_at_the_last_position():
    q, k, v = (ta.tensor(a) for a in arrays((6, 4), (6, 4), (6, 3)))
    causal = F.linear_attention(q, k, v, is_causal=True, chunk_size=4).data
    np.testing.assert_allclose(causal[-1], F.linear_attention(q, k, v).data[-1], rtol=1e-13)


@pytest.mark.parametrize("is_causal", [True, False])
def test_leading_axes_broadcast(is_causal):
    inputs = arrays((2, 1, 7, 4), (1, 3, 7, 4), (3, 7, 5))          # (B, H, L, E) and friends
    upstream = arrays((2, 3, 7, 5), seed=1)[0]
    got = output_and_gradients(F.linear_attention, inputs, upstream, is_causal=is_causal,
                               chunk_size=3)
    reference = causal_by_cumsum if is_causal else quadratic
    assert_same(got, output_and_gradients(reference, inputs, upstream))


def test_the_recurrent_form_equals_the_causal_form():
    inputs = arrays((2, 3, 6, 4), (2, 3, 6, 4), (2, 3, 6, 5))
    upstream = arrays((2, 3, 6, 5), seed=1)[0]
    got = output_and_gradients(by_steps, inputs, upstream)
    assert_same(got, output_and_gradients(F.linear_attention, inputs, upstream, is_causal=True,
                                          chunk_size=4))


def test_the_recurrent_state_keeps_its_size():
    q, k, v = (ta.tensor(a) for a in arrays((2, 9, 4), (2, 9, 4), (2, 9, 3)))
    state = None
    for t in range(9):
        out, state = F.linear_attention_step(q[:, t], k[:, t], v[:, t], state)
        assert out.shape == (2, 3) and state[0].shape == (2, 4, 3) and state[1].shape == (2, 4)
    np.testing.assert_allclose(state[1].data, np_phi(k.data).sum(axis=1), rtol=1e-13)


@pytest.mark.parametrize("fn, kwargs", [
    (F.linear_attention, dict()), (F.linear_attention, dict(is_causal=True, chunk_size=3)),
    (by_steps, dict())])
def test_float32_stays_float32(fn, kwargs):
    inputs = [a.astype(np.float32) for a in arrays((2, 7, 4), (2, 7, 4), (2, 7, 3))]
    upstream = arrays((2, 7, 3), seed=1)[0]
    got = output_and_gradients(fn, inputs, upstream.astype(np.float32), **kwargs)
    want = output_and_gradients(fn, [a.astype(np.float64) for a in inputs], upstream, **kwargs)
    for g, w in zip(got, want):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


def test_nothing_of_size_L_E_Ev_or_L_L_is_kept():
    L, E, Ev, C = 512, 8, 8, 16
    query, key, value = (ta.tensor(a, requires_grad=True) for a in arrays((L, E), (L, E), (L, Ev)))
    causal = largest_saved_array(F.linear_attention(query, key, value, True, chunk_size=C))
    assert causal <= max(L * C, L * E)            # the (L / C, C, C) weights inside the chunks
    assert causal < L * E * Ev and causal < L * L
    assert largest_saved_array(F.linear_attention(query, key, value)) <= L * max(E, Ev)
    assert largest_saved_array(causal_by_cumsum(query, key, value)) == L * E * Ev


QKV = ((2, 5, 4), (2, 5, 4), (2, 5, 3))


@pytest.mark.parametrize("shapes, kwargs, error, message", [
    (((2, 5, 4), (2, 6, 4), (2, 6, 3)), dict(is_causal=True), ValueError,
     r"linear_attention: causal attention needs as many keys as queries \(L == Lk\), got "
     r"query \(2, 5, 4\), key \(2, 6, 4\), value \(2, 6, 3\)"),
    (((2, 5, 4), (2, 6, 3), (2, 6, 3)), dict(), ValueError,
     r"linear_attention: query and key disagree on E \(4 and 3\)"),
    (QKV, dict(eps=-1.0), ValueError, r"linear_attention: eps must be >= 0, got -1.0"),
    (QKV, dict(is_causal=True, chunk_size=0), ValueError,
     r"linear_attention: chunk_size must be at least 1, got 0"),
    (QKV, dict(is_causal=True, chunk_size=2.0), TypeError,
     r"linear_attention: chunk_size must be an int, got 2.0"),
])
def test_bad_input_is_named_before_any_node(shapes, kwargs, error, message):
    assert_refused_before_any_node(F.linear_attention, shapes, kwargs, error, message)


@pytest.mark.parametrize("state, error, message", [
    ("S", TypeError, r"linear_attention_step: state must be the \(S, z\) pair a previous step "
                     r"returned, or None, got str"),
    ((np.ones((2, 4, 3)), np.ones((2, 4))), TypeError,
     r"linear_attention_step: S must be a Tensor"),
    ((ta.tensor(np.ones((2, 4, 2))), ta.tensor(np.ones((2, 4)))), ValueError,
     r"linear_attention_step: value and S disagree on Ev \(3 and 2\)"),
    ((ta.tensor(np.ones((2, 4, 3))), ta.tensor(np.ones((2, 5)))), ValueError,
     r"linear_attention_step: query and z disagree on E \(4 and 5\)"),
])
def test_a_bad_state_is_named(state, error, message):
    query, key, value = (ta.tensor(a) for a in arrays((2, 4), (2, 4), (2, 3)))
    with pytest.raises(error, match=message):
        F.linear_attention_step(query, key, value, state)


def test_mixed_dtypes_are_refused():
    query, key = (ta.tensor(a) for a in arrays((5, 4), (5, 4)))
    value = ta.tensor(np.ones((5, 3), np.float32))
    with pytest.raises(TypeError, match=r"linear_attention: query, key and value must have the "
                                        r"same dtype, got float64, float64 and float32"):
        F.linear_attention(query, key, value)
