"""Chapter 4. What a trained model computes, read through the activations chapter 1's layers name
(`model.run_with_cache` and `model.hooks`, nn/hooks.py): the logit lens, ablation, activation
patching and attribution patching; and, from circuits.py, the residual stream read as a sum
(`residual_components`), direct logit attribution, the QK and OV circuits of a head and the
composition scores between heads (Elhage et al. 2021), all importable from here.

The logit lens (nostalgebraist 2020, "interpreting GPT: the logit lens"). A pre-LN transformer
adds every block's output to one residual stream (B, T, E) and reads its prediction off the end,
logits = head(ln(x)). Reading it off earlier, through the same final LayerNorm and head, gives
what the model would predict if it stopped there: `logit_lens` does so for the embeddings and
for every block's resid_post. The last row is the model's own logits; how early the others
approach them says where the prediction is made.

Ablation. Setting a head's output to zero (`ablate_head`, through `model.hooks`) removes its
contribution to the residual stream, as if its columns of out_proj were zero; what the loss
loses says what the head was for (Olsson et al. 2022 ablate induction heads so).

Activation patching (Meng et al. 2022, "Locating and Editing Factual Associations in GPT";
Wang et al. 2022, "Interpretability in the Wild"). Two inputs of one shape: a clean one, on
which the model does the task, and a corrupted one, changed where it matters, on which it cannot.
Run the corrupted input, but with one activation (a layer's output, one head's, at one position)
taken from the clean run: metric(patched) - metric(corrupted) measures how much of the clean
behaviour that activation carries. It costs one forward pass per activation, head and position.

Attribution patching (Nanda 2023, "Attribution Patching: Activation Patching At Industrial
Scale"). With the metric M seen as a function of one activation a, patching a from its
corrupted value a* to its clean value a_clean changes M by

    M(a_clean) - M(a*)  ~  (a_clean - a*) . dM/da at a*           (first-order Taylor)

and one backward pass from M on the corrupted run gives dM/da for every activation at once. So
one forward and one backward pass estimate the patching of every head and position of every
layer; a head's estimate is the sum of the products over its elements.

When the estimate is wrong: the error is the Taylor remainder, about
(1/2) (a_clean - a*)^T (d^2 M/da^2) (a_clean - a*): small when the two runs' activations are
close or when M is nearly linear between them, and not otherwise. Three places where a
transformer is far from linear:
- a softmax whose weights move from one key to another: an induction head's query finds the key
  it looks for in the clean run and not in the corrupted one, so patching moves its attention
  across the sequence, far beyond what the slope at a* predicts;
- a saturated softmax (weights near 0 or 1): its gradient is near zero, so the estimate is near
  zero even where patching changes the weights completely (tests/test_interpretability.py builds
  one);
- LayerNorm divides by the norm of the stream: a patch that changes that norm much rescales
  everything after it.
The tests compare the two on small random models within a stated tolerance, and check that the
error shrinks as the square of the difference; demo 15 compares them on a trained induction
circuit, where they disagree.
"""
import numpy as np

from tinyattn import interpretability_checks
from tinyattn.arguments import door, integer
from tinyattn.arrays import data_of
from tinyattn.engine import Tensor, no_grad
from tinyattn.nn.hooks import activation_points, head_axis
from tinyattn.ops import where
from tinyattn.circuits import (attribution_names, composition_scores,  # noqa: F401  (here too)
                               direct_logit_attribution, ov_circuit, qk_circuit,
                               residual_components)


# ------------------------------------------------------------------------------------------------
# The logit lens

@no_grad()
def logit_lens(model, ids, positions=None):
    """What each layer would predict: (num_layers + 1, B, T, vocab_size) logits, a NumPy array.

    Row 0 reads the embeddings ("embed"), row i the residual stream after block i - 1
    ("blocks.{i - 1}.resid_post"), each through the model's final LayerNorm and head
    (`model.head(model.ln(x))`); the last row is the model's own logits. `model` is a language
    model of `blocks` with `ln` and `head`, as nn.CausalTransformer (GPT-2 included) is.
    `positions` (an int, a slice or an array of ints, NumPy's indexing of the T axis) reads those
    positions only: with GPT-2's 50,257 tokens, every position costs 50,257 numbers per row.
    """
    interpretability_checks.lens_model_fits(model)
    names = ["embed"] + [f"blocks.{i}.resid_post" for i in range(len(model.blocks))]
    _, cache = model.run_with_cache(ids, names=names)
    read = slice(None) if positions is None else positions
    return np.stack([model.head(model.ln(Tensor(cache[name][:, read]))).data for name in names])


# ------------------------------------------------------------------------------------------------
# Replacing activations: functions for `model.hooks`

@door(head=integer)
def ablate_head(head):
    """A function for `model.hooks` that sets head `head` (an int) of an attention activation to
    zero: of "blocks.i.attn.q", "k", "v" (B, H, T, D), "weights" (B, H, L, S), "heads"
    (B, H, L, D) or "result" (B, T, H, E), the activations with a head axis. On "heads" or
    "result", the head's output, it removes the head from the layer's output. An activation of
    the residual stream (B, T, E) has no head axis: the function refuses it rather than zero a
    position. (`hooks` tells it where the head axis is, through `with_head_axis`.)"""
    return zeroing_head(head, axis=1)


def zeroing_head(head, axis):
    """ablate_head's function, for activations whose heads are on `axis` (None: none are)."""
    def ablated(x):
        interpretability_checks.head_in_range("ablate_head", head, x, axis)
        chosen = np.zeros(x.shape[:axis + 1] + (1,) * (x.ndim - axis - 1), dtype=bool)
        chosen[(slice(None),) * axis + (head,)] = True                  # (B, H, 1, 1), (B, T, H, 1)
        return where(chosen, 0.0, x)                                    # x's shape
    ablated.with_head_axis = lambda axis: zeroing_head(head, axis)
    return ablated


def patch(source, index=()):
    """A function for `model.hooks` that puts `source[index]` (a NumPy array of the activation's
    shape, e.g. from another run's cache) in place of the activation's own values at `index`
    (all of them for `()`); gradients flow to the values left in place. An activation of another
    shape (a run on another number of tokens) is refused, naming both shapes."""
    source = np.asarray(data_of(source))
    chosen = np.zeros(source.shape, dtype=bool)
    chosen[index] = True

    def patched(x):
        interpretability_checks.source_fits_activation("patch", source, x)
        return where(chosen, source, x)
    return patched


# ------------------------------------------------------------------------------------------------
# Activation patching and attribution patching

def activation_patching(model, ids, source, metric, names, per_head=False, per_position=False):
    """{name: array}: how much `metric` changes when `model` runs on `ids` (the corrupted input)
    with the activation `name` taken from `source` (the clean run's cache, `run_with_cache` on an
    input of the same shape): metric(patched) - metric(corrupted), one forward pass per entry.

    metric(logits) returns a number or a one-element Tensor (a logit difference, a mean
    log-probability of the right tokens). With `per_head`, each head of an attention activation
    (q, k, v, weights, heads) is patched on its own, and with `per_position`, each position (the
    query's, for weights); the array then has a head axis, a position axis, or both, in that
    order; an activation without heads gets a position axis or none.
    """
    regions = patching_regions(model, ids, source, metric, names, per_head, per_position,
                               "activation_patching")
    with no_grad():
        corrupted = interpretability_checks.metric_number("activation_patching", metric(model(ids)))
        effects = {}
        for name, (shape, kept) in regions.items():
            effect = np.zeros(shape)
            for where_in_region in np.ndindex(*shape):
                index = activation_index(source[name].ndim, kept, where_in_region)
                with model.hooks({name: patch(source[name], index)}):
                    patched = metric(model(ids))
                effect[where_in_region] = interpretability_checks.metric_number(
                    "activation_patching", patched) - corrupted
            effects[name] = effect
    return effects


def attribution_patching(model, ids, source, metric, names, per_head=False, per_position=False):
    """Nanda's first-order estimate of `activation_patching`'s numbers, with the same arguments
    and the same arrays: for each activation a, sum((source[name] - a) * dM/da) over each head
    and position, from one forward and one backward pass on `ids` (M = metric(logits), a
    one-element Tensor). The parameters' `.grad` are left as they were.
    """
    regions = patching_regions(model, ids, source, metric, names, per_head, per_position,
                               "attribution_patching")
    activations = {}

    def keeper(name):
        def keep(x):
            x.retain_grad()                     # dM/da stays on the activation after backward
            activations[name] = x
            if name.rpartition(".")[2] == "result":     # each head's result is in the graph
                return x * 1.0          # only when it replaces the output (nn/hooks.py): so it does
        return keep

    parameters = model.parameters()
    kept_grads = [parameter.grad for parameter in parameters]
    for parameter in parameters:        # backward adds into .grad in place: give it none to add to
        parameter.grad = None
    try:
        with model.hooks([(name, keeper(name)) for name in regions]):
            value = metric(model(ids))
        interpretability_checks.differentiable_metric("attribution_patching", value)
        value.backward()
    finally:
        for parameter, grad in zip(parameters, kept_grads):
            parameter.grad = grad
    estimates = {}
    for name, (_, kept) in regions.items():
        a = activations[name]
        products = (source[name] - a.data) * a.grad                  # (B, H, T, D), (B, T, E)
        summed = tuple(axis for axis in range(a.ndim) if axis not in kept)
        estimate = products.sum(axis=summed, dtype=np.float64)       # the kept axes, in order
        estimates[name] = estimate.transpose([sorted(kept).index(axis) for axis in kept])
    return estimates


def patching_regions(model, ids, source, metric, names, per_head, per_position, function):
    """{name: (shape of its result, the activation's axes that shape comes from)}, after checking
    the arguments: names the model's activations, each in `source` with the shape it has on
    `ids` (found by a forward pass without a graph), metric callable."""
    interpretability_checks.patching_fits(model, source, metric, names, function)
    with no_grad():
        _, shapes = model.run_with_cache(ids, names=list(names))
    interpretability_checks.source_shapes_fit(source, shapes, function)
    points = activation_points(model)
    regions = {}
    for name in names:
        heads = head_axis(*points[name])        # 1 (B, H, T, ...), 2 (B, T, H, E) or None
        kept = ()                               # the head axis, then the position axis
        if per_head and heads is not None:
            kept += (heads,)
        if per_position:
            kept += (2 if heads == 1 else 1,)
        regions[name] = (tuple(shapes[name].shape[axis] for axis in kept), kept)
    return regions


def activation_index(ndim, kept, where_in_region):
    """The index into the activation of one entry of a result: `where_in_region` on the `kept`
    axes, everything on the others."""
    index = [slice(None)] * ndim
    for axis, i in zip(kept, where_in_region):
        index[axis] = i
    return tuple(index)
