"""Chapter 5. What a family's config asks for that the decoder does not compute, and what a
family's files cannot hold, which `from_pretrained` and `save_pretrained` (nn/open_checkpoints.py)
refuse by name."""
from tinyattn.nn.families import FIXED


def unimplemented(config, family):
    """The refusals (a list of phrases) for the switches of a config (its keys with the family's
    defaults filled in) that the decoder does not compute; the rotary, the layer types and the
    activation are checked where they are read."""
    refused = []
    if config.get("attention_dropout", 0.0):
        refused.append(f"attention_dropout {config['attention_dropout']} (no dropout here)")
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
    if not isinstance(kv_heads, int) or heads % kv_heads:
        refused.append(f"num_key_value_heads {kv_heads!r} not dividing num_attention_heads "
                       f"{heads}")
    return refused


def family_holds_it(self, folder):
    """save_pretrained: the family's layout holds the model (nn/open_checkpoints.py): no LoRA
    adapter unmerged, every switch the family's code fixes at its value there, and sliding layers
    only where the family has them (none in llama, all or none in mistral)."""
    settings = self.settings
    differences = [f"{name}={getattr(settings, name)!r} ({settings.model_type} has {value!r})"
                    for name, value in FIXED[settings.model_type].items()
                    if getattr(settings, name) != value]
    kinds = settings.kinds()
    if settings.model_type == "llama" and "sliding" in kinds:
        differences.append("sliding layers (llama has none)")
    if settings.model_type == "mistral" and len(set(kinds)) > 1:
        differences.append(f"layer_types {kinds} (mistral slides on every layer, or none)")
    if settings.qkv_bias != settings.out_bias and settings.model_type != "qwen2":
        differences.append(f"qkv_bias={settings.qkv_bias} with out_bias={settings.out_bias} "
                           f"(one attention_bias for all four)")
    if any(".lora_" in name for name in self.state_dict()):
        differences.append("LoRA adapters (merge_lora(model) first)")
    if differences:
        raise ValueError(f"a {settings.model_type} checkpoint cannot hold this model's "
                         f"{'; '.join(differences)}")
