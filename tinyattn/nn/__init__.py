"""Layers, built from tinyattn's ops: `import tinyattn.nn as nn`. This file is the index of every
chapter's layers; read the files in this order:

    chapter 1  module (parameters, and the two extension points later chapters use), layers
               (Linear, LayerNorm, Embedding, Dropout, the feed-forward block),
               multi_head_attention, transformer (the block)
    chapter 2  kv_cache (the key/value cache: LayerCache, one layer's keys and values, and
               KVCache, a model's), positions (the sinusoidal table as a layer; chapter 2's
               MultiHeadAttention: rotary positions and the cache in its forward),
               causal_transformer (a small GPT, and its CausalBlock), generation (generate),
               decoder (self- and cross-attention), experts (a mixture of experts)
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
    chapter 6  vit (the Vision Transformer: ViT), vit_checkpoints (its from_pretrained, and
               save_pretrained, in transformers' layouts),
               whisper (speech to text: Whisper's encoder of audio frames, its decoder with
               cross-attention and a cache of both attentions), whisper_checkpoints (its files),
               dit (DiT, a diffusion transformer: adaLN-Zero blocks over latent patches),
               dit_checkpoints (its diffusers folders: from_pretrained, save_pretrained),
               t5 (T5, an encoder-decoder: relative position buckets, cached cross-attention;
               generate with greedy or beam search, tinyattn/beam_search.py), t5_checkpoints
               (T5's files, both ways), bart (BART and Marian on T5's skeleton: absolute
               positions, post-norm blocks), bart_checkpoints (their files, both ways),
               clip (CLIP: a vision tower and a text tower in one space, the contrastive loss),
               clip_checkpoints (its files, both ways);
               pretrained_models (nn.from_pretrained: every model of the book, by config.json)

What makes a layer's argument bad is in checks.py for chapter 1, and beside its file for a later
chapter (lora_checks.py beside lora.py).
"""
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.layers import Linear, LayerNorm, Embedding, Dropout, FeedForward
from tinyattn.nn.transformer import TransformerBlock
from tinyattn.nn.kv_cache import KVCache, LayerCache
# chapter 2's MultiHeadAttention: chapter 1's, with rope=True and a cache in its forward
from tinyattn.nn.positions import MultiHeadAttention, PositionalEncoding
from tinyattn.nn.causal_transformer import CausalBlock, CausalTransformer
from tinyattn.nn import generation  # noqa: F401  (CausalTransformer.generate)
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
from tinyattn.nn.sink_cache import SinkCache
from tinyattn.nn.vit import ViT
from tinyattn.nn import vit_checkpoints  # noqa: F401  (ViT.save_pretrained)
from tinyattn.nn.whisper import Whisper, WhisperSettings, WhisperCache
from tinyattn.nn import whisper_checkpoints  # noqa: F401  (Whisper.save_pretrained, from_pretrained)
from tinyattn.nn.dit import DiT, DiTSettings
from tinyattn.nn import dit_checkpoints  # noqa: F401  (DiT.save_pretrained, its from_pretrained)
from tinyattn.nn.t5 import T5, T5Settings
from tinyattn.nn import t5_checkpoints  # noqa: F401  (T5.save_pretrained; its from_pretrained)
from tinyattn.nn.bart import Bart, BartSettings, Marian
from tinyattn.nn import bart_checkpoints  # noqa: F401  (Bart.save_pretrained; from_pretrained)
from tinyattn.nn.clip import CLIP
from tinyattn.nn import clip_checkpoints  # noqa: F401  (CLIP.save_pretrained; its from_pretrained)
from tinyattn.nn.pretrained_models import from_pretrained     # every model of the book

__all__ = ["Module", "Parameter", "Linear", "LayerNorm", "Embedding", "Dropout", "FeedForward",
           "MultiHeadAttention", "TransformerBlock", "PositionalEncoding", "LayerCache",
           "CausalBlock", "CausalTransformer",
           "KVCache", "TransformerDecoderBlock", "EncoderDecoder", "MixtureOfExperts",
           "LoRALinear", "add_lora", "merge_lora", "save_lora", "load_lora",
           "RMSNorm", "GatedFeedForward", "LatentAttention", "LatentCache",
           "LatentSettings", "ExpertSettings", "RoutedExperts", "DecoderSettings", "OpenDecoder",
           "DecoderCache", "Llama", "Mistral", "Qwen2", "Qwen3", "Gemma3", "Qwen3Moe",
           "DeepseekV3", "from_pretrained", "SinkCache",
           "Whisper", "WhisperSettings", "WhisperCache", "DiT", "DiTSettings",
           "T5", "T5Settings", "Bart", "BartSettings", "Marian", "ViT", "CLIP"]
