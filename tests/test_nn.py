"""tinyattn.nn: layers against NumPy references and PyTorch's conventions, the Module machinery
(names, state dicts, saving, modes, dtypes), and a small transformer that learns to reverse."""
import math

import numpy as np
import pytest
from references import arrays, assert_refused_before_any_node

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn import optim
from tinyattn.nn.checkpoints import write_checkpoint
from tinyattn_tools.checklist.ops import np_multi_head_attention


def test_linear_uses_pytorchs_layout_and_initialisation():
    ta.manual_seed(0)
    layer = nn.Linear(50, 3)
    assert layer.weight.shape == (3, 50) and layer.bias.shape == (3,)
    bound = 1 / math.sqrt(50)
    magnitudes = np.abs(layer.weight.data)
    assert np.all(magnitudes <= bound) and magnitudes.max() > bound / 2
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
    table = ta.functional.sinusoidal_positions(10, 6)
    position, i = 7, 2                                   # the pair of columns 2i, 2i + 1
    angle = position / 10000 ** (2 * i / 6)
    assert table[position, 2 * i] == pytest.approx(math.sin(angle))
    assert table[position, 2 * i + 1] == pytest.approx(math.cos(angle))


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


def attention_layer():
    ta.manual_seed(0)
    return nn.MultiHeadAttention(8, 2)


def transformer_block():
    ta.manual_seed(0)
    return nn.TransformerBlock(8, 2)


@pytest.mark.parametrize("make, name", [(attention_layer, "MultiHeadAttention"),
                                        (transformer_block, "TransformerBlock")])
@pytest.mark.parametrize("kwargs, error, message", [
    ({"attn_mask": np.ones((5, 5), bool)}, ValueError,
     r"attn_mask of shape \(5, 5\) does not broadcast to the scores' shape \(2, 2, 3, 3\)"),
    ({"attn_mask": np.ones((3, 3), int)}, TypeError, r"attn_mask must be boolean or float"),
    ({"attn_mask": ta.tensor(np.zeros((3, 3), np.float32))}, TypeError,
     r"attn_mask is a float32 tensor but the query is float64"),
    ({"attn_mask": [[True, False], [True]]}, ValueError, r"attn_mask: .*inhomogeneous"),
    ({"is_causal": "no"}, TypeError, r"is_causal must be a bool, got 'no'"),
])
def test_a_layer_refuses_a_bad_mask_or_flag_at_its_door(make, name, kwargs, error, message):
    """Named by the layer that received it, and before any node is built (not ~15 nodes later,
    inside the attention function)."""
    assert_refused_before_any_node(make(), [(2, 3, 8)], kwargs, error, f"^{name}: {message}")


def test_flags_accept_numpy_bools():
    layer = attention_layer()
    x = ta.tensor(arrays((1, 3, 8))[0])
    np.testing.assert_array_equal(layer(x, is_causal=np.bool_(True))[1].data,
                                  layer(x, is_causal=True)[1].data)


def test_feed_forward_hidden_dim_defaults_to_4_embed_dim():
    assert nn.FeedForward(8).up.out_features == 32
    assert nn.FeedForward(8, hidden_dim=3).up.out_features == 3


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


def test_layer_norm_over_two_axes_normalises_them_together():
    x, weight, bias = arrays((2, 3, 4), (3, 4), (3, 4))
    layer = nn.LayerNorm((3, 4))
    layer.weight.data[...], layer.bias.data[...] = weight, bias
    mean, variance = x.mean(axis=(1, 2), keepdims=True), x.var(axis=(1, 2), keepdims=True)
    expected = (x - mean) / np.sqrt(variance + 1e-5) * weight + bias
    np.testing.assert_allclose(layer(ta.tensor(x)).data, expected, rtol=1e-12, atol=1e-12)


def small_model(num_layers=1):
    return nn.CausalTransformer(vocab_size=5, embed_dim=8, num_heads=2, num_layers=num_layers)


@pytest.mark.parametrize("name", ["ck", "ck.npz", "ck.tinyattn"])
def test_save_and_load_use_the_same_path(tmp_path, name):
    model, ids = small_model(), np.array([[1, 2, 3]])
    model.save(tmp_path / name)
    assert [p.name for p in tmp_path.iterdir()] == [name]        # that name, no temporary left
    fresh = small_model().load(str(tmp_path / name))
    np.testing.assert_array_equal(model(ids).data, fresh(ids).data)


def test_save_writes_safetensors_that_load_safetensors_reads(tmp_path):
    model = small_model()
    model.save(tmp_path / "ck")
    assert (tmp_path / "ck").read_bytes()[8:10] == b'{"'            # the header length, then JSON
    arrays = ta.load_safetensors(tmp_path / "ck")
    assert list(arrays) == list(model.state_dict())
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(arrays[name], array)
        assert arrays[name].dtype == array.dtype


def test_load_still_reads_an_npz_checkpoint(tmp_path):
    model, ids = small_model(), np.array([[1, 2, 3]])
    write_checkpoint(tmp_path / "old.npz", model.state_dict())
    assert (tmp_path / "old.npz").read_bytes()[:4] == b"PK\x03\x04"      # a zip archive
    np.testing.assert_array_equal(small_model().load(tmp_path / "old.npz")(ids).data,
                                  model(ids).data)


def fail_half_way(file, *args, **kwargs):
    file.write(b"half a file")
    raise OSError("disk full")


@pytest.mark.parametrize("save, writer", [
    (lambda path: small_model().save(path), "tinyattn.nn.checkpoints.write_safetensors"),
    (lambda path: write_checkpoint(path, small_model().state_dict()), "numpy.savez"),
])
def test_a_failed_save_leaves_no_half_written_file(tmp_path, monkeypatch, save, writer):
    path = tmp_path / "ck"
    save(path)
    before = path.read_bytes()
    monkeypatch.setattr(writer, fail_half_way)
    with pytest.raises(OSError, match="disk full"):
        save(path)
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["ck"]
    with pytest.raises(FileNotFoundError, match="save: there is no folder"):
        save(tmp_path / "missing" / "ck")


def good_checkpoint(path, save=lambda path: small_model().save(path)):
    save(path)
    return path.read_bytes()


NOT_SAFETENSORS = r"\(safetensors, or NumPy \.npz\): "


@pytest.mark.parametrize("content, reason", [
    (lambda good: b"", "the file is empty"),
    (lambda good: np.random.default_rng(0).bytes(300),
     NOT_SAFETENSORS + r"the header length, \d+ bytes, runs past the end of the file \(300"),
    (lambda good: good[:len(good) // 2],
     NOT_SAFETENSORS + r"tensor '.*' ends at byte \d+ of the data, past its end"),
    (lambda good: good[:-1], NOT_SAFETENSORS + "tensor '.*' ends at byte"),
    (lambda good: good + b"\0",
     NOT_SAFETENSORS + r"bytes \d+ to \d+ of the data belong to no tensor"),
    (lambda good: good[:8] + b"[" + good[9:], NOT_SAFETENSORS + "the header is not valid JSON"),
])
def test_a_file_that_is_not_a_checkpoint_is_named(tmp_path, content, reason):
    path = tmp_path / "ck"
    path.write_bytes(content(good_checkpoint(tmp_path / "good")))
    model = small_model()
    before = model.state_dict()
    with pytest.raises(ValueError, match=rf"load: '.*ck' is not a tinyattn checkpoint:? {reason}"):
        model.load(path)
    for name, array in model.state_dict().items():
        np.testing.assert_array_equal(array, before[name])


@pytest.mark.parametrize("content, reason", [
    (lambda good: good[:len(good) // 2], r"the zip archive is damaged or cut short"),
    (lambda good: good[:-1], r"the zip archive is damaged or cut short"),
    (lambda good: good[:200] + bytes([good[200] ^ 255]) + good[201:],
     r"the zip archive is damaged or cut short \(Bad CRC-32"),
])
def test_a_damaged_npz_checkpoint_is_named(tmp_path, content, reason):
    old = good_checkpoint(tmp_path / "good",
                          lambda path: write_checkpoint(path, small_model().state_dict()))
    (tmp_path / "ck").write_bytes(content(old))
    with pytest.raises(ValueError, match=rf"load: '.*ck' is not a tinyattn checkpoint: {reason}"):
        small_model().load(tmp_path / "ck")


def test_loading_a_missing_file_or_another_models_checkpoint(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"load: there is no checkpoint file '.*nothing'"):
        small_model().load(tmp_path / "nothing")
    small_model(num_layers=2).save(tmp_path / "two_layers")
    with pytest.raises(ValueError, match=r"load: the checkpoint '.*two_layers' does not fit "
                                         r"this CausalTransformer: missing \[\], unexpected "
                                         r"\['blocks.1"):
        small_model().load(tmp_path / "two_layers")
    np.savez(tmp_path / "objects.npz", weight=np.array([{"a": 1}], dtype=object))
    with pytest.raises(ValueError, match=r"not a tinyattn checkpoint: an entry of the archive "
                                         r"cannot be read as an array of numbers"):
        nn.Linear(1, 1).load(tmp_path / "objects.npz")


def test_a_folder_is_named_as_one_by_load_and_save(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"^load: '.*' is a folder, not a checkpoint "
                                                r"file; name the file"):
        small_model().load(tmp_path)
    with pytest.raises(IsADirectoryError, match=r"^save: '.*' is a folder; name a file to save "
                                                r"in"):
        small_model().save(tmp_path)
    assert list(tmp_path.iterdir()) == []


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


def reverse_task(random, batch, length=4, digits=6):
    """Sequences `d1 d2 d3 d4 SEP d4 d3 d2 d1`: after the separator, the model must reproduce the
    digits in reverse order, which it can only do by attending back to them."""
    separator = digits
    first_half = random.integers(0, digits, (batch, length))
    sequences = np.concatenate([first_half, np.full((batch, 1), separator), first_half[:, ::-1]],
                               axis=1)                                 # (B, 2 * length + 1)
    inputs, targets = sequences[:, :-1], sequences[:, 1:].copy()       # predict the next token
    targets[:, :length] = -100          # the first digits are random: nothing to learn there
    return inputs, targets


def test_a_small_causal_transformer_learns_to_reverse():
    ta.manual_seed(0)
    random = np.random.default_rng(0)
    model = nn.CausalTransformer(vocab_size=7, embed_dim=32, num_heads=2, num_layers=2, max_len=8,
                                 dtype=np.float32)
    adam = optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    for _ in range(150):
        inputs, targets = reverse_task(random, batch=32)
        logits = model(inputs)                                      # (B, T, vocab)
        loss = F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1))
        adam.zero_grad()
        loss.backward()
        adam.step()
        losses.append(loss.item())
    assert losses[0] > 1.5                                  # about log(6): a guess
    assert np.mean(losses[-10:]) < 0.25 * losses[0]
    inputs, targets = reverse_task(np.random.default_rng(1), batch=200)
    with ta.no_grad():
        predictions = model(inputs).data.argmax(axis=-1)
    scored = targets != -100
    assert np.mean(predictions[scored] == targets[scored]) > 0.9
