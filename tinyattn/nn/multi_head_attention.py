"""Chapter 1. Multi-head attention: several attention heads side by side, each looking at its own
slice of the embedding.

    1. project  the inputs into queries, keys and values     (B, T, E) -> (B, T, E)
    2. split    each projection into num_heads heads         (B, T, E) -> (B, H, T, D)
    3. attend   every head on its own (scaled dot-product)   -> weights (B, H, L, S), (B, H, L, D)
    4. merge    the heads back side by side                  (B, H, L, D) -> (B, L, E)
    5. project  the merged heads with out_proj               (B, L, E) -> (B, L, E)

with E = embed_dim, H = num_heads, D = E / H the head size, L the query length, S the key length.
"""
from tinyattn.arguments import at_least, between, door, floating_dtype, number, optional
from tinyattn.functional.scaled_dot_product import attention_weights
from tinyattn.nn import checks
from tinyattn.nn.layers import Linear
from tinyattn.nn.module import Module


class MultiHeadAttention(Module):
    """Multi-head attention with batch-first inputs (B, T, E), as in "Attention Is All You Need".

    forward(query, key=None, value=None, attn_mask=None, is_causal=False) -> (output, weights):
    `key` defaults to `query` (self-attention) and `value` to `key`; for cross-attention pass the
    other sequence as `key`. `weights` are per head, (B, num_heads, L, S).

    `scale` multiplies the scores; the default is 1 / sqrt(head_dim), `scale=1.0` leaves them
    unscaled. `dropout` is the probability of dropping an attention weight while training; the
    returned weights are those after dropout, so in training their rows need not sum to 1 (as in
    PyTorch). `dtype` is the parameters' dtype (default float64).

    `attn_mask` means what it means in `F.scaled_dot_product_attention`: True marks the (query, key)
    pairs that take part, a float mask is added to the scores; it broadcasts to (B, H, L, S), so a
    (L, S) mask applies to every batch and head and a (B, 1, 1, S) mask hides padding keys. A
    per-example mask needs its head axis: (B, 1, L, S), not (B, L, S), which NumPy would line up
    with (H, L, S). Note that PyTorch's `nn.MultiheadAttention` uses the opposite convention for
    boolean masks (True = masked).

    The activations it names (`Module.hook`): each head's queries, keys and values "q", "k", "v"
    (B, H, T, D), the attention "weights" (B, H, L, S), each head's output "heads" (B, H, L, D),
    before they are merged, and the layer's output "out" (B, L, E).
    """

    activations = ("q", "k", "v", "weights", "heads", "out")

    @door(checks.heads_fit, embed_dim=at_least(1), num_heads=at_least(1), bias=bool,
          dropout=between(0, 1), scale=optional(number), dtype=floating_dtype)
    def __init__(self, embed_dim, num_heads, bias=True, dropout=0.0, scale=None, dtype=None):
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        self.scale = scale          # None: 1 / sqrt(head_dim); 1.0: unscaled (see demos)
        self.q_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.k_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.v_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype)

    @door(checks.key_value_and_mask_fit, is_causal=bool)
    def forward(self, query, key=None, value=None, attn_mask=None, is_causal=False):
        key = query if key is None else key
        value = key if value is None else value
        (B, L, E), S = query.shape, key.shape[1]
        H, D = self.num_heads, self.head_dim

        # 1. project
        q = self.q_proj(query)                                          # (B, L, E)
        k = self.k_proj(key)                                            # (B, S, E)
        v = self.v_proj(value)                                          # (B, S, E)
        # 2. split into heads: head h owns features h*D ... (h+1)*D - 1
        q = self.hook("q", q.reshape(B, L, H, D).transpose(0, 2, 1, 3))     # (B, H, L, D)
        k = self.hook("k", k.reshape(B, S, H, D).transpose(0, 2, 1, 3))     # (B, H, S, D)
        v = self.hook("v", v.reshape(B, S, H, D).transpose(0, 2, 1, 3))     # (B, H, S, D)
        # 3. attend, every head at once (the head axis is a batch axis)
        dropout_p = self.dropout if self.training else 0.0
        weights = self.hook("weights", attention_weights(
            q, k, attn_mask, dropout_p, is_causal, self.scale))             # (B, H, L, S)
        heads = self.hook("heads", weights @ v)                              # (B, H, L, D)
        # 4. merge the heads side by side
        merged = heads.transpose(0, 2, 1, 3).reshape(B, L, E)               # (B, L, H, D) -> (B, L, E)
        # 5. project
        return self.hook("out", self.out_proj(merged)), weights             # (B, L, E), (B, H, L, S)

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"
