"""tinyattn: a reverse-mode autograd engine over NumPy, and attention built on it.

This file is the index of every chapter: `import tinyattn as ta`. What is where:

    engine.py, ops/       the core: the Tensor, the graph, the backward sweep, one class per op
                          (what a first reading can skip: tensor_protocols.py, the Tensor as a
                          Python object; arrays.py, what the ops compute on; numpy_1_26.py, what
                          the oldest NumPy needs; memory.py, the one speed setting; extends.py,
                          how a later chapter adds a method)
    gradient_check.py     the engine's gradients against central finite differences
    functional/, nn/,     built on the core, chapter 1: attention and the layers of a transformer,
    optim.py              the optimizers (arguments.py: the doors, how they check what they are
                          given; each package's checks.py: what makes an argument bad, and a
                          later chapter's module has its own beside it, e.g. nn/lora_checks.py;
                          rng.py: the random generator that manual_seed seeds); chapter 2 in the
                          same folders: positions, cross-attention, FlashAttention, sparse,
                          sliding and linear attention, experts, the key/value cache, generation
    safetensors.py,       chapter 3, a real model's files: weights in the safetensors format,
    tokenizer.py          text as GPT-2's tokens (nn/pretrained.py: GPT-2's weights)
    interpretability.py   chapter 4, what a model learned: the logit lens, ablation, activation
                          and attribution patching (nn/hooks.py: every activation by name,
                          model.run_with_cache and model.hooks); circuits.py: the residual
                          stream as a sum, direct logit attribution, QK and OV circuits,
                          composition; `import tinyattn.interpretability` has both;
                          and making it yours: nn/lora.py, low-rank adapters (nn/lora_peft.py:
                          in peft's format)
    tokenizer_json.py     chapter 5, today's open models: their tokenizer.json (split_patterns.py:
                          Llama 3's and Qwen's patterns; chat_template.py: the text of a chat),
                          read by tinyattn.tokenizer.from_pretrained
    nn/open_*.py          and the models, as one decoder with settings (Llama, Mistral, Qwen,
                          Gemma), read from their own files (nn.from_pretrained); their pieces:
                          ops/rms_norm.py, ops/silu.py, ops/rotate_half.py,
                          functional/grouped_query.py; the cache as the bottleneck:
                          nn/latent_attention.py, nn/sink_cache.py; and experts as Qwen3-MoE
                          and DeepSeek-V3 route them: nn/routed_experts.py (ops/sigmoid.py)
    audio.py              chapter 6, attention beyond language: sound as a log-mel spectrogram,
                          which Whisper (nn/whisper.py) turns into text
    diffusion.py          chapter 6, image generation: the DDPM schedule (noise added, and
                          removed step by step), for nn/dit.py's diffusion transformer

Beside the book, not in it: the package `tinyattn_tools` (the command line, the checklist of
gradient checks, benchmarks, drawing, downloads, exercises): it reads the book, and the book
reaches it only through two doors, viz.py (`ta.viz`) and __main__.py (`python -m tinyattn`).
"""
from tinyattn.arrays import TensorIndexError
from tinyattn.memory import keep_freed_memory
from tinyattn.engine import Tensor, tensor, no_grad, retain_grads
from tinyattn.ops import concatenate, stack, where
from tinyattn.rng import manual_seed
from tinyattn.gradient_check import gradcheck, GradcheckError
from tinyattn.safetensors import load_safetensors, save_safetensors
from tinyattn import functional, nn, optim  # noqa: F401  (ta.functional, ta.nn, ta.optim)
from tinyattn import tokenizer_json  # noqa: F401  (tokenizer.from_pretrained reads tokenizer.json)
from tinyattn import audio  # noqa: F401  (ta.audio.log_mel_spectrogram, chapter 6)
from tinyattn import diffusion  # noqa: F401  (ta.diffusion.DDPMSchedule)

keep_freed_memory()     # the one speed setting: freed memory kept for the next step (memory.py)

__all__ = ["Tensor", "TensorIndexError", "tensor", "no_grad", "retain_grads",
           "concatenate", "stack", "where", "gradcheck", "GradcheckError", "manual_seed",
           "load_safetensors", "save_safetensors"]


def __getattr__(name):
    """`ta.viz`, imported on first use: drawing needs the graphviz package, the rest only NumPy."""
    if name == "viz":
        import tinyattn.viz
        return tinyattn.viz
    raise AttributeError(f"module 'tinyattn' has no attribute {name!r}")
