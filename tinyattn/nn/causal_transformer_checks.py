"""Chapter 2. What makes an argument of the language model and its block
(nn/causal_transformer.py) and of `generate` (nn/generation.py) bad: each door names its rule."""
import numpy as np

from tinyattn import arguments
from tinyattn.arguments import at_least, between, floating_dtype, number, one_of, optional
from tinyattn.arrays import data_of
from tinyattn.nn.positions_checks import heads_fit_rope, inputs_and_cache_fit

POSITIONAL = ("sinusoidal", "learned", "rope", "alibi", "none")     # CausalTransformer's choices

# What each argument of CausalBlock and CausalTransformer must be, for their doors
BLOCK_ARGUMENTS = dict(embed_dim=at_least(1), num_heads=at_least(1),
                       hidden_dim=optional(at_least(1)), dropout=between(0, 1),
                       scale=optional(number), dtype=floating_dtype, layer_norm_eps=between(0),
                       rope=bool)
MODEL_ARGUMENTS = dict(vocab_size=at_least(1), embed_dim=at_least(1), num_heads=at_least(1),
                       num_layers=at_least(1), max_len=at_least(1), dropout=between(0, 1),
                       scale=optional(number), dtype=floating_dtype,
                       positional=one_of(*POSITIONAL), hidden_dim=optional(at_least(1)),
                       layer_norm_eps=between(0), tied_head=bool)


def heads_fit_positions(embed_dim, num_heads=1, positional="sinusoidal", **_):
    """num_heads divides embed_dim, into an even head_dim with rotary positions."""
    heads_fit_rope(embed_dim, num_heads, rope=positional == "rope")


def block_input_and_cache_fit(self, x, attn_mask=None, cache=None, **_):
    """CausalBlock: its attention's rule (nn/positions_checks.py) for its self-attention on x."""
    inputs_and_cache_fit(self.attn, x, attn_mask=attn_mask, cache=cache)


def token_ids(model, ids):
    """ids of a language model: (B, T) integers in [0, vocab_size), T >= 1, given as an array, a
    list (of rows of one length) or a tensor. Returns their shape."""
    try:
        shape = np.shape(data_of(ids))
    except ValueError:                  # NumPy's "inhomogeneous shape": rows of other lengths
        raise ValueError("ids: the rows have different lengths, but a batch (B, T) holds "
                         "sequences of one length T: pad them to one length, or give them one "
                         "at a time") from None
    arguments.ids("ids", ids, model.embed.num_embeddings, "tokens")
    if len(shape) != 2 or shape[1] == 0:
        raise ValueError(f"ids must be (B, T) with T >= 1, got shape {shape}")
    return shape


def ids_and_cache_fit(self, ids, cache=None, **_):
    """CausalTransformer.forward: token ids; cache None or a KVCache of this model, of as many
    sequences as ids, in the model's dtype; and with absolute positions, the sequence (cached
    tokens and ids) no longer than the table."""
    B, T = token_ids(self, ids)
    start = 0
    if cache is not None:
        if getattr(cache, "model", None) is not self:
            raise TypeError(f"cache must be a KVCache of this model (from model.empty_cache()), "
                            f"got {type(cache).__name__}")
        start = len(cache)
        if start and cache.batch_size != B:
            raise ValueError(f"the cache holds the keys of {cache.batch_size} sequences, but ids "
                             f"is a batch of {B} (shape {(B, T)})")
    if self.positional in ("sinusoidal", "learned") and start + T > self.max_len:
        called = " (n_positions in a GPT-2 config.json)" if self.positional == "learned" else ""
        raise ValueError(f"a sequence of {start + T} tokens is longer than max_len "
                         f"{self.max_len}, the length of the {self.positional} position "
                         f"table{called}")


def prompt_fits(self, ids, **_):
    """CausalTransformer.generate: token ids (the prompt)."""
    token_ids(self, ids)
