"""Chapter 1. The layers a transformer is made of, besides attention: Linear, LayerNorm, Embedding,
Dropout and the feed-forward block.

Every layer with parameters takes `dtype=None` (float64) and initialises them as PyTorch does, from
the generator `ta.manual_seed` seeds.
"""
import math

import numpy as np

import tinyattn.functional as F
from tinyattn import rng
from tinyattn.arguments import at_least, between, door, floating_dtype, one_of, optional
from tinyattn.nn import checks
from tinyattn.nn.module import Module, Parameter, uniform
from tinyattn.arrays import data_of


class Linear(Module):
    """y = x @ weight^T + bias, with PyTorch's layout: weight is (out_features, in_features); x may
    have any leading axes, (..., in_features) -> (..., out_features) (`F.linear`, one op).

    Initialised uniformly in +-1/sqrt(in_features), as PyTorch does (0 when in_features is 0).
    """

    @door(in_features=at_least(0), out_features=at_least(0), bias=bool, dtype=floating_dtype)
    def __init__(self, in_features, out_features, bias=True, dtype=None):
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = uniform((out_features, in_features), bound, np.dtype(dtype))
        self.bias = uniform((out_features,), bound, np.dtype(dtype)) if bias else None

    @door(x="(..., in_features)")
    def forward(self, x):
        return F.linear(x, self.weight, self.bias)                      # (..., out_features)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class LayerNorm(Module):
    """Normalise over the last axis (or the last len(normalized_shape) axes), then scale and shift
    with the learned `weight` (ones at first) and `bias` (zeros)."""

    @door(checks.sizes_at_least_0, eps=between(0), dtype=floating_dtype)
    def __init__(self, normalized_shape, eps=1e-5, dtype=None):
        if not isinstance(normalized_shape, (tuple, list)):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = float(eps)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))

    @door(checks.normalized_axes_fit)
    def forward(self, x):
        if len(self.normalized_shape) == 1:
            return F.layer_norm(x, self.weight, self.bias, self.eps)
        # Over several axes: the same as over one axis holding their N elements.
        N = math.prod(self.normalized_shape)
        leading = x.shape[:x.ndim - len(self.normalized_shape)]
        rows = F.layer_norm(x.reshape(*leading, N), self.weight.reshape(N), self.bias.reshape(N),
                            self.eps)                                           # (..., N)
        return rows.reshape(x.shape)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class Embedding(Module):
    """A lookup table: token id i -> row i of `weight` (num_embeddings, embedding_dim), initialised
    from N(0, 1) as in PyTorch. The backward of the lookup adds each row's gradient back to its
    row, summing over repeated ids."""

    @door(num_embeddings=at_least(0), embedding_dim=at_least(0), dtype=floating_dtype)
    def __init__(self, num_embeddings, embedding_dim, dtype=None):
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        table = rng.generator.standard_normal((num_embeddings, embedding_dim))
        self.weight = Parameter(table.astype(dtype))

    @door(checks.ids_in_the_table)
    def forward(self, ids):
        return self.weight[np.asarray(data_of(ids))]       # (*ids.shape, embedding_dim)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zero elements with probability p while training (scaling the rest by 1/(1-p))."""

    @door(p=between(0, 1))
    def __init__(self, p=0.1):
        self.p = float(p)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class FeedForward(Module):
    """The position-wise feed-forward block: Linear(E, hidden) -> GELU -> Linear(hidden, E) ->
    dropout, with hidden = 4 E unless given. Each token is transformed on its own; attention is
    where tokens meet.

    `activation` is the GELU: "gelu_tanh", its tanh form (GPT-2's), or "gelu", as defined with
    erf (ViT's, BERT's; the names are transformers' config values, `F.gelu`'s two forms).
    """

    @door(embed_dim=at_least(1), hidden_dim=optional(at_least(1)), dropout=between(0, 1),
          activation=one_of("gelu_tanh", "gelu"), dtype=floating_dtype)
    def __init__(self, embed_dim, hidden_dim=None, dropout=0.0, activation="gelu_tanh",
                 dtype=None):
        self.embed_dim = embed_dim
        self.approximate = "tanh" if activation == "gelu_tanh" else "none"     # F.gelu's name
        hidden_dim = 4 * embed_dim if hidden_dim is None else hidden_dim
        self.up = Linear(embed_dim, hidden_dim, dtype=dtype)
        self.down = Linear(hidden_dim, embed_dim, dtype=dtype)
        self.dropout = Dropout(dropout)

    @door(x="(..., embed_dim)")
    def forward(self, x):
        hidden = F.gelu(self.up(x), approximate=self.approximate)        # (..., E) -> (..., hidden)
        return self.dropout(self.down(hidden))                           # (..., E)
