"""Chapter 5. Qwen3-MoE on a page: Qwen3 (nn/qwen3.py) whose feed-forward, on every layer but
the dense ones, is a set of routed experts (nn/routed_experts.py): each token goes through
top_k of num_experts small SwiGLUs, chosen by a softmax router, weighted by their scores.

What one forward pass computes, Qwen3-30B-A3B's sizes in brackets (QWEN3_30B_A3B below):

    x = embed(ids)                                        [E = 2048]
    48 times:
        x = x + attn(attn_norm(x))                        Qwen3's: QK-norm, 32 query heads on
                                                          4 key/value heads of 128
        x = x + experts(mlp_norm(x))                      8 of 128 experts of width 768 a token
    logits = head(norm(x))                                [151,936]

30.5 billion parameters, of which 3.3 billion work on each token (the A3B): the experts hold
most of the parameters and each token reads 8 / 128 of them. In training, the router is kept
from sending every token to a few experts by an auxiliary loss (`load_balancing_loss()`,
OpenDecoder's, with config.json's router_aux_loss_coef 0.001).
"""
from tinyattn.nn.llama import Llama
from tinyattn.nn.open_decoder import DecoderSettings
from tinyattn.nn.qwen3 import Qwen3
from tinyattn.nn.routed_experts import ExpertSettings, RoutedExperts

# Qwen/Qwen3-30B-A3B's config.json: 48 layers, every one of experts (decoder_sparse_step 1, no
# mlp_only_layers); its intermediate_size (6144) is that of a dense layer, none here
QWEN3_30B_A3B = DecoderSettings(
    vocab_size=151936, hidden_size=2048, intermediate_size=6144, num_layers=48, num_heads=32,
    num_kv_heads=4, head_dim=128, norm_eps=1e-6, rope_theta=1000000.0, qk_norm=True,
    experts=ExpertSettings(num_experts=128, top_k=8, hidden_dim=768, norm_topk_prob=True),
    model_type="qwen3_moe")


class Qwen3Moe(Qwen3):
    """Qwen3-MoE: Qwen3 with routed experts in place of the feed-forward, except on the layers
    settings.experts.dense_layers names (config.json's mlp_only_layers and decoder_sparse_step),
    which keep Qwen3's SwiGLU of intermediate_size."""

    model_type = "qwen3_moe"

    def feed_forward(self, layer, dtype):
        s = self.settings
        if s.feed_forwards()[layer] == "dense":
            return Llama.feed_forward(self, layer, dtype)          # Llama's SwiGLU
        return RoutedExperts(s.hidden_size, **s.experts.layer_arguments(),
                             activation=s.activation, dtype=dtype)
