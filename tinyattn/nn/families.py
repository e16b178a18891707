"""Chapter 5. The families of today's open models as data: for each `model_type` that
nn/open_checkpoints.py reads, what its transformers code fixes whatever its config.json says, and
the defaults of the keys a config.json may leave out. Every other difference between the
families is a value in their config.json, read into a DecoderSettings (nn/open_decoder.py).

    family        fixes                                           reads from config.json
    llama         no QK-norm, none of Gemma's extras              attention_bias, mlp_bias,
                                                                  rope_scaling (llama3), tie
    mistral       no biases, no QK-norm                           sliding_window (every layer)
    qwen2         q, k, v biases (not o), no QK-norm              use_sliding_window, layer_types
    qwen3         QK-norm                                         attention_bias, sliding layers
    gemma3_text   (1 + w) norms, QK-norm, sqrt(E) embedding,      query_pre_attn_scalar,
                  sandwich norms                                  layer_types, both rope bases,
                                                                  final_logit_softcapping
    qwen3_moe     QK-norm; softmax router, no bias, no groups,    num_experts, norm_topk_prob,
                  no shared expert (ROUTERS)                      mlp_only_layers,
                                                                  decoder_sparse_step, sliding
                                                                  (every layer)
    deepseek_v3   latent attention, no QK-norm; sigmoid router    kv_lora_rank, q_lora_rank and
                  with a choice bias (ROUTERS)                    the head sizes, rope_interleave,
                                                                  n_group, topk_group, shared and
                                                                  routed experts,
                                                                  routed_scaling_factor,
                                                                  first_k_dense_replace
"""
FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma3_text", "qwen3_moe", "deepseek_v3")
ARCHITECTURES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM",
                 "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM",
                 "gemma3_text": "Gemma3ForCausalLM", "qwen3_moe": "Qwen3MoeForCausalLM",
                 "deepseek_v3": "DeepseekV3ForCausalLM"}

# What each family's code fixes, whatever its config.json says (the other settings are read).
NOT_GEMMA = dict(norm_unit_offset=False, embed_scale=False, sandwich_norms=False,
                 final_logit_softcapping=None, query_pre_attn_scalar=None, local_rope_theta=None)
DENSE = dict(latent=None, experts=None)          # grouped-query attention, a feed-forward
FIXED = {
    "llama": dict(NOT_GEMMA, **DENSE, qk_norm=False),
    "mistral": dict(NOT_GEMMA, **DENSE, qk_norm=False, qkv_bias=False, out_bias=False,
                    mlp_bias=False),
    "qwen2": dict(NOT_GEMMA, **DENSE, qk_norm=False, qkv_bias=True, out_bias=False,
                  mlp_bias=False),
    "qwen3": dict(NOT_GEMMA, **DENSE, qk_norm=True, mlp_bias=False),
    "gemma3_text": dict(**DENSE, norm_unit_offset=True, embed_scale=True, sandwich_norms=True,
                        qk_norm=True, mlp_bias=False),
    "qwen3_moe": dict(NOT_GEMMA, latent=None, qk_norm=True, mlp_bias=False),
    "deepseek_v3": dict(NOT_GEMMA, qk_norm=False, mlp_bias=False, layer_types=None),
}
# ... and what it fixes of its router (ExpertSettings, nn/routed_experts.py)
ROUTERS = {
    "qwen3_moe": dict(scoring="softmax", choice_bias=False, num_groups=1, top_groups=1,
                      routed_scaling_factor=1.0, shared_hidden_dim=None),
    "deepseek_v3": dict(scoring="sigmoid", choice_bias=True),
}

# transformers' defaults (its Config classes) for the keys a config.json may leave out
DEFAULTS = {
    "llama": dict(num_key_value_heads=None, head_dim=None, hidden_act="silu", rms_norm_eps=1e-6,
                  tie_word_embeddings=False, attention_bias=False, mlp_bias=False,
                  max_position_embeddings=2048),
    "mistral": dict(num_key_value_heads=8, head_dim=None, hidden_act="silu", rms_norm_eps=1e-6,
                    tie_word_embeddings=False, sliding_window=4096,
                    max_position_embeddings=4096 * 32),
    "qwen2": dict(num_key_value_heads=32, head_dim=None, hidden_act="silu", rms_norm_eps=1e-6,
                  tie_word_embeddings=False, use_sliding_window=False, sliding_window=4096,
                  max_window_layers=28, max_position_embeddings=32768),
    "qwen3": dict(num_key_value_heads=32, head_dim=128, hidden_act="silu", rms_norm_eps=1e-6,
                  tie_word_embeddings=False, attention_bias=False, use_sliding_window=False,
                  sliding_window=4096, max_window_layers=28, max_position_embeddings=32768),
    "gemma3_text": dict(num_key_value_heads=4, head_dim=256,
                        hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                        tie_word_embeddings=True, attention_bias=False,
                        query_pre_attn_scalar=256, sliding_window=4096, sliding_window_pattern=6,
                        final_logit_softcapping=None, attn_logit_softcapping=None,
                        use_bidirectional_attention=False, max_position_embeddings=131072),
    "qwen3_moe": dict(num_key_value_heads=4, head_dim=None, hidden_act="silu", rms_norm_eps=1e-6,
                      tie_word_embeddings=False, attention_bias=False, use_sliding_window=False,
                      sliding_window=4096, max_position_embeddings=32768, num_experts=128,
                      num_experts_per_tok=8, moe_intermediate_size=768, norm_topk_prob=False,
                      decoder_sparse_step=1, mlp_only_layers=None),
    "deepseek_v3": dict(num_key_value_heads=128, head_dim=None, hidden_act="silu",
                        rms_norm_eps=1e-6, tie_word_embeddings=False, attention_bias=False,
                        max_position_embeddings=4096, kv_lora_rank=512, q_lora_rank=1536,
                        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128,
                        rope_interleave=True, n_routed_experts=256, n_shared_experts=1,
                        num_experts_per_tok=8, moe_intermediate_size=2048, n_group=8,
                        topk_group=4, routed_scaling_factor=2.5, norm_topk_prob=True,
                        first_k_dense_replace=3),
}
SIZES = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
         "num_attention_heads")
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu_pytorch_tanh": "gelu_tanh",
               "gelu_new": "gelu_tanh", "gelu_python_tanh": "gelu_tanh"}   # transformers' names
THEIR_ACTIVATION = {"silu": "silu", "gelu_tanh": "gelu_pytorch_tanh"}
LAYER_TYPES = {"full_attention": "full", "sliding_attention": "sliding"}
THETA = {"gemma3_text": (1_000_000.0, 10_000.0)}     # Gemma 3's default bases: global, local
