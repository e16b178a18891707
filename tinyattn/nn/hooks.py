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
"""
import contextlib

from tinyattn.arguments import door
from tinyattn.nn import hooks_checks
from tinyattn.nn.module import Module, extends


def activation_points(model):
    """{full name: (layer, the layer's own name for it)} of every activation `model` names, in
    the order of its tree of modules (the layer's own first, then its children's)."""
    points = {}
    for path, layer in model.named_modules():
        for name in layer.activations:
            points[f"{path}.{name}" if path else name] = (layer, name)
    return points


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
    """
    detachers = []
    try:
        points = activation_points(self)
        for name, function in functions:
            layer, own_name = points[name]
            detachers.append(layer.attach(own_name, replacing(self, name, function)))
        yield self
    finally:
        for detach in reversed(detachers):
            detach()


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
            raise named from error
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
    the forward pass used. Under `ta.no_grad()` no graph is recorded, which is what reading needs;
    functions attached by an enclosing `with model.hooks(...)` run first, so the cache holds what
    they returned.
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

