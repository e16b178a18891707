"""Chapter 2. What makes an argument of nn/positions.py's layers bad (each door names its rule)."""
from tinyattn.nn.checks import heads_fit


def within_the_table(self, x, offset=0):
    """PositionalEncoding: positions offset ... offset + T - 1 are rows of the table."""
    if offset + x.shape[-2] > self.max_len:
        raise ValueError(f"sequence length {offset + x.shape[-2]} exceeds max_len {self.max_len}")


def heads_fit_rope(embed_dim, num_heads=1, rope=False, **_):
    """num_heads divides embed_dim, into an even head_dim with rope (it rotates pairs)."""
    heads_fit(embed_dim, num_heads)
    if rope:
        even_head_dim(embed_dim, num_heads)


def even_head_dim(embed_dim, num_heads):
    if (embed_dim // num_heads) % 2:
        raise ValueError(f"rope rotates pairs of features, so it needs an even head_dim; got "
                         f"embed_dim {embed_dim} / num_heads {num_heads} = "
                         f"{embed_dim // num_heads}")
