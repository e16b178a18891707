"""Chapter 4. What makes an argument of circuits.py's functions bad: a model whose stream is not a
sum of blocks of attention (and feed-forward), a cache without what they read, tokens or a
position outside the cache, a head that is not there, a kind of composition that is none."""
from collections.abc import Mapping

import numpy as np

from tinyattn import arguments
from tinyattn.arrays import data_of, numeric_array
from tinyattn.nn.multi_head_attention import MultiHeadAttention

BLOCK_ACTIVATIONS = {"resid_pre", "resid_mid", "mlp_out", "resid_post"}   # what a block may name
KINDS = ("q", "k", "v")


def names_read(model):
    """The activations the stream's pieces are read from (circuits.attribution_names): "embed",
    each block's "attn.result" and "mlp_out" (if it names one), the last block's resid_post."""
    names = ["embed"]
    for i, block in enumerate(model.blocks):
        names.append(f"blocks.{i}.attn.result")
        if "mlp_out" in block.activations:
            names.append(f"blocks.{i}.mlp_out")
    return names + [f"blocks.{len(model.blocks) - 1}.resid_post"]


def a_sum_of_blocks(model):
    """A language model of `blocks` whose stream is a sum: each block an attention `attn` (an
    nn.MultiHeadAttention) and perhaps a feed-forward, naming only the activations of a
    TransformerBlock (resid_pre, resid_mid, mlp_out, resid_post; resid_post at least); the model
    names "embed"."""
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, (list, tuple)) or not blocks or "embed" not in model.activations:
        raise TypeError(f"model must be a language model of blocks that names its embeddings "
                        f"\"embed\" (an nn.CausalTransformer), got {type(model).__name__}")
    for i, block in enumerate(blocks):
        if not isinstance(getattr(block, "attn", None), MultiHeadAttention):
            raise TypeError(f"block {i} of the model ({type(block).__name__}) has no attention "
                            f"`attn` (an nn.MultiHeadAttention) whose heads' results it adds to "
                            f"the stream")
        names = set(block.activations)
        if not names <= BLOCK_ACTIVATIONS or "resid_post" not in names:
            raise TypeError(f"block {i} of the model ({type(block).__name__}) names "
                            f"{sorted(names)}: a block read as a sum adds its attention's output "
                            f"and perhaps its feed-forward's (mlp_out), and names resid_post")


def attribution_names_fit(model):
    """attribution_names: a model whose stream is a sum of its blocks."""
    a_sum_of_blocks(model)


def cache_fits(model, cache):
    """residual_components: a model whose stream is a sum, a cache ({name: array}, from
    run_with_cache) holding every activation its pieces are read from."""
    a_sum_of_blocks(model)
    if not isinstance(cache, Mapping):
        raise TypeError(f"cache must be {{name: array}}, from model.run_with_cache(ids), got "
                        f"{type(cache).__name__}")
    missing = [name for name in names_read(model) if name not in cache]
    if missing:
        raise ValueError(f"the cache holds no {', '.join(missing)}: run_with_cache(ids) keeps "
                         f"every activation, or names=attribution_names(model) these alone")


def attribution_fits(model, cache, tokens, position):
    """direct_logit_attribution: cache_fits, a final LayerNorm `ln` and a `head`, one token id
    (B,) per sequence of the cache, a position of its T. Returns the tokens as an int array."""
    cache_fits(model, cache)
    if not all(hasattr(model, part) for part in ("ln", "head")):
        raise TypeError(f"the model must end in a final LayerNorm `ln` and a `head` (an "
                        f"nn.CausalTransformer), got {type(model).__name__}")
    B, T = np.shape(cache["embed"])[:2]
    tokens = numeric_array(data_of(tokens), "tokens")
    if tokens.shape != (B,):
        raise ValueError(f"tokens must be one token id per sequence, shape ({B},), got "
                         f"{tokens.shape}")
    arguments.ids("tokens", tokens, model.head.weight.shape[0], "tokens in the vocabulary")
    if not -T <= position < T:
        raise ValueError(f"position {position} is outside the cache's {T} positions")
    return {"tokens": tokens}


def a_head_of(attention, head):
    """qk_circuit, ov_circuit: an nn.MultiHeadAttention and one of its heads."""
    if not isinstance(attention, MultiHeadAttention):
        raise TypeError(f"attention must be an nn.MultiHeadAttention (model.blocks[i].attn), got "
                        f"{type(attention).__name__}")
    if not -attention.num_heads <= head < attention.num_heads:
        raise ValueError(f"head {head} of an attention of {attention.num_heads} heads")


def composition_fits(model, kind):
    """composition_scores: a model of blocks with attention, `kind` one of q, k, v (either case).
    Returns the kind in lower case."""
    blocks = getattr(model, "blocks", None)
    if not isinstance(blocks, (list, tuple)) or not all(
            isinstance(getattr(block, "attn", None), MultiHeadAttention) for block in blocks):
        raise TypeError(f"model must have `blocks`, each with an attention `attn` (an "
                        f"nn.MultiHeadAttention), got {type(model).__name__}")
    sizes = {(block.attn.num_heads, block.attn.embed_dim) for block in blocks}
    if len(sizes) > 1:
        raise ValueError(f"the blocks' attentions differ in (heads, width): {sorted(sizes)}; the "
                         f"scores are one array (layers, heads, layers, heads)")
    if not isinstance(kind, str) or kind.lower() not in KINDS:
        raise ValueError(f"kind must be one of 'q', 'k', 'v' (the later head's query, key or "
                         f"value reading the earlier head's output), got {kind!r}")
    return {"kind": kind.lower()}
