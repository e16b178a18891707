"""Chapter 2. The key/value cache: the keys and values of the tokens seen so far, which the next
tokens' queries attend to after their own. `LayerCache` is one attention layer's, `KVCache` a
language model's: one LayerCache per attention layer, and how many positions it has seen.

With causal attention a token's key and value depend only on the tokens up to it, so once computed
they never change: a step of generation computes the new tokens' keys and values alone and puts the
cached ones in front (`extended`). A layer that sees only a window of recent keys (a sliding layer)
keeps only that window.

The cache is passed down, not attached: `CausalTransformer.forward(ids, cache=...)` gives each
block its layer's LayerCache and the position `start` of its first new token, and the attention
(nn/positions.py, step 4 of its forward) puts the cached keys and values before the new ones.
"""
from tinyattn.ops import concatenate


class LayerCache:
    """One attention layer's keys and values so far, (B, K, c, D) each for the c tokens it holds:
    K is the layer's key/value heads (H in chapter 2's attention; fewer in chapter 5's grouped-query
    attention, which is the point of it: its cache is H / K times smaller).

    A layer that sees every key keeps every token's. A sliding layer (chapter 5: `window`) lets
    each query see the `window` newest keys, itself among them, so it keeps the `window` newest
    and drops the older ones: its cache, and its memory, stop growing. (The next token needs only
    window - 1 of them, which is what transformers keeps; keeping the window makes every layer's
    size its window, and costs one key.)"""

    def __init__(self, window=None):
        self.window = window
        self.keys = self.values = None              # tensors (B, K, c, D), once filled

    def extended(self, keys, values):
        """The c cached keys and values followed by the T new ones (B, K, T, D) each: (B, K, c + T,
        D), what the new queries attend to; of those, the layer keeps its window."""
        if self.keys is not None:
            keys = concatenate([self.keys, keys], axis=2)               # (B, K, c + T, D)
            values = concatenate([self.values, values], axis=2)         # (B, K, c + T, D)
        self.keys, self.values = keys, values
        if self.window is not None and keys.shape[2] > self.window:
            self.keys, self.values = keys[:, :, -self.window:], values[:, :, -self.window:]
        return keys, values

    @property
    def batch_size(self):
        return None if self.keys is None else self.keys.shape[0]

    @property
    def nbytes(self):
        return 0 if self.keys is None else self.keys.data.nbytes + self.values.data.nbytes


class KVCache:
    """The keys and values every attention layer of `model` (a CausalTransformer, or one of
    chapter 5's language models) has computed so far: one LayerCache per block, in `layers`,
    (B, H, c, D) each for the c positions seen, `len(cache)`. Make it with `model.empty_cache()`
    and pass it to every call on the same sequences: the first call may hold the whole prompt, the
    next ones each new token; the model's forward adds the tokens of each call to `length`."""

    def __init__(self, model):
        self.model = model
        self.layers = [self.layer_cache(block) for block in model.blocks]
        self.length = 0

    def layer_cache(self, block):
        """The empty cache of one block's attention: here every token's keys and values (chapter
        5's decoders keep a window on a sliding layer, a latent on a latent layer)."""
        return LayerCache()

    def __len__(self):
        """How many positions are cached."""
        return self.length

    @property
    def batch_size(self):
        return self.layers[0].batch_size

    @property
    def nbytes(self):
        """The bytes of the keys and values it holds, summed over the layers: 2 * layers * B * H *
        T * D * itemsize here (keys and values, every layer, all the T tokens seen)."""
        return sum(layer.nbytes for layer in self.layers)
