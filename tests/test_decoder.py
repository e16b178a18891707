"""tinyattn.nn.decoder: the decoder block against its sub-modules composed by hand, what its causal
self-attention and its cross-attention may and may not see, the memory padding mask, and the
encoder-decoder model's greedy decoding. (Gradients: the checklist rows in
tinyattn_tools/checklist/decoder_experts.py.)"""
import numpy as np
import pytest
from references import arrays, assert_refused_before_any_node

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import engine

E, H = 8, 2


def decoder_block():
    ta.manual_seed(0)
    return nn.TransformerDecoderBlock(E, H, hidden_dim=16)


def test_the_block_is_its_three_residual_sub_layers():
    block = decoder_block()
    x, memory = map(ta.tensor, arrays((2, 4, E), (2, 5, E)))
    padding = np.array([[True] * 5, [True, True, True, False, False]])[:, None, None, :]
    out, self_weights, cross_weights = block(x, memory, padding, return_weights=True)

    attended, expected_self = block.self_attn(block.ln1(x), is_causal=True)
    h = x + attended
    read, expected_cross = block.cross_attn(block.ln2(h), memory, memory, attn_mask=padding)
    h = h + read
    expected = h + block.ff(block.ln3(h))
    np.testing.assert_allclose(out.data, expected.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(self_weights.data, expected_self.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(cross_weights.data, expected_cross.data, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(block(x, memory, padding).data, out.data)
    assert [name for name, _ in block.named_children()] == \
        ["ln1", "self_attn", "ln2", "cross_attn", "ln3", "ff", "dropout"]


def test_self_attention_is_causal_and_cross_attention_sees_all_memory():
    block = decoder_block()
    x, memory = arrays((1, 5, E), (1, 6, E))
    out, self_weights, cross_weights = block(ta.tensor(x), ta.tensor(memory), return_weights=True)
    assert not np.triu(self_weights.data, k=1).any()          # no target sees a later one
    assert (cross_weights.data > 0).all()                     # every target sees every source
    later = x.copy()
    later[0, 3] += arrays((E,), seed=1)[0]     # change target position 3 (not by a constant,
                                               # which ln1 would take away)
    changed = block(ta.tensor(later), ta.tensor(memory)).data
    np.testing.assert_array_equal(changed[0, :3], out.data[0, :3])
    assert (np.abs(changed[0, 3:] - out.data[0, 3:]) > 1e-6).all(axis=-1).all()
    moved = memory.copy()
    moved[0, 5] += arrays((E,), seed=2)[0]     # change the last source position
    changed = block(ta.tensor(x), ta.tensor(moved)).data
    assert (np.abs(changed - out.data) > 1e-6).any(axis=-1).all()   # every target position moves


def test_masked_memory_positions_do_not_affect_the_output():
    block = decoder_block()
    x, memory, noise = arrays((2, 4, E), (2, 6, E), (2, 6, E))
    keep = np.array([[True] * 6, [True, True, True, False, False, False]])
    padding = keep[:, None, None, :]                          # (B, 1, 1, S)
    out, _, cross_weights = block(ta.tensor(x), ta.tensor(memory), padding, return_weights=True)
    assert (cross_weights.data[1, :, :, 3:] == 0).all()
    changed = np.where(keep[:, :, None], memory, noise)       # other numbers where masked
    np.testing.assert_array_equal(block(ta.tensor(x), ta.tensor(changed), padding).data, out.data)
    alone = block(ta.tensor(x[1:]), ta.tensor(memory[1:, :3])).data     # as if never padded
    np.testing.assert_allclose(out.data[1:], alone, rtol=1e-12, atol=1e-12)


def test_the_block_stays_float32():
    block = decoder_block().to(np.float32)
    x, memory = (ta.tensor(a.astype(np.float32), requires_grad=True)
                 for a in arrays((2, 3, E), (2, 4, E)))
    out = block(x, memory)
    out.backward(np.ones(out.shape, np.float32))
    assert out.dtype == x.grad.dtype == memory.grad.dtype == np.float32


def model(**kwargs):
    ta.manual_seed(0)
    return nn.EncoderDecoder(src_vocab=9, tgt_vocab=7, embed_dim=E, num_heads=H, num_layers=2,
                             max_len=10, **kwargs)


SRC = np.array([[3, 1, 4, 1, 5], [2, 6, 5, 0, 0], [8, 7, 0, 0, 0]])
SRC_MASK = SRC != 0                                           # id 0 pads the source


def test_greedy_decode_is_the_argmax_of_a_full_forward_step_by_step():
    translator = model()
    written = translator.greedy_decode(SRC, 6, start_id=1, src_mask=SRC_MASK)
    assert isinstance(written, np.ndarray) and written.shape == (3, 7)
    assert (written[:, 0] == 1).all()
    for t in range(1, 7):
        logits = translator(SRC, written[:, :t], SRC_MASK)    # the whole prefix, recomputed
        np.testing.assert_array_equal(written[:, t], logits.data[:, -1].argmax(axis=-1))
    assert len(np.unique(written[:, 1:])) > 1                 # it did not write one token only


def test_a_later_target_token_does_not_change_the_earlier_logits():
    translator = model()
    target = np.array([[1, 2, 3, 4, 5]] * 3)
    changed = target.copy()
    changed[:, 3] = 6
    before, after = translator(SRC, target, SRC_MASK).data, translator(SRC, changed, SRC_MASK).data
    np.testing.assert_array_equal(after[:, :3], before[:, :3])
    assert (np.abs(after[:, 3:] - before[:, 3:]) > 1e-6).any(axis=-1).all()


def test_greedy_decode_records_no_graph():
    translator = model()
    first = next(engine._node_counter)
    translator.greedy_decode(SRC, 3, start_id=0)
    assert next(engine._node_counter) == first + 1


def test_source_padding_is_as_if_the_source_were_shorter():
    translator = model()
    target = np.array([[1, 2, 3, 4]] * 3)
    logits = translator(SRC, target, SRC_MASK).data
    for row, length in enumerate(SRC_MASK.sum(axis=1)):
        alone = translator(SRC[row:row + 1, :length], target[row:row + 1]).data
        np.testing.assert_allclose(logits[row], alone[0], rtol=1e-10, atol=1e-12)


def test_the_decoder_reads_the_source_only_through_cross_attention():
    translator = model()
    target = np.array([[1, 2, 3]] * 3)
    _, weights = translator(SRC, target, SRC_MASK, return_weights=True)
    assert len(weights["self"]) == len(weights["cross"]) == 2
    assert weights["self"][0].shape == (3, H, 3, 3) and weights["cross"][0].shape == (3, H, 3, 5)
    for block in translator.decoder:                          # no cross-attention: no source
        block.cross_attn.out_proj.weight.data[...] = 0
        block.cross_attn.out_proj.bias.data[...] = 0
    other_source = np.array([[5, 5, 5, 5, 5]] * 3)
    np.testing.assert_array_equal(translator(SRC, target).data,
                                  translator(other_source, target).data)


@pytest.mark.parametrize("shapes, kwargs, error, message", [
    (((2, 3, E), (3, 4, E)), {}, ValueError,
     r"TransformerDecoderBlock: x and memory disagree on B \(2 and 3\)"),
    (((2, 3, E), (2, 4, 6)), {}, ValueError,
     r"TransformerDecoderBlock: memory must have shape \(B, S, 8\), got \(2, 4, 6\)"),
    (((2, 3, E), (2, 4, E)), {"memory_mask": np.ones((2, 4), bool)}, ValueError,
     r"TransformerDecoderBlock: memory_mask of shape \(2, 4\) does not broadcast to the scores' "
     r"shape \(2, 2, 3, 4\)"),
    (((2, 3, E), (2, 4, E)), {"memory_mask": np.ones((2, 1, 1, 4), int)}, TypeError,
     r"TransformerDecoderBlock: memory_mask must be boolean or float, got dtype int64"),
])
def test_the_block_refuses_bad_input_before_any_node(shapes, kwargs, error, message):
    assert_refused_before_any_node(decoder_block(), shapes, kwargs, error, message)


@pytest.mark.parametrize("call, error, message", [
    (lambda: decoder_block()(ta.tensor(np.ones((2, 3, E), np.float32)),
                             ta.tensor(np.ones((2, 4, E)))),
     TypeError, r"TransformerDecoderBlock: x has dtype float32 but the layer's parameters"),
    (lambda: nn.TransformerDecoderBlock(8, 0), ValueError,
     r"TransformerDecoderBlock: num_heads must be at least 1, got 0"),
    (lambda: nn.TransformerDecoderBlock(8, 2, hidden_dim=0), ValueError,
     r"TransformerDecoderBlock: hidden_dim must be at least 1, got 0"),
    (lambda: nn.TransformerDecoderBlock(8, 2, hidden_dim=-1), ValueError,
     r"TransformerDecoderBlock: hidden_dim must be at least 1, got -1"),
    (lambda: nn.TransformerDecoderBlock(8, 2, hidden_dim=2.5), TypeError,
     r"TransformerDecoderBlock: hidden_dim must be an int, got 2.5"),
    (lambda: nn.TransformerDecoderBlock(8, 2, scale="x"), TypeError,
     r"TransformerDecoderBlock: scale must be a number, got 'x'"),
    (lambda: nn.TransformerDecoderBlock(8, 2, dropout=1.5), ValueError,
     r"TransformerDecoderBlock: dropout must be between 0 and 1, got 1.5"),
    (lambda: nn.EncoderDecoder(7, 7, 8, 2, 1, hidden_dim=0), ValueError,
     r"EncoderDecoder: hidden_dim must be at least 1, got 0"),
    (lambda: nn.EncoderDecoder(7, 7, 8, 3, 1), ValueError,
     r"EncoderDecoder: embed_dim 8 is not divisible by num_heads 3"),
    (lambda: nn.EncoderDecoder(7, 7, 8, 2, 1, scale=[1.0]), TypeError,
     r"EncoderDecoder: scale must be a number, got \[1.0\]"),
    (lambda: model()(SRC, np.array([[1, 7]] * 3)), IndexError,
     r"EncoderDecoder: tgt_ids must lie in \[0, 7\) \(7 tokens\), got 7"),
    (lambda: model()(SRC[0], np.array([1, 2])), ValueError,
     r"EncoderDecoder: src_ids must have shape \(B, T\) with T <= max_len 10, got \(5,\)"),
    (lambda: model()(np.ones((1, 11), int), np.ones((1, 2), int)), ValueError,
     r"src_ids must have shape \(B, T\) with T <= max_len 10, got \(1, 11\)"),
    (lambda: model()(SRC, np.ones((3, 2), int), SRC_MASK[:, :4]), ValueError,
     r"EncoderDecoder: src_mask must have the source's shape \(B, S\) = \(3, 5\), got \(3, 4\)"),
    (lambda: model()(SRC, np.ones((3, 2), int), SRC_MASK * 1), TypeError,
     r"EncoderDecoder: src_mask must be booleans \(True = a real token\), got dtype int64"),
    (lambda: model().greedy_decode(SRC, -1, 0), ValueError,
     r"greedy_decode: max_new_tokens must be at least 0, got -1"),
    # the start token is named as start_id, not as the tgt_ids it starts
    (lambda: model().greedy_decode(SRC, 3, 7), IndexError,
     r"^EncoderDecoder.greedy_decode: start_id must lie in \[0, 7\) \(7 target tokens\), got 7"),
    (lambda: model().greedy_decode(SRC, 10, 0), ValueError,
     r"greedy_decode: 1 \+ max_new_tokens = 11 target tokens exceed max_len 10"),
])
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call()
