"""Chapter 5. Attention sinks (StreamingLLM, Xiao et al. 2023): a cache of constant size that keeps
the first few tokens as well as the newest ones.

A cache that keeps only the `window` newest tokens (a sliding window, evicting the oldest) holds
its memory constant however long the text grows. Xiao et al. found that it fails as soon as the
first tokens are evicted: softmax must give every query's attention somewhere, and a trained model
parks what it does not need on the first tokens, which every later query sees (a "sink"); evict
them and that attention lands on tokens that carry meaning, and the perplexity shoots up. Keeping
the first `sinks` tokens (4 in the paper) with the window keeps it flat far past the window:

    kept:   [t_0 ... t_{sinks-1}]  +  [the window - 1 newest tokens]  +  the new token
            the sinks                 the window, the new token included

Positions. The paper gives the tokens their positions within the cache, not in the text: the
sinks sit just before the window, whatever was evicted between them. A key is cached turned by its
rotary position; so when tokens are evicted, the sinks' keys are turned further by as many
positions (a rotation is a group: turning by p and then by e is turning by p + e), and the window's
keys and the new token keep their own. A query then sees every key at a distance of at most
sinks + window: distances it was trained on, however far into the text it is.

Here, for every layer of a family's model with grouped-query attention (nn/llama.py): a
SinkCache(model, window, sinks) in place of `model.empty_cache()`. With sinks=0 it is the plain
sliding window that fails. Tokens are best fed one at a time: a chunk of T tokens at once sees all
that is kept and its own earlier tokens (causal), and the window is cut to size after it.
"""
from tinyattn.arguments import at_least, door
from tinyattn.functional.rotate_half import rope_rotate_half
from tinyattn.nn import sink_cache_checks as checks
from tinyattn.nn.kv_cache import LayerCache
from tinyattn.nn.open_decoder import DecoderCache
from tinyattn.ops import concatenate


class SinkLayerCache(LayerCache):
    """One grouped-query layer's keys and values (B, K, S, D), held as chapter 2's LayerCache
    (nn/kv_cache.py) holds them, in `keys` and `values` (its batch_size and nbytes), but kept
    otherwise: the first `sinks` tokens', then the `window` - 1 newest; `frequencies` are the
    layer's rotary frequencies (D/2,), with which the sinks' keys are moved next to the window."""

    def __init__(self, window, sinks, frequencies):
        super().__init__(window)
        self.sinks, self.frequencies = sinks, frequencies

    def extended(self, keys, values):
        """The kept keys and values followed by the new ones (B, K, T, D): what the new queries
        attend to. Of those, the sinks and the window - 1 newest are kept, the sinks' keys
        turned by as many positions as there were tokens evicted."""
        if self.keys is not None:
            keys = concatenate([self.keys, keys], axis=2)               # (B, K, S + T, D)
            values = concatenate([self.values, values], axis=2)         # (B, K, S + T, D)
        self.keys, self.values = keys, values
        s = self.sinks
        evicted = keys.shape[2] - s - (self.window - 1)                 # the oldest after sinks
        if evicted > 0:
            sinks = self.moved(keys[:, :, :s], evicted)                 # (B, K, s, D)
            self.keys = concatenate([sinks, keys[:, :, s + evicted:]], axis=2)
            self.values = concatenate([values[:, :, :s], values[:, :, s + evicted:]], axis=2)
        return keys, values

    def moved(self, keys, positions):
        """Keys (B, K, s, D) turned by `positions` more positions each."""
        B, K, s, D = keys.shape
        one_row_each = keys.reshape(B, K, s, 1, D)                     # a "sequence" of 1 each
        turned = rope_rotate_half(one_row_each, positions, frequencies=self.frequencies)
        return turned.reshape(B, K, s, D)                               # (B, K, s, D)


class SinkCache(DecoderCache):
    """StreamingLLM's cache for every layer of `model` (a family's model, an OpenDecoder, of
    grouped-query attention and full layers): each keeps the first `sinks` tokens and the `window`
    newest (the new one included), so its memory stops growing at sinks + window - 1 tokens a layer.
    Pass it to `model(ids, cache=...)` as the cache of `model.empty_cache()`; `len(cache)` counts
    every token seen."""

    @door(checks.streamable, window=at_least(1), sinks=at_least(0))
    def __init__(self, model, window, sinks=4):
        self.window, self.sinks = window, sinks
        super().__init__(model)

    def layer_cache(self, block):
        return SinkLayerCache(self.window, self.sinks, block.attn.frequencies)
