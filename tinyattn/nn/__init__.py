"""Layers, built from tinyattn's ops: `import tinyattn.nn as nn`. This file is the index of every
chapter's layers; read the files in this order:

    chapter 1  module (parameters, and the two extension points later chapters use), layers
               (Linear, LayerNorm, Embedding, Dropout, the feed-forward block),
               multi_head_attention, transformer (the block)
    chapter 2  positions (the sinusoidal table as a layer; rotary positions attached to
               attention, and MultiHeadAttention(rope=True)), causal_transformer (a small GPT),
               kv_cache (one layer's keys and values), generation (generate, and the
               model's key/value cache), decoder (self- and
               cross-attention), experts (a mixture of experts)
    chapter 3  checkpoints (Module.save and Module.load), pretrained (GPT-2's own files, which
               CausalTransformer.from_pretrained reads and save_pretrained writes)
    chapter 4  hooks (every layer's activations by name: Module.run_with_cache and Module.hooks,
               each head's result computed when asked for), lora (low-rank adapters: LoRALinear,
               add_lora, merge_lora, save_lora, load_lora), lora_peft (the adapters in Hugging
               Face peft's format)
    chapter 5  open_layers (RMSNorm, GatedFeedForward), latent_attention
               (DeepSeek's: LatentAttention and its LatentCache), routed_experts (Qwen3-MoE's
               and DeepSeek-V3's routers: RoutedExperts), open_decoder (what every family's
               model shares: DecoderSettings, generate, its cache), a model on a page for each
               family: llama (Llama 3, and Mistral and Qwen2 as Llama with a piece changed),
               qwen3 (Llama with QK-norm), gemma3 (Qwen3 with Gemma's norms, scale, local
               layers and embedding), qwen3_moe (Qwen3 with routed experts), deepseek_v3 (Llama
               with latent attention and DeepSeek's experts); families (what each family
               fixes), open_checkpoints (from_pretrained for every family, save_pretrained),
               sink_cache (StreamingLLM's cache: the first tokens and a window)

What makes a layer's argument bad is in checks.py for chapter 1, and beside its file for a later
chapter (lora_checks.py beside lora.py).
"""
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.layers import Linear, LayerNorm, Embedding, Dropout, FeedForward
from tinyattn.nn.transformer import TransformerBlock
# chapter 1's MultiHeadAttention, and rope=True: rotary positions through its hook points
from tinyattn.nn.positions import MultiHeadAttention, PositionalEncoding, Rotary
from tinyattn.nn.causal_transformer import CausalTransformer
from tinyattn.nn.generation import KVCache
from tinyattn.nn.decoder import TransformerDecoderBlock, EncoderDecoder
from tinyattn.nn.experts import MixtureOfExperts
from tinyattn.nn import checkpoints, pretrained  # noqa: F401  (Module.save, from_pretrained)
from tinyattn.nn import hooks  # noqa: F401  (Module.run_with_cache, Module.hooks)
from tinyattn.nn.lora import LoRALinear, add_lora, merge_lora, save_lora, load_lora
from tinyattn.nn.open_layers import RMSNorm, GatedFeedForward
from tinyattn.nn.latent_attention import LatentAttention, LatentCache, LatentSettings
from tinyattn.nn.routed_experts import ExpertSettings, RoutedExperts
from tinyattn.nn.open_decoder import DecoderSettings, OpenDecoder, DecoderCache
from tinyattn.nn.llama import Llama, Mistral, Qwen2
from tinyattn.nn.qwen3 import Qwen3
from tinyattn.nn.gemma3 import Gemma3
from tinyattn.nn.qwen3_moe import Qwen3Moe
from tinyattn.nn.deepseek_v3 import DeepseekV3
from tinyattn.nn.open_checkpoints import from_pretrained
from tinyattn.nn.sink_cache import SinkCache

__all__ = ["Module", "Parameter", "Linear", "LayerNorm", "Embedding", "Dropout", "FeedForward",
           "MultiHeadAttention", "TransformerBlock", "PositionalEncoding", "Rotary",
           "CausalTransformer",
           "KVCache", "TransformerDecoderBlock", "EncoderDecoder", "MixtureOfExperts",
           "LoRALinear", "add_lora", "merge_lora", "save_lora", "load_lora",
           "RMSNorm", "GatedFeedForward", "LatentAttention", "LatentCache",
           "LatentSettings", "ExpertSettings", "RoutedExperts", "DecoderSettings", "OpenDecoder",
           "DecoderCache", "Llama", "Mistral", "Qwen2", "Qwen3", "Gemma3", "Qwen3Moe",
           "DeepseekV3",            "from_pretrained", "SinkCache"]
