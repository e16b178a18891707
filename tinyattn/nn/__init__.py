"""Layers, built from tinyattn's ops. Read in this order: module, layers, multi_head_attention,
transformer (chapter 1); decoder (self- and cross-attention) and experts (chapter 2); pretrained
(GPT-2's checkpoint layout, which CausalTransformer.from_pretrained reads and save_pretrained
writes), after safetensors.py and tokenizer.py (chapter 3)."""
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.layers import (Linear, LayerNorm, Embedding, Dropout, FeedForward,
                                PositionalEncoding)
from tinyattn.functional.positions import sinusoidal_positions   # also nn.sinusoidal_positions
from tinyattn.nn.multi_head_attention import MultiHeadAttention, KVCache
from tinyattn.nn.transformer import TransformerBlock, CausalTransformer
from tinyattn.nn.decoder import TransformerDecoderBlock, EncoderDecoder
from tinyattn.nn.experts import MixtureOfExperts

__all__ = ["Module", "Parameter", "Linear", "LayerNorm", "Embedding", "Dropout", "FeedForward",
           "PositionalEncoding", "sinusoidal_positions", "MultiHeadAttention", "KVCache",
           "TransformerBlock", "CausalTransformer", "TransformerDecoderBlock", "EncoderDecoder",
           "MixtureOfExperts"]
