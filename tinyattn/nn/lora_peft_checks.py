"""Chapter 4. What peft's format (nn/lora_peft.py) cannot hold or read: adapters on layers that
GPT-2's modules do not include, q, k and v of one block at different scales, a folder whose
adapters are not LoRA, ask for what LoRALinear does not do, or do not fit their config."""
import re

from tinyattn.arguments import REAL_NUMBERS
from tinyattn.arrays import numeric_array
from tinyattn.nn.pretrained import PREFIX
from tinyattn.nn.pretrained_checks import gpt2_differences

MODULE_KEY = re.compile(r"base_model\.model\.(?:transformer\.)?"
                        r"(h\.\d+\.(?:attn\.c_attn|attn\.c_proj|mlp\.c_fc|mlp\.c_proj))"
                        r"\.lora_([AB])\.weight")
# peft's settings that change what an adapter computes or which modules it adapts, and the value
# each takes when it does not: anything else is refused rather than loaded to other logits
PLAIN_SETTINGS = {"use_dora": False, "use_rslora": False, "bias": "none", "lora_bias": False,
                  "modules_to_save": None, "layers_to_transform": None, "layers_pattern": None,
                  "exclude_modules": None, "layer_replication": None,
                  "trainable_token_indices": None, "target_parameters": None,
                  "use_qalora": False, "alora_invocation_tokens": None}


def peft_can_hold(model, layers, modules):
    """save_lora(format="peft"): a GPT-2 (what save_pretrained writes, adapters aside), adapters
    (`layers`, {name: LoRALinear}) only on GPT-2's modules (`modules`, {name: (GPT-2's module,
    third of c_attn)}, None for a layer GPT-2 has no module for), and q, k and v of each block at
    one scale alpha / rank."""
    differences = gpt2_differences(model, also={type(layer) for layer in layers.values()}) \
        if hasattr(model, "blocks") and hasattr(model, "positional") else ["no GPT-2 blocks"]
    if differences:
        raise ValueError(f"save_lora: peft's format is for the GPT-2 of a transformers "
                         f"checkpoint, with learned positions, GPT-2's layers and the default "
                         f"scale; this model has {' and '.join(differences)}")
    elsewhere = [name for name, module in modules.items() if module is None]
    if elsewhere:
        raise ValueError(f"save_lora: peft's format holds adapters on GPT-2's modules (the "
                         f"attention's q_proj, k_proj, v_proj in c_attn, out_proj as c_proj, the "
                         f"feed-forward's up and down as mlp.c_fc and mlp.c_proj); "
                         f"{', '.join(elsewhere)} has no place there")
    scales = {}
    for name, layer in layers.items():
        module, third = modules[name]
        if third is not None:
            scales.setdefault(module, {})[name] = layer.scale
    for module, of_module in scales.items():
        if len(set(of_module.values())) > 1:
            shown = ", ".join(f"{name} {scale:g}" for name, scale in of_module.items())
            raise ValueError(f"save_lora: q, k and v are one module in GPT-2 ({module}), with one "
                             f"scale alpha / rank, but their adapters' scales differ: {shown}")


def peft_adapters_fit(folder, config, stored):
    """load_lora of a peft folder: LoRA of plain settings (PLAIN_SETTINGS), keys of GPT-2's
    modules alone, each module's A (R, in) and B (out, R) (c_attn's out three times its in), R
    its rank in the config, the module one of its target_modules. Returns {module: (A, B,
    alpha)}, modules in GPT-2's names ("h.0.attn.c_attn")."""
    where = f"load_lora: the peft folder {str(folder)!r}"
    if config.get("peft_type") != "LORA":
        raise ValueError(f"{where} holds a {config.get('peft_type')!r} adapter, not LoRA")
    unplain = [f"{key} {config[key]!r}" for key, plain in PLAIN_SETTINGS.items()
               if config.get(key) not in (plain, None, [], {})]
    if unplain:
        raise ValueError(f"{where} asks for what LoRALinear does not do: {', '.join(unplain)}")
    parts = {}
    for key, array in stored.items():
        match = MODULE_KEY.fullmatch(key)
        if match is None:
            raise ValueError(f"{where} holds {key}: an adapter on a module tinyattn's GPT-2 has "
                             f"no LoRA place for (GPT-2's attn.c_attn, attn.c_proj, mlp.c_fc and "
                             f"mlp.c_proj take adapters)")
        parts.setdefault(match.group(1), {})[match.group(2)] = numeric_array(array, key)
    adapters = {}
    for module, arrays in parts.items():
        if set(arrays) != {"A", "B"} or arrays["A"].ndim != 2 or arrays["B"].ndim != 2 \
                or arrays["A"].shape[0] != arrays["B"].shape[1]:
            shapes = {part: array.shape for part, array in sorted(arrays.items())}
            raise ValueError(f"{where}: {module}'s lora_A and lora_B are {shapes}, not A (r, in) "
                             f"and B (out, r)")
        A, B = arrays["A"], arrays["B"]
        if module.endswith("c_attn") and B.shape[0] != 3 * A.shape[1]:
            raise ValueError(f"{where}: {module}'s B is {B.shape}, A {A.shape}: c_attn's output "
                             f"is three times its input (q, k and v)")
        rank, alpha = pattern_value(config, "rank_pattern", "r", module), \
            pattern_value(config, "alpha_pattern", "lora_alpha", module)
        if rank != A.shape[0]:
            raise ValueError(f"{where}: {module} has adapters of rank {A.shape[0]}, but its "
                             f"config says rank {rank!r}")
        if isinstance(alpha, bool) or not isinstance(alpha, REAL_NUMBERS) or alpha < 0:
            raise ValueError(f"{where}: {module}'s lora_alpha is {alpha!r}, not a number >= 0")
        if not targeted(config.get("target_modules"), PREFIX + module):
            raise ValueError(f"{where} holds adapters for {module}, which its target_modules "
                             f"{config.get('target_modules')!r} do not name: peft would not "
                             f"load them")
        adapters[module] = (A, B, float(alpha))
    if not adapters:
        raise ValueError(f"{where} holds no adapters")
    return adapters


def pattern_value(config, pattern, default, module):
    """What peft takes for `module` from a per-module pattern ({regex: value}, matched as the end
    of the module's name, as peft's get_pattern_key) or else the config's `default`."""
    for key, value in (config.get(pattern) or {}).items():
        if re.match(rf"(.*\.)?({key})$", PREFIX + module):
            return value
    return config.get(default)


def targeted(targets, name):
    """peft's rule: a str is a regular expression the module's whole name matches; a list names
    modules by their name or its end (after a dot)."""
    if isinstance(targets, str):
        return re.fullmatch(targets, name) is not None
    return any(name == target or name.endswith("." + target) for target in targets or ())


def stacking_readable(stacked):
    """The record of how save_lora stacked q, k and v: {name: {"rank": int, ...}}."""
    return isinstance(stacked, dict) and all(
        isinstance(setting, dict) and isinstance(setting.get("rank"), int)
        and setting["rank"] >= 1 for setting in stacked.values())
