"""Chapter 5. Llama, Mistral, Qwen and Gemma as one model: a decoder whose settings are the
differences between them.

GPT-2 (chapter 3) is a stack of blocks x + attn(ln(x)), x + mlp(ln(x)) between an embedding and
a head. So is every model here; each family changed a handful of the pieces, and each change is
a setting of `DecoderSettings` (the README's table says which family turns on which, and where
it comes from):

    the norm           RMSNorm instead of LayerNorm (all); Gemma's scales by 1 + weight
    the feed-forward   gated: down(act(gate(x)) * up(x)), SiLU (SwiGLU) or GELU (GeGLU: Gemma)
    the heads          fewer key/value heads than query heads (grouped-query attention), and a
                       head_dim of its own (Qwen3, Gemma 3)
    positions          rotary, rotate-half layout, with a larger base; Llama 3.1's frequency
                       bands, or linear scaling (Gemma 3's global layers)
    QK-norm            queries and keys RMS-normed per head before the rotation (Qwen3, Gemma 3)
    sliding layers     a window of recent keys on every layer (Mistral), on the later layers
                       (Qwen2 with use_sliding_window), or on five layers of six, with a rotary
                       base of their own (Gemma 3's local/global pattern)
    biases             none (Llama, Mistral, Gemma), on q, k, v (Qwen2), or all (attention_bias)
    Gemma's extras     the embedding times sqrt(hidden_size), scores scaled by
                       query_pre_attn_scalar^(-1/2), a norm after attention and after the
                       feed-forward too ("sandwich"), logits softly capped: c tanh(logits / c)
    the head           tied to the embedding, or a matrix of its own
    latent attention   keys and values rebuilt from one small cached vector per token
                       (DeepSeek-V3: nn/latent_attention.py)
    experts            routed experts in place of the feed-forward, on all layers or some
                       (Qwen3-MoE, DeepSeek-V3: nn/routed_experts.py)

Read in this order: DecoderSettings, DecoderBlock, OpenDecoder (forward, then generate), and the
cache: LayerCache (one layer's keys and values; a sliding layer keeps its window only; a latent
layer's LatentCache keeps its latents) and DecoderCache (every layer's, and `nbytes`).
nn/open_checkpoints.py reads and writes each family's own files (`nn.from_pretrained`).
"""
import dataclasses
import math

import numpy as np

from tinyattn.arguments import at_least, between, door, floating_dtype, optional
from tinyattn.arrays import data_of
from tinyattn.engine import no_grad
from tinyattn.nn import open_decoder_checks as checks
from tinyattn.nn.generation import next_tokens, samplable
from tinyattn.nn.kv_cache import LayerCache
from tinyattn.nn.latent_attention import LatentAttention, LatentCache, LatentSettings
from tinyattn.nn.layers import Embedding, Linear
from tinyattn.nn.module import Module
from tinyattn.nn.open_layers import GatedFeedForward, GroupedQueryAttention, RMSNorm
from tinyattn.nn.routed_experts import ExpertSettings, RoutedExperts, load_balancing_loss


@dataclasses.dataclass(frozen=True)
class DecoderSettings:
    """The sizes of a decoder and its switches. The switches' defaults are Llama's; each other
    family turns some on (nn/open_checkpoints.py reads them from a config.json).

    sizes      vocab_size, hidden_size (E), intermediate_size (the feed-forward's), num_layers,
               num_heads (H), num_kv_heads (K, dividing H), head_dim (D, even)
    norm       norm_eps; norm_unit_offset: Gemma's norms scale by 1 + weight
    mlp        activation: "silu" (SwiGLU) or "gelu_tanh" (GeGLU); mlp_bias (Llama's)
    attention  qkv_bias (Qwen2; attention_bias), out_bias (attention_bias); qk_norm (Qwen3,
               Gemma 3); query_pre_attn_scalar: scores scaled by its -1/2 power instead of
               head_dim's (Gemma)
    rotary     rope_theta, the base; rope_scaling: None or {"rope_type": "llama3" or "linear",
               ...} (F.rope_frequencies); local_rope_theta: the base of the sliding layers
               (Gemma 3), None for rope_theta
    sliding    sliding_window, the keys a query of a sliding layer sees (itself included);
               layer_types: "full" or "sliding" per layer (None: every layer full)
    Gemma      embed_scale: the embedding times sqrt(hidden_size); sandwich_norms: a norm after
               the attention and after the feed-forward too; final_logit_softcapping: c for
               logits = c tanh(logits / c), None for none
    head       tied_head: the head is the token embedding
    latent     a LatentSettings: DeepSeek's latent attention in every layer instead of
               grouped-query attention (head_dim is then its queries' and keys',
               qk_nope_head_dim + qk_rope_head_dim, and num_kv_heads is num_heads); None: none
    experts    an ExpertSettings: routed experts in place of the feed-forward, except on its
               dense_layers (Qwen3-MoE, DeepSeek-V3); None: a feed-forward on every layer
    model_type the family whose files save_pretrained writes: "llama", "mistral", "qwen2",
               "qwen3", "gemma3_text", "qwen3_moe" or "deepseek_v3"
    """

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    norm_eps: float = 1e-6
    norm_unit_offset: bool = False
    activation: str = "silu"
    mlp_bias: bool = False
    qkv_bias: bool = False
    out_bias: bool = False
    qk_norm: bool = False
    query_pre_attn_scalar: float = None
    rope_theta: float = 10000.0
    rope_scaling: dict = None
    local_rope_theta: float = None
    sliding_window: int = None
    layer_types: tuple = None
    embed_scale: bool = False
    sandwich_norms: bool = False
    final_logit_softcapping: float = None
    tied_head: bool = False
    latent: LatentSettings = None
    experts: ExpertSettings = None
    model_type: str = "llama"

    def kinds(self):
        """Each layer's kind, "full" or "sliding"."""
        return tuple(self.layer_types) if self.layer_types else ("full",) * self.num_layers

    def feed_forwards(self):
        """Each layer's feed-forward, "dense" or "experts"."""
        dense = range(self.num_layers) if self.experts is None else self.experts.dense_layers
        return tuple("dense" if i in dense else "experts" for i in range(self.num_layers))


class DecoderBlock(Module):
    """One pre-norm block of the decoder (settings: DecoderSettings; `sliding`: a sliding layer):

        x = x + attn(attn_norm(x))         [Gemma 3: x + attn_out_norm(attn(attn_norm(x)))]
        x = x + mlp(mlp_norm(x))           [Gemma 3: x + mlp_out_norm(mlp(mlp_norm(x)))]

    chapter 1's block with RMSNorms, grouped-query attention and a gated feed-forward. A sliding
    layer attends to the settings' sliding_window newest keys, with its rotary base
    (local_rope_theta, unscaled) where the settings give one. With the settings' `latent`, the
    attention is latent attention (nn/latent_attention.py); with `routed`, the feed-forward is
    the settings' routed experts (nn/routed_experts.py). The activations it names are
    chapter 1's: "resid_pre", "resid_mid", "mlp_out", "resid_post" (B, T, E).
    """

    activations = ("resid_pre", "resid_mid", "mlp_out", "resid_post")

    def __init__(self, settings, sliding=False, dtype=None, routed=False):
        s = settings
        rope_base, rope_scaling = s.rope_theta, s.rope_scaling
        if sliding and s.local_rope_theta is not None:          # Gemma 3's local layers
            rope_base, rope_scaling = s.local_rope_theta, None
        scale = None if s.query_pre_attn_scalar is None else s.query_pre_attn_scalar ** -0.5

        def norm():
            return RMSNorm(s.hidden_size, s.norm_eps, s.norm_unit_offset, dtype)

        self.attn_norm = norm()
        if s.latent is not None:
            self.attn = LatentAttention(s.hidden_size, s.num_heads, **vars(s.latent),
                                        bias=s.out_bias, rope_base=rope_base,
                                        rope_scaling=rope_scaling, dtype=dtype)
        else:
            self.attn = GroupedQueryAttention(
                s.hidden_size, s.num_heads, s.num_kv_heads, s.head_dim, qkv_bias=s.qkv_bias,
                out_bias=s.out_bias, qk_norm=s.qk_norm, norm_eps=s.norm_eps,
                norm_unit_offset=s.norm_unit_offset, rope_base=rope_base,
                rope_scaling=rope_scaling, window=s.sliding_window if sliding else None,
                scale=scale, dtype=dtype)
        self.attn_out_norm = norm() if s.sandwich_norms else None
        self.mlp_norm = norm()
        if routed:
            self.mlp = RoutedExperts(s.hidden_size, **s.experts.layer_arguments(),
                                     activation=s.activation, dtype=dtype)
        else:
            self.mlp = GatedFeedForward(s.hidden_size, s.intermediate_size, s.activation,
                                        bias=s.mlp_bias, dtype=dtype)
        self.mlp_out_norm = norm() if s.sandwich_norms else None

    def forward(self, x, start=0, cache=None):
        """(the output (B, T, E), the attention weights (B, H, T, S)) for tokens at positions
        start, start + 1, ...; `cache`: this layer's LayerCache, or None."""
        x = self.hook("resid_pre", x)                                       # (B, T, E)
        attended, weights = self.attn(self.attn_norm(x), start, cache)      # (B, T, E)
        if self.attn_out_norm is not None:
            attended = self.attn_out_norm(attended)                         # (B, T, E)
        x = self.hook("resid_mid", x + attended)                            # (B, T, E)
        transformed = self.mlp(self.mlp_norm(x))                            # (B, T, E)
        if self.mlp_out_norm is not None:
            transformed = self.mlp_out_norm(transformed)                    # (B, T, E)
        x = self.hook("resid_post", x + self.hook("mlp_out", transformed))  # (B, T, E)
        return x, weights


class OpenDecoder(Module):
    """A language model of the families Llama, Mistral, Qwen2, Qwen3, Gemma 3, Qwen3-MoE and
    DeepSeek-V3: token ids (B, T) -> next-token logits (B, T, vocab_size).

        embed (x sqrt(E): Gemma) -> num_layers DecoderBlocks -> norm -> head
                                                         (-> c tanh(logits / c): Gemma)

    `settings` (a DecoderSettings) says which family's switches are on; `nn.from_pretrained`
    reads them, and the weights, from a model folder. The parameters take `dtype` (default
    float64) and start as chapter 1's layers start (norms at ones, or zeros with Gemma's
    1 + weight); `tied_head` makes `head.weight` the embedding's own Parameter, as chapter 2's
    CausalTransformer does.

    The activations it names are chapter 4's: "embed" (B, T, E), the embeddings (scaled, for
    Gemma), and "final", the last norm's output, which the head turns into logits; its blocks
    and their attention name theirs ("blocks.0.attn.weights" (B, H, T, S)).
    """

    activations = ("embed", "final")
    config = None       # the config.json it was read from (nn.from_pretrained), if it was

    @door(checks.settings_fit, dtype=floating_dtype)
    def __init__(self, settings, dtype=None):
        self.settings = settings
        self.embed = Embedding(settings.vocab_size, settings.hidden_size, dtype=dtype)
        self.blocks = [DecoderBlock(settings, kind == "sliding", dtype, feed == "experts")
                       for kind, feed in zip(settings.kinds(), settings.feed_forwards())]
        self.norm = RMSNorm(settings.hidden_size, settings.norm_eps, settings.norm_unit_offset,
                            dtype)
        self.head = Linear(settings.hidden_size, settings.vocab_size, bias=False, dtype=dtype)
        if settings.tied_head:          # one Parameter in two places: its gradient sums both uses
            self.head.weight = self.embed.weight        # (vocab_size, E): Linear's (out, in)

    @door(checks.ids_and_cache_fit, return_weights=bool, last_only=bool)
    def forward(self, ids, cache=None, return_weights=False, last_only=False):
        """Logits (B, T, vocab_size); with return_weights, also each block's attention weights
        (B, H, T, S). `last_only=True` gives the last position's logits alone, (B, 1, vocab).

        `cache` (a DecoderCache from `empty_cache()`) holds the keys and values of the tokens
        seen so far: the ids are then the next tokens of the same sequences, at the positions
        after the cached ones, and the logits are those the model gives them in the whole
        sequence. The cache grows by the ids' length (a sliding layer's up to its window).
        """
        ids = np.asarray(data_of(ids))                                  # (B, T)
        start = 0 if cache is None else len(cache)                      # positions already seen
        x = self.embed(ids)                                             # (B, T, E)
        if self.settings.embed_scale:
            x = x * math.sqrt(self.settings.hidden_size)                # (B, T, E)
        x = self.hook("embed", x)                                       # (B, T, E)
        weights = []
        for i, block in enumerate(self.blocks):
            x, block_weights = block(x, start, None if cache is None else cache.layers[i])
            weights.append(block_weights)                               # (B, H, T, S)
        if cache is not None:
            cache.length += ids.shape[1]
        if last_only:
            x = x[:, -1:]                                               # (B, 1, E)
        logits = self.head(self.hook("final", self.norm(x)))            # (B, T or 1, vocab)
        cap = self.settings.final_logit_softcapping
        if cap is not None:
            logits = (logits / cap).tanh() * cap                        # in (-cap, cap)
        return (logits, weights) if return_weights else logits

    def empty_cache(self):
        """A DecoderCache for this model, empty, for `forward(ids, cache=...)`."""
        return DecoderCache(self)

    def load_balancing_loss(self):
        """Qwen3-MoE's auxiliary loss over the last forward's expert layers
        (nn/routed_experts.py's load_balancing_loss, which says what it is), a () Tensor: in
        training, `loss = F.cross_entropy(...) + 0.001 * model.load_balancing_loss()`, 0.001
        being config.json's router_aux_loss_coef."""
        return load_balancing_loss(self.expert_layers())

    def update_choice_bias(self, speed=0.001):
        """DeepSeek-V3's auxiliary-loss-free balancing, one step in every expert layer
        (RoutedExperts.update_choice_bias, which says what it is), after a training step."""
        for experts in self.expert_layers():
            experts.update_choice_bias(speed)

    def expert_layers(self):
        """The blocks' RoutedExperts, first to last (none in a dense model)."""
        return [block.mlp for block in self.blocks if isinstance(block.mlp, RoutedExperts)]

    @no_grad()
    @door(checks.prompt_fits, max_new_tokens=at_least(0), temperature=between(0),
          top_k=optional(at_least(1)), use_cache=bool)
    def generate(self, ids, max_new_tokens, temperature=0.0, top_k=None, use_cache=True):
        """Continue each row of `ids` (B, T) by max_new_tokens tokens: (B, T + max_new_tokens),
        a NumPy int64 array. As chapter 2's `CausalTransformer.generate` (its docstring says the
        rest), but greedy unless told otherwise: temperature 0 takes the largest logit, as
        transformers' `generate(do_sample=False)`; temperature > 0 draws from
        softmax(logits / temperature), over the top_k largest when top_k is given.

        The first step runs the prompt into a DecoderCache, each later step the newest token
        alone: the tokens are those of recomputing the whole prefix (`use_cache=False`), which
        the rotary positions allow at any length. No token stops it early.
        """
        ids = np.asarray(data_of(ids), dtype=np.int64)                  # (B, T)
        cache = self.empty_cache() if use_cache else None
        new = ids                                                       # what the next step runs
        for step in range(max_new_tokens):
            logits = self(new, cache=cache, last_only=True)             # (B, 1, vocab)
            last = logits.data[:, -1]                                   # (B, vocab)
            samplable(last, step, "OpenDecoder.generate")
            chosen = next_tokens(last, temperature, top_k)              # (B,)
            ids = np.concatenate([ids, chosen[:, None]], axis=1)        # (B, T + 1)
            new = ids[:, -1:] if use_cache else ids
        return ids

    def extra_repr(self):
        return f"model_type={self.settings.model_type!r}"


# ------------------------------------------------------------------------------------------------
# The key/value cache

class DecoderCache:
    """The keys and values every layer of an OpenDecoder has kept, one LayerCache per block;
    `len(cache)` is the number of positions seen (more than a sliding layer keeps). Make it with
    `model.empty_cache()` and pass it to every call on the same sequences."""

    def __init__(self, model):
        self.model = model
        self.layers = [LatentCache() if isinstance(block.attn, LatentAttention)
                       else LayerCache(block.attn.window) for block in model.blocks]
        self.length = 0

    def __len__(self):
        return self.length

    @property
    def batch_size(self):
        return self.layers[0].batch_size

    @property
    def nbytes(self):
        """The bytes of the keys and values it holds: 2 * B * K * T * D * itemsize summed over
        the layers, T the tokens a layer keeps (all of them, or its window); a latent layer's
        B * T * (kv_lora_rank + qk_rope_head_dim) * itemsize."""
        return sum(layer.nbytes for layer in self.layers)
