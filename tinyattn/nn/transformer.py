"""Chapter 1. A pre-LayerNorm transformer block: the unit a transformer stacks.

    x = x + attention(layer_norm(x))        tokens look at each other
    x = x + feed_forward(layer_norm(x))     each token is transformed on its own

The residual connections (`x + ...`) give the gradient a direct path through every block; putting
the LayerNorm before each sub-layer ("pre-LN", as in GPT-2) keeps deep stacks trainable without a
learning-rate warm-up.
"""
from tinyattn.arguments import at_least, between, door, floating_dtype, number, one_of, optional
from tinyattn.nn import checks
from tinyattn.nn.layers import Dropout, FeedForward, LayerNorm
from tinyattn.nn.module import Module
from tinyattn.nn.multi_head_attention import MultiHeadAttention


class TransformerBlock(Module):
    """Pre-LN block: x + attn(ln1(x)), then x + ff(ln2(x)). Inputs and outputs are (B, T, E).

    `layer_norm_eps` is the eps of both LayerNorms (GPT-2's config calls it layer_norm_epsilon);
    `activation` the feed-forward's GELU, "gelu_tanh" (GPT-2's) or "gelu" (with erf: ViT's).

    The activations it names (`Module.hook`): the residual stream as it comes in, "resid_pre",
    after the attention is added, "resid_mid", and as it goes out, "resid_post" (B, T, E); and
    the feed-forward's output "mlp_out" (the attention's is its own "out").
    """

    activations = ("resid_pre", "resid_mid", "mlp_out", "resid_post")

    @door(checks.heads_fit, embed_dim=at_least(1), num_heads=at_least(1),
          hidden_dim=optional(at_least(1)), dropout=between(0, 1), scale=optional(number),
          dtype=floating_dtype, layer_norm_eps=between(0), activation=one_of("gelu_tanh", "gelu"))
    def __init__(self, embed_dim, num_heads, hidden_dim=None, dropout=0.0, scale=None,
                 dtype=None, layer_norm_eps=1e-5, activation="gelu_tanh"):
        self.embed_dim = embed_dim
        self.ln1 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, scale=scale,
                                       dtype=dtype)
        self.ln2 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.ff = FeedForward(embed_dim, hidden_dim, dropout=dropout, activation=activation,
                              dtype=dtype)
        self.dropout = Dropout(dropout)

    @door(checks.block_mask_fits, x="(B, T, embed_dim)", is_causal=bool, return_weights=bool)
    def forward(self, x, attn_mask=None, is_causal=False, return_weights=False):
        """The output (B, T, E); with return_weights, also the attention weights (B, H, T, S)."""
        x = self.hook("resid_pre", x)                                       # (B, T, E)
        attended, weights = self.attn(self.ln1(x), attn_mask=attn_mask, is_causal=is_causal)
        x = self.hook("resid_mid", x + self.dropout(attended))              # (B, T, E)
        x = x + self.hook("mlp_out", self.ff(self.ln2(x)))                  # (B, T, E)
        x = self.hook("resid_post", x)                                      # (B, T, E)
        return (x, weights) if return_weights else x
