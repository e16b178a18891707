"""Chapter 5. Qwen3 on a page: Llama (nn/llama.py) with its queries and keys RMS-normed per head
before they are turned (QK-norm), and a head_dim of its own.

What one forward pass computes, for token ids (B, T), Qwen3-0.6B's sizes in brackets (its
config.json is QWEN3_0_6B_CONFIG below, which `nn.from_pretrained` reads as any config.json):

    x = embed(ids)                                        (B, T, E)        [E = 1024]
    28 times:
        h = attn_norm(x)                                  RMSNorm
        q = q_norm(q_proj(h)) per head, k = k_norm(k_proj(h)) per head, v = v_proj(h)
                                                          [16 query heads on 8 key/value
                                                           heads of D = 128: H D = 2048 > E]
        q, k turned by their positions (rotary, base 1,000,000)
        k, v put after the cache's                        (B, 8, S, 128)
        x = x + out_proj(softmax(q k^T / sqrt(D) + causal mask) v)
        x = x + down(silu(gate(mlp_norm(x))) * up(mlp_norm(x)))    [3072 wide]
    logits = head(norm(x))                                (B, T, 151936), the head tied to
                                                          the embedding

Against GPT-2 (chapter 2's nn/causal_transformer.py, chapter 1's nn/transformer.py): no learned
positions added to x (the rotation carries them), RMSNorm for LayerNorm and no biases, K < H
key/value heads, a head width D of its own (H D = 2048, not E), SwiGLU for the GELU
feed-forward, and QK-norm. Why QK-norm: a score q . k grows
with the norms of q and k, which grow with the weights; normed over D (with a learned gain), the
scores stay in a range whatever the weights do, and training at large learning rates stops
blowing up the softmax into one-hot rows (Dehghani et al. 2023; Qwen3 and Gemma 3 use it).
"""
from tinyattn.nn.llama import Llama, LlamaAttention, sliding_window
from tinyattn.nn.open_layers import RMSNorm

# config.json of Qwen/Qwen3-0.6B (tinyattn_tools/download.py's revision), in the hub's key order:
# written as transformers writes a config.json, these are its bytes (tests/test_download.py).
# 28 layers, width 1024, 16 query heads on 8 key/value heads of 128, feed-forward 3072,
# vocabulary 151,936, the head tied to the embedding: 596,049,920 parameters
QWEN3_0_6B_CONFIG = {
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu",
    "hidden_size": 1024, "initializer_range": 0.02, "intermediate_size": 3072,
    "max_position_embeddings": 40960, "max_window_layers": 28, "model_type": "qwen3",
    "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": True, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": 151936,
}


class Qwen3Attention(LlamaAttention):
    """Llama's attention whose queries and keys are RMS-normed over each head's D features
    (q_norm, k_norm: one gain of D shared by the heads) after they are projected and before they
    are turned; the rest is LlamaAttention.forward's steps."""

    def __init__(self, settings, window=None, dtype=None):
        super().__init__(settings, window, dtype)
        self.q_norm = RMSNorm(settings.head_dim, settings.norm_eps, dtype=dtype)
        self.k_norm = RMSNorm(settings.head_dim, settings.norm_eps, dtype=dtype)

    def project(self, x):
        """q (B, H, T, D), k and v (B, K, T, D): Llama's, q and k normed over D."""
        q, k, v = super().project(x)                            # (B, H or K, T, D)
        return self.q_norm(q), self.k_norm(k), v                # (B, H or K, T, D)


class Qwen3(Llama):
    """Qwen3: Llama with Qwen3Attention, sliding layers where its config says (as Qwen2), and
    its own head_dim (128 in Qwen3-0.6B, where hidden_size / num_heads is 64)."""

    model_type = "qwen3"
    Attention = Qwen3Attention

    def window(self, layer):
        return sliding_window(self.settings, layer)
