"""Chapter 1. The layers' checks: what makes an argument of a layer in tinyattn.nn bad.

A layer's door names them, `@door(checks.heads_fit, embed_dim=at_least(1), ...)` above its
`__init__` or `forward` (tinyattn/arguments.py says how doors work). They run once per user call;
each gets the arguments by name (`self` first, for a method) and raises a ValueError or TypeError
saying what does not fit, with the layer's name put in front by the door.

In the order of the files they serve: module, layers, multi_head_attention, transformer: the
layers of chapter 1 (besides their doors' rules, `state_fits`, which load_state_dict calls). A
later chapter's rules are beside the file they serve, in its chapter: `lora_checks.py` beside
`lora.py`.
"""
from collections.abc import Mapping

import numpy as np

from tinyattn import arguments
from tinyattn.arguments import at_least, shapes
from tinyattn.functional.checks import attention_mask
from tinyattn.arrays import data_of, numeric_array

def state_fits(module, state):
    """A state dict for `module`: a mapping with its parameters' names, arrays of their shapes and
    of numbers that fit their dtype. Returns {name: the array converted to that dtype}."""
    if not isinstance(state, Mapping):
        raise TypeError(f"load_state_dict: expected a dict of arrays, "
                        f"got {type(state).__name__}")
    parameters = dict(module.named_parameters())
    missing, unexpected = parameters.keys() - state.keys(), state.keys() - parameters.keys()
    if missing or unexpected:
        raise ValueError(f"load_state_dict: missing {sorted(missing)}, "
                         f"unexpected {sorted(unexpected)}")
    arrays = {}
    for name, parameter in parameters.items():
        array = numeric_array(data_of(state[name]), f"load_state_dict: {name}")
        if array.shape != parameter.shape:
            raise ValueError(f"load_state_dict: {name} has shape {parameter.shape}, "
                             f"the state has {array.shape}")
        try:
            with np.errstate(over="raise"):
                arrays[name] = array.astype(parameter.dtype)
        except FloatingPointError:
            raise ValueError(f"load_state_dict: {name} holds numbers too large for "
                             f"{parameter.dtype}") from None
    return arrays


def sizes_at_least_0(normalized_shape, **_):
    """normalized_shape: a size, or a tuple of them."""
    sizes = normalized_shape if isinstance(normalized_shape, (tuple, list)) else [normalized_shape]
    for size in sizes:
        at_least(0)("normalized_shape", size)


def normalized_axes_fit(self, x):
    """x ends with the normalized_shape."""
    sizes = ", ".join(map(str, self.normalized_shape))
    shapes(dtype=self.dtype, x=(x, f"(..., {sizes})"))


def ids_in_the_table(self, ids):
    """Embedding: ids are integers in [0, num_embeddings)."""
    arguments.ids("ids", ids, self.num_embeddings, "embeddings")


def heads_fit(embed_dim, num_heads=1, **_):
    """num_heads divides embed_dim."""
    if embed_dim % num_heads:
        raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")


def key_value_and_mask_fit(self, query, key=None, value=None, attn_mask=None, is_causal=False):
    """MultiHeadAttention: key and value (default: query) are (B, S, E) like the query (B, L, E),
    and attn_mask broadcasts to the scores (B, H, L, S)."""
    key = query if key is None else key
    shapes(dtype=self.dtype, layer=self, query=(query, "(B, L, embed_dim)"),
           key=(key, "(B, S, embed_dim)"), value=(key if value is None else value,
                                                  "(B, S, embed_dim)"))
    (B, L, _), S = query.shape, key.shape[1]
    attention_mask(attn_mask, (B, self.num_heads, L, S), query.dtype)


def block_mask_fits(self, x, attn_mask=None, **_):
    """TransformerBlock: attn_mask broadcasts to the scores of its self-attention (B, H, T, T)."""
    B, T, _ = x.shape
    attention_mask(attn_mask, (B, self.attn.num_heads, T, T), x.dtype)
