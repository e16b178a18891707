"""Chapter 5. DeepSeek-V3 on a page: Llama (nn/llama.py) with two pieces of its own, each an
override here:

    the attention     latent attention (nn/latent_attention.py): every head's keys and values
                      rebuilt from one small vector per token, which is all the cache keeps
    the feed-forward  routed experts as Qwen3-MoE's (nn/qwen3_moe.py) on the layers after the
                      first first_k_dense_replace, with DeepSeek's router: sigmoid scores, a
                      choice bias balancing the load without a loss (`update_choice_bias()`),
                      experts chosen in groups, a shared expert every token goes through

What one forward pass computes, DeepSeek-V3's sizes in brackets (DEEPSEEK_V3 below):

    x = embed(ids)                                        [E = 7168]
    61 times:
        x = x + latent_attn(attn_norm(x))                 128 heads; the cache keeps 512 + 64
                                                          numbers a token and layer
        x = x + mlp(mlp_norm(x))                          layers 0-2: SwiGLU 18,432 wide;
                                                          3-60: 8 of 256 experts of 2048, in 4
                                                          of 8 groups, + 1 shared
    logits = head(norm(x))                                [129,280]
"""
from tinyattn.nn.latent_attention import LatentAttention, LatentSettings
from tinyattn.nn.llama import Llama
from tinyattn.nn.open_decoder import DecoderSettings
from tinyattn.nn.qwen3_moe import Qwen3Moe
from tinyattn.nn.routed_experts import ExpertSettings

# deepseek-ai/DeepSeek-V3's config.json (671 billion parameters, 37 billion a token), but for
# its rotary's YaRN scaling (factor 40), which this book does not compute: from_pretrained
# refuses that config by name; these are its sizes
DEEPSEEK_V3 = DecoderSettings(
    vocab_size=129280, hidden_size=7168, intermediate_size=18432, num_layers=61, num_heads=128,
    num_kv_heads=128, head_dim=192, norm_eps=1e-6, rope_theta=10000.0,
    latent=LatentSettings(kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128,
                          v_head_dim=128, q_lora_rank=1536, rope_interleave=True),
    experts=ExpertSettings(num_experts=256, top_k=8, hidden_dim=2048, scoring="sigmoid",
                           norm_topk_prob=True, routed_scaling_factor=2.5, num_groups=8,
                           top_groups=4, choice_bias=True, shared_hidden_dim=2048,
                           dense_layers=(0, 1, 2)),
    model_type="deepseek_v3")


class DeepseekV3(Llama):
    """DeepSeek-V3: Llama with latent attention on every layer and routed experts after its dense
    layers (settings.latent, settings.experts)."""

    model_type = "deepseek_v3"
    feed_forward = Qwen3Moe.feed_forward       # experts but on the dense layers, as Qwen3-MoE

    def attention(self, layer, dtype):
        s = self.settings
        return LatentAttention(s.hidden_size, s.num_heads, **vars(s.latent), bias=s.out_bias,
                               rope_base=s.rope_theta, rope_scaling=s.rope_scaling, dtype=dtype)
