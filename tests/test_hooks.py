"""Chapter 4's hooks (tinyattn/nn/hooks.py): the cache holds what the forward pass computed, a
function attached by name reads or replaces an activation (and gradients flow through what it
returns), the functions are gone after the `with` block whatever happened in it, and bad names or
bad replacements are named."""
import pathlib

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import engine
from tinyattn.functional.scaled_dot_product import causal_mask
from tinyattn.interpretability import ablate_head

B, T, V, E, H = 2, 6, 11, 16, 4
GPT2_TINY = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"


def small_model(dtype=np.float64, seed=0, **options):
    ta.manual_seed(seed)
    return nn.CausalTransformer(V, E, H, num_layers=2, max_len=8, dtype=dtype, **options).eval()


def some_ids(seed=0):
    return np.random.default_rng(seed).integers(0, V, (B, T))


def nothing_attached(model):
    return all(layer.hooked is None for layer in model.modules())


# ------------------------------------------------------------------------------------------------
# The cache

def test_the_cache_holds_every_named_activation_in_the_order_computed():
    model = small_model()
    logits, cache = model.run_with_cache(some_ids())
    per_block = ["resid_pre", "attn.q", "attn.k", "attn.v", "attn.weights", "attn.heads",
                 "attn.result", "attn.out", "resid_mid", "mlp_out", "resid_post"]
    assert list(cache) == ["embed", *(f"blocks.{i}.{name}" for i in range(2) for name in
                                      per_block), "final"]
    assert set(cache) == set(model.activation_names())
    assert all(isinstance(array, np.ndarray) for array in cache.values())
    np.testing.assert_array_equal(logits.data, model(some_ids()).data)


def test_cached_activations_are_those_the_forward_pass_computed():
    """Each block recomputed by hand from the cached stream gives the next cached numbers, and
    the attention weights are those `return_weights` gives."""
    model, ids = small_model(), some_ids()
    logits, cache = model.run_with_cache(ids)
    _, weights = model(ids, return_weights=True)
    np.testing.assert_array_equal(cache["embed"], model.positions(model.embed(ids)).data)
    mask = causal_mask(T, T)
    for i, block in enumerate(model.blocks):
        name = f"blocks.{i}."
        np.testing.assert_array_equal(cache[name + "attn.weights"], weights[i].data)
        x = ta.tensor(cache[name + "resid_pre"])
        attn = block.attn
        q = attn.q_proj(block.ln1(x)).reshape(B, T, H, E // H).transpose(0, 2, 1, 3)
        np.testing.assert_array_equal(cache[name + "attn.q"], q.data)
        np.testing.assert_allclose(cache[name + "attn.heads"],
                                   cache[name + "attn.weights"] @ cache[name + "attn.v"],
                                   rtol=1e-12, atol=1e-12)
        merged = cache[name + "attn.heads"].transpose(0, 2, 1, 3).reshape(B, T, E)
        np.testing.assert_array_equal(cache[name + "attn.out"],
                                      attn.out_proj(ta.tensor(merged)).data)
        np.testing.assert_array_equal(cache[name + "resid_mid"],
                                      cache[name + "resid_pre"] + cache[name + "attn.out"])
        np.testing.assert_array_equal(cache[name + "resid_post"],
                                      cache[name + "resid_mid"] + cache[name + "mlp_out"])
        np.testing.assert_array_equal(cache[name + "resid_post"],
                                      block(x, mask).data)
        if i > 0:
            np.testing.assert_array_equal(cache[name + "resid_pre"],
                                          cache[f"blocks.{i - 1}.resid_post"])
    np.testing.assert_array_equal(cache["final"], model.ln(ta.tensor(cache["blocks.1.resid_post"]))
                                  .data)
    np.testing.assert_array_equal(model.head(ta.tensor(cache["final"])).data, logits.data)


def test_names_choose_what_is_cached_and_float32_stays_float32():
    model = small_model(np.float32)
    logits, cache = model.run_with_cache(some_ids(), names=["blocks.1.attn.weights", "embed"])
    assert list(cache) == ["embed", "blocks.1.attn.weights"]         # the order computed
    assert cache["blocks.1.attn.weights"].shape == (B, H, T, T)
    assert logits.dtype == cache["embed"].dtype == cache["blocks.1.attn.weights"].dtype \
        == np.float32


def test_gpt2_from_pretrained_runs_with_a_cache():
    model = nn.CausalTransformer.from_pretrained(GPT2_TINY)
    ids = np.array([[464, 2068, 7586, 21831, 18045, 625]])
    with ta.no_grad():
        logits, cache = model.run_with_cache(ids)
        np.testing.assert_array_equal(logits.data, model(ids).data)
    layers, heads = len(model.blocks), model.num_heads
    for i in range(layers):
        weights = cache[f"blocks.{i}.attn.weights"]
        assert weights.shape == (1, heads, 6, 6) and weights.dtype == np.float32
        np.testing.assert_allclose(weights.sum(axis=-1), 1, rtol=1e-5)


def test_any_layer_runs_with_a_cache():
    ta.manual_seed(0)
    attention = nn.MultiHeadAttention(E, H)
    x = ta.tensor(np.random.default_rng(0).standard_normal((B, T, E)))
    (output, weights), cache = attention.run_with_cache(x, is_causal=True)
    assert list(cache) == ["q", "k", "v", "weights", "heads", "result", "out"]
    np.testing.assert_array_equal(cache["out"], output.data)
    np.testing.assert_array_equal(cache["weights"], weights.data)


def test_a_layer_called_twice_in_one_pass_is_named():
    class Twice(nn.Module):
        def __init__(self):
            self.attention = nn.MultiHeadAttention(E, H)

        def forward(self, x):
            return self.attention(self.attention(x)[0])[0]

    ta.manual_seed(0)
    twice = Twice()
    x = ta.tensor(np.zeros((1, 3, E)))
    with pytest.raises(ValueError, match=r"^Twice.run_with_cache: the activation 'attention.q' "
                                         r"was computed twice in one forward pass"):
        twice.run_with_cache(x)
    assert nothing_attached(twice)


# ------------------------------------------------------------------------------------------------
# Reading and replacing

def test_a_function_that_returns_none_reads_and_changes_nothing():
    model, ids = small_model(), some_ids()
    seen = []
    with model.hooks({"blocks.0.attn.weights": seen.append}):
        logits = model(ids)
    assert len(seen) == 1 and isinstance(seen[0], ta.Tensor) and seen[0].shape == (B, H, T, T)
    np.testing.assert_array_equal(logits.data, model(ids).data)


def loss_and_gradients(model, ids):
    """[the logits, then every parameter's gradient] of a cross-entropy loss on `ids`."""
    model.zero_grad()
    logits = model(ids)
    targets = some_ids(seed=1)
    ta.functional.cross_entropy(logits.reshape(-1, V), targets.reshape(-1)).backward()
    return [logits.data] + [p.grad for p in model.parameters()]


@pytest.mark.parametrize("name", small_model().activation_names())
def test_replacing_an_activation_by_itself_changes_nothing_bit_for_bit(name):
    """The logits and every parameter's gradient, with the activation replaced by itself and by
    `x * 1.0` (a new tensor with its numbers, in the graph), equal those without a hook. (Each
    head's result replaced makes the attention's output the sum of the replacement over heads
    plus the bias: the same numbers added in another order, so equal only to rounding: below.)"""
    model, ids = small_model(), some_ids()
    plain = loss_and_gradients(model, ids)
    replacements = (lambda x: x,) if name.endswith(".result") else (lambda x: x, lambda x: x * 1.0)
    for itself in replacements:
        with model.hooks({name: itself}):
            hooked = loss_and_gradients(model, ids)
        for got, want in zip(hooked, plain):
            np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("block", [0, 1])
def test_each_heads_result_replaced_by_a_copy_gives_the_same_logits_and_gradients(block):
    """out = sum over heads of result + bias, with its gradients: the pass equals the plain one
    to rounding (float64: 1e-13), with gradients reaching every parameter (out_proj's weight
    through the result, its bias through the sum)."""
    model, ids = small_model(), some_ids()
    plain = loss_and_gradients(model, ids)
    with model.hooks({f"blocks.{block}.attn.result": lambda x: x * 1.0}):
        copied = loss_and_gradients(model, ids)
    for got, want in zip(copied, plain):
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


def test_functions_on_one_name_run_in_the_order_given():
    model, ids = small_model(), some_ids()
    calls = []
    with model.hooks([("blocks.1.attn.out", lambda x: calls.append("first") or x * 2.0),
                      ("blocks.1.attn.out", lambda x: calls.append(x.data.copy()))]):
        model(ids)
    _, cache = model.run_with_cache(ids, names=["blocks.1.attn.out"])
    assert calls[0] == "first"
    np.testing.assert_array_equal(calls[1], 2.0 * cache["blocks.1.attn.out"])


def test_zero_ablating_a_head_through_a_hook_equals_removing_it_by_hand():
    """Head 2 of block 1 removed by hand: its columns of out_proj set to zero, so that the merged
    heads' slice h*D ... (h+1)*D - 1 reaches nothing."""
    model, ids = small_model(), some_ids()
    head, D = 2, E // H
    with model.hooks({"blocks.1.attn.heads": ablate_head(head)}):
        ablated = model(ids).data
    by_hand = small_model()
    by_hand.blocks[1].attn.out_proj.weight.data[:, head * D:(head + 1) * D] = 0.0
    np.testing.assert_allclose(ablated, by_hand(ids).data, rtol=1e-13, atol=1e-13)
    assert not np.allclose(ablated, model(ids).data, atol=1e-3)      # the head did something


def test_ablating_keeps_float32():
    model = small_model(np.float32)
    with model.hooks({"blocks.0.attn.heads": ablate_head(0)}):
        _, cache = model.run_with_cache(some_ids(), names=["blocks.0.attn.heads"])
    heads = cache["blocks.0.attn.heads"]
    assert heads.dtype == np.float32 and (heads[:, 0] == 0).all() and (heads[:, 1] != 0).any()


def test_gradients_flow_through_a_replacement():
    """gradcheck through a patched forward pass: head 1 of block 0's output replaced by a tensor
    P of our own, the rest kept; the logits' gradients with respect to P, to a parameter before
    the patch (it reaches the logits through the heads left in place) and to one after it."""
    model, ids = small_model(), some_ids()
    D = E // H
    chosen = np.zeros((1, H, 1, 1), dtype=bool)
    chosen[:, 1] = True
    P = ta.tensor(np.random.default_rng(2).standard_normal((B, H, T, D)), requires_grad=True)
    before = model.blocks[0].attn.v_proj.weight
    after = model.blocks[1].attn.q_proj.weight

    def patched(P, before, after):
        with model.hooks({"blocks.0.attn.heads": lambda x: ta.where(chosen, P, x)}):
            return model(ids)

    assert ta.gradcheck(patched, [P, before, after])
    model.zero_grad()
    patched(P, before, after).sum().backward()
    assert (P.grad[:, 1] != 0).any() and (P.grad[:, [0, 2, 3]] == 0).all()


# ------------------------------------------------------------------------------------------------
# Each head's result, computed only when asked for

class Shapes(engine.Watcher):
    """The output shape of every op applied."""

    def __init__(self):
        self.shapes = []

    def applied(self, node, arrays, params, out):
        self.shapes.append(out.shape)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_each_heads_result_is_its_output_times_its_columns_of_out_proj(dtype):
    """Written independently: head h's (B, T, D) output @ out_proj.weight[:, h*D:(h+1)*D]^T; the
    heads' sum plus the bias is the layer's output."""
    model, ids = small_model(dtype), some_ids()
    _, cache = model.run_with_cache(ids)
    D = E // H
    tolerance = dict(rtol=1e-12, atol=1e-13) if dtype == np.float64 else dict(rtol=1e-5, atol=1e-6)
    for i, block in enumerate(model.blocks):
        result = cache[f"blocks.{i}.attn.result"]
        heads = cache[f"blocks.{i}.attn.heads"]                         # (B, H, T, D)
        weight = block.attn.out_proj.weight.data                        # (E, E)
        assert result.shape == (B, T, H, E) and result.dtype == dtype
        for h in range(H):
            own_columns = weight[:, h * D:(h + 1) * D]                  # (E, D)
            np.testing.assert_allclose(result[:, :, h], heads[:, h] @ own_columns.T, **tolerance)
        np.testing.assert_allclose(result.sum(axis=2) + block.attn.out_proj.bias.data,
                                   cache[f"blocks.{i}.attn.out"], **tolerance)


def test_no_forward_pass_computes_the_result_unless_asked_for():
    """The result is the one op whose output is (B, T, H, 1, E): none in a pass without hooks, nor
    with functions on every other activation; one per attention asked for."""
    model, ids = small_model(), some_ids()
    result_shape = (B, T, H, 1, E)
    others = [name for name in model.activation_names() if not name.endswith(".result")]
    for names, count in ((None, 0), (others, 0), (["blocks.1.attn.result"], 1),
                         (model.activation_names(), 2)):
        watcher = Shapes()
        with engine.watching(watcher):
            if names is None:
                model(ids)
            else:
                model.run_with_cache(ids, names=names)
        assert watcher.shapes.count(result_shape) == count, names


def test_ablating_a_heads_result_equals_ablating_its_output():
    """The result replaced (head 2's zeroed) makes the attention's output the sum of the
    replacement over heads plus the bias: what zeroing the head's output gives."""
    model, ids = small_model(), some_ids()
    with model.hooks({"blocks.1.attn.heads": ablate_head(2)}):
        expected = model(ids).data
    with model.hooks({"blocks.1.attn.result": ablate_head(2)}):
        ablated = model(ids).data
    np.testing.assert_allclose(ablated, expected, rtol=1e-12, atol=1e-13)
    assert not np.allclose(ablated, model(ids).data, atol=1e-3)
    with pytest.raises(ValueError, match=r"^ablate_head: head 4 of an activation of shape "
                                         r"\(2, 6, 4, 16\), which has 4 heads on axis 2"):
        with model.hooks({"blocks.1.attn.result": ablate_head(4)}):
            model(ids)


def test_the_result_is_made_from_the_heads_as_the_other_functions_left_them():
    """A function on heads, given after the one on result (or in an enclosing block), still comes
    first; a function on out sees the output made from the replaced result."""
    model, ids = small_model(), some_ids()
    seen = {}
    with model.hooks({"blocks.0.attn.heads": ablate_head(1)}):
        _, expected = model.run_with_cache(ids, names=["blocks.0.attn.result",
                                                       "blocks.0.attn.out"])
    with model.hooks([("blocks.0.attn.result", lambda x: seen.update(result=x.data)),
                      ("blocks.0.attn.heads", ablate_head(1))]):
        model(ids)
    assert (seen["result"][:, :, 1] == 0).all()
    np.testing.assert_array_equal(seen["result"], expected["blocks.0.attn.result"])
    with model.hooks([("blocks.0.attn.out", lambda x: seen.update(replaced=x.data)),
                      ("blocks.0.attn.result", lambda x: x * 2.0)]):
        model(ids)
    _, plain = model.run_with_cache(ids, names=["blocks.0.attn.result"])
    bias = model.blocks[0].attn.out_proj.bias.data
    np.testing.assert_allclose(seen["replaced"], 2.0 * plain["blocks.0.attn.result"].sum(axis=2)
                               + bias, rtol=1e-12, atol=1e-13)


def test_gradients_flow_through_a_replaced_result():
    """gradcheck: the logits with head 3's result of block 0 replaced by a tensor P of our own,
    with respect to P, to out_proj's weight and bias (through the heads left in place, and the
    sum), and to a parameter after it."""
    model, ids = small_model(), some_ids()[:1, :3]                     # one short sequence
    chosen = np.zeros((1, 1, H, 1), dtype=bool)
    chosen[:, :, 3] = True
    P = ta.tensor(np.random.default_rng(3).standard_normal((1, 3, H, E)), requires_grad=True)
    out_proj = model.blocks[0].attn.out_proj

    def patched(P, weight, bias, after):
        with model.hooks({"blocks.0.attn.result": lambda x: ta.where(chosen, P, x)}):
            return model(ids)

    assert ta.gradcheck(patched, [P, out_proj.weight, out_proj.bias,
                                  model.blocks[1].attn.v_proj.bias])


def test_the_result_of_an_adapted_out_proj_includes_its_update():
    """LoRA on out_proj: the result reads W + (alpha / rank) B A, so the heads still sum to the
    layer's output."""
    model, ids = small_model(), some_ids()
    nn.add_lora(model, rank=2, targets="*out_proj")
    for block in model.blocks:
        block.attn.out_proj.lora_B.data[...] = np.random.default_rng(4).standard_normal((E, 2))
    _, cache = model.run_with_cache(ids)
    for i, block in enumerate(model.blocks):
        np.testing.assert_allclose(cache[f"blocks.{i}.attn.result"].sum(axis=2)
                                   + block.attn.out_proj.bias.data, cache[f"blocks.{i}.attn.out"],
                                   rtol=1e-12, atol=1e-13)


def test_the_result_during_generation_is_the_new_tokens():
    model = small_model()
    seen = []
    with model.hooks({"blocks.0.attn.result": lambda x: seen.append(x.shape)}):
        tokens = model.generate(some_ids()[:, :3], max_new_tokens=2, temperature=0)
    assert seen == [(B, 3, H, E), (B, 1, H, E)]
    np.testing.assert_array_equal(tokens, model.generate(some_ids()[:, :3], 2, temperature=0))


# ------------------------------------------------------------------------------------------------
# Attached only within the block

def test_functions_are_detached_on_leaving_even_after_an_error():
    model, ids = small_model(), some_ids()
    with pytest.raises(RuntimeError, match="raised in the block"):
        with model.hooks({"blocks.0.attn.weights": lambda x: None, "final": lambda x: None}):
            assert not nothing_attached(model)
            raise RuntimeError("raised in the block")
    assert nothing_attached(model)

    def failing(x):
        raise KeyError("raised in a hook")
    with pytest.raises(KeyError):
        with model.hooks({"blocks.1.attn.q": failing}):
            model(ids)
    assert nothing_attached(model)


def test_the_key_value_cache_still_works_inside_hooks():
    model, ids = small_model(), some_ids()
    with model.hooks({"blocks.0.attn.weights": lambda x: None}):
        with_hooks = model.generate(ids, 2, temperature=0)
    np.testing.assert_array_equal(with_hooks, model.generate(ids, 2, temperature=0))
    assert nothing_attached(model)


# ------------------------------------------------------------------------------------------------
# Bad names, bad functions, bad replacements

def test_an_unknown_name_lists_the_models_activations_and_attaches_nothing():
    model = small_model()
    listed = (r"this CausalTransformer's activations are embed, final, blocks.N.resid_pre, "
              r"blocks.N.resid_mid, blocks.N.mlp_out, blocks.N.resid_post, blocks.N.attn.q, "
              r"blocks.N.attn.k, blocks.N.attn.v, blocks.N.attn.weights, blocks.N.attn.heads, "
              r"blocks.N.attn.result, blocks.N.attn.out \(N = 0 ... 1\)$")
    with pytest.raises(ValueError, match=r"^CausalTransformer.hooks: no activation "
                                         r"'blocks.2.attn.weights'; " + listed):
        with model.hooks({"embed": lambda x: None, "blocks.2.attn.weights": lambda x: None}):
            pass
    assert nothing_attached(model)
    with pytest.raises(ValueError, match=r"^CausalTransformer.run_with_cache: no activation "
                                         r"'attn.weights'; " + listed):
        model.run_with_cache(some_ids(), names=["attn.weights"])


@pytest.mark.parametrize("functions, error, message", [
    ("embed", TypeError, r"functions must be a dict \{name: function\} or a list of \(name, "
                         r"function\) pairs, got str"),
    ([("embed",)], TypeError, r"functions must be .* pairs, got the item \('embed',\)"),
    ({"embed": 3}, TypeError, r"the function for 'embed' must be callable, got int"),
])
def test_functions_that_are_not_functions_are_named(functions, error, message):
    with pytest.raises(error, match=r"^CausalTransformer.hooks: " + message):
        small_model().hooks(functions)


def test_names_to_cache_must_be_a_list():
    with pytest.raises(TypeError, match=r"^CausalTransformer.run_with_cache: names must be a "
                                        r"list of activation names, got 'embed'"):
        small_model().run_with_cache(some_ids(), names="embed")


@pytest.mark.parametrize("replacement, error, message", [
    (lambda x: x.data, TypeError, r"returned a ndarray: return None to leave the activation as "
                                  r"it is, or a Tensor to replace it"),
    (lambda x: x[:, :2], ValueError, r"returned a float64 tensor of shape \(2, 2, 6, 4\) for an "
                                     r"activation float64 \(2, 4, 6, 4\): a replacement has the "
                                     r"activation's shape and dtype"),
    (lambda x: ta.tensor(x.data.astype(np.float32)), ValueError, r"returned a float32 tensor"),
])
def test_a_replacement_of_another_kind_shape_or_dtype_is_named(replacement, error, message):
    model = small_model()
    with pytest.raises(error, match=r"^CausalTransformer.hooks: the function on "
                                    r"'blocks.0.attn.heads' " + message):
        with model.hooks({"blocks.0.attn.heads": replacement}):
            model(some_ids())
    assert nothing_attached(model)


def test_ablating_a_head_that_is_not_there_is_named():
    model = small_model()
    with pytest.raises(ValueError, match=r"^ablate_head: head 4 of an activation of shape "
                                         r"\(2, 4, 6, 4\), which has 4 heads on axis 1"):
        with model.hooks({"blocks.0.attn.heads": ablate_head(4)}):
            model(some_ids())


@pytest.mark.parametrize("name", ["blocks.0.attn.out", "blocks.0.resid_pre", "blocks.1.mlp_out",
                                  "embed", "final"])
def test_ablating_a_head_of_an_activation_without_heads_is_refused(name):
    """The residual stream (B, T, E) has no head axis: ablate_head(1) there would zero position
    1. It is refused, naming the function, the shape and the activation."""
    model = small_model()
    with pytest.raises(ValueError, match=r"^ablate_head: an activation of shape \(2, 6, 16\) has "
                                         r"no head axis .* q, k, v, weights, heads \(B, H, "
                                         r"\.\.\.\) or result \(B, T, H, E\) \(in the function "
                                         rf"given to hooks for '{name}'\)$"):
        with model.hooks({name: ablate_head(1)}):
            model(some_ids())
    assert nothing_attached(model)


@pytest.mark.parametrize("head", [1.5, True, "0"])
def test_a_head_is_an_int_at_the_call(head):
    with pytest.raises(TypeError, match=rf"^ablate_head: head must be an int, got {head!r}$"):
        ablate_head(head)


def test_a_reading_function_that_writes_in_place_is_an_error_naming_the_activation():
    """Written into in place, the activation would change the outputs but not the gradients: the
    function gets it read-only, and the write is named."""
    model = small_model()

    def scale_in_place(x):
        x.data[...] *= 2.0

    with pytest.raises(ValueError, match=r"^hooks: the function for 'blocks.0.attn.v' wrote into "
                                         r"the activation in place .* return a new Tensor"):
        with model.hooks({"blocks.0.attn.v": scale_in_place}):
            model(some_ids())
    logits, cache = model.run_with_cache(some_ids())        # the activations writable again
    assert all(array.flags.writeable for array in cache.values())
    np.testing.assert_array_equal(logits.data, model(some_ids()).data)


def test_what_a_key_hook_sees_during_generation_is_the_new_tokens_keys():
    """A function on "k" comes before the key/value cache's: at each step of generate, the keys of
    the new tokens alone, (B, H, T, D): the prompt, then one token (nn/generation.py says so)."""
    model = small_model()
    seen = []
    with model.hooks({"blocks.1.attn.k": lambda k: seen.append(k.shape)}):
        model.generate(some_ids()[:, :3], max_new_tokens=3, temperature=0)
    assert seen == [(B, H, 3, E // H), (B, H, 1, E // H), (B, H, 1, E // H)]
