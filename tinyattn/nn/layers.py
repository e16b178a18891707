"""The layers a transformer is made of, besides attention: Linear, LayerNorm, Embedding, Dropout,
the feed-forward block and the sinusoidal positional encoding.

Every layer with parameters takes `dtype=None` (float64) and initialises them as PyTorch does, from
the generator `ta.manual_seed` seeds.
"""
import math

import numpy as np

import tinyattn.functional as F
from tinyattn import rng
from tinyattn.arguments import (check_dtype, check_flags, check_ids, check_ints,
                                check_layer_arguments, check_number, check_shapes)
from tinyattn.nn.module import Module, Parameter, uniform


class Linear(Module):
    """y = x @ weight^T + bias, with PyTorch's layout: weight is (out_features, in_features).

    Initialised uniformly in +-1/sqrt(in_features), as PyTorch does (0 when in_features is 0).
    """

    def __init__(self, in_features, out_features, bias=True, dtype=None):
        check_ints("Linear", low=0, in_features=in_features, out_features=out_features)
        check_flags("Linear", bias=bias)
        dtype = check_dtype("Linear", dtype)
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = uniform((out_features, in_features), bound, dtype)
        self.bias = uniform((out_features,), bound, dtype) if bias else None

    def forward(self, x):
        check_shapes("Linear", dtype=self.weight.dtype, input=(x, f"... {self.in_features}"))
        y = x @ self.weight.T               # (..., in) @ (in, out) -> (..., out)
        return y + self.bias if self.bias is not None else y

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


class LayerNorm(Module):
    """Normalise over the last axis (or the last len(normalized_shape) axes), then scale and shift
    with the learned `weight` (ones at first) and `bias` (zeros)."""

    def __init__(self, normalized_shape, eps=1e-5, dtype=None):
        if not isinstance(normalized_shape, (tuple, list)):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        for size in self.normalized_shape:
            check_ints("LayerNorm", low=0, normalized_shape=size)
        self.eps = check_number("LayerNorm", "eps", eps, low=0)
        dtype = check_dtype("LayerNorm", dtype)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))

    def forward(self, x):
        check_shapes("LayerNorm", dtype=self.weight.dtype,
                     input=(x, "... " + " ".join(map(str, self.normalized_shape))))
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

    def __init__(self, num_embeddings, embedding_dim, dtype=None):
        check_ints("Embedding", low=0, num_embeddings=num_embeddings, embedding_dim=embedding_dim)
        dtype = check_dtype("Embedding", dtype)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        table = rng.generator.standard_normal((num_embeddings, embedding_dim))
        self.weight = Parameter(table.astype(dtype))

    def forward(self, ids):
        ids = check_ids("Embedding", "ids", ids, self.num_embeddings, "embeddings")
        return self.weight[ids]             # (*ids.shape, embedding_dim)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class Dropout(Module):
    """Zero elements with probability p while training (scaling the rest by 1/(1-p))."""

    def __init__(self, p=0.1):
        self.p = check_number("Dropout", "p", p, 0, 1)

    def forward(self, x):
        return F.dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"


class FeedForward(Module):
    """The position-wise feed-forward block: Linear(E, hidden) -> GELU -> Linear(hidden, E) ->
    dropout, with hidden = 4 E unless given. Each token is transformed on its own; attention is
    where tokens meet."""

    def __init__(self, embed_dim, hidden_dim=None, dropout=0.0, dtype=None):
        check_layer_arguments("FeedForward", embed_dim, hidden_dim=hidden_dim, dropout=dropout,
                              dtype=dtype)
        hidden_dim = 4 * embed_dim if hidden_dim is None else hidden_dim
        self.up = Linear(embed_dim, hidden_dim, dtype=dtype)
        self.down = Linear(hidden_dim, embed_dim, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.down(F.gelu(self.up(x))))    # (..., E) -> (..., hidden) -> (..., E)


class PositionalEncoding(Module):
    """Adds the sinusoidal position table (`F.sinusoidal_positions`) to a batch of embeddings
    (B, T, E); no parameters. forward(x, offset=0) adds the rows offset ... offset + T - 1: the
    positions of tokens that come after `offset` cached ones."""

    def __init__(self, embed_dim, max_len=1024):
        check_ints("PositionalEncoding", low=0, embed_dim=embed_dim, max_len=max_len)
        self.embed_dim, self.max_len = embed_dim, max_len
        self.table = F.sinusoidal_positions(max_len, embed_dim)

    def forward(self, x, offset=0):
        T = check_shapes("PositionalEncoding", floating=True,
                         input=(x, f"... T {self.embed_dim}"))["T"]
        check_ints("PositionalEncoding", low=0, offset=offset)
        if offset + T > self.max_len:
            raise ValueError(f"PositionalEncoding: sequence length {offset + T} exceeds max_len "
                             f"{self.max_len}")
        rows = self.table[offset:offset + T].astype(x.dtype, copy=False)     # (T, E)
        return x + rows                                                       # (B, T, E)

    def extra_repr(self):
        return f"{self.embed_dim}, max_len={self.max_len}"
