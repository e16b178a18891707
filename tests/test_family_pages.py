"""Chapter 5's models on a page (tinyattn/nn/llama.py, qwen3.py, gemma3.py, qwen3_moe.py,
deepseek_v3.py): their cache, their pieces, their real sizes, and the settings each refuses. Their
logits against transformers' on each family's files: tests/test_open_checkpoints.py; their
gradients: the checklist's rows "Llama", "Mistral", "Qwen2", "Qwen3", "Gemma 3", "Qwen3-MoE",
"DeepSeek-V3"."""
import dataclasses

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.nn.deepseek_v3 import DEEPSEEK_V3
from tinyattn.nn.gemma3 import GEMMA_3_1B
from tinyattn.nn.llama import LLAMA_3_2_1B, MISTRAL_7B, QWEN2_0_5B, LlamaAttention
from tinyattn.nn.llama_checks import family_fits
from tinyattn.nn.open_checkpoints import settings_from_config
from tinyattn.nn.qwen3 import QWEN3_0_6B_CONFIG, Qwen3Attention
from tinyattn.nn.qwen3_moe import QWEN3_30B_A3B
from tinyattn_tools.checklist.chapter5 import FAMILIES as DENSE_FAMILIES, TINY, off_their_start
from tinyattn_tools.checklist.latent_and_experts import MIXTURE_FAMILIES, with_random_bias

FAMILIES = {**DENSE_FAMILIES, **MIXTURE_FAMILIES}
IDS = np.random.default_rng(0).integers(0, TINY["vocab_size"], (2, 7))


def logits_of(model, ids, **options):
    with ta.no_grad():
        return model(ids, **options).data


@pytest.mark.parametrize("family", FAMILIES)
def test_each_pages_cached_steps_give_its_logits_and_the_cache_its_bytes(family):
    """float64: the logits of cached steps past the window are the whole sequence's; every
    layer attends with its family's window and caches its keys and values (or latents)."""
    model_class, switches = FAMILIES[family]
    settings = nn.DecoderSettings(**{**TINY, **switches})
    ta.manual_seed(0)
    page = with_random_bias(off_their_start(model_class(settings))).eval()
    ours, weights = page(IDS, return_weights=True)
    assert [w.shape for w in weights] == [(2, TINY["num_heads"], 7, 7)] * TINY["num_layers"]
    cache = page.empty_cache()
    steps = [logits_of(page, IDS[:, a:b], cache=cache) for a, b in ((0, 3), (3, 4), (4, 7))]
    np.testing.assert_allclose(np.concatenate(steps, axis=1), ours.data, rtol=0, atol=1e-12)
    assert len(cache) == 7 and cache.batch_size == 2
    if settings.latent is not None:                 # the latents: r + d_R a token and layer
        latent = settings.latent.kv_lora_rank + settings.latent.qk_rope_head_dim
        assert cache.nbytes == settings.num_layers * 2 * 7 * latent * 8
        return
    windows = [settings.sliding_window if kind == "sliding" else None
               for kind in settings.kinds()]
    assert [block.attn.window for block in page.blocks] == windows
    K, D = settings.num_kv_heads, settings.head_dim
    assert cache.nbytes == sum(2 * 2 * K * (7 if w is None else w) * D * 8 for w in windows)


def test_qwen3_is_llama_with_qk_norm_and_qwen2_llama_with_qkv_biases():
    qwen3 = FAMILIES["Qwen3"][0](nn.DecoderSettings(**{**TINY, **FAMILIES["Qwen3"][1]}))
    assert type(qwen3.blocks[0].attn) is Qwen3Attention
    assert isinstance(qwen3.blocks[0].attn, LlamaAttention)
    assert qwen3.blocks[0].attn.q_norm.weight.shape == (TINY["head_dim"],)
    qwen2 = nn.Qwen2(nn.DecoderSettings(**TINY, qkv_bias=True, model_type="qwen2"))
    attention = qwen2.blocks[0].attn
    assert attention.q_proj.bias is not None and attention.v_proj.bias is not None
    assert attention.out_proj.bias is None


def test_the_pages_real_sizes_are_their_families():
    """Llama 3.2-1B's, Mistral 7B's, Qwen2-0.5B's, Gemma 3 1B's, Qwen3-30B-A3B's, DeepSeek-V3's
    settings are of their family; Qwen3-0.6B's
    config.json reads to 28 layers of 16 heads on 8 key/value heads of 128 (not 1024 / 16)."""
    for model_class, settings in ((nn.Llama, LLAMA_3_2_1B), (nn.Mistral, MISTRAL_7B),
                                  (nn.Qwen2, QWEN2_0_5B), (nn.Gemma3, GEMMA_3_1B),
                                  (nn.Qwen3Moe, QWEN3_30B_A3B), (nn.DeepseekV3, DEEPSEEK_V3)):
        family_fits(model_class.__new__(model_class), settings)
    qwen3 = settings_from_config(QWEN3_0_6B_CONFIG, "Qwen3-0.6B's config.json")
    assert (qwen3.num_layers, qwen3.num_heads, qwen3.num_kv_heads, qwen3.head_dim,
            qwen3.hidden_size) == (28, 16, 8, 128, 1024)
    family_fits(nn.Qwen3.__new__(nn.Qwen3), qwen3)


@pytest.mark.parametrize("model_class, changes, message", [
    (nn.Llama, dict(qk_norm=True), r"^Llama: a llama model cannot have qk_norm=True \(llama has "
                                   r"False\)$"),
    (nn.Llama, dict(sliding_window=2, layer_types=("sliding", "full")),
     r"^Llama: a llama model cannot have sliding layers \(llama has none\)$"),
    (nn.Mistral, dict(model_type="mistral", qk_norm=True, mlp_bias=True),
     r"^Mistral: a mistral model cannot have qk_norm=True \(mistral has False\); mlp_bias=True "
     r"\(mistral has False\)$"),
    (nn.Qwen2, dict(model_type="qwen2"), r"^Qwen2: a qwen2 model cannot have qkv_bias=False "
                                         r"\(qwen2 has True\)$"),
    (nn.Qwen3, dict(), r"^Qwen3: settings.model_type must be 'qwen3' for a Qwen3, got 'llama'$"),
    (nn.Qwen3, dict(model_type="qwen3", qk_norm=True, num_kv_heads=3),
     r"^Qwen3: num_kv_heads 3 must divide num_heads 4"),
])
def test_settings_a_family_does_not_have_are_named(model_class, changes, message):
    with pytest.raises(ValueError, match=message):
        model_class(dataclasses.replace(nn.DecoderSettings(**TINY), **changes))


def dense_parameters(settings):
    """The parameters of a dense grouped-query page of these settings, counted from the shapes
    its layers give their weights (Gemma's sandwich norms: two more a block)."""
    E, H, K, D, I = (settings.hidden_size, settings.num_heads, settings.num_kv_heads,
                     settings.head_dim, settings.intermediate_size)
    attention = 2 * E * H * D + 2 * E * K * D + settings.qkv_bias * (H + 2 * K) * D \
        + settings.qk_norm * 2 * D
    norms = (4 if settings.sandwich_norms else 2) * E
    block = attention + 3 * E * I + norms
    head = 0 if settings.tied_head else settings.vocab_size * E
    return settings.vocab_size * E + settings.num_layers * block + E + head


def test_the_counts_the_pages_name_are_their_sizes():
    """Llama 3.2-1B's 1.24 billion, Mistral 7B's 7.24, Qwen2-0.5B's 494 million, Gemma 3 1B's
    999,885,952 (the counts their model cards give); the formula checked on a small page."""
    small = nn.Gemma3(nn.DecoderSettings(**{**TINY, **FAMILIES["Gemma 3"][1]}))
    assert dense_parameters(small.settings) == sum(p.size for p in small.parameters())
    small = nn.Qwen2(nn.DecoderSettings(**{**TINY, **FAMILIES["Qwen2"][1]}))
    assert dense_parameters(small.settings) == sum(p.size for p in small.parameters())
    assert [dense_parameters(s) for s in (LLAMA_3_2_1B, MISTRAL_7B, QWEN2_0_5B, GEMMA_3_1B)] == \
        [1_235_814_400, 7_241_732_096, 494_032_768, 999_885_952]
