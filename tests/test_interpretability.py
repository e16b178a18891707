"""Chapter 4's readings of a model (tinyattn/interpretability.py): the logit lens ends at the
model's own logits, activation patching measures what it should, and attribution patching agrees
with it to first order: within a stated tolerance on small random models, with an error that
shrinks as the square of the patch, and not at all through a saturated softmax."""
import pathlib
import re

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.interpretability import (activation_patching, attribution_patching, logit_lens,
                                       patch)

V, E, H = 13, 16, 4
GPT2_TINY = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"
PAGE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "chapter4_interpretability.md"
# every head's output, every layer's attention and feed-forward output: what patching looks at
COMPONENTS = ("attn.heads", "attn.out", "mlp_out")


def small_model(seed=0, dtype=np.float64, **options):
    ta.manual_seed(seed)
    return nn.CausalTransformer(V, E, H, num_layers=2, max_len=8, dtype=dtype, **options).eval()


def clean_and_corrupted(seed=0):
    """Two batches of 2 sequences of 7 tokens, which differ in the token at position 2."""
    clean = np.random.default_rng(seed).integers(0, V, (2, 7))
    corrupted = clean.copy()
    corrupted[:, 2] = (clean[:, 2] + 5) % V
    return clean, corrupted


def logit_difference(logits):
    """The mean over the batch of the last position's logit of token 3 minus that of token 8."""
    return (logits[:, -1, 3] - logits[:, -1, 8]).mean()


def component_names(model):
    return [name for name in model.activation_names() if name.endswith(COMPONENTS)]


# ------------------------------------------------------------------------------------------------
# The logit lens

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_logit_lens_reads_every_layer_and_ends_at_the_models_logits(dtype):
    model, (ids, _) = small_model(dtype=dtype), clean_and_corrupted()
    lens = logit_lens(model, ids)
    assert lens.shape == (3, 2, 7, V) and lens.dtype == dtype
    np.testing.assert_array_equal(lens[-1], model(ids).data)
    _, cache = model.run_with_cache(ids)
    for row, name in enumerate(["embed", "blocks.0.resid_post"]):
        np.testing.assert_array_equal(lens[row],
                                      model.head(model.ln(ta.tensor(cache[name]))).data)
    assert not np.allclose(lens[0], lens[-1])


def test_the_logit_lens_reads_chosen_positions():
    model, (ids, _) = small_model(), clean_and_corrupted()
    lens = logit_lens(model, ids)
    np.testing.assert_allclose(logit_lens(model, ids, positions=slice(2, 5)), lens[:, :, 2:5],
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(logit_lens(model, ids, positions=-1), lens[:, :, -1],
                               rtol=1e-12, atol=1e-12)


def test_the_logit_lens_reads_gpt2():
    model = nn.CausalTransformer.from_pretrained(GPT2_TINY)
    ids = np.array([[464, 2068, 7586, 21831]])
    lens = logit_lens(model, ids)
    assert lens.shape == (len(model.blocks) + 1, 1, 4, model.embed.num_embeddings)
    np.testing.assert_array_equal(lens[-1], model(ids).data)


def test_the_logit_lens_needs_a_language_model():
    with pytest.raises(TypeError, match=r"^logit_lens: the model must be a language model with "
                                        r"blocks, a final LayerNorm `ln` and a `head`"):
        logit_lens(nn.MultiHeadAttention(E, H), np.zeros((1, 3), dtype=int))


# ------------------------------------------------------------------------------------------------
# Activation patching

def test_patching_from_the_run_itself_changes_nothing():
    model, (_, corrupted) = small_model(), clean_and_corrupted()
    _, own = model.run_with_cache(corrupted)
    effects = activation_patching(model, corrupted, own, logit_difference, component_names(model),
                                  per_head=True, per_position=True)
    assert all((effect == 0).all() for effect in effects.values())


def test_patching_the_whole_last_stream_gives_the_clean_run():
    """The last block's resid_post, patched at every position, is all that the head reads: the
    patched run ends where the clean run ends."""
    model, (clean, corrupted) = small_model(), clean_and_corrupted()
    _, cache = model.run_with_cache(clean)
    effect = activation_patching(model, corrupted, cache, logit_difference,
                                 ["blocks.1.resid_post"])["blocks.1.resid_post"]
    expected = logit_difference(model(clean)).item() - logit_difference(model(corrupted)).item()
    assert effect.shape == () and effect == pytest.approx(expected, abs=1e-12)


def test_patching_one_head_at_one_position_is_one_patched_run():
    model, (clean, corrupted) = small_model(), clean_and_corrupted()
    _, cache = model.run_with_cache(clean)
    effects = activation_patching(model, corrupted, cache, logit_difference,
                                  ["blocks.0.attn.heads", "blocks.0.mlp_out"], per_head=True,
                                  per_position=True)
    assert effects["blocks.0.attn.heads"].shape == (H, 7)       # heads, positions
    assert effects["blocks.0.mlp_out"].shape == (7,)            # no heads: positions
    assert (effects["blocks.0.attn.heads"][:, :2] == 0).all()   # before the change: no effect
    with model.hooks({"blocks.0.attn.heads": patch(cache["blocks.0.attn.heads"],
                                                   (slice(None), 3, 4))}):
        patched = logit_difference(model(corrupted)).item()
    assert effects["blocks.0.attn.heads"][3, 4] == pytest.approx(
        patched - logit_difference(model(corrupted)).item(), abs=1e-15)


def test_patching_a_heads_result_is_patching_its_output():
    """result (B, T, H, E) is linear in heads (B, H, T, D), head by head: patched per head and
    position, measured and estimated, the two give the same (head, position) arrays."""
    model, (clean, corrupted) = small_model(), clean_and_corrupted()
    _, cache = model.run_with_cache(clean)
    names = ["blocks.1.attn.heads", "blocks.1.attn.result"]
    arguments = (model, corrupted, cache, logit_difference, names)
    for patching in (activation_patching, attribution_patching):
        effects = patching(*arguments, per_head=True, per_position=True)
        assert effects["blocks.1.attn.result"].shape == (H, 7)
        np.testing.assert_allclose(effects["blocks.1.attn.result"], effects["blocks.1.attn.heads"],
                                   rtol=1e-10, atol=1e-14)
        assert np.abs(effects["blocks.1.attn.heads"]).max() > 1e-3


# ------------------------------------------------------------------------------------------------
# Attribution patching against activation patching

@pytest.mark.parametrize("seed", range(3))
def test_attribution_patching_agrees_with_patching_on_small_random_models(seed):
    """Every head and position of every layer's heads, attention and feed-forward outputs, on
    prompts that differ in one token: each estimate within 10% of the largest effect of patching.

    Why it can hold here: a model fresh from PyTorch's initialisation has attention weights far
    from 0 and 1 (no saturated softmax), and one token changes the stream a little, so M is
    close to linear between the two runs. The tolerance is in units of the largest effect
    because the small effects are where the first-order term and the remainder are of one size.
    """
    model, (clean, corrupted) = small_model(seed), clean_and_corrupted(seed)
    _, cache = model.run_with_cache(clean)
    names = component_names(model)
    arguments = (model, corrupted, cache, logit_difference, names)
    patched = activation_patching(*arguments, per_head=True, per_position=True)
    estimated = attribution_patching(*arguments, per_head=True, per_position=True)
    largest = max(np.abs(effect).max() for effect in patched.values())
    assert largest > 1e-3
    for name in names:
        assert patched[name].shape == estimated[name].shape
        np.testing.assert_allclose(estimated[name], patched[name], rtol=0, atol=0.1 * largest,
                                   err_msg=name)


def test_the_estimates_error_shrinks_as_the_square_of_the_patch():
    """Patching to a * + eps (a_clean - a*): the effect is first order in eps, the error of the
    estimate second order. So a tenth of the patch leaves a hundredth of the error (within 20%),
    and at eps = 1e-3 the estimate is within 1e-3 of the effect, relatively."""
    model, (clean, corrupted) = small_model(), clean_and_corrupted()
    names = component_names(model)
    _, clean_cache = model.run_with_cache(clean)
    _, corrupted_cache = model.run_with_cache(corrupted)
    errors = []
    for eps in (1e-2, 1e-3):
        source = {name: corrupted_cache[name] + eps * (clean_cache[name] - corrupted_cache[name])
                  for name in names}
        arguments = (model, corrupted, source, logit_difference, names)
        patched = activation_patching(*arguments, per_head=True, per_position=True)
        estimated = attribution_patching(*arguments, per_head=True, per_position=True)
        errors.append(max(np.abs(estimated[n] - patched[n]).max() for n in names))
        largest = max(np.abs(patched[n]).max() for n in names)
    assert errors[1] / errors[0] == pytest.approx(0.01, rel=0.2)
    assert errors[1] < 1e-3 * largest


def test_through_a_saturated_softmax_the_estimate_misses_the_effect():
    """Scores multiplied by 100 saturate the softmax (each query puts nearly all its weight on one
    key), so dM/d(key) is nearly zero: the estimate of patching block 1's keys is nearly zero,
    while patching them moves that weight to another key and changes the metric."""
    model, (clean, corrupted) = small_model(scale=100.0), clean_and_corrupted()
    _, cache = model.run_with_cache(clean)
    assert cache["blocks.1.attn.weights"].max(axis=-1).mean() > 0.95
    arguments = (model, corrupted, cache, logit_difference, ["blocks.1.attn.k"])
    patched = activation_patching(*arguments, per_head=True)["blocks.1.attn.k"]
    estimated = attribution_patching(*arguments, per_head=True)["blocks.1.attn.k"]
    assert np.abs(patched).max() > 0.01
    assert np.abs(estimated).max() < 0.01 * np.abs(patched).max()


def test_attribution_patching_leaves_the_parameters_gradients_as_they_were():
    model, (clean, corrupted) = small_model(), clean_and_corrupted()
    _, cache = model.run_with_cache(clean)
    weight = model.blocks[0].attn.q_proj.weight
    weight.grad = np.full(weight.shape, 7.0)
    attribution_patching(model, corrupted, cache, logit_difference, ["blocks.0.attn.heads"])
    assert (weight.grad == 7.0).all() and model.head.weight.grad is None


def test_float32_patching_gives_float_numbers_of_the_same_effect():
    model, (clean, corrupted) = small_model(dtype=np.float32), clean_and_corrupted()
    _, cache = model.run_with_cache(clean)
    arguments = (model, corrupted, cache, logit_difference, ["blocks.1.attn.heads"])
    patched = activation_patching(*arguments, per_head=True)["blocks.1.attn.heads"]
    estimated = attribution_patching(*arguments, per_head=True)["blocks.1.attn.heads"]
    np.testing.assert_allclose(estimated, patched, atol=0.1 * np.abs(patched).max())


# ------------------------------------------------------------------------------------------------
# Bad arguments

@pytest.mark.parametrize("function", [activation_patching, attribution_patching])
def test_bad_patching_arguments_are_named(function):
    model, (clean, corrupted) = small_model(), clean_and_corrupted()
    _, cache = model.run_with_cache(clean, names=["blocks.0.attn.heads"])
    name = function.__name__
    with pytest.raises(ValueError, match=rf"^{name}: no activation 'blocks.0.heads'; this "
                                         r"CausalTransformer's activations are embed, final"):
        function(model, corrupted, cache, logit_difference, ["blocks.0.heads"])
    with pytest.raises(ValueError, match=rf"^{name}: source holds no 'blocks.1.mlp_out': cache "
                                         r"them in the clean run"):
        function(model, corrupted, cache, logit_difference, ["blocks.1.mlp_out"])
    with pytest.raises(ValueError, match=rf"^{name}: source\['blocks.0.attn.heads'\] is float64 "
                                         r"\(2, 4, 7, 4\), but the activation is float64 "
                                         r"\(2, 4, 5, 4\) on these ids: the clean and corrupted "
                                         r"inputs must have one shape"):
        function(model, corrupted[:, :5], cache, logit_difference, ["blocks.0.attn.heads"])
    with pytest.raises(TypeError, match=rf"^{name}: names must be a list of activation names"):
        function(model, corrupted, cache, logit_difference, "blocks.0.attn.heads")
    with pytest.raises(ValueError, match=rf"^{name}: the metric must return one number \(or a "
                                         r"one-element Tensor\), got Tensor of shape \(2, 7, 13\)"
                                         if function is activation_patching else
                                         rf"^{name}: the metric must return a one-element Tensor"):
        function(model, corrupted, cache, lambda logits: logits, ["blocks.0.attn.heads"])


def test_attribution_patching_needs_a_graph():
    model, (clean, corrupted) = small_model(), clean_and_corrupted()
    _, cache = model.run_with_cache(clean)
    with pytest.raises(ValueError, match=r"^attribution_patching: the metric's value has no "
                                         r"graph to differentiate: call attribution_patching "
                                         r"outside ta.no_grad\(\)"):
        with ta.no_grad():
            attribution_patching(model, corrupted, cache, logit_difference,
                                 ["blocks.0.attn.heads"])


def test_the_chapter_pages_code_runs():
    """docs/chapter4_interpretability.md's examples, one after the other, as a reader runs them."""
    namespace = {}
    for block in re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.S):
        exec(compile(block, str(PAGE), "exec"), namespace)
    assert namespace["lens"].shape == (3, 1, 12, 50) and len(namespace["seen"]) == 1
    assert namespace["measured"].keys() == namespace["estimated"].keys()
    pieces, cache, ids = namespace["pieces"], namespace["cache"], namespace["ids"]
    assert pieces["blocks.0.attn.result.0"].shape == (1, 12, 32)
    np.testing.assert_allclose(sum(pieces.values()), cache["blocks.1.resid_post"], atol=1e-12)
    assert sum(namespace["attributions"].values())[0] == pytest.approx(
        namespace["logits"].data[0, -2, ids[0, -1]], abs=1e-10)
    assert namespace["k_composition"].shape == (2, 4, 2, 4)
    assert namespace["tokens_to_logits"].shape == (50, 50)
    assert len(namespace["summary"].layers) == 8


def test_a_patch_from_a_run_of_another_length_is_refused_naming_both_shapes():
    model = small_model()
    clean, _ = clean_and_corrupted()
    _, cache = model.run_with_cache(clean[:, :6])
    with pytest.raises(ValueError, match=r"^patch: the source has shape \(2, 6, 16\), the "
                                         r"activation \(2, 7, 16\): a patch comes from a run on "
                                         r"inputs of the same shape \(in the function given to "
                                         r"hooks for 'blocks.0.resid_post'\)$"):
        with model.hooks({"blocks.0.resid_post": patch(cache["blocks.0.resid_post"])}):
            model(clean)
