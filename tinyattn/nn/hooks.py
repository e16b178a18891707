"""Chapter 4. Hooks and the activation cache, to read and change what a model computes inside.

Interpretability asks what a trained model computes: which head attends where, what the residual
stream holds after each layer, what changes if one head is switched off. Chapter 1's layers name
their activations as they compute them (`Module.hook`): a MultiHeadAttention its "q", "k", "v"
(B, H, T, D), "weights" (B, H, L, S), "heads" (B, H, L, D) and "out" (B, L, E); a
TransformerBlock its residual stream "resid_pre", "resid_mid", "resid_post" and its feed-forward's
"mlp_out" (B, T, E); a CausalTransformer its "embed" and "final" (B, T, E). Seen from the model,
an activation's full name is the path to its layer and its own name, as a parameter's is:

    embed                         token embeddings with their positions (B, T, E)
    blocks.0.resid_pre            what block 0 reads (B, T, E)
    blocks.0.attn.weights         its attention weights (B, H, T, T)
    blocks.0.attn.heads           each head's output before the heads are merged (B, H, T, D)
    blocks.0.resid_post           what it writes back: the next block's resid_pre (B, T, E)
    ...
    final                         the last LayerNorm's output, which the head turns into logits

This file adds to every Module the two methods of TransformerLens (Nanda & Bloom 2022), written
small, and `activation_names()`, which lists the names:

    logits, cache = model.run_with_cache(ids)      # cache["blocks.1.attn.weights"]: an array
    with model.hooks({"blocks.1.attn.heads": ablate_head(0)}):    # tinyattn.interpretability
        logits = model(ids)                        # head 0 of block 1 switched off

A function given to `hooks` gets the activation, a Tensor, and either reads it (returns None) or
replaces it (returns a Tensor of the same shape and dtype, which the rest of the forward pass
uses). A replacement is computed with tinyattn's ops, so gradients flow through it: back into the
activation, if the replacement is made from it, and into any tensor it was made from.

Nothing here changes a forward pass: `hooks` attaches each function to its layer
(`Module.attach`) when the `with` block starts, and detaches it when the block ends, also when
the block raised. A model outside `with model.hooks(...)` is exactly the model of chapter 1, whose
`hook` lines return x after one attribute lookup; `python -m tinyattn bench 7` measures a
training step with and without.

One activation is computed only when it is asked for: each head's result,

    blocks.0.attn.result          what each head writes into the residual stream (B, T, H, E)

head h's output (B, T, D) times its slice of out_proj's weight, the columns h*D ... (h+1)*D - 1,
without the bias. Summed over the heads, plus out_proj's bias, it is the layer's "out": the
residual stream is a sum of what each head wrote (tinyattn/circuits.py reads it so). It is H
times the size of "out", so chapter 1's attention has no hook line for it; when a function or
the cache asks for it, `hooks` attaches two functions to the attention (`head_results`, below):
one on "heads" keeps them, one on "out" computes the result from them and out_proj's weight,
gives it to the function, and, if the function replaced it, makes the layer's output the sum
over heads of the replacement, plus out_proj's bias.
"""
import contextlib

from tinyattn.arguments import door
from tinyattn.nn import hooks_checks
from tinyattn.nn.lora import weight_of
from tinyattn.nn.module import Module, extends
from tinyattn.nn.multi_head_attention import MultiHeadAttention

HEADED = ("q", "k", "v", "weights", "heads")     # MultiHeadAttention's activations (B, H, T, ...)


def activation_points(model):
    """{full name: (layer, the layer's own name for it)} of every activation `model` names, in
    the order of its tree of modules (the layer's own first, then its children's)."""
    points = {}
    for path, layer in model.named_modules():
        for name in named_by(layer):
            points[f"{path}.{name}" if path else name] = (layer, name)
    return points


def named_by(layer):
    """The activations `layer` names: those of its `hook` lines, and after an attention's "heads"
    each head's "result", which is computed only when asked for (`head_results`)."""
    names = list(layer.activations)
    if isinstance(layer, MultiHeadAttention):
        names.insert(names.index("heads") + 1, "result")
    return names


def head_axis(layer, name):
    """The axis of the heads in the activation `name` of `layer`: 1 for an attention's q, k, v,
    weights and heads (B, H, ...), 2 for its result (B, T, H, E), None for the others."""
    if name == "result" and isinstance(layer, MultiHeadAttention):
        return 2
    return 1 if name in HEADED else None


@extends(Module)
def activation_names(self):
    """The full names of every activation this model names, in the order of its modules."""
    return list(activation_points(self))


@extends(Module)
@contextlib.contextmanager
@door(hooks_checks.hook_functions_fit)
def hooks(self, functions):
    """A `with` block during which each function sees its activation in every forward pass.

    functions: {name: function} or a list of (name, function) pairs (a name may then come twice:
    its functions run in the order given), names as `activation_names()` lists them. A function
    gets the activation, a Tensor; it returns None to leave it as it is, or a Tensor of the same
    shape and dtype to replace it. On leaving the block every function is detached, also when the
    block raised.

    An attention's "result" is computed from its "heads" as the functions given for them left
    them (here, or by an enclosing `with`), before any function given here for its "out"; a
    function that works on one head (`ablate_head`) is told where the result's head axis is.
    """
    detachers = []
    try:
        points = activation_points(self)
        attachments = []        # (when, layer, the layer's name, function): 0 first, 2 last
        for name, function in functions:
            layer, own_name = points[name]
            if hasattr(function, "with_head_axis"):        # ablate_head's: told where heads are
                function = function.with_head_axis(head_axis(layer, own_name))
            run = replacing(self, name, function)
            if own_name == "result":
                keep_heads, through_result = head_results(layer, run)
                attachments += [(0, layer, "out", through_result), (2, layer, "heads", keep_heads)]
            else:
                attachments.append((1, layer, own_name, run))
        for _, layer, own_name, run in sorted(attachments, key=lambda attachment: attachment[0]):
            detachers.append(layer.attach(own_name, run))
        yield self
    finally:
        for detach in reversed(detachers):
            detach()


def head_results(attention, function):
    """The two functions that give `function` the attention's result (B, T, H, E): the first,
    for its "heads", keeps them; the second, for its "out", computes the result from them, gives
    it to `function` and returns the output the rest of the pass uses: "out" as it was if the
    result was left as it is, else the sum over heads of the replacement, plus out_proj's bias.

    With W = out_proj's weight (E, H*D) (W + (alpha / rank) B A for LoRA, `weight_of`), head h
    owns its columns h*D ... (h+1)*D - 1 (the heads are merged side by side), so

        out = merged @ W^T + bias = sum_h heads[h] @ W[:, h*D:(h+1)*D]^T + bias
        result[..., h, :] = heads[h] @ W[:, h*D:(h+1)*D]^T                    (B, T, E)
    """
    kept = []

    def keep_heads(heads):
        kept.append(heads)
        return heads

    def through_result(out):
        heads = kept.pop()                                              # (B, H, T, D)
        B, H, T, D = heads.shape
        E = attention.embed_dim
        W = weight_of(attention.out_proj)                               # (E, H * D)
        per_head = W.reshape(E, H, D).transpose(1, 2, 0)                # (H, D, E)
        rows = heads.transpose(0, 2, 1, 3).reshape(B, T, H, 1, D)       # (B, T, H, 1, D)
        result = (rows @ per_head).reshape(B, T, H, E)                  # (B, T, H, E)
        replaced = function(result)                                     # (B, T, H, E)
        if replaced is result:                                          # it was only read
            return out
        bias = attention.out_proj.bias
        summed = replaced.sum(axis=2)                                   # (B, T, E)
        return summed if bias is None else summed + bias                # (B, T, E)
    return keep_heads, through_result


def replacing(model, name, function):
    """`function` as `Module.attach` wants it: the activation in, the activation (or what replaces
    it) out; what the function returns is checked at every call.

    The function sees the activation read-only: the rest of the forward pass reads its array,
    but the graph's backward would not know of a change made in place (the gradients would
    disagree with the outputs), so a write into `x.data` is an error naming the activation; a
    function that changes an activation returns its replacement. An error the function raises
    names the activation too."""
    def run(x):
        writeable = x.data.flags.writeable
        x.data.flags.writeable = False
        try:
            result = function(x)
        except (ValueError, TypeError) as error:
            named = hooks_checks.named_for(name, error)
            if named is error:
                raise
            raise named from None           # said once, naming the activation
        finally:
            x.data.flags.writeable = writeable
        if result is None:                                  # it read the activation
            return x
        hooks_checks.replacement_fits(model, name, x, result)
        return result
    return run


@extends(Module)
def run_with_cache(self, *inputs, names=None, **options):
    """(what `self(*inputs, **options)` returns, cache): cache is {name: NumPy array} of the
    activations the forward pass computed, in the order it computed them; `names` (a list) keeps
    only those. The arrays are the activations' own `.data`, not copies: the values the rest of
    the forward pass used. (Every activation includes each attention's "result", H times the size
    of its output: `names` can leave it out.) Under `ta.no_grad()` no graph is recorded, which is
    what reading needs; functions attached by an enclosing `with model.hooks(...)` run first, so
    the cache holds what they returned.
    """
    names = hooks_checks.names_to_cache(self, names)
    cache = {}

    def keeper(name):
        def keep(x):
            hooks_checks.computed_once(self, name, cache)
            cache[name] = x.data
        return keep

    with self.hooks([(name, keeper(name)) for name in names]):
        output = self(*inputs, **options)
    return output, cache

