"""Bad input gets a clear error at the call that received it, naming the op and the shapes, and
leaves nothing behind in the graph."""
import traceback

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn import engine, optim


def t(*shape):
    return ta.tensor(np.ones(shape), requires_grad=True)


@pytest.mark.parametrize("call, error, message", [
    (lambda: t(2, 3) @ t(4, 5), ValueError,
     r"matmul: shapes \(2, 3\) and \(4, 5\) are not aligned: "
     r"3 \(axis -1 of a\) != 4 \(axis -2 of b\)"),
    (lambda: t(3) @ t(4), ValueError, r"matmul: shapes \(3,\) and \(4,\) are not aligned"),
    (lambda: t(2, 3, 4) @ t(5, 4, 2), ValueError,
     r"matmul: shapes \(2, 3, 4\) and \(5, 4, 2\): the batch shapes \(2,\) and \(5,\)"),
    (lambda: t(2, 3) @ 2.0, ValueError, r"matmul: shapes \(2, 3\) and \(\)"),
    (lambda: t(2, 3) + t(4,), ValueError, r"add: .*\(2,3\).*\(4,\)"),
    (lambda: t(2, 3) * t(3, 2), ValueError, r"mul: .*\(2,3\).*\(3,2\)"),
    (lambda: ta.where(np.ones((2, 3), bool), t(2, 3), t(4, 1)), ValueError, r"where: "),
    (lambda: ta.where(np.ones(3), t(3), t(3)), TypeError, r"where: the condition must be boolean"),
    (lambda: t(2, 3).reshape(4, 2), ValueError,
     r"reshape: cannot reshape a tensor of shape \(2, 3\) \(6 elements\) into shape \(4, 2\)"),
    (lambda: t(2, 3).reshape(-1, -1), ValueError, r"reshape: .*at most one -1"),
    (lambda: t(2, 3).reshape(4, -1), ValueError, r"reshape: cannot reshape .*\(2, 3\)"),
    (lambda: t(2, 3).transpose(0, 0), ValueError,
     r"transpose: axes \(0, 0\) are not a permutation"),
    (lambda: t(2, 3).swapaxes(0, 2), ValueError, r"swapaxes: axes 0 and 2 are out of range"),
    (lambda: t(3).mT, ValueError, r"mT: needs at least 2 dimensions, got a tensor of shape \(3,\)"),
    (lambda: t(2, 3).sum(axis=2), ValueError, r"sum: axis 2 is out of range .* 2 dimensions"),
    (lambda: t(2, 3).mean(axis=(0, 0)), ValueError, r"mean: axis \(0, 0\) repeats an axis"),
    (lambda: t(0, 3).max(), ValueError, r"max: cannot take the max over an empty axis"),
    (lambda: t(2, 3).cumsum(2), ValueError, r"cumsum: axis 2 is out of range .* 2 dimensions"),
    (lambda: t(2, 3).cumsum(-3), ValueError, r"cumsum: axis -3 is out of range .* 2 dimensions"),
    (lambda: t().cumsum(1), ValueError, r"cumsum: axis 1 is out of range for a 0-d tensor"),
    (lambda: t(2, 3).cumsum(1.0), TypeError, r"cumsum: axis must be an int, got 1.0"),
    (lambda: t(2, 3).cumsum(True), TypeError, r"cumsum: axis must be an int, got True"),
    (lambda: t(2, 3).cumsum(None), TypeError, r"cumsum: axis must be an int, got None"),
    (lambda: F.elu(t(2), alpha="a"), TypeError, r"elu: alpha must be a number, got 'a'"),
    (lambda: F.elu(t(2), alpha=float("nan")), ValueError, r"elu: alpha must not be NaN"),
    (lambda: t(2, 3)[5], IndexError, r"index: index 5 is out of bounds"),
    (lambda: t(2, 3)[5], ValueError, r"index: index 5 is out of bounds"),
    (lambda: ta.concatenate([t(2, 3), t(2, 4)]), ValueError,
     r"concatenate: shapes \(2, 3\) and \(2, 4\) differ outside axis 0"),
    (lambda: ta.concatenate([]), ValueError, r"concatenate: need at least one tensor"),
    (lambda: ta.stack([t(2, 3), t(3, 2)]), ValueError,
     r"stack: all tensors must have the same shape, got \(2, 3\) and \(3, 2\)"),
    (lambda: t(2, 3) + "x", TypeError, r"add: cannot use a str"),
    (lambda: t(2, 3).backward(), ValueError,
     r"backward: a seed gradient is needed for a tensor of shape \(2, 3\)"),
    (lambda: t(2, 3).backward(np.ones(3)), ValueError,
     r"backward: the seed gradient has shape \(3,\) but the tensor has shape \(2, 3\)"),
    (lambda: ta.tensor([1.0, 2.0]).sum().backward(), ValueError,
     r"backward: this tensor of shape \(\) does not require grad"),
    # functions and layers
    (lambda: F.scaled_dot_product_attention(t(2, 3, 4), t(2, 5, 3), t(2, 5, 6)), ValueError,
     r"scaled_dot_product_attention: query and key disagree on E \(4 and 3\): expected "
     r"query \(\.\.\., L, E\), key \(\.\.\., S, E\), value \(\.\.\., S, Ev\); "
     r"got query \(2, 3, 4\), key \(2, 5, 3\), value \(2, 5, 6\)"),
    (lambda: F.scaled_dot_product_attention(t(2, 3, 4), t(2, 5, 4), t(2, 4, 6)), ValueError,
     r"scaled_dot_product_attention: key and value disagree on S \(5 and 4\): .*\(2, 4, 6\)"),
    (lambda: F.scaled_dot_product_attention(t(2, 3, 4), t(3, 5, 4), t(3, 5, 6)), ValueError,
     r"scaled_dot_product_attention: the leading \(batch\) axes do not broadcast"),
    (lambda: F.scaled_dot_product_attention(t(2, 3, 4), t(2, 5, 4), t(2, 5, 6),
                                            attn_mask=np.ones((4, 5), bool)), ValueError,
     r"attn_mask of shape \(4, 5\) does not broadcast to the scores' shape \(2, 3, 5\)"),
    (lambda: F.scaled_dot_product_attention(t(2, 3, 4), t(2, 5, 4), t(2, 5, 6),
                                            attn_mask=np.ones((3, 5), int)), TypeError,
     r"attn_mask must be boolean or float, got dtype int"),
    (lambda: F.scaled_dot_product_attention(t(4), t(5, 4), t(5, 6)), ValueError,
     r"query must have shape \(\.\.\., L, E\), got \(4,\)"),
    (lambda: nn.MultiHeadAttention(10, 3), ValueError,
     r"MultiHeadAttention: embed_dim 10 is not divisible by num_heads 3"),
    (lambda: nn.MultiHeadAttention(8, 2)(t(2, 3, 6)), ValueError,
     r"MultiHeadAttention: query must have shape \(B, L, 8\), got \(2, 3, 6\)"),
    (lambda: nn.MultiHeadAttention(8, 2)(t(2, 3, 8), t(3, 3, 8)), ValueError,
     r"MultiHeadAttention: query and key disagree on B \(2 and 3\)"),
    (lambda: nn.Linear(4, 3)(t(2, 5)), ValueError,
     r"Linear: x must have shape \(\.\.\., 4\), got \(2, 5\)"),
    (lambda: nn.LayerNorm(4)(t(2, 5)), ValueError,
     r"LayerNorm: x must have shape \(\.\.\., 4\), got \(2, 5\)"),
    (lambda: F.layer_norm(t(2, 3), t(4), t(4)), ValueError,
     r"layer_norm: x and weight disagree on N \(3 and 4\): .* got x \(2, 3\), weight \(4,\)"),
    (lambda: F.layer_norm(t(2, 3), None, t(2)), ValueError,
     r"layer_norm: x and bias disagree on N \(3 and 2\): .* got x \(2, 3\), bias \(2,\)$"),
    (lambda: F.layer_norm(t(2, 3), ta.tensor(np.ones(3, np.float32))), TypeError,
     r"layer_norm: x and weight must have the same dtype, got float64 and float32"),
    (lambda: nn.Embedding(4, 3)(np.array([0, 4])), IndexError,
     r"Embedding: ids must lie in \[0, 4\) \(4 embeddings\), got 4"),
    (lambda: nn.Embedding(4, 3)(np.array([0.5])), TypeError, r"Embedding: ids must be integers"),
    (lambda: F.cross_entropy(t(3, 4), np.array([0, 1])), ValueError,
     r"cross_entropy: logits of shape \(3, 4\) need targets of shape \(3,\), got \(2,\)"),
    (lambda: F.cross_entropy(t(3, 4), np.array([0, 1, 4])), ValueError,
     r"cross_entropy: targets must lie in \[0, 4\) \(4 classes\), got 4"),
    (lambda: F.cross_entropy(t(3, 4), np.array([0.0, 1, 2])), TypeError,
     r"cross_entropy: targets must be integers, got dtype float64"),
    (lambda: F.dropout(t(3), 1.5), ValueError, r"dropout: p must be between 0 and 1, got 1.5"),
    (lambda: nn.PositionalEncoding(4, max_len=3)(t(1, 5, 4)), ValueError,
     r"PositionalEncoding: sequence length 5 exceeds max_len 3"),
    (lambda: optim.SGD([], lr=0.1), ValueError, r"SGD: got an empty list of parameters"),
    (lambda: optim.Adam(nn.Linear(2, 2).parameters(), lr=-1), ValueError,
     r"Adam: lr must be >= 0, got -1"),
    (lambda: optim.Adam(nn.Linear(2, 2).parameters(), betas=(0.9, 1.0)), ValueError,
     r"Adam: needs 0 <= betas < 1"),
    (lambda: optim.SGD([nn.Parameter(np.ones(2))] * 2, lr=0.1), ValueError,
     r"SGD: a parameter appears twice"),
    (lambda: optim.AdamW([ta.tensor(np.ones(2))]), TypeError,
     r"AdamW: every parameter must be a Tensor that requires grad"),
    (lambda: optim.AdamW(nn.Linear(2, 2).parameters(), betas=(-0.1, 0.9)), ValueError,
     r"AdamW: beta1 must be >= 0, got -0.1"),
    (lambda: optim.AdamW(nn.Linear(2, 2).parameters(), weight_decay=-1), ValueError,
     r"AdamW: weight_decay must be >= 0, got -1"),
    (lambda: optim.clip_grad_norm(nn.Linear(2, 2).parameters(), max_norm=-1.0), ValueError,
     r"clip_grad_norm: max_norm must be >= 0, got -1.0"),
    (lambda: optim.clip_grad_norm([], max_norm=1.0), ValueError,
     r"clip_grad_norm: got an empty list of parameters"),
    (lambda: optim.warmup_cosine_lr(-1, 1e-3, 10, 100), ValueError,
     r"warmup_cosine_lr: step must be at least 0, got -1"),
    (lambda: nn.MultiHeadAttention(8, 0), ValueError,
     r"MultiHeadAttention: num_heads must be at least 1, got 0"),
    (lambda: nn.PositionalEncoding(4)(t(4)), ValueError,
     r"PositionalEncoding: x must have shape \(\.\.\., T, 4\), got \(4,\)"),
    (lambda: F.scaled_dot_product_attention(t(2, 0), t(3, 0), t(3, 2)), ValueError,
     r"scaled_dot_product_attention: .*width E of 0"),
    (lambda: F.cross_entropy(t(), np.array(0)), ValueError,
     r"cross_entropy: logits need at least one dimension \(the classes\), got shape \(\)"),
    (lambda: F.scaled_dot_product_attention(t(2, 3), t(4, 3), t(4, 2),
                                            attn_mask=ta.tensor(np.zeros((2, 4), np.float32))),
     TypeError, r"attn_mask .* float32 .* float64"),
    (lambda: nn.Linear(2, 2).to(np.int32), TypeError,
     r"to: dtype must be a floating-point type, got int32"),
    # the wrong kind of argument: a TypeError that still names the op
    (lambda: ta.tensor([[1, 2], [3]]), ValueError, r"tensor: .*inhomogeneous"),
    (lambda: t(2) + np.array(["a", "b"]), TypeError,
     r"add: expected numbers, got an array of dtype <U1"),
    (lambda: t(2) + np.array([1, "a"], dtype=object), TypeError,
     r"add: expected numbers, got an array of dtype object"),
    (lambda: ta.concatenate([t(2), t(2)], axis=None), TypeError, r"concatenate: axes must be ints"),
    (lambda: ta.stack([t(2), t(2)], axis=1.0), TypeError,
     r"stack: axes must be ints, got \(1.0,\)"),
    (lambda: t(2, 3).transpose("a", "b"), TypeError, r"transpose: axes must be ints"),
    (lambda: t(2, 3).swapaxes(0.0, 1), TypeError, r"swapaxes: axes must be ints, got \(0.0, 1\)"),
    (lambda: t(2, 3).sum(axis=1.0), TypeError,
     r"sum: axis must be None, an int or a tuple of ints, got 1.0"),
    (lambda: t(2, 3).max(axis="a"), TypeError, r"max: axis must be None, an int or a tuple"),
    (lambda: F.softmax(t(2, 3), axis=1.0), TypeError, r"softmax: .*float"),
    (lambda: (t(2) * 2).backward("ab"), TypeError,
     r"backward: expected numbers, got an array of dtype <U2"),
    (lambda: F.scaled_dot_product_attention(t(3, 2), t(3, 2), t(3, 2), scale="a"), TypeError,
     r"scaled_dot_product_attention: scale must be a number, got 'a'"),
    (lambda: F.gelu(np.ones(3)), TypeError, r"gelu: x must be a Tensor, got ndarray"),
    (lambda: F.layer_norm(np.ones(3)), TypeError, r"layer_norm: x must be a Tensor, got ndarray"),
    (lambda: F.layer_norm(t(3), [1.0, 1.0, 1.0]), TypeError,
     r"layer_norm: weight must be a Tensor, got list"),
    (lambda: F.layer_norm(t()), ValueError,
     r"layer_norm: x must have shape \(\.\.\., N\), got \(\)"),
    (lambda: F.layer_norm(t(3), eps=-1.0), ValueError, r"layer_norm: eps must be >= 0, got -1.0"),
    (lambda: nn.LayerNorm(4)(np.ones((2, 4))), TypeError,
     r"LayerNorm: x must be a Tensor, got ndarray"),
    (lambda: nn.Linear(4, 3)([1.0, 2.0, 3.0, 4.0]), TypeError,
     r"Linear: x must be a Tensor, got list"),
    (lambda: nn.Linear(-1, 3), ValueError, r"Linear: in_features must be at least 0, got -1"),
    (lambda: nn.Embedding(4, -3), ValueError,
     r"Embedding: embedding_dim must be at least 0, got -3"),
    (lambda: nn.LayerNorm(-2), ValueError,
     r"LayerNorm: normalized_shape must be at least 0, got -2"),
    (lambda: nn.MultiHeadAttention(8.0, 2), TypeError,
     r"MultiHeadAttention: embed_dim must be an int, got 8.0"),
    (lambda: nn.MultiHeadAttention(8, 2.0), TypeError,
     r"MultiHeadAttention: num_heads must be an int, got 2.0"),
    (lambda: optim.Adam(nn.Linear(2, 2).parameters(), betas=(0.9,)), TypeError,
     r"Adam: betas must be a pair \(beta1, beta2\), got \(0.9,\)"),
    (lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr="0.1"), TypeError,
     r"SGD: lr must be a number, got '0.1'"),
    (lambda: optim.SGD(nn.Linear(2, 2).parameters(), lr=float("nan")), ValueError,
     r"SGD: lr must not be NaN"),
    (lambda: F.scaled_dot_product_attention(t(3, 2), t(3, 2),
                                            ta.tensor(np.ones((3, 2), np.float32))),
     TypeError, r"scaled_dot_product_attention: .* same dtype, got float64, float64 and float32"),
    (lambda: F.dropout(t(3), "a"), TypeError, r"dropout: p must be a number, got 'a'"),
    (lambda: F.layer_norm(t(3), eps="a"), TypeError, r"layer_norm: eps must be a number"),
    (lambda: F.scaled_dot_product_attention(t(3, 2), t(3, 2), t(3, 2), scale=True), TypeError,
     r"scaled_dot_product_attention: scale must be a number, got True"),
    (lambda: nn.LayerNorm(4.0), TypeError, r"LayerNorm: normalized_shape must be an int, got 4.0"),
    (lambda: nn.PositionalEncoding(4)(ta.tensor(np.ones((1, 2, 4), int))), TypeError,
     r"PositionalEncoding: x must hold floating-point numbers, got int64"),
    (lambda: list(ta.tensor(1.0)), TypeError,
     r"iter: cannot iterate over a 0-d tensor \(shape \(\)\)"),
    (lambda: nn.Linear(3, 2)(ta.tensor(np.ones((1, 3), np.float32))), TypeError,
     r"Linear: x has dtype float32 but the layer's parameters are float64"),
    (lambda: nn.LayerNorm(3)(ta.tensor(np.ones((1, 3), int))), TypeError,
     r"LayerNorm: x has dtype int64 but the layer's parameters are float64"),
    (lambda: nn.MultiHeadAttention(4, 2).to(np.float32)(t(1, 2, 4)), TypeError,
     r"MultiHeadAttention: query has dtype float64 but the layer's parameters are float32"),
    (lambda: nn.Linear(2, 2).load_state_dict([1, 2]), TypeError,
     r"load_state_dict: expected a dict of arrays, got list"),
    # flags: a string or None where a bool belongs is an error, not "truthy" (PyTorch raises too)
    (lambda: F.scaled_dot_product_attention(t(3, 2), t(3, 2), t(3, 2), is_causal="no"), TypeError,
     r"scaled_dot_product_attention: is_causal must be a bool, got 'no'"),
    (lambda: F.attention(t(3, 2), t(3, 2), t(3, 2), is_causal=None), TypeError,
     r"^attention: is_causal must be a bool, got None"),
    (lambda: F.flash_attention(t(3, 2), t(3, 2), t(3, 2), is_causal="no"), TypeError,
     r"flash_attention: is_causal must be a bool, got 'no'"),
    (lambda: F.sliding_window_attention(t(3, 2), t(3, 2), t(3, 2), 2, is_causal=None), TypeError,
     r"sliding_window_attention: is_causal must be a bool, got None"),
    (lambda: F.linear_attention(t(3, 2), t(4, 2), t(4, 2), is_causal="no"), TypeError,
     r"linear_attention: is_causal must be a bool, got 'no'"),
    (lambda: F.local_mask(4, 2, is_causal=1), TypeError, r"local_mask: is_causal must be a bool"),
    (lambda: nn.MultiHeadAttention(4, 2)(t(1, 3, 4), is_causal="no"), TypeError,
     r"MultiHeadAttention: is_causal must be a bool, got 'no'"),
    (lambda: nn.TransformerBlock(4, 2)(t(1, 3, 4), is_causal=None), TypeError,
     r"TransformerBlock: is_causal must be a bool, got None"),
    (lambda: nn.MultiHeadAttention(4, 2, rope="yes"), TypeError,
     r"MultiHeadAttention: rope must be a bool, got 'yes'"),
    (lambda: nn.MultiHeadAttention(4, 2, bias=None), TypeError,
     r"MultiHeadAttention: bias must be a bool, got None"),
    (lambda: nn.Linear(4, 2, bias="no"), TypeError, r"Linear: bias must be a bool, got 'no'"),
    # F.attention's errors name attention, SDPA's scaled_dot_product_attention
    (lambda: F.attention(t(3, 2), t(3, 4), t(3, 2)), ValueError,
     r"^attention: query and key disagree on E"),
    # every layer checks all its constructor's arguments at its own door, naming itself
    (lambda: nn.CausalTransformer(11, 8, 2, 0), ValueError,
     r"CausalTransformer: num_layers must be at least 1, got 0"),
    (lambda: nn.CausalTransformer(11, 8, 2, -1), ValueError,
     r"CausalTransformer: num_layers must be at least 1, got -1"),
    (lambda: nn.CausalTransformer(11, 8, 2, True), TypeError,
     r"CausalTransformer: num_layers must be an int, got True"),
    (lambda: nn.CausalTransformer(11, 8, 2, 1.0), TypeError,
     r"CausalTransformer: num_layers must be an int, got 1.0"),
    (lambda: nn.CausalTransformer(11.0, 8, 2, 1), TypeError,
     r"CausalTransformer: vocab_size must be an int, got 11.0"),
    (lambda: nn.CausalTransformer(11, 8, 3, 1), ValueError,
     r"CausalTransformer: embed_dim 8 is not divisible by num_heads 3"),
    (lambda: nn.CausalTransformer(11, 6, 2, 1, positional="rope"), ValueError,
     r"CausalTransformer: rope rotates pairs of features, so it needs an even head_dim"),
    (lambda: nn.CausalTransformer(11, 8, 2, 1, dropout=1.5), ValueError,
     r"CausalTransformer: dropout must be between 0 and 1, got 1.5"),
    (lambda: nn.CausalTransformer(11, 8, 2, 1, scale="x"), TypeError,
     r"CausalTransformer: scale must be a number, got 'x'"),
    (lambda: nn.CausalTransformer(11, 8, 2, 1, dtype="banana"), TypeError,
     r"CausalTransformer: dtype must be a floating-point type, got 'banana'"),
    (lambda: nn.CausalTransformer(11, 8, 2, 1, dtype=np.int32), TypeError,
     r"CausalTransformer: dtype must be a floating-point type, got int32"),
    (lambda: nn.TransformerBlock(8, 2, hidden_dim=0), ValueError,
     r"TransformerBlock: hidden_dim must be at least 1, got 0"),
    (lambda: nn.TransformerBlock(8, 2, scale=None, dropout="0.1"), TypeError,
     r"TransformerBlock: dropout must be a number, got '0.1'"),
    (lambda: nn.MultiHeadAttention(8, 2, scale="x"), TypeError,
     r"MultiHeadAttention: scale must be a number, got 'x'"),
    (lambda: nn.MultiHeadAttention(8, 2, scale=float("nan")), ValueError,
     r"MultiHeadAttention: scale must not be NaN"),
    (lambda: nn.FeedForward(8, hidden_dim=0), ValueError,
     r"FeedForward: hidden_dim must be at least 1, got 0"),
    (lambda: nn.FeedForward(8, hidden_dim=2.5), TypeError,
     r"FeedForward: hidden_dim must be an int, got 2.5"),
    (lambda: nn.FeedForward(8, dropout=-0.1), ValueError,
     r"FeedForward: dropout must be between 0 and 1, got -0.1"),
    (lambda: nn.Linear(2, 2, dtype="banana"), TypeError,
     r"Linear: dtype must be a floating-point type, got 'banana'"),
    (lambda: nn.LayerNorm(2, dtype=np.int64), TypeError,
     r"LayerNorm: dtype must be a floating-point type, got int64"),
    (lambda: nn.Embedding(2, 2, dtype="banana"), TypeError, r"Embedding: dtype must be"),
    (lambda: F.alibi_bias(2, 4, dtype="banana"), TypeError,
     r"alibi_bias: dtype must be a floating-point type, got 'banana'"),
    # attn_mask and cache, at the door of the layer that receives them
    (lambda: nn.MultiHeadAttention(4, 2)(t(2, 3, 4), attn_mask=np.ones((5, 5), bool)), ValueError,
     r"MultiHeadAttention: attn_mask of shape \(5, 5\) does not broadcast to the scores' shape "
     r"\(2, 2, 3, 3\)"),
    (lambda: nn.MultiHeadAttention(4, 2)(t(2, 3, 4), attn_mask=np.ones((3, 3), int)), TypeError,
     r"MultiHeadAttention: attn_mask must be boolean or float, got dtype int64"),
    (lambda: nn.TransformerBlock(4, 2)(t(2, 3, 4), attn_mask=np.ones((4, 4), bool)), ValueError,
     r"TransformerBlock: attn_mask of shape \(4, 4\) does not broadcast"),
    (lambda: nn.TransformerBlock(4, 2)(t(2, 3, 6)), ValueError,
     r"TransformerBlock: x must have shape \(B, T, 4\), got \(2, 3, 6\)"),
    (lambda: nn.CausalTransformer(11, 4, 2, 1)(np.array([[1, 2]]), cache=object()), TypeError,
     r"CausalTransformer: cache must be a KVCache of this model \(from model.empty_cache\(\)\), "
     r"got object"),
    # attention and normalisation take floating-point tensors only (as PyTorch), and the
    # functions take tensors, not arrays
    (lambda: F.scaled_dot_product_attention(*[ta.tensor(np.ones((3, 2), int))] * 3), TypeError,
     r"scaled_dot_product_attention: query must hold floating-point numbers, got int64"),
    (lambda: F.sliding_window_attention(*[ta.tensor(np.ones((3, 2), bool))] * 3, window=2),
     TypeError, r"sliding_window_attention: query must hold floating-point numbers, got bool"),
    (lambda: F.linear_attention(*[ta.tensor(np.ones((3, 2), int))] * 3), TypeError,
     r"linear_attention: query must hold floating-point numbers, got int64"),
    (lambda: F.layer_norm(ta.tensor(np.ones((3, 2), int))), TypeError,
     r"layer_norm: x must hold floating-point numbers, got int64"),
    (lambda: F.softmax(np.ones(3)), TypeError, r"softmax: x must be a Tensor, got ndarray"),
    (lambda: F.log_softmax(np.ones(3)), TypeError, r"log_softmax: x must be a Tensor"),
    (lambda: F.relu(np.ones(3)), TypeError, r"relu: x must be a Tensor, got ndarray"),
    (lambda: F.elu(np.ones(3)), TypeError, r"elu: x must be a Tensor, got ndarray"),
    (lambda: F.sinusoidal_positions(-1, 4), ValueError,
     r"sinusoidal_positions: length must be at least 0, got -1"),
    (lambda: F.sinusoidal_positions(4, 4.5), TypeError,
     r"sinusoidal_positions: dim must be an int, got 4.5"),
    # a ragged list of ids names the function that received it
    (lambda: nn.Embedding(4, 3)([[0, 1], [2]]), ValueError, r"^Embedding: ids: .*inhomogeneous"),
    (lambda: F.cross_entropy(t(2, 4), [[0, 1], [2]]), ValueError,
     r"^cross_entropy: targets: .*inhomogeneous"),
])
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message) as raised:
        call()
    shown = "".join(traceback.format_exception(raised.value))    # as Python prints it
    assert "The above exception" not in shown and "During handling" not in shown  # said once


def test_a_cache_of_another_batch_is_named_at_the_model():
    model = nn.CausalTransformer(11, 4, 2, 1)
    cache = model.empty_cache()
    model(np.array([[1, 2, 3]]), cache=cache)
    with pytest.raises(ValueError, match=r"^CausalTransformer: the cache holds the keys of 1 "
                                         r"sequences, but ids is a batch of 2 \(shape \(2, 1\)\)"):
        model(np.array([[1], [2]]), cache=cache)
    assert len(cache) == 3                                       # nothing appended


def test_a_failed_call_adds_nothing_to_the_graph():
    x, y, logits = t(2, 3), t(4, 5), t(2, 5, 3)
    first_probe = next(engine._node_counter)
    with pytest.raises(ValueError):
        x @ y
    with pytest.raises(ValueError):
        x.reshape(7)
    with pytest.raises(ValueError):
        F.cross_entropy(logits, np.array([[0, 1, 9], [0, 0, 0]]))   # checked before any op
    assert next(engine._node_counter) == first_probe + 1     # no node was numbered in between
    (x * 2).sum().backward()
    np.testing.assert_array_equal(x.grad, np.full((2, 3), 2.0))


def test_float32_warning_from_gradcheck():
    x = ta.tensor(np.ones(3, np.float32), requires_grad=True)
    with pytest.warns(UserWarning, match="float32"):
        ta.gradcheck(lambda a: a * 2, [x], atol=1e-2, rtol=1e-2, eps=1e-3)


def test_load_state_dict_checks_every_value_before_changing_anything():
    layer = nn.Linear(2, 2)
    before = {name: array.copy() for name, array in layer.state_dict().items()}
    with pytest.raises(TypeError, match=r"load_state_dict: bias: expected numbers"):
        layer.load_state_dict({"weight": np.full((2, 2), 5.0), "bias": np.array(["a", "b"])})
    for name, array in layer.state_dict().items():
        np.testing.assert_array_equal(array, before[name])


def test_load_state_dict_refuses_numbers_too_large_for_the_dtype():
    layer = nn.Linear(2, 2).to(np.float32)
    before = layer.weight.data.copy()
    state = {"weight": np.zeros((2, 2)), "bias": np.array([1e300, 0.0])}
    with pytest.raises(ValueError, match=r"load_state_dict: bias holds numbers too large for "
                                         r"float32"):
        layer.load_state_dict(state)
    np.testing.assert_array_equal(layer.weight.data, before)
