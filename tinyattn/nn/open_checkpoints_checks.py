"""Chapter 5. What a family's config asks for that the decoder does not compute, and what a
family's files cannot hold, which `from_pretrained` and `save_pretrained` (nn/open_checkpoints.py)
refuse by name."""
from tinyattn.nn.deepseek_v3 import DeepseekV3
from tinyattn.nn.gemma3 import Gemma3, Gemma3Attention, Gemma3Block, GemmaRMSNorm
from tinyattn.nn.latent_attention import LatentAttention
from tinyattn.nn.layers import Embedding, Linear
from tinyattn.nn.llama import Llama, LlamaAttention, LlamaBlock, Mistral, Qwen2, Qwen2Attention
from tinyattn.nn.open_decoder_checks import family_differences, what_the_files_lack
from tinyattn.nn.open_layers import GatedFeedForward, RMSNorm
from tinyattn.nn.qwen3 import Qwen3, Qwen3Attention
from tinyattn.nn.qwen3_moe import Qwen3Moe
from tinyattn.nn.routed_experts import RoutedExperts

# The layers a decoder is made of, each exactly of its class: a subclass (a LoRALinear is a
# Linear) computes something else, which a family's files have no place for.
DECODER_LAYERS = (Llama, Mistral, Qwen2, Qwen3, Gemma3, Qwen3Moe, DeepseekV3, Embedding,
                  LlamaBlock, Gemma3Block, RMSNorm, GemmaRMSNorm, LlamaAttention, Qwen2Attention,
                  Qwen3Attention, Gemma3Attention, LatentAttention, GatedFeedForward,
                  RoutedExperts, Linear)


def unimplemented(config, family):
    """The refusals (a list of phrases) for the switches of a config (its keys with the family's
    defaults filled in) that the decoder does not compute; the rotary, the layer types and the
    activation are checked where they are read."""
    refused = []
    if config.get("attention_dropout", 0.0):
        refused.append(f"attention_dropout {config['attention_dropout']} (no dropout here)")
    if config.get("partial_rotary_factor", 1.0) != 1.0:
        refused.append(f"partial_rotary_factor {config['partial_rotary_factor']} (every feature "
                       f"of a head turns here)")
    if config.get("quantization_config") is not None:
        method = config["quantization_config"].get("quant_method", "?") \
            if isinstance(config["quantization_config"], dict) else "?"
        refused.append(f"quantization_config ({method}: the weights are quantized)")
    if family == "gemma3_text":
        if config.get("attn_logit_softcapping") is not None:
            refused.append(f"attn_logit_softcapping {config['attn_logit_softcapping']} (Gemma 2's "
                           f"capping of the scores)")
        if config.get("use_bidirectional_attention"):
            refused.append("use_bidirectional_attention true (the decoder is causal)")
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"] or \
        config["num_attention_heads"]
    if family == "deepseek_v3" and kv_heads != heads:
        refused.append(f"num_key_value_heads {kv_heads!r} other than num_attention_heads "
                       f"{heads} (latent attention rebuilds every head's own keys)")
    elif not isinstance(kv_heads, int) or heads % kv_heads:
        refused.append(f"num_key_value_heads {kv_heads!r} not dividing num_attention_heads "
                       f"{heads}")
    return refused


def family_holds_it(self, folder):
    """save_pretrained: the family's layout holds the model (nn/open_checkpoints.py): every switch
    the family's code fixes at its value there, sliding layers only where the family has them
    (none in llama, all or none in mistral); the decoder's layers alone (no LoRA adapter left
    unmerged), nothing attached to their hook points, one dtype."""
    settings = self.settings
    differences = family_differences(settings) + what_the_files_lack(settings)
    others = [f"{name} (a {type(layer).__name__})" for name, layer in self.named_modules()
              if type(layer) not in DECODER_LAYERS]
    if others:
        adapted = any(isinstance(layer, Linear) for layer in self.modules()
                      if type(layer) not in DECODER_LAYERS)
        differences.append("layers the decoder does not have: " + ", ".join(others)
                           + (" (merge_lora(model) folds LoRA adapters into plain Linear layers;"
                              " save_lora saves the adapters alone)" if adapted else ""))
    attached = [f"{name or 'the model'} ({', '.join(layer.hooked)})"
                for name, layer in self.named_modules() if layer.hooked]
    if attached:
        differences.append(f"functions attached to the hook points of {', '.join(attached)}")
    if len({parameter.dtype for parameter in self.parameters()}) > 1:
        differences.append("parameters of several dtypes")
    if differences:
        raise ValueError(f"a {settings.model_type} checkpoint cannot hold this model's "
                         f"{'; '.join(differences)}")
