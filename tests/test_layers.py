"""Functions and layers: whole-layer gradient checks (the LAYER_CASES table of `tinyattn/check.py`),
outputs against NumPy references of their formulas, masking, dtypes, and the Module machinery."""
import math

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.tools import checklist as check
from tinyattn.tools.checklist.cases import LayerCase
from tinyattn.tools.checklist.layers import MASK, ROW_FULLY_MASKED


@pytest.mark.parametrize("case", check.LAYER_CASES, ids=[c.name for c in check.LAYER_CASES])
def test_whole_layer_gradients_match_finite_differences(case):
    fn, inputs = case.build()
    result = check.run(case.name, fn, inputs, case.directions)
    assert result.compared >= len(inputs)
    assert result.passed, result


def test_check_command_prints_a_table_and_passes(capsys):
    assert check.main(["-k", "sdpa, causal"]) == 0
    out = capsys.readouterr().out
    assert "sdpa, causal and mask" in out and "pass" in out and "2 of 2 checks pass" in out


def test_check_command_fails_on_a_wrong_gradient(monkeypatch, capsys):
    def gelu_with_a_wrong_gradient():
        x = ta.tensor(np.linspace(-2, 2, 6), requires_grad=True)
        # right forward value, but the gradient of a detached factor is lost
        return (lambda x: x * F.gelu(x).detach() / x.detach()), [x]
    monkeypatch.setattr(check, "LAYER_CASES", [LayerCase("broken", gelu_with_a_wrong_gradient)])
    assert check.main(["-k", "broken"]) == 1
    assert "FAIL" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------------
# NumPy references

def np_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def np_attention(q, k, v, allowed=None, scale=None):
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = q @ np.swapaxes(k, -1, -2) * scale
    if allowed is not None:
        scores = np.where(allowed, scores, -np.inf)
    weights = np_softmax(scores)
    return weights @ v, weights


def arrays(*shapes, seed=0):
    random = np.random.default_rng(seed)
    return [random.standard_normal(shape) for shape in shapes]


@pytest.mark.parametrize("mask, causal, scale", [
    (None, False, None), (None, True, None), (None, False, 1.0), (MASK, False, 0.3),
    (MASK, True, None)])
def test_sdpa_matches_numpy(mask, causal, scale):
    q, k, v = arrays((2, 3, 4), (2, 5, 4), (2, 5, 6))
    allowed = mask
    if causal:
        causal_mask = np.tril(np.ones((3, 5), bool))
        allowed = causal_mask if mask is None else mask & causal_mask
    expected, expected_weights = np_attention(q, k, v, allowed, scale)
    out, weights = F.attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), attn_mask=mask,
                               is_causal=causal, scale=scale)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights.data, expected_weights, rtol=1e-12, atol=1e-12)
    sdpa = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), mask,
                                          is_causal=causal, scale=scale)
    np.testing.assert_array_equal(sdpa.data, out.data)


def test_sdpa_float_mask_is_added_to_the_scores():
    q, k, v, bias = arrays((2, 3, 4), (2, 5, 4), (2, 5, 6), (3, 5))
    scores = q @ np.swapaxes(k, -1, -2) / 2.0 + bias
    out = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v), bias)
    np.testing.assert_allclose(out.data, np_softmax(scores) @ v, rtol=1e-12, atol=1e-12)


def test_sdpa_broadcasts_leading_axes():
    q, k, v = arrays((2, 1, 3, 4), (1, 4, 5, 4), (4, 5, 6))
    out = F.scaled_dot_product_attention(ta.tensor(q), ta.tensor(k), ta.tensor(v))
    assert out.shape == (2, 4, 3, 6)
    np.testing.assert_allclose(out.data, np_attention(q, k, v)[0], rtol=1e-12, atol=1e-12)


def test_fully_masked_query_row_gives_zeros_and_zero_gradients_not_nan():
    q, k, v = (ta.tensor(a, requires_grad=True) for a in arrays((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    out, weights = F.attention(q, k, v, attn_mask=ROW_FULLY_MASKED)
    assert np.all(weights.data[:, 1] == 0) and np.all(out.data[:, 1] == 0)
    np.testing.assert_allclose(weights.data[:, [0, 2]].sum(axis=-1), 1.0)
    out.backward(np.ones(out.shape))
    for t in (q, k, v):
        assert np.all(np.isfinite(t.grad))
    assert np.all(q.grad[:, 1] == 0)                   # the masked query gets no gradient
    assert np.any(q.grad[:, 0] != 0)


def test_float32_attention_stays_float32():
    q, k, v = (ta.tensor(a.astype(np.float32), requires_grad=True)
               for a in arrays((2, 3, 4), (2, 5, 4), (2, 5, 6)))
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=MASK, is_causal=True)
    assert out.dtype == np.float32
    out.backward(np.ones(out.shape, np.float32))
    assert q.grad.dtype == k.grad.dtype == v.grad.dtype == np.float32


def np_layer_norm(x, weight, bias, eps=1e-5):
    mean = x.mean(axis=-1, keepdims=True)
    variance = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * weight + bias


def test_functions_match_numpy():
    x, weight, bias = arrays((2, 3, 5), (5,), (5,))
    np.testing.assert_allclose(F.layer_norm(ta.tensor(x), ta.tensor(weight), ta.tensor(bias)).data,
                               np_layer_norm(x, weight, bias), rtol=1e-12, atol=1e-12)
    gelu = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    np.testing.assert_allclose(F.gelu(ta.tensor(x)).data, gelu, rtol=1e-12, atol=1e-12)
    logits, targets = x[0], np.array([4, 0, 2])
    log_probabilities = np.log(np_softmax(logits))
    expected = -log_probabilities[np.arange(3), targets].mean()
    np.testing.assert_allclose(F.cross_entropy(ta.tensor(logits), targets).item(), expected)


def test_cross_entropy_over_extra_axes_leaves_out_ignored_targets():
    logits = arrays((2, 4, 3))[0]                             # (N, C, d)
    targets = np.array([[1, -100, 3], [0, 2, -100]])
    log_probabilities = np.log(np_softmax(np.moveaxis(logits, 1, -1)))    # (N, d, C)
    kept = [(0, 0, 1), (0, 2, 3), (1, 0, 0), (1, 1, 2)]
    expected = -np.mean([log_probabilities[n, d, c] for n, d, c in kept])
    np.testing.assert_allclose(F.cross_entropy(ta.tensor(logits), targets).item(), expected)


def test_dropout_scales_survivors_and_is_off_in_eval():
    ta.manual_seed(0)
    x = ta.tensor(np.ones((200, 50)))
    dropped = F.dropout(x, p=0.2)
    assert set(np.unique(dropped.data)) == {0.0, 1.25}
    assert 0.17 < np.mean(dropped.data == 0) < 0.23
    layer = nn.Dropout(0.2).eval()
    assert layer(x) is x


# ------------------------------------------------------------------------------------------------
# Layers

def test_linear_uses_pytorchs_layout_and_initialisation():
    ta.manual_seed(0)
    layer = nn.Linear(50, 3)
    assert layer.weight.shape == (3, 50) and layer.bias.shape == (3,)
    bound = 1 / math.sqrt(50)
    assert np.all(np.abs(layer.weight.data) <= bound) and np.abs(layer.weight.data).max() > bound / 2
    x = arrays((4, 50))[0]
    np.testing.assert_allclose(layer(ta.tensor(x)).data, x @ layer.weight.data.T + layer.bias.data)


def test_manual_seed_makes_initialisation_reproducible():
    ta.manual_seed(7)
    first = nn.TransformerBlock(8, 2).state_dict()
    ta.manual_seed(7)
    second = nn.TransformerBlock(8, 2).state_dict()
    assert all(np.array_equal(first[name], second[name]) for name in first)


def test_embedding_looks_up_rows():
    table = nn.Embedding(5, 3)
    ids = np.array([[4, 0], [0, 2]])
    np.testing.assert_array_equal(table(ids).data, table.weight.data[ids])


def test_positional_encoding_is_the_papers_table():
    table = nn.sinusoidal_positions(10, 6)
    position, i = 7, 2                                   # the pair of columns 2i, 2i + 1
    angle = position / 10000 ** (2 * i / 6)
    assert table[position, 2 * i] == pytest.approx(math.sin(angle))
    assert table[position, 2 * i + 1] == pytest.approx(math.cos(angle))


def np_multi_head_attention(mha, query, key, value, allowed=None):
    """The formula of "Attention Is All You Need", one head at a time, in NumPy."""
    def project(linear, x):
        return x @ linear.weight.data.T + linear.bias.data
    q, k, v = project(mha.q_proj, query), project(mha.k_proj, key), project(mha.v_proj, value)
    D = mha.head_dim
    heads, weights = [], []
    for h in range(mha.num_heads):
        part = slice(h * D, (h + 1) * D)
        head, head_weights = np_attention(q[..., part], k[..., part], v[..., part], allowed)
        heads.append(head)
        weights.append(head_weights)
    return project(mha.out_proj, np.concatenate(heads, axis=-1)), np.stack(weights, axis=1)


@pytest.mark.parametrize("cross", [False, True])
def test_multi_head_attention_matches_numpy(cross):
    mha = nn.MultiHeadAttention(12, 3)
    query, memory = arrays((2, 4, 12), (2, 6, 12))
    key = memory if cross else query
    out, weights = mha(ta.tensor(query), ta.tensor(key) if cross else None)
    expected, expected_weights = np_multi_head_attention(mha, query, key, key)
    assert weights.shape == (2, 3, 4, key.shape[1])
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights.data, expected_weights, rtol=1e-12, atol=1e-12)


def test_multi_head_attention_mask_means_true_takes_part():
    mha = nn.MultiHeadAttention(8, 2)
    x = arrays((2, 4, 8))[0]
    padding = np.array([[True, True, True, False], [True, True, False, False]])[:, None, None, :]
    causal = np.tril(np.ones((4, 4), bool))
    out, weights = mha(ta.tensor(x), attn_mask=padding, is_causal=True)
    allowed = (padding & causal)[:, 0]                  # (B, L, S), the same for every head
    expected, expected_weights = np_multi_head_attention(mha, x, x, x, allowed)
    np.testing.assert_allclose(out.data, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(weights.data, expected_weights, rtol=1e-12, atol=1e-12)
    assert np.all(weights.data[1, :, :, 2:] == 0)        # padding keys get no attention


def test_float32_layers_stay_float32():
    block = nn.TransformerBlock(8, 2, dtype=np.float32)
    x = ta.tensor(arrays((2, 3, 8))[0].astype(np.float32), requires_grad=True)
    out = block(x, is_causal=True)
    assert out.dtype == np.float32
    out.backward(np.ones(out.shape, np.float32))
    assert x.grad.dtype == np.float32
    assert all(p.dtype == np.float32 and p.grad.dtype == np.float32 for p in block.parameters())


def test_module_to_converts_every_parameter():
    model = nn.CausalTransformer(vocab_size=5, embed_dim=8, num_heads=2, num_layers=2)
    reference = model(np.array([[1, 2, 3]])).data
    model.to(np.float32)
    assert all(p.dtype == np.float32 for p in model.parameters())
    logits = model(np.array([[1, 2, 3]]))
    assert logits.dtype == np.float32
    np.testing.assert_allclose(logits.data, reference, rtol=1e-4, atol=1e-4)


def test_every_parameter_of_a_block_gets_a_gradient_but_the_key_bias():
    block = nn.TransformerBlock(8, 2)
    x = ta.tensor(arrays((2, 5, 8))[0], requires_grad=True)
    block(x, is_causal=True).backward(arrays((2, 5, 8), seed=1)[0])
    names = dict(block.named_parameters())
    assert len(names) == 16
    # The one exception, exactly: the key bias adds q . b_k to every score of query q, and softmax
    # ignores a shift shared by a whole row, so its gradient is 0 up to rounding.
    assert np.abs(names.pop("attn.k_proj.bias").grad).max() < 1e-12
    for name, parameter in names.items():
        assert parameter.grad is not None and np.abs(parameter.grad).max() > 1e-3, name


def test_named_parameters_are_dotted_paths():
    model = nn.CausalTransformer(vocab_size=5, embed_dim=8, num_heads=2, num_layers=2)
    names = [name for name, _ in model.named_parameters()]
    assert names[0] == "embed.weight"
    assert "blocks.1.attn.q_proj.weight" in names and "blocks.0.ff.down.bias" in names
    assert names[-2:] == ["head.weight", "head.bias"]
    assert len(names) == len(set(names)) == len(model.parameters())


def test_state_dict_round_trip_and_npz(tmp_path):
    model = nn.CausalTransformer(vocab_size=5, embed_dim=8, num_heads=2, num_layers=1)
    other = nn.CausalTransformer(vocab_size=5, embed_dim=8, num_heads=2, num_layers=1)
    ids = np.array([[1, 2, 3, 4]])
    assert not np.allclose(model(ids).data, other(ids).data)
    other.load_state_dict(model.state_dict())
    np.testing.assert_array_equal(model(ids).data, other(ids).data)
    path = tmp_path / "model.npz"
    model.save(path)
    fresh = nn.CausalTransformer(vocab_size=5, embed_dim=8, num_heads=2, num_layers=1).load(path)
    np.testing.assert_array_equal(model(ids).data, fresh(ids).data)
    state = model.state_dict()
    state["head.bias"] += 1.0                                  # a copy: the model is unchanged
    assert not np.array_equal(state["head.bias"], model.head.bias.data)


def test_load_state_dict_rejects_wrong_names_and_shapes():
    layer = nn.Linear(3, 2)
    with pytest.raises(ValueError, match=r"missing \['bias'\]"):
        layer.load_state_dict({"weight": np.zeros((2, 3))})
    with pytest.raises(ValueError, match=r"weight has shape \(2, 3\), the state has \(3, 2\)"):
        layer.load_state_dict({"weight": np.zeros((3, 2)), "bias": np.zeros(2)})


def test_zero_grad_train_and_eval():
    model = nn.TransformerBlock(8, 2, dropout=0.5)
    x = ta.tensor(arrays((1, 3, 8))[0])
    model(x).sum().backward()
    assert all(p.grad is not None for p in model.parameters())
    model.zero_grad()
    assert all(p.grad is None for p in model.parameters())
    model.eval()
    assert not any(m.training for m in model.modules())
    np.testing.assert_array_equal(model(x).data, model(x).data)    # no dropout: deterministic
    assert model.train() is model and model.ff.dropout.training


def test_load_state_dict_changes_nothing_when_a_shape_is_wrong():
    layer = nn.Linear(3, 2)
    before = layer.weight.data.copy()
    with pytest.raises(ValueError):
        layer.load_state_dict({"weight": np.zeros((2, 3)), "bias": np.zeros(3)})
    np.testing.assert_array_equal(layer.weight.data, before)


def test_a_float64_numpy_mask_keeps_float32_attention_float32():
    mha = nn.MultiHeadAttention(8, 2, dtype=np.float32)
    x = ta.tensor(arrays((2, 4, 8))[0].astype(np.float32), requires_grad=True)
    additive = np.triu(np.full((4, 4), -np.inf), k=1)           # float64, as NumPy makes it
    out, weights = mha(x, attn_mask=additive)
    assert out.dtype == weights.dtype == np.float32
    out.backward(np.ones(out.shape, np.float32))
    assert x.grad.dtype == np.float32


def test_max_backward_stays_float32_inside_the_graph():
    x = ta.tensor(np.array([[1.0, 3.0, 3.0]], np.float32), requires_grad=True)
    top = x.max(axis=1)
    (grad,) = top._node.backward(np.ones(1, np.float32))    # what the sweep passes upstream
    assert grad.dtype == np.float32
    np.testing.assert_array_equal(grad, [[0.0, 0.5, 0.5]])


def test_softmax_of_integers_is_computed_in_float64():
    np.testing.assert_allclose(F.softmax(ta.tensor([1, 2, 3])).data, np_softmax(np.arange(1.0, 4.0)))


def test_layers_with_zero_sizes_work_as_in_pytorch():
    """Linear(0, n) outputs its bias (its weight has no columns); attention over zero keys gives
    zeros, as a fully masked row does."""
    layer = nn.Linear(0, 3)
    layer.bias.data[:] = [1.0, 2.0, 3.0]           # initialised to 0: bound 1/sqrt(0) taken as 0
    np.testing.assert_array_equal(layer(ta.tensor(np.ones((2, 0)))).data,
                                  np.broadcast_to(layer.bias.data, (2, 3)))
    attention = nn.MultiHeadAttention(8, 2, bias=False)
    query = ta.tensor(np.ones((2, 3, 8)))
    out, weights = attention(query, ta.tensor(np.zeros((2, 0, 8))))
    np.testing.assert_array_equal(out.data, np.zeros((2, 3, 8)))
    assert weights.shape == (2, 2, 3, 0)


def test_a_module_names_its_parameters_by_where_they_live():
    block = nn.TransformerBlock(8, 2)
    for name, parameter in block.named_parameters():
        assert parameter.name == name
    assert block.attn.q_proj.weight.name == "attn.q_proj.weight"


def test_a_tied_weight_keeps_its_first_name():
    class Tied(nn.Module):
        def __init__(self):
            self.embed = nn.Embedding(5, 4)
            self.head = nn.Linear(4, 5, bias=False)
            self.head.weight = self.embed.weight        # (5, 4): the same matrix both ways

    model = Tied()
    assert model.head.weight.name == "embed.weight"
    assert [name for name, _ in model.named_parameters()] == ["embed.weight"]
