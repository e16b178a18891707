"""The layers' checks: what makes an argument of a layer in tinyattn.nn bad.

A layer's door names them, `@door(checks.heads_fit, embed_dim=at_least(1), ...)` above its
`__init__` or `forward` (tinyattn/arguments.py says how doors work). They run once per user call;
each gets the arguments by name (`self` first, for a method) and raises a ValueError or TypeError
saying what does not fit, with the layer's name put in front by the door.

In the order of the files they serve: module, layers, multi_head_attention, transformer (chapter
1); causal_transformer and generation, decoder, experts (chapter 2); pretrained (chapter 3);
hooks and lora (chapter 4: besides their doors' checks, those their functions call once they have
found the layers or read the file they check, as load_state_dict calls state_fits).
"""
from collections.abc import Mapping

import numpy as np

from tinyattn import arguments
from tinyattn.arguments import at_least, shapes
from tinyattn.engine import Tensor
from tinyattn.functional.checks import attention_mask
from tinyattn.plumbing import TensorIndexError, data_of, numeric_array


# ------------------------------------------------------------------------------------------------
# Chapter 1

def state_fits(module, state):
    """A state dict for `module`: a mapping with its parameters' names, arrays of their shapes and
    of numbers that fit their dtype. Returns {name: the array converted to that dtype}."""
    if not isinstance(state, Mapping):
        raise TypeError(f"load_state_dict: expected a dict of arrays, "
                        f"got {type(state).__name__}")
    parameters = dict(module.named_parameters())
    missing, unexpected = parameters.keys() - state.keys(), state.keys() - parameters.keys()
    if missing or unexpected:
        raise ValueError(f"load_state_dict: missing {sorted(missing)}, "
                         f"unexpected {sorted(unexpected)}")
    arrays = {}
    for name, parameter in parameters.items():
        array = numeric_array(data_of(state[name]), f"load_state_dict: {name}")
        if array.shape != parameter.shape:
            raise ValueError(f"load_state_dict: {name} has shape {parameter.shape}, "
                             f"the state has {array.shape}")
        try:
            with np.errstate(over="raise"):
                arrays[name] = array.astype(parameter.dtype)
        except FloatingPointError:
            raise ValueError(f"load_state_dict: {name} holds numbers too large for "
                             f"{parameter.dtype}") from None
    return arrays


def sizes_at_least_0(normalized_shape, **_):
    """normalized_shape: a size, or a tuple of them."""
    sizes = normalized_shape if isinstance(normalized_shape, (tuple, list)) else [normalized_shape]
    for size in sizes:
        at_least(0)("normalized_shape", size)


def normalized_axes_fit(self, x):
    """x ends with the normalized_shape."""
    sizes = ", ".join(map(str, self.normalized_shape))
    shapes(dtype=self.dtype, x=(x, f"(..., {sizes})"))


def ids_in_the_table(self, ids):
    """Embedding: ids are integers in [0, num_embeddings)."""
    arguments.ids("ids", ids, self.num_embeddings, "embeddings")


def heads_fit(embed_dim, num_heads=1, rope=False, positional=None, **_):
    """num_heads divides embed_dim, into an even head_dim with rope (it rotates pairs), asked for
    as rope=True or, for a whole model, positional="rope"."""
    rope = rope or positional == "rope"
    if embed_dim % num_heads:
        raise ValueError(f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}")
    if rope and (embed_dim // num_heads) % 2:
        raise ValueError(f"rope rotates pairs of features, so it needs an even head_dim; got "
                         f"embed_dim {embed_dim} / num_heads {num_heads} = "
                         f"{embed_dim // num_heads}")


def key_value_and_mask_fit(self, query, key=None, value=None, attn_mask=None, is_causal=False):
    """MultiHeadAttention: key and value (default: query) are (B, S, E) like the query (B, L, E),
    and attn_mask broadcasts to the scores (B, H, L, S)."""
    key = query if key is None else key
    shapes(dtype=self.dtype, layer=self, query=(query, "(B, L, embed_dim)"),
           key=(key, "(B, S, embed_dim)"), value=(key if value is None else value,
                                                  "(B, S, embed_dim)"))
    (B, L, _), S = query.shape, key.shape[1]
    if attn_mask is not None and self.hooked and "k" in self.hooked:   # a function attached to
        S = numeric_array(data_of(attn_mask), "attn_mask").shape[-1]    # the keys may add some
    attention_mask(attn_mask, (B, self.num_heads, L, S), query.dtype)


def block_mask_fits(self, x, attn_mask=None, **_):
    """TransformerBlock: attn_mask broadcasts to the scores of its self-attention (B, H, T, T)."""
    B, T, _ = x.shape
    attention_mask(attn_mask, (B, self.attn.num_heads, T, T), x.dtype)


# ------------------------------------------------------------------------------------------------
# Chapter 2

def within_the_table(self, x, offset=0):
    """PositionalEncoding: positions offset ... offset + T - 1 are rows of the table."""
    if offset + x.shape[-2] > self.max_len:
        raise ValueError(f"sequence length {offset + x.shape[-2]} exceeds max_len {self.max_len}")


def token_ids(model, ids):
    """ids of a language model: (B, T) integers in [0, vocab_size), T >= 1, given as an array, a
    list (of rows of one length) or a tensor. Returns their shape."""
    try:
        shape = np.shape(data_of(ids))
    except ValueError:                  # NumPy's "inhomogeneous shape": rows of other lengths
        raise ValueError("ids: the rows have different lengths, but a batch (B, T) holds "
                         "sequences of one length T: pad them to one length, or give them one "
                         "at a time") from None
    arguments.ids("ids", ids, model.embed.num_embeddings, "tokens")
    if len(shape) != 2 or shape[1] == 0:
        raise ValueError(f"ids must be (B, T) with T >= 1, got shape {shape}")
    return shape


def ids_and_cache_fit(self, ids, cache=None, **_):
    """CausalTransformer.forward: token ids; cache None or a KVCache of this model, of as many
    sequences as ids, in the model's dtype; and with absolute positions, the sequence (cached
    tokens and ids) no longer than the table."""
    B, T = token_ids(self, ids)
    start = 0
    if cache is not None:
        if getattr(cache, "model", None) is not self:
            raise TypeError(f"cache must be a KVCache of this model (from model.empty_cache()), "
                            f"got {type(cache).__name__}")
        start = len(cache)
        if start and cache.batch_size != B:
            raise ValueError(f"the cache holds the keys of {cache.batch_size} sequences, but ids "
                             f"is a batch of {B} (shape {(B, T)})")
    if self.positional in ("sinusoidal", "learned") and start + T > self.max_len:
        called = " (n_positions in a GPT-2 config.json)" if self.positional == "learned" else ""
        raise ValueError(f"a sequence of {start + T} tokens is longer than max_len "
                         f"{self.max_len}, the length of the {self.positional} position "
                         f"table{called}")


def prompt_fits(self, ids, **_):
    """CausalTransformer.generate: token ids (the prompt)."""
    token_ids(self, ids)


def memory_mask_fits(self, x, memory, memory_mask=None, **_):
    cross_scores = (len(x), self.cross_attn.num_heads, x.shape[1], memory.shape[1])  # (B, H, L, S)
    attention_mask(memory_mask, cross_scores, x.dtype, "memory_mask")


def sequence_fits(model, name, ids, vocab_size):
    """ids (B, T) within the vocabulary and max_len."""
    arguments.ids(name, ids, vocab_size, "tokens")
    shape = np.shape(data_of(ids))
    if len(shape) != 2 or shape[1] > model.max_len:
        raise ValueError(f"{name} must have shape (B, T) with T <= max_len {model.max_len}, got "
                         f"{shape}")


def src_mask_fits(src_mask, shape):
    """src_mask None, or booleans (True = a real token) of the source's shape (B, S)."""
    if src_mask is None:
        return
    src_mask = np.asarray(src_mask)
    if src_mask.dtype != np.bool_:
        raise TypeError(f"src_mask must be booleans (True = a real token), got dtype "
                        f"{src_mask.dtype}")
    if src_mask.shape != tuple(shape):
        raise ValueError(f"src_mask must have the source's shape (B, S) = {tuple(shape)}, got "
                         f"{src_mask.shape}")


def source_and_target_fit(self, src_ids, tgt_ids, src_mask=None, return_weights=False):
    source_fits(self, src_ids, src_mask)
    sequence_fits(self, "tgt_ids", tgt_ids, self.tgt_vocab)


def source_fits(self, src_ids, src_mask=None):
    sequence_fits(self, "src_ids", src_ids, self.src_vocab)
    src_mask_fits(src_mask, np.shape(data_of(src_ids)))


def target_fits(self, tgt_ids, memory, src_mask=None, return_weights=False):
    sequence_fits(self, "tgt_ids", tgt_ids, self.tgt_vocab)
    src_mask_fits(src_mask, memory.shape[:2])


def start_and_source_fit(self, src_ids, max_new_tokens, start_id, src_mask=None):
    if start_id >= self.tgt_vocab:
        raise TensorIndexError(f"start_id must lie in [0, {self.tgt_vocab}) "
                               f"({self.tgt_vocab} target tokens), got {start_id}")
    if 1 + max_new_tokens > self.max_len:
        raise ValueError(f"1 + max_new_tokens = {1 + max_new_tokens} target tokens exceed "
                         f"max_len {self.max_len}")
    source_fits(self, src_ids, src_mask)



def top_k_of_the_experts(num_experts, top_k=2, **_):
    if top_k > num_experts:
        raise ValueError(f"top_k {top_k} is more than num_experts {num_experts}")


def some_tokens(self, x):
    if x.size == 0:
        raise ValueError(f"needs at least one token, got an input of shape {x.shape}")


# ------------------------------------------------------------------------------------------------
# Chapter 3

def gpt2_shaped(self, folder):
    """save_pretrained: what GPT-2's layout can hold (nn/pretrained.py): learned positions, a tied
    head without bias, attention scaled by 1/sqrt(head_dim) or not at all."""
    differences = [what for what, differs in (
        (f"{self.positional} positions (not learned)", self.positional != "learned"),
        ("an output head of its own (not tied to the embedding)", not self.tied_head),
        (f"scale {self.blocks[0].attn.scale} (not None or 1.0)",
         self.blocks[0].attn.scale not in (None, 1.0))) if differs]
    if differences:
        raise ValueError(f"GPT-2's layout holds a model with learned positions, a head tied to "
                         f"the embedding and the default scale; this one has "
                         f"{' and '.join(differences)}")


# ------------------------------------------------------------------------------------------------
# Chapter 4

def hook_functions_fit(self, functions):
    """Module.hooks: {name: function} or [(name, function)], each name one of the model's
    activations and each function callable. Returns the pairs, as a list."""
    if isinstance(functions, Mapping):
        pairs = list(functions.items())
    elif isinstance(functions, (list, tuple)):
        pairs = list(functions)
    else:
        raise TypeError(f"functions must be a dict {{name: function}} or a list of (name, "
                        f"function) pairs, got {type(functions).__name__}")
    for pair in pairs:
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
            raise TypeError(f"functions must be a dict {{name: function}} or a list of (name, "
                            f"function) pairs, got the item {pair!r}")
        if not callable(pair[1]):
            raise TypeError(f"the function for {pair[0]!r} must be callable, got "
                            f"{type(pair[1]).__name__}")
    activations_known(self, [name for name, _ in pairs])
    return {"functions": pairs}


def names_to_cache(self, names):
    """Module.run_with_cache: None (every activation) or a list of the model's activation names.
    Returns the names. (run_with_cache passes its inputs on, so this check names it itself.)"""
    if names is None:
        return self.activation_names()
    names_known(self, names, f"{type(self).__name__}.run_with_cache")
    return list(names)


def names_known(model, names, function):
    """A list of the model's activation names; errors begin with `function`."""
    if isinstance(names, str) or not isinstance(names, (list, tuple)):
        raise TypeError(f"{function}: names must be a list of activation names, got {names!r}")
    try:
        activations_known(model, names)
    except ValueError as error:
        raise ValueError(f"{function}: {error}") from None


def activations_known(model, names):
    """Every name one of `model.activation_names()`; the error lists them."""
    known = model.activation_names()
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"no activation {', '.join(map(repr, unknown))}; this "
                         f"{type(model).__name__}'s activations are {listed(known) or 'none'}")


def listed(names):
    """The names in one line, those of numbered layers once per layer kind:
    'embed, blocks.N.resid_pre, blocks.N.attn.q, final (N = 0 ... 3)'."""
    numbers, patterns = set(), []
    for name in names:
        parts = name.split(".")
        numbered = [i for i, part in enumerate(parts) if part.isdigit()][:1]
        for i in numbered:
            numbers.add(int(parts[i]))
            parts[i] = "N"
        if ".".join(parts) not in patterns:
            patterns.append(".".join(parts))
    if not numbers:
        return ", ".join(patterns)
    low, high = min(numbers), max(numbers)
    span = f"N = {low} ... {high}" if len(numbers) == high - low + 1 else f"N in {sorted(numbers)}"
    return f"{', '.join(patterns)} ({span})"


def replacement_fits(model, name, activation, replacement):
    """What a function given to Module.hooks returned in place of the activation `name`: a
    Tensor of the activation's shape and dtype. (Called in the forward pass: it names hooks.)"""
    where = f"{type(model).__name__}.hooks: the function on {name!r}"
    if not isinstance(replacement, Tensor):
        raise TypeError(f"{where} returned a {type(replacement).__name__}: return None to leave "
                        f"the activation as it is, or a Tensor to replace it (ta.tensor(array) "
                        f"for numbers of your own: gradients stop there)")
    if replacement.shape != activation.shape or replacement.dtype != activation.dtype:
        raise ValueError(f"{where} returned a {replacement.dtype} tensor of shape "
                         f"{replacement.shape} for an activation {activation.dtype} "
                         f"{activation.shape}: a replacement has the activation's shape and dtype")


def computed_once(model, name, cache):
    """Module.run_with_cache: an activation computed once per forward pass (a layer called twice
    in one pass would compute its activations twice, under one name)."""
    if name in cache:
        raise ValueError(f"{type(model).__name__}.run_with_cache: the activation {name!r} was "
                         f"computed twice in one forward pass (its layer was called twice); a "
                         f"cache holds one array per name")


def lens_model_fits(model):
    """logit_lens: a language model of `blocks`, with a final `ln` and a `head`."""
    if not all(hasattr(model, part) for part in ("blocks", "ln", "head")):
        raise TypeError(f"logit_lens: the model must be a language model with blocks, a final "
                        f"LayerNorm `ln` and a `head` (an nn.CausalTransformer), got "
                        f"{type(model).__name__}")


def head_in_range(function, head, x):
    """A head of an activation (B, H, ...)."""
    if x.ndim < 2 or not -x.shape[1] <= head < x.shape[1]:
        raise ValueError(f"{function}: head {head} of an activation of shape {x.shape}, which "
                         f"has {x.shape[1] if x.ndim >= 2 else 'no'} heads on axis 1")


def patching_fits(model, source, metric, names, function):
    """activation_patching and attribution_patching: names of the model's activations (a list),
    a source cache (a dict) holding each, a callable metric."""
    names_known(model, names, function)
    if not isinstance(source, Mapping):
        raise TypeError(f"{function}: source must be a cache, {{name: array}} (from "
                        f"model.run_with_cache), got {type(source).__name__}")
    missing = [name for name in names if name not in source]
    if missing:
        raise ValueError(f"{function}: source holds no {', '.join(map(repr, missing))}: cache "
                         f"them in the clean run (run_with_cache with names=None keeps all)")
    if not callable(metric):
        raise TypeError(f"{function}: metric must be a function of the logits, got "
                        f"{type(metric).__name__}")


def source_shapes_fit(source, activations, function):
    """Each source array of the shape and dtype the activation has in the patched run."""
    for name, activation in activations.items():
        given = np.asarray(source[name])
        if given.shape != activation.shape or given.dtype != activation.dtype:
            raise ValueError(f"{function}: source[{name!r}] is {given.dtype} {given.shape}, but "
                             f"the activation is {activation.dtype} {activation.shape} on these "
                             f"ids: the clean and corrupted inputs must have one shape")


def metric_number(function, value):
    """What a metric returned: a number, or a one-element Tensor; as a float."""
    array = np.asarray(value.data if isinstance(value, Tensor) else value)
    if array.size != 1 or array.dtype.kind not in "biuf":
        raise ValueError(f"{function}: the metric must return one number (or a one-element "
                         f"Tensor), got {type(value).__name__} of shape {array.shape}")
    return float(array.reshape(()))


def differentiable_metric(function, value):
    """attribution_patching's metric: a one-element Tensor, computed with a graph."""
    if not isinstance(value, Tensor) or value.size != 1:
        raise ValueError(f"{function}: the metric must return a one-element Tensor computed "
                         f"from the logits, to differentiate; got {type(value).__name__} of "
                         f"shape {np.shape(value)}")
    if not value.requires_grad:
        raise ValueError(f"{function}: the metric's value has no graph to differentiate: call "
                         f"{function} outside ta.no_grad(), with a metric made of tinyattn ops")


# (This file cannot import nn.layers or nn.module, which import it: a Linear is told by what LoRA
# uses of it, its sizes and a 2-D weight; a Module by its tree of children.)

def a_module(name, value):
    """An nn.Module."""
    if not callable(getattr(value, "named_children", None)):
        raise TypeError(f"{name} must be an nn.Module, got {type(value).__name__}")


def patterns(name, value):
    """A shell-style pattern ("*q_proj"), or a non-empty list or tuple of them."""
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, (list, tuple)) or not values or \
            not all(isinstance(pattern, str) for pattern in values):
        raise TypeError(f"{name} must be a pattern of layer names such as '*q_proj', or a list "
                        f"of them, got {value!r}")


def rank_fits(linear, rank, where="", caller=""):
    """The rank of an adapter is at most min(in_features, out_features): B A can have no higher
    rank, so more would only add parameters."""
    if rank > min(linear.in_features, linear.out_features):
        raise ValueError(f"{caller}rank {rank} is more than min(in_features, out_features) = "
                         f"min({linear.in_features}, {linear.out_features}){where}: B A (out, in) "
                         f"has no higher rank")


def a_linear_to_adapt(self, linear, rank, alpha=None):
    """LoRALinear: `linear` is a Linear without an adapter, and the rank fits it."""
    weight = getattr(linear, "weight", None)
    if not (hasattr(linear, "in_features") and isinstance(weight, Tensor) and weight.ndim == 2):
        raise TypeError(f"linear must be an nn.Linear, got {type(linear).__name__}")
    if hasattr(linear, "lora_A"):
        raise ValueError("linear already has an adapter (it is a LoRALinear): merge() it first, "
                         "or give its own rank to it")
    rank_fits(linear, rank)


def layers_to_adapt(chosen, rank, targets, linears):
    """add_lora: the patterns chose some Linear layers (`chosen`, of all the model's `linears`),
    none with an adapter already, each wide enough for the rank; both are {name: layer}."""
    if not chosen:
        names = list(linears)
        shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
        raise ValueError(f"add_lora: no Linear layer of the model matches targets {targets!r}; "
                         f"its Linear layers are {shown or 'none'}")
    for name, layer in chosen.items():
        if hasattr(layer, "lora_A"):
            raise ValueError(f"add_lora: {name} already has an adapter; merge_lora(model) first "
                             f"to adapt a model again")
        rank_fits(layer, rank, f" of {name}", "add_lora: ")


def adapters_fit(path, arrays, settings, linears):
    """load_lora: the file's adapters fit the model's Linear layers `linears` ({name: layer}):
    a rank and alpha for each layer it names, and that layer's A (rank, in) and B (out, rank),
    no other array; a layer adapted already has the same rank. Returns the arrays converted to
    the layers' dtype. Errors name the file."""
    where = f"load_lora: the file {str(path)!r}"
    expected = {f"{name}.{part}" for name in settings for part in ("lora_A", "lora_B")}
    if set(arrays) != expected:
        raise ValueError(f"{where} holds arrays {sorted(arrays)} but names the adapters of "
                         f"{sorted(settings)}: it was not written by save_lora")
    converted = {}
    for name, setting in settings.items():
        layer = linears.get(name)
        if layer is None:
            raise ValueError(f"{where} adapts {name}, which is no Linear layer of this model")
        rank, alpha = (setting.get("rank"), setting.get("alpha")) if isinstance(setting, dict) \
            else (None, None)
        try:
            at_least(1)("its rank", rank)
            arguments.between(0)("its alpha", alpha)
            rank_fits(layer, rank, f" of {name}")
        except (TypeError, ValueError) as error:
            raise type(error)(f"{where}, adapting {name}: {error}") from None
        if getattr(layer, "rank", rank) != rank:
            raise ValueError(f"{where} has adapters of rank {rank} for {name}, which has one of "
                             f"rank {layer.rank} already")
        for part, shape in (("lora_A", (rank, layer.in_features)),
                            ("lora_B", (layer.out_features, rank))):
            array = numeric_array(arrays[f"{name}.{part}"], f"{where}: {name}.{part}")
            if array.shape != shape:
                raise ValueError(f"{where}: {name}.{part} has shape {array.shape}, the layer's "
                                 f"is {shape}")
            converted[f"{name}.{part}"] = array.astype(layer.weight.dtype)
    return converted
