"""The layers a transformer is made of, besides attention: Linear, LayerNorm, Embedding, Dropout,
the feed-forward block and the sinusoidal positional encoding.

Every layer with parameters takes `dtype=None` (float64) and initialises them as PyTorch does, from
the generator `ta.manual_seed` seeds.
"""
import math

import numpy as np

import tinyattn.functional as F
from tinyattn import arguments, rng
from tinyattn.arguments import at_least, between, door, floating_dtype, optional
from tinyattn.nn.module import Module, Parameter, uniform
from tinyattn.plumbing import data_of


class Linear(Module):
    """y = x @ weight^T + bias, with PyTorch's layout: weight is (out_features, in_features).

    Initialised uniformly in +-1/sqrt(in_features), as PyTorch does (0 when in_features is 0).

    Speed: x may have any leading axes (..., in_features), and forward folds them into rows
    first, so that the product is one (N, in) @ (in, out). As written, x @ weight^T would be one
    small product per batch element (NumPy's @ loops over the batch axes), and its backward
    dL/dweight^T = x^T @ grad one per batch element, summed afterwards by the sweep. The same
    numbers; `dev/measure_tricks.py` measures what the folding saves on a training step.
    """

    @door(in_features=at_least(0), out_features=at_least(0), bias=bool, dtype=floating_dtype)
    def __init__(self, in_features, out_features, bias=True, dtype=None):
        self.in_features, self.out_features = in_features, out_features
        bound = 1.0 / math.sqrt(in_features) if in_features > 0 else 0.0
        self.weight = uniform((out_features, in_features), bound, np.dtype(dtype))
        self.bias = uniform((out_features,), bound, np.dtype(dtype)) if bias else None

    @door(x="(..., in_features)")
    def forward(self, x):
        rows = x.reshape(math.prod(x.shape[:-1]), self.in_features)    # (..., in) -> (N, in)
        y = rows @ self.weight.T                                       # (N, in) @ (in, out)
        if self.bias is not None:
            y = y + self.bias                                          # (N, out)
        return y.reshape(*x.shape[:-1], self.out_features)             # (..., out)

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias is not None}"


def sizes_at_least_0(normalized_shape, **_):
    """normalized_shape: a size, or a tuple of them."""
    sizes = normalized_shape if isinstance(normalized_shape, (tuple, list)) else [normalized_shape]
    for size in sizes:
        at_least(0)("normalized_shape", size)


def normalized_axes_fit(self, x):
    """x ends with the normalized_shape."""
    sizes = ", ".join(map(str, self.normalized_shape))
    arguments.shapes(dtype=self.dtype, x=(x, f"(..., {sizes})"))


class LayerNorm(Module):
    """Normalise over the last axis (or the last len(normalized_shape) axes), then scale and shift
    with the learned `weight` (ones at first) and `bias` (zeros)."""

    @door(sizes_at_least_0, eps=between(0), dtype=floating_dtype)
    def __init__(self, normalized_shape, eps=1e-5, dtype=None):
        if not isinstance(normalized_shape, (tuple, list)):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(normalized_shape)
        self.eps = float(eps)
        self.weight = Parameter(np.ones(self.normalized_shape, dtype=dtype))
        self.bias = Parameter(np.zeros(self.normalized_shape, dtype=dtype))

    @door(normalized_axes_fit)
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

    @door(lambda self, ids: arguments.ids("ids", ids, self.num_embeddings, "embeddings"))
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
    where tokens meet."""

    @door(embed_dim=at_least(1), hidden_dim=optional(at_least(1)), dropout=between(0, 1),
          dtype=floating_dtype)
    def __init__(self, embed_dim, hidden_dim=None, dropout=0.0, dtype=None):
        self.embed_dim = embed_dim
        hidden_dim = 4 * embed_dim if hidden_dim is None else hidden_dim
        self.up = Linear(embed_dim, hidden_dim, dtype=dtype)
        self.down = Linear(hidden_dim, embed_dim, dtype=dtype)
        self.dropout = Dropout(dropout)

    @door(x="(..., embed_dim)")
    def forward(self, x):
        return self.dropout(self.down(F.gelu(self.up(x))))   # (..., E) -> (..., hidden) -> (..., E)


def within_the_table(self, x, offset=0):
    if offset + x.shape[-2] > self.max_len:
        raise ValueError(f"sequence length {offset + x.shape[-2]} exceeds max_len {self.max_len}")


class PositionalEncoding(Module):
    """Adds the sinusoidal position table (`F.sinusoidal_positions`) to a batch of embeddings
    (B, T, E); no parameters. forward(x, offset=0) adds the rows offset ... offset + T - 1: the
    positions of tokens that come after `offset` cached ones."""

    @door(embed_dim=at_least(0), max_len=at_least(0))
    def __init__(self, embed_dim, max_len=1024):
        self.embed_dim, self.max_len = embed_dim, max_len
        self.table = F.sinusoidal_positions(max_len, embed_dim)

    @door(within_the_table, x="(..., T, embed_dim)", offset=at_least(0))
    def forward(self, x, offset=0):
        T = x.shape[-2]
        rows = self.table[offset:offset + T].astype(x.dtype, copy=False)     # (T, E)
        return x + rows                                                       # (B, T, E)

    def extra_repr(self):
        return f"{self.embed_dim}, max_len={self.max_len}"
