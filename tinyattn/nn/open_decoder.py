"""Chapter 5. What every family's model shares: its sizes (DecoderSettings), generation with
its key/value cache (OpenDecoder, the base of each family's model), and the cache itself
(DecoderCache).

Each family is a model on a page, whose forward reads top to bottom:

    nn/llama.py        Llama 3, and Mistral and Qwen2 as Llama with a piece changed
    nn/qwen3.py        Qwen3: Llama with QK-norm
    nn/gemma3.py       Gemma 3: Qwen3 with Gemma's norms, scale, local layers, embedding
    nn/qwen3_moe.py    Qwen3-MoE: Qwen3 with routed experts
    nn/deepseek_v3.py  DeepSeek-V3: Llama with latent attention and DeepSeek's experts

The README's table is the map of what differs; nn/families.py says what each family's code fixes
and nn/open_checkpoints.py reads and writes each family's files (`nn.from_pretrained`). Read
here: DecoderSettings (the sizes a config.json gives), OpenDecoder.generate (a step of
generation written out), and the cache: LayerCache (nn/kv_cache.py: one layer's keys and
values; a sliding layer keeps its window only; a latent layer's LatentCache keeps its latents)
and DecoderCache (every layer's, and `nbytes`).
"""
import dataclasses

import numpy as np

from tinyattn.arguments import at_least, between, door, optional
from tinyattn.arrays import data_of
from tinyattn.engine import no_grad
from tinyattn.nn import open_decoder_checks as checks
from tinyattn.nn.generation import next_tokens, samplable
from tinyattn.nn.kv_cache import KVCache, LayerCache
from tinyattn.nn.latent_attention import LatentAttention, LatentCache, LatentSettings
from tinyattn.nn.module import Module
from tinyattn.nn.routed_experts import ExpertSettings, RoutedExperts, load_balancing_loss


@dataclasses.dataclass(frozen=True)
class DecoderSettings:
    """The sizes of a model and the settings its config.json gives (nn/open_checkpoints.py reads
    them as transformers does). Each family's page reads the fields its family has and its door
    refuses the others set otherwise than the family fixes them (nn/families.py's FIXED): a
    Llama reads no query_pre_attn_scalar, a Qwen3 needs qk_norm. The defaults are Llama's.

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


class OpenDecoder(Module):
    """The base of every family's model (Llama, Mistral, Qwen2, Qwen3, Gemma3, Qwen3Moe,
    DeepseekV3): token ids (B, T) -> next-token logits (B, T, vocab_size), the forward on the
    family's page. What they share is here: `generate`, `empty_cache`, and the experts' helpers
    (`load_balancing_loss`, `update_choice_bias`); `save_pretrained` is nn/open_checkpoints.py's.

    A model holds `settings` (a DecoderSettings), `embed`, `blocks` (each with its `attn` and
    `mlp`), `norm` and `head`; `config`, the config.json it was read from, if it was.
    """

    activations = ("embed", "final")
    config = None       # the config.json it was read from (nn.from_pretrained), if it was

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
            samplable(last, step, f"{type(self).__name__}.generate")
            chosen = next_tokens(last, temperature, top_k)              # (B,)
            ids = np.concatenate([ids, chosen[:, None]], axis=1)        # (B, T + 1)
            new = ids[:, -1:] if use_cache else ids
        return ids

    def extra_repr(self):
        return f"model_type={self.settings.model_type!r}"


# ------------------------------------------------------------------------------------------------
# The key/value cache

class DecoderCache(KVCache):
    """Chapter 2's KVCache (nn/kv_cache.py: one cache per block, `len(cache)` the positions seen,
    `batch_size`, `nbytes`) for chapter 5's decoders, whose layers keep less: a sliding layer its
    window of keys and values (so `len(cache)` is more than it keeps), a latent layer its latents.
    `nbytes` is then 2 * B * K * T * D * itemsize summed over the layers, T the tokens a layer
    keeps; a latent layer's B * T * (kv_lora_rank + qk_rope_head_dim) * itemsize."""

    def layer_cache(self, block):
        if isinstance(block.attn, LatentAttention):
            return LatentCache()
        return LayerCache(block.attn.window)
