"""Chapter 4. LoRA adapters in Hugging Face peft's format, both ways: `save_lora(model, folder,
format="peft")` (nn/lora.py) writes a folder that `peft.PeftModel.from_pretrained` loads onto
the `transformers` GPT-2 of the same checkpoint, with the same logits, and `load_lora(model,
folder)` reads a folder that peft wrote.

A peft folder holds adapter_config.json (peft_type "LORA", its rank `r`, `lora_alpha`, the
`target_modules`, per-module `rank_pattern` and `alpha_pattern`, ...) and
adapter_model.safetensors, with, for each adapted module M of transformers' GPT2LMHeadModel,

    base_model.model.M.lora_A.weight   A (r, in)     the module's output gains
    base_model.model.M.lora_B.weight   B (out, r)    (lora_alpha / r) x A^T B^T

which is LoRALinear's update. GPT-2's modules (nn/pretrained.py), in both libraries' names:

    blocks.N.attn.q_proj, k_proj, v_proj    transformer.h.N.attn.c_attn   q, k, v side by side
    blocks.N.attn.out_proj                  transformer.h.N.attn.c_proj
    blocks.N.ff.up, blocks.N.ff.down        transformer.h.N.mlp.c_fc, transformer.h.N.mlp.c_proj

GPT-2's modules are Conv1D layers, whose weight is stored (in, out), transposed from a Linear's;
peft's `fan_in_fan_out: true` says so, for merging. A and B are stored as for a Linear all the
same: only the frozen weight is transposed, and it is not in the folder. Adapters on any other
layer (the head, say) have no place in the folder: they are refused by name, never dropped.

c_attn. Adapters on q, k and v of ranks r_q, r_k, r_v are one adapter on c_attn, of rank
R = r_q + r_k + r_v: A stacked, B block-diagonal,

    A = [A_q; A_k; A_v]  (R, E)      B = [[B_q, 0, 0], [0, B_k, 0], [0, 0, B_v]]  (3E, R)

since then B A = [B_q A_q; B_k A_k; B_v A_v]: each third of c_attn's output gets its own update
and nothing else (a third without an adapter gets rows of zeros). The scale must stay what it
was, so alpha' / R = alpha / r: alpha' = alpha R / r. So q, k and v of one block must share one
scale alpha / r (the default alpha = r gives 1); their ranks may differ.

Back, a peft adapter on c_attn splits into three exactly when its B is block-diagonal in the
order of the stacking. A folder that `save_lora` wrote says how it stacked (the ranks and alphas
of q, k, v, in the metadata of adapter_model.safetensors, which peft ignores), and B is checked
to be zero outside those blocks: then each third gets its own adapter back, as it was saved.
Otherwise (peft trained it, or wrote it) a rank-R adapter on c_attn does not split into three of
lower rank: each third of its update B_t A (B_t: the third's rows of B) has rank up to R, not
R / 3. It is still loaded exactly: as a rank-R adapter on each of q, k and v, each with all of A
(copied: three parameters from here on, which training may move apart) and its third of B,
alpha' = lora_alpha, so the same scale. (LoRALinear's rank is at most the layer's width, E.)
"""
import json
import os
import re

import numpy as np

from tinyattn.nn import lora_peft_checks
from tinyattn.nn.pretrained import LAYOUT, PREFIX
from tinyattn.safetensors import read_file, replaced_atomically, save_safetensors

CONFIG, WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
KEY_PREFIX = "base_model.model."           # peft's prefix, before GPT2LMHeadModel's own names
# GPT-2's module of each tinyattn Linear of a block (N), and its third of c_attn (None: all of it)
MODULES = {ours.removesuffix(".weight"): (theirs.removesuffix(".weight"), third)
           for ours, theirs, third, transposed in LAYOUT if transposed}
# the other way, {GPT-2 module: [tinyattn Linear]}: c_attn's q_proj, k_proj, v_proj in order
LAYERS_OF = {theirs: [ours for ours, (module, _) in MODULES.items() if module == theirs]
             for theirs, _ in MODULES.values()}


def gpt2_module(name):
    """(GPT-2's module, its third of c_attn or None) of a tinyattn Linear ("blocks.0.attn.k_proj"
    -> ("h.0.attn.c_attn", 1)); None for a layer that GPT-2's modules do not include."""
    match = re.fullmatch(r"blocks\.(\d+)\.(.+)", name)
    if match is None or f"blocks.N.{match.group(2)}" not in MODULES:
        return None
    module, third = MODULES[f"blocks.N.{match.group(2)}"]
    return module.replace("N", match.group(1), 1), third


def tinyattn_layers(module):
    """The tinyattn Linear layers of one GPT-2 module ("h.3.attn.c_attn" -> blocks.3's q_proj,
    k_proj, v_proj)."""
    block = module.split(".")[1]
    return [name.replace("N", block, 1) for name in LAYERS_OF[module.replace(block, "N", 1)]]


# ------------------------------------------------------------------------------------------------
# Writing

def save_peft(model, folder, layers, base_model_name_or_path=None):
    """Write the adapters `layers` ({name: LoRALinear}) of `model` to `folder` (made if missing)
    in peft's format: adapter_config.json and adapter_model.safetensors, each written whole or
    not at all."""
    lora_peft_checks.peft_can_hold(model, layers, {name: gpt2_module(name) for name in layers})
    modules = {}                           # {GPT-2 module: [(third, tinyattn name, layer)]}
    for name, layer in layers.items():
        module, third = gpt2_module(name)
        modules.setdefault(module, []).append((third, name, layer))
    arrays, ranks, alphas = {}, {}, {}
    for module, parts in modules.items():
        A, B, alpha = joined(sorted(parts, key=lambda part: part[0] or 0))
        arrays[f"{KEY_PREFIX}{PREFIX}{module}.lora_A.weight"] = A
        arrays[f"{KEY_PREFIX}{PREFIX}{module}.lora_B.weight"] = B
        ranks[module], alphas[module] = A.shape[0], alpha
    os.makedirs(os.fspath(folder), exist_ok=True)
    config = peft_config(ranks, alphas, base_model_name_or_path)
    with replaced_atomically(os.path.join(folder, CONFIG), "save_lora") as file:
        file.write((json.dumps(config, indent=2) + "\n").encode("utf-8"))
    stacked = {name: {"rank": layer.rank, "alpha": layer.alpha} for name, layer in layers.items()}
    # transformers and peft read a safetensors file whose metadata names the format "pt"
    save_safetensors(os.path.join(folder, WEIGHTS), arrays,
                     {"format": "pt", "lora": json.dumps(stacked)})


def joined(parts):
    """(A, B, alpha) of one GPT-2 module from the adapters on it, [(third, name, LoRALinear)]:
    a single layer's own, or c_attn's thirds stacked (the top of this file)."""
    if parts[0][0] is None:                                    # not c_attn: the layer's own
        layer = parts[0][2]
        return layer.lora_A.data, layer.lora_B.data, layer.alpha
    E = parts[0][2].out_features
    R = sum(layer.rank for _, _, layer in parts)
    A = np.concatenate([layer.lora_A.data for _, _, layer in parts])          # (R, E)
    B = np.zeros((3 * E, R), dtype=A.dtype)                                   # (3E, R)
    column = 0
    for third, _, layer in parts:
        B[third * E:(third + 1) * E, column:column + layer.rank] = layer.lora_B.data
        column += layer.rank
    alpha = parts[0][2].alpha * R / parts[0][2].rank           # the scale alpha / r kept
    return A, B, alpha


def peft_config(ranks, alphas, base_model_name_or_path):
    """adapter_config.json: LoRA on exactly these modules (GPT-2's names, each matched by peft as
    the end of a module's name), the first one's rank and alpha as `r` and `lora_alpha`, the
    others' where they differ in `rank_pattern` and `alpha_pattern`."""
    first = next(iter(ranks))

    def number(value):                      # 24, not 24.0, as peft's own configs write it
        return int(value) if float(value).is_integer() else value
    return {"peft_type": "LORA", "task_type": "CAUSAL_LM",
            "base_model_name_or_path": base_model_name_or_path,
            "r": ranks[first], "lora_alpha": number(alphas[first]),
            "target_modules": list(ranks),
            "rank_pattern": {module: rank for module, rank in ranks.items()
                             if rank != ranks[first]},
            "alpha_pattern": {module: number(alpha) for module, alpha in alphas.items()
                              if alpha != alphas[first]},
            "fan_in_fan_out": True, "lora_dropout": 0.0, "bias": "none",
            "use_rslora": False, "use_dora": False, "modules_to_save": None,
            "init_lora_weights": True, "inference_mode": True}


# ------------------------------------------------------------------------------------------------
# Reading

def read_peft(folder):
    """(arrays, settings) of the adapters in a peft folder, in tinyattn's names, as `read_lora`
    returns them for save_lora's own file: {"blocks.0.attn.q_proj.lora_A": A, ...} and
    {"blocks.0.attn.q_proj": {"rank": r, "alpha": alpha}, ...}. Errors name the folder."""
    folder = os.fspath(folder)
    config = read_config(folder)
    stored, stacked = read_weights(folder)
    adapters = lora_peft_checks.peft_adapters_fit(folder, config, stored)  # {module: (A, B, a)}
    arrays, settings = {}, {}
    for module, (A, B, alpha) in adapters.items():
        names = tinyattn_layers(module)
        parts = split(A, B, alpha, names, stacked) if len(names) == 3 else {names[0]: (A, B, alpha)}
        for name, (part_A, part_B, part_alpha) in parts.items():
            arrays[f"{name}.lora_A"], arrays[f"{name}.lora_B"] = part_A, part_B
            settings[name] = {"rank": part_A.shape[0], "alpha": part_alpha}
    return arrays, settings


def split(A, B, alpha, names, stacked):
    """{name: (A, B, alpha)} of q, k and v (`names`) from c_attn's adapter A (R, E), B (3E, R):
    as save_lora stacked them, if `stacked` (its record) gives ranks that add up to R and B is
    zero outside their blocks, each with the scale alpha / R; else a rank-R adapter on each
    third (the top of this file)."""
    E, R = B.shape[0] // 3, A.shape[0]
    blocks = [(third, stacked[name]["rank"]) for third, name in enumerate(names)
              if name in stacked]
    if blocks and sum(rank for _, rank in blocks) == R:
        parts, outside, column = {}, B.copy(), 0
        for third, rank in blocks:
            rows, columns = slice(third * E, (third + 1) * E), slice(column, column + rank)
            parts[names[third]] = (A[columns], B[rows, columns], alpha * rank / R)
            outside[rows, columns] = 0
            column += rank
        if not outside.any():
            return parts
    return {name: (A.copy(), B[third * E:(third + 1) * E], alpha)
            for third, name in enumerate(names)}


def read_config(folder):
    """adapter_config.json of `folder`, as a dict; errors name the folder."""
    path = os.path.join(folder, CONFIG)
    try:
        with open(path, encoding="utf-8") as file:
            config = json.load(file)
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"load_lora: {path!r} is not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise ValueError(f"load_lora: {path!r} holds a JSON {type(config).__name__}, not an "
                         f"object")
    return config


def read_weights(folder):
    """({key: array} of adapter_model.safetensors, the stacking save_lora recorded or {})."""
    arrays, metadata = read_file(os.path.join(folder, WEIGHTS), "load_lora", "peft adapter file",
                                 with_metadata=True)
    try:
        stacked = json.loads(metadata.get("lora", "{}"))
    except json.JSONDecodeError:
        stacked = {}
    return arrays, stacked if lora_peft_checks.stacking_readable(stacked) else {}
