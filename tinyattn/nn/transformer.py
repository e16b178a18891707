"""A pre-LayerNorm transformer block, and a small causal language model made of them.

    x = x + attention(layer_norm(x))        tokens look at each other
    x = x + feed_forward(layer_norm(x))     each token is transformed on its own

The residual connections (`x + ...`) give the gradient a direct path through every block; putting
the LayerNorm before each sub-layer ("pre-LN", as in GPT-2) keeps deep stacks trainable without a
learning-rate warm-up.
"""
from tinyattn.nn.attention import MultiHeadAttention
from tinyattn.nn.layers import Dropout, Embedding, FeedForward, LayerNorm, Linear, \
    PositionalEncoding
from tinyattn.nn.module import Module


class TransformerBlock(Module):
    """Pre-LN block: x + attn(ln1(x)), then x + ff(ln2(x)). Inputs and outputs are (B, T, E)."""

    def __init__(self, embed_dim, num_heads, hidden_dim=None, dropout=0.0, scale=None,
                 dtype=None):
        self.ln1 = LayerNorm(embed_dim, dtype=dtype)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, scale=scale,
                                       dtype=dtype)
        self.ln2 = LayerNorm(embed_dim, dtype=dtype)
        self.ff = FeedForward(embed_dim, hidden_dim, dropout=dropout, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x, attn_mask=None, is_causal=False):
        return self.forward_with_weights(x, attn_mask, is_causal)[0]

    def forward_with_weights(self, x, attn_mask=None, is_causal=False):
        """(output, attention weights (B, H, T, T))."""
        attended, weights = self.attn(self.ln1(x), attn_mask=attn_mask, is_causal=is_causal)
        x = x + self.dropout(attended)          # (B, T, E)
        return x + self.ff(self.ln2(x)), weights


class CausalTransformer(Module):
    """A small GPT-style language model: token ids (B, T) -> next-token logits (B, T, vocab_size).

    embedding + sinusoidal positions -> num_layers causal TransformerBlocks -> LayerNorm -> Linear.
    `scale` is passed to every attention layer (None: 1 / sqrt(head_dim); 1.0: unscaled).
    """

    def __init__(self, vocab_size, embed_dim, num_heads, num_layers, max_len=256, dropout=0.0,
                 scale=None, dtype=None):
        self.embed = Embedding(vocab_size, embed_dim, dtype=dtype)
        self.positions = PositionalEncoding(embed_dim, max_len)
        self.blocks = [TransformerBlock(embed_dim, num_heads, dropout=dropout, scale=scale,
                                        dtype=dtype) for _ in range(num_layers)]
        self.ln = LayerNorm(embed_dim, dtype=dtype)
        self.head = Linear(embed_dim, vocab_size, dtype=dtype)

    def forward(self, ids, return_weights=False):
        """Logits (B, T, vocab_size); with return_weights, also each block's attention weights."""
        x = self.positions(self.embed(ids))     # (B, T, E)
        weights = []
        for block in self.blocks:
            x, block_weights = block.forward_with_weights(x, is_causal=True)   # (B, T, E)
            weights.append(block_weights)       # (B, H, T, T)
        logits = self.head(self.ln(x))          # (B, T, vocab_size)
        return (logits, weights) if return_weights else logits
