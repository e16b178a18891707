"""Chapter 5. Llama 3 on a page, and Mistral and Qwen2 as Llama with a piece changed.

GPT-2 (chapter 2's CausalTransformer, chapter 3's checkpoints) is embed + positions -> blocks
x + attn(ln(x)), x + mlp(ln(x)) -> ln -> head. Llama keeps that skeleton and changes four
pieces; every family of this chapter starts here:

    the norm          RMSNorm, x / sqrt(mean(x^2) + eps) * weight: no mean taken out, no bias
    the positions     none added to the embedding: queries and keys are turned by their position
                      (rotary, rotate-half layout), so a score depends on how far apart they are
    the heads         K key/value heads shared by H query heads in groups of H / K
                      (grouped-query attention): the cache is H / K times smaller
    the feed-forward  gated: down(silu(gate(x)) * up(x)) (SwiGLU; the config's hidden_act)

Read top to bottom: LlamaAttention (its forward's numbered steps: project, rotate, the cache,
attend, merge), LlamaBlock, Llama (embedding, blocks, final norm, head), then the variants:

    Mistral  Llama with a sliding window on every layer: a query sees the sliding_window newest
             keys only, and each layer's cache keeps that many (MISTRAL_7B: 4096)
    Qwen2    Llama with biases on q_proj, k_proj and v_proj (Qwen2Attention), and sliding layers
             where its config says (use_sliding_window, max_window_layers)

nn/qwen3.py adds QK-norm to this attention. The sizes are a DecoderSettings (nn/open_decoder.py);
each family reads the fields it has, and refuses a setting its family's code fixes otherwise
(nn/families.py's FIXED). nn/open_checkpoints.py reads and writes the families' files.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, door, floating_dtype, optional
from tinyattn.arrays import data_of
from tinyattn.functional.grouped_query import grouped_values, grouped_weights, visible_keys
from tinyattn.nn import llama_checks as checks
from tinyattn.nn.layers import Embedding, Linear
from tinyattn.nn.module import Module
from tinyattn.nn.open_decoder import DecoderSettings, OpenDecoder
from tinyattn.nn.open_layers import GatedFeedForward, RMSNorm

# meta-llama/Llama-3.2-1B's config.json: 1.24 billion parameters, the head tied to the embedding,
# 32 query heads on 8 key/value heads of 64, Llama 3.1's rotary bands stretching 8192 to 131072
LLAMA_3_2_1B = DecoderSettings(
    vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_layers=16, num_heads=32,
    num_kv_heads=8, head_dim=64, norm_eps=1e-5, rope_theta=500000.0,
    rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192},
    tied_head=True, model_type="llama")
# mistralai/Mistral-7B-v0.1's: 7.24 billion parameters, every layer sliding over the 4096
# newest keys
MISTRAL_7B = DecoderSettings(
    vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_layers=32, num_heads=32,
    num_kv_heads=8, head_dim=128, norm_eps=1e-5, rope_theta=10000.0, sliding_window=4096,
    layer_types=("sliding",) * 32, model_type="mistral")
# Qwen/Qwen2-0.5B's: 494 million parameters, 14 query heads on 2 key/value heads, q, k, v with
# biases
QWEN2_0_5B = DecoderSettings(
    vocab_size=151936, hidden_size=896, intermediate_size=4864, num_layers=24, num_heads=14,
    num_kv_heads=2, head_dim=64, norm_eps=1e-6, rope_theta=1000000.0, qkv_bias=True,
    tied_head=True, model_type="qwen2")


class LlamaAttention(Module):
    """Causal self-attention of H query heads on K key/value heads with rotary positions, as
    Llama computes it (settings: num_heads H, num_kv_heads K, head_dim D, rope_theta and
    rope_scaling; attention_bias: qkv_bias and out_bias). `window`: the keys a query sees on a
    sliding layer (itself included), None for all. Inputs and outputs (B, T, E).

    forward(x, start, cache) -> (output (B, T, E), weights (B, H, T, S)): the tokens are at
    positions start, start + 1, ...; `cache`, this layer's LayerCache (nn/kv_cache.py), puts the
    keys and values of the earlier tokens before the new ones (S in all). The activations it
    names: "q" (B, H, T, D), "k" and "v" (B, K, T, D) (the new tokens', rotated), "weights",
    "heads" (B, H, T, D), "out" (B, T, E).
    """

    activations = ("q", "k", "v", "weights", "heads", "out")
    qkv_bias = None         # None: the settings' attention_bias (qkv_bias); Qwen2: always True
    scale = None            # the scores' factor, None: 1 / sqrt(D); Gemma 3 has its own

    @door(checks.attention_fits, window=optional(at_least(1)), dtype=floating_dtype)
    def __init__(self, settings, window=None, dtype=None):
        s = settings
        self.embed_dim, self.num_heads = s.hidden_size, s.num_heads
        self.num_kv_heads, self.head_dim, self.window = s.num_kv_heads, s.head_dim, window
        H, K, D = s.num_heads, s.num_kv_heads, s.head_dim
        qkv_bias = s.qkv_bias if self.qkv_bias is None else self.qkv_bias
        self.q_proj = Linear(s.hidden_size, H * D, bias=qkv_bias, dtype=dtype)
        self.k_proj = Linear(s.hidden_size, K * D, bias=qkv_bias, dtype=dtype)
        self.v_proj = Linear(s.hidden_size, K * D, bias=qkv_bias, dtype=dtype)
        self.out_proj = Linear(H * D, s.hidden_size, bias=s.out_bias, dtype=dtype)
        # theta_i = rope_theta^(-2i/D), rescaled by Llama 3.1's bands (F.rope_frequencies)
        self.frequencies = F.rope_frequencies(D, s.rope_theta, s.rope_scaling)     # (D/2,)

    @door(checks.input_and_cache_fit, x="(B, T, embed_dim)", start=at_least(0))
    def forward(self, x, start=0, cache=None):
        B, T, _ = x.shape
        H, D = self.num_heads, self.head_dim
        # 1. project and split into heads (head h owns features h D ... (h + 1) D - 1)
        q, k, v = self.project(x)                                   # (B, H or K, T, D)
        # 2. rotate by the positions start ... start + T - 1
        q = F.rope_rotate_half(q, start, frequencies=self.frequencies)  # (B, H, T, D)
        k = F.rope_rotate_half(k, start, frequencies=self.frequencies)  # (B, K, T, D)
        q, k, v = self.hook("q", q), self.hook("k", k), self.hook("v", v)
        # 3. the keys and values the cache kept, before the new ones: S in all
        if cache is not None:
            k, v = cache.extended(k, v)                             # (B, K, S, D)
        S = k.shape[2]                                              # T without a cache
        # 4. attend, each group of H / K query heads on its key/value head (query head h reads
        # key/value head h // (H / K)), causal: the query at position start + t sees the keys up
        # to it, the mask offset by the S - T cached ones (on a sliding layer, its window of them)
        mask = visible_keys(T, S, self.window)                      # (T, S) or None
        weights = grouped_weights(q, k, mask, self.scale)           # (B, H, T, S)
        weights = self.hook("weights", weights)                     # (B, H, T, S)
        heads = self.hook("heads", grouped_values(weights, v))      # (B, H, T, D)
        # 5. merge the heads side by side, and project
        merged = heads.transpose(0, 2, 1, 3).reshape(B, T, H * D)   # (B, T, H D)
        return self.hook("out", self.out_proj(merged)), weights     # (B, T, E), (B, H, T, S)

    def project(self, x):
        """q (B, H, T, D), k and v (B, K, T, D): x's projections, split into heads."""
        B, T, _ = x.shape
        H, K, D = self.num_heads, self.num_kv_heads, self.head_dim
        q = self.q_proj(x).reshape(B, T, H, D).transpose(0, 2, 1, 3)    # (B, H, T, D)
        k = self.k_proj(x).reshape(B, T, K, D).transpose(0, 2, 1, 3)    # (B, K, T, D)
        v = self.v_proj(x).reshape(B, T, K, D).transpose(0, 2, 1, 3)    # (B, K, T, D)
        return q, k, v

    def extra_repr(self):
        window = "" if self.window is None else f", window={self.window}"
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"num_kv_heads={self.num_kv_heads}, head_dim={self.head_dim}{window}")


class LlamaBlock(Module):
    """One pre-norm block, chapter 1's with RMSNorms, the model's attention and feed-forward:

        x = x + attn(attn_norm(x))
        x = x + mlp(mlp_norm(x))

    The activations it names are chapter 1's: "resid_pre", "resid_mid", "mlp_out", "resid_post"
    (B, T, E)."""

    activations = ("resid_pre", "resid_mid", "mlp_out", "resid_post")

    def __init__(self, settings, attention, mlp, dtype=None):
        self.attn_norm = RMSNorm(settings.hidden_size, settings.norm_eps, dtype=dtype)
        self.attn = attention
        self.mlp_norm = RMSNorm(settings.hidden_size, settings.norm_eps, dtype=dtype)
        self.mlp = mlp

    def forward(self, x, start=0, cache=None):
        """(the output (B, T, E), the attention weights (B, H, T, S)) for tokens at positions
        start, start + 1, ...; `cache`: this layer's LayerCache, or None."""
        x = self.hook("resid_pre", x)                                       # (B, T, E)
        attended, weights = self.attn(self.attn_norm(x), start, cache)      # (B, T, E)
        x = self.hook("resid_mid", x + attended)                            # (B, T, E)
        transformed = self.hook("mlp_out", self.mlp(self.mlp_norm(x)))      # (B, T, E)
        x = self.hook("resid_post", x + transformed)                        # (B, T, E)
        return x, weights


class Llama(OpenDecoder):
    """Llama 3: token ids (B, T) -> next-token logits (B, T, vocab_size).

        embed -> num_layers LlamaBlocks -> norm -> head (tied to the embedding in 3.2-1B)

    `settings`: a DecoderSettings of the family (LLAMA_3_2_1B's sizes, say); the parameters take
    `dtype` (default float64). generate, empty_cache (nn/open_decoder.py) and save_pretrained
    (nn/open_checkpoints.py) are every family's. The activations it names are chapter 4's:
    "embed" (B, T, E) and "final", the last norm's output.
    """

    model_type = "llama"
    Attention = LlamaAttention          # what a variant changes: its attention, its block,
    Block = LlamaBlock                  # its norm (Gemma 3's scales by 1 + weight) ...
    Norm = RMSNorm

    def window(self, layer):
        """... the keys a query of `layer` sees (itself included): all of them, None ..."""
        return None

    def attention(self, layer, dtype):
        """... the attention of `layer` (DeepSeek-V3's is latent attention) ..."""
        return self.Attention(self.settings, self.window(layer), dtype)

    def feed_forward(self, layer, dtype):
        """... and its feed-forward: gated, SwiGLU (Qwen3-MoE's: routed experts)."""
        s = self.settings
        return GatedFeedForward(s.hidden_size, s.intermediate_size, s.activation,
                                bias=s.mlp_bias, dtype=dtype)

    @door(checks.family_fits, dtype=floating_dtype)
    def __init__(self, settings, dtype=None):
        self.settings = settings
        self.embed = Embedding(settings.vocab_size, settings.hidden_size, dtype=dtype)
        self.blocks = [self.Block(settings, self.attention(i, dtype), self.feed_forward(i, dtype),
                                  dtype) for i in range(settings.num_layers)]
        self.norm = self.Norm(settings.hidden_size, settings.norm_eps, dtype=dtype)
        self.head = Linear(settings.hidden_size, settings.vocab_size, bias=False, dtype=dtype)
        if settings.tied_head:          # one Parameter in two places: its gradient sums both uses
            self.head.weight = self.embed.weight        # (vocab_size, E): Linear's (out, in)

    @door(checks.ids_and_cache_fit, return_weights=bool, last_only=bool)
    def forward(self, ids, cache=None, return_weights=False, last_only=False):
        """Logits (B, T, vocab_size), or the last position's alone (B, 1, vocab) with
        `last_only`; with return_weights, also each block's attention weights (B, H, T, S).
        `cache` (from `empty_cache()`) holds every layer's keys and values of the tokens seen
        so far: the ids are the next tokens of those sequences, at the positions after them."""
        ids = np.asarray(data_of(ids))                                  # (B, T)
        start = 0 if cache is None else len(cache)                      # positions already seen
        x = self.hook("embed", self.embed(ids))                         # (B, T, E)
        weights = []
        for i, block in enumerate(self.blocks):
            x, block_weights = block(x, start, None if cache is None else cache.layers[i])
            weights.append(block_weights)                               # (B, H, T, S)
        if cache is not None:
            cache.length += ids.shape[1]
        if last_only:
            x = x[:, -1:]                                               # (B, 1, E)
        logits = self.head(self.hook("final", self.norm(x)))            # (B, T or 1, vocab)
        return (logits, weights) if return_weights else logits


class Mistral(Llama):
    """Mistral: Llama whose every layer slides: a query sees the settings' sliding_window newest
    keys (itself included), and the cache keeps that many a layer (MISTRAL_7B). A stack of W-key
    windows still carries a token further: through L layers, up to L (W - 1) positions back."""

    model_type = "mistral"

    def window(self, layer):
        return sliding_window(self.settings, layer)     # every layer's, or none (family_fits)


class Qwen2Attention(LlamaAttention):
    """Llama's attention with biases on q_proj, k_proj and v_proj (not on out_proj)."""

    qkv_bias = True


class Qwen2(Llama):
    """Qwen2: Llama with biases on q, k and v (Qwen2Attention), sliding layers where the config
    says (settings.layer_types: the layers from max_window_layers on, with use_sliding_window),
    and its own sizes (QWEN2_0_5B)."""

    model_type = "qwen2"
    Attention = Qwen2Attention

    def window(self, layer):
        return sliding_window(self.settings, layer)


def sliding_window(settings, layer):
    """The settings' sliding_window on a layer its layer_types mark "sliding", None on a full
    one (Mistral's config slides on every layer; Qwen's from max_window_layers on)."""
    return settings.sliding_window if settings.kinds()[layer] == "sliding" else None
