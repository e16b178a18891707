"""The checklist's rows for functions and layers, each checked as a whole with respect to every
input and parameter."""
import numpy as np

import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn
from tinyattn.nn.multi_head_attention import MultiHeadAttention     # chapter 1's layer itself
from tinyattn_tools.checklist.cases import LayerCase, function, layer, leaves
from tinyattn_tools.checklist.positions import language_model


def seeded_dropout(x):
    """Dropout with the same mask at every call, so that finite differences see one function."""
    ta.manual_seed(0)
    return F.dropout(x, p=0.3)


QKV = ((2, 3, 4), (2, 5, 4), (2, 5, 6))        # query (B, L, E), key (B, S, E), value (B, S, Ev)
MASK = np.array([[True, False, True, True, False],
                 [True, True, False, True, True],
                 [False, True, True, False, True]])              # (L, S) = (3, 5)
ROW_FULLY_MASKED = MASK & np.array([[True], [False], [True]])    # query 1 sees no key
PADDING = np.array([True, True, True, False])[None, None, None, :]   # (B, H, L, S): key 3 hidden


def sdpa_with_learned_mask():
    """The additive float mask is a tensor that requires grad too: the scores' gradient flows
    into it."""
    query, key, value, bias = leaves(*QKV, (3, 5))
    return F.scaled_dot_product_attention, [query, key, value, bias]


def long_chain(x):
    """3,000 ops in a row: a sweep that recursed would pass Python's limit of 1,000 frames."""
    for _ in range(3000):
        x = x * 1.0002
    return x


def embedding():
    ta.manual_seed(0)
    table = nn.Embedding(6, 4)
    ids = np.array([[0, 3, 3], [5, 0, 3]])       # repeated ids: their gradients add up
    return (lambda weight: table(ids)), [table.weight]


def tied_embedding():
    """Every element of the tied embedding of a GPT-2-shaped model, checked on its own: its
    gradient is the lookup's (rows of the ids) plus the head's (every row)."""
    ta.manual_seed(0)
    model = nn.CausalTransformer(vocab_size=5, embed_dim=4, num_heads=2, num_layers=1, max_len=4,
                                 positional="learned", tied_head=True)
    ids = np.array([[1, 3, 3, 0]])
    return (lambda weight: model(ids)), [model.embed.weight]


LAYER_CASES = [
    # functions
    LayerCase("F.dropout (fixed mask)", function(seeded_dropout, (4, 5))),
    LayerCase("a broadcast input shaped like the output",
              function(lambda a, b: (b * a).sum(axis=0), (4,), (3, 4))),
    LayerCase("a chain of 3,000 ops (deeper than Python's recursion limit)",
              function(long_chain, (3,))),
    LayerCase("F.cross_entropy",
              function(F.cross_entropy, (4, 5), targets=np.array([1, 0, 4, 1]))),
    LayerCase("F.cross_entropy (N, C, d), ignore_index",
              function(F.cross_entropy, (2, 4, 3), targets=np.array([[1, -100, 3], [0, 2, 2]]))),
    # scaled dot-product attention, on query, key and value of the shapes QKV
    LayerCase("attention: sdpa", function(F.scaled_dot_product_attention, *QKV)),
    LayerCase("attention: sdpa, output and weights", function(F.attention, *QKV)),
    LayerCase("attention: sdpa, broadcast batch", function(F.scaled_dot_product_attention,
                                                           (2, 1, 3, 4), (1, 2, 5, 4), (2, 5, 6))),
    LayerCase("attention: sdpa, unscaled (scale=1)",
              function(F.scaled_dot_product_attention, *QKV, scale=1.0)),
    LayerCase("attention: sdpa, boolean mask",
              function(F.scaled_dot_product_attention, *QKV, attn_mask=MASK)),
    LayerCase("attention: sdpa, fully masked row",
              function(F.attention, *QKV, attn_mask=ROW_FULLY_MASKED)),
    LayerCase("attention: sdpa, learned float mask", sdpa_with_learned_mask),
    LayerCase("attention: sdpa, learned float mask, causal",
              lambda: (lambda q, k, v, bias: F.scaled_dot_product_attention(
                  q, k, v, attn_mask=bias, is_causal=True), leaves((2, 4, 3), (2, 4, 3),
                                                                   (2, 4, 2), (4, 4)))),
    LayerCase("attention: sdpa, causal",
              function(F.attention, (2, 4, 4), (2, 4, 4), (2, 4, 3), is_causal=True)),
    LayerCase("attention: sdpa, causal and mask",
              function(F.scaled_dot_product_attention, *QKV, attn_mask=MASK, is_causal=True)),
    # layers, with respect to their inputs and every parameter
    LayerCase("Linear", layer(lambda: nn.Linear(4, 3), (2, 3, 4))),
    LayerCase("Linear, no bias", layer(lambda: nn.Linear(4, 3, bias=False), (5, 4))),
    LayerCase("LayerNorm", layer(lambda: nn.LayerNorm(5), (2, 3, 5))),
    LayerCase("LayerNorm over two axes", layer(lambda: nn.LayerNorm((3, 5)), (2, 3, 5))),
    LayerCase("Embedding", embedding),
    LayerCase("PositionalEncoding", layer(lambda: nn.PositionalEncoding(6, max_len=8), (2, 5, 6))),
    LayerCase("FeedForward", layer(lambda: nn.FeedForward(4, 8), (2, 3, 4))),
    LayerCase("MultiHeadAttention, self", layer(lambda: MultiHeadAttention(8, 2), (2, 3, 8))),
    LayerCase("MultiHeadAttention, cross",
              layer(lambda: MultiHeadAttention(8, 2), (2, 3, 8), (2, 5, 8))),
    LayerCase("MultiHeadAttention, cross, key != value",
              layer(lambda: MultiHeadAttention(8, 2), (2, 3, 8), (2, 5, 8), (2, 5, 8))),
    LayerCase("MultiHeadAttention, causal and padding",
              layer(lambda: MultiHeadAttention(8, 4), (2, 4, 8), attn_mask=PADDING,
                    is_causal=True)),
    LayerCase("TransformerBlock",
              layer(lambda: nn.TransformerBlock(8, 2, hidden_dim=16), (2, 4, 8))),
    LayerCase("TransformerBlock, causal",
              layer(lambda: nn.TransformerBlock(8, 2, hidden_dim=16), (2, 4, 8), is_causal=True)),
    LayerCase("MultiHeadAttention, E=64 (random directions)",
              layer(lambda: MultiHeadAttention(64, 8), (2, 6, 64)), directions=4),
    LayerCase("CausalTransformer (random directions)",
              language_model("sinusoidal", num_layers=2), directions=4),
    # GPT-2's shape: the head is the embedding, so embed.weight's gradient sums both uses
    LayerCase("CausalTransformer, GPT-2's tied head (random directions)",
              language_model("learned", num_layers=2, tied_head=True, layer_norm_eps=1e-3),
              directions=4),
    LayerCase("CausalTransformer, GPT-2's tied head (embed.weight alone)", tied_embedding),
]
