"""Chapter 4's circuits (tinyattn/circuits.py): the residual stream is the sum of its pieces, direct
logit attribution plus its constant terms is the logit, and the composition scores are Elhage et
al.'s ratio of the raw weights: each against a computation written here from the weights and the
cache (float64 and float32), and against TransformerLens where it is installed."""
import pathlib

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn.interpretability import (attribution_names, composition_scores,
                                       direct_logit_attribution, ov_circuit, qk_circuit,
                                       residual_components)

V, E, H, L = 13, 16, 4, 3
GPT2_TINY = pathlib.Path(__file__).resolve().parent / "fixtures" / "gpt2-tiny"
IDS = np.array([[464, 2068, 7586, 21831, 18045, 625], [11, 12, 13, 14, 15, 16]])
# float64: the 1e-12 for the stream, 1e-10 for the logit; float32: its rounding
TOLERANCE = {np.float64: dict(rtol=1e-12, atol=1e-12), np.float32: dict(rtol=1e-5, atol=1e-5)}
LOGIT_TOLERANCE = {np.float64: dict(rtol=0, atol=1e-10), np.float32: dict(rtol=1e-5, atol=1e-5)}


def small_model(dtype=np.float64, seed=0, **options):
    ta.manual_seed(seed)
    return nn.CausalTransformer(V, E, H, num_layers=L, max_len=8, dtype=dtype, **options).eval()


def some_ids(seed=0):
    return np.random.default_rng(seed).integers(0, V, (2, 7))


class AttentionOnly(nn.Module):
    """Demo 15's kind of model: blocks of attention alone (without biases here), a head with a
    bias."""

    activations = ("embed",)

    class Block(nn.Module):
        activations = ("resid_pre", "resid_post")

        def __init__(self):
            self.ln = nn.LayerNorm(E)
            self.attn = nn.MultiHeadAttention(E, H, bias=False)

        def forward(self, x):
            x = self.hook("resid_pre", x)
            return self.hook("resid_post", x + self.attn(self.ln(x), is_causal=True)[0])

    def __init__(self):
        ta.manual_seed(1)
        self.embed = nn.Embedding(V, E)
        self.blocks = [self.Block() for _ in range(2)]
        self.ln = nn.LayerNorm(E)
        self.head = nn.Linear(E, V)
        self.ln.weight.data[...] = np.random.default_rng(5).uniform(0.5, 1.5, E)
        self.ln.bias.data[...] = np.random.default_rng(6).standard_normal(E)

    def forward(self, ids):
        x = self.hook("embed", self.embed(ids))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


# ------------------------------------------------------------------------------------------------
# The residual stream as a sum

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_pieces_sum_to_the_last_stream(dtype):
    model, ids = small_model(dtype), some_ids()
    _, cache = model.run_with_cache(ids)
    pieces = residual_components(model, cache)
    per_block = [f"attn.result.{h}" for h in range(H)] + ["attn.bias", "mlp_out"]
    assert list(pieces) == ["embed"] + [f"blocks.{i}.{name}" for i in range(L)
                                        for name in per_block]
    assert all(piece.shape == (2, 7, E) and piece.dtype == dtype for piece in pieces.values())
    np.testing.assert_allclose(sum(pieces.values()), cache[f"blocks.{L - 1}.resid_post"],
                               **TOLERANCE[dtype])


def test_the_pieces_are_what_each_part_wrote():
    """Written from the cache and the weights: each head's output times its columns of out_proj,
    out_proj's bias at every position, the feed-forward's output."""
    model, ids = small_model(), some_ids()
    _, cache = model.run_with_cache(ids)
    pieces = residual_components(model, cache)
    D = E // H
    np.testing.assert_array_equal(pieces["embed"], cache["embed"])
    for i, block in enumerate(model.blocks):
        weight = block.attn.out_proj.weight.data
        for h in range(H):
            np.testing.assert_allclose(pieces[f"blocks.{i}.attn.result.{h}"],
                                       cache[f"blocks.{i}.attn.heads"][:, h]
                                       @ weight[:, h * D:(h + 1) * D].T, rtol=1e-12, atol=1e-14)
        np.testing.assert_array_equal(pieces[f"blocks.{i}.attn.bias"][1, 4],
                                      block.attn.out_proj.bias.data)
        np.testing.assert_array_equal(pieces[f"blocks.{i}.mlp_out"], cache[f"blocks.{i}.mlp_out"])


def test_a_model_of_attention_alone_without_biases_has_no_bias_pieces():
    model, ids = AttentionOnly(), some_ids()
    _, cache = model.run_with_cache(ids, names=attribution_names(model))
    assert attribution_names(model) == ["embed", "blocks.0.attn.result", "blocks.1.attn.result",
                                        "blocks.1.resid_post"]
    pieces = residual_components(model, cache)
    assert list(pieces) == ["embed"] + [f"blocks.{i}.attn.result.{h}" for i in range(2)
                                        for h in range(H)]
    np.testing.assert_allclose(sum(pieces.values()), cache["blocks.1.resid_post"],
                               rtol=1e-12, atol=1e-12)


# ------------------------------------------------------------------------------------------------
# Direct logit attribution

def attribution_by_hand(model, cache, token, position):
    """{name: float} for sequence 0, written from the definition: each piece centred, divided by
    the standard deviation of the stream the final LayerNorm read (np.std, with its eps), times
    the LayerNorm's weight, dotted with the head's row for the token."""
    stream = cache[f"blocks.{len(model.blocks) - 1}.resid_post"][0, position]
    sigma = np.sqrt(np.std(stream) ** 2 + model.ln.eps)
    row = model.head.weight.data[token]
    return {name: float((piece[0, position] - piece[0, position].mean()) / sigma
                        @ (model.ln.weight.data * row))
            for name, piece in residual_components(model, cache).items()}


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("position", [-1, 0, 3])
def test_the_attributions_and_the_constant_terms_add_up_to_the_logit(dtype, position):
    model, ids = small_model(dtype, tied_head=False), some_ids()
    logits, cache = model.run_with_cache(ids)
    tokens = np.array([3, 8])
    attributions = direct_logit_attribution(model, cache, tokens, position)
    assert list(attributions)[-2:] == ["ln.bias", "head.bias"]
    assert all(value.shape == (2,) and value.dtype == dtype for value in attributions.values())
    np.testing.assert_allclose(sum(attributions.values()),
                               logits.data[[0, 1], position, tokens], **LOGIT_TOLERANCE[dtype])
    by_hand = attribution_by_hand(model, cache, 3, position)
    for name, value in by_hand.items():
        np.testing.assert_allclose(attributions[name][0], value, **LOGIT_TOLERANCE[dtype])
    np.testing.assert_allclose(attributions["ln.bias"][0],
                               model.ln.bias.data @ model.head.weight.data[3], rtol=1e-5)
    np.testing.assert_array_equal(attributions["head.bias"], model.head.bias.data[tokens])


def test_a_tied_head_without_bias_attributes_through_the_embedding():
    """GPT-2: the head is the token embedding, without bias (no "head.bias" entry)."""
    model = nn.CausalTransformer.from_pretrained(GPT2_TINY, dtype=np.float64)
    logits, cache = model.run_with_cache(IDS)
    tokens = IDS[:, 2]
    attributions = direct_logit_attribution(model, cache, tokens, position=1)
    assert "head.bias" not in attributions and list(attributions)[-1] == "ln.bias"
    np.testing.assert_allclose(sum(attributions.values()), logits.data[[0, 1], 1, tokens],
                               rtol=0, atol=1e-10)


def test_attention_alone_with_a_biased_head():
    model, ids = AttentionOnly(), some_ids()
    logits, cache = model.run_with_cache(ids)
    attributions = direct_logit_attribution(model, cache, ids[:, -1], position=-2)
    np.testing.assert_allclose(sum(attributions.values()), logits.data[[0, 1], -2, ids[:, -1]],
                               rtol=0, atol=1e-10)
    by_hand = attribution_by_hand(model, cache, ids[0, -1], -2)
    for name, value in by_hand.items():
        assert attributions[name][0] == pytest.approx(value, abs=1e-12)


# ------------------------------------------------------------------------------------------------
# Circuits and composition

def circuits_by_hand(attention, head):
    """(W_QK, W_OV) (E, E) from the head's slices of the projections' weights."""
    D = attention.head_dim
    rows = slice(head * D, (head + 1) * D)
    W_Q, W_K, W_V = (linear.weight.data[rows] for linear in
                     (attention.q_proj, attention.k_proj, attention.v_proj))
    return W_Q.T @ W_K, attention.out_proj.weight.data[:, rows] @ W_V


def scores_by_hand(model, kind):
    """Elhage et al.'s ratio with the (E, E) matrices made and multiplied."""
    layers = len(model.blocks)
    scores = np.zeros((layers, H, layers, H))
    for later in range(layers):
        for later_head in range(H):
            qk, ov = circuits_by_hand(model.blocks[later].attn, later_head)
            reader = {"q": qk.T, "k": qk, "v": ov}[kind]
            for earlier in range(later):
                for earlier_head in range(H):
                    written = circuits_by_hand(model.blocks[earlier].attn, earlier_head)[1]
                    scores[later, later_head, earlier, earlier_head] = (
                        np.linalg.norm(reader @ written)
                        / (np.linalg.norm(reader) * np.linalg.norm(written)))
    return scores


def test_a_heads_circuits():
    model = small_model()
    for layer, head in ((0, 0), (2, 3)):
        qk, ov = circuits_by_hand(model.blocks[layer].attn, head)
        np.testing.assert_allclose(qk_circuit(model.blocks[layer].attn, head), qk, rtol=1e-12,
                                   atol=1e-15)
        np.testing.assert_allclose(ov_circuit(model.blocks[layer].attn, head), ov, rtol=1e-12,
                                   atol=1e-15)


def test_a_score_is_the_score_of_the_circuits():
    """The query x^T W_QK y of a later head, fed W_OV z of an earlier one: x^T W_QK W_OV z (K) or
    z^T W_OV^T W_QK y (Q); checked on the scores themselves, with W_QK and W_OV made here."""
    model = small_model()
    qk, _ = circuits_by_hand(model.blocks[2].attn, 1)
    _, ov = circuits_by_hand(model.blocks[0].attn, 3)
    def ratio(a, b):
        return np.linalg.norm(a @ b) / (np.linalg.norm(a) * np.linalg.norm(b))
    assert composition_scores(model, "k")[2, 1, 0, 3] == pytest.approx(ratio(qk, ov), rel=1e-12)
    assert composition_scores(model, "Q")[2, 1, 0, 3] == pytest.approx(ratio(ov.T, qk), rel=1e-12)


@pytest.mark.parametrize("kind", ["q", "k", "v", "K"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_composition_scores_against_the_products_made_in_full(kind, dtype):
    model = small_model(dtype)
    scores = composition_scores(model, kind)
    assert scores.shape == (L, H, L, H) and scores.dtype == dtype
    expected = scores_by_hand(model.to(np.float64), kind.lower())
    np.testing.assert_allclose(scores, expected, **TOLERANCE[dtype])
    for later in range(L):
        assert (scores[later, :, later:] == 0).all() and (scores[later, :, :later] > 0).all()


def test_a_head_without_weights_composes_with_nothing():
    model = small_model()
    model.blocks[0].attn.v_proj.weight.data[:E // H] = 0.0         # head 0's W_V, so its W_OV
    model.blocks[2].attn.q_proj.weight.data[:E // H] = 0.0         # head 0's W_Q, so its W_QK
    scores = composition_scores(model, "k")
    assert not np.isnan(scores).any()
    assert (scores[:, :, 0, 0] == 0).all() and (scores[2, 0] == 0).all()
    assert (scores[1, :, 0, 1:] > 0).all()


def test_adapters_are_read_as_the_model_computes():
    """LoRA on the projections: the circuits are those of the merged weights."""
    model = small_model()
    nn.add_lora(model, rank=2)
    for layer in nn.lora.adapters(model).values():
        layer.lora_B.data[...] = np.random.default_rng(7).standard_normal(layer.lora_B.shape)
    merged = nn.merge_lora(small_model())
    for layer_name, layer in nn.lora.adapters(model).items():
        merged.get_submodule(layer_name).weight.data[...] = layer.merge().weight.data
    np.testing.assert_allclose(composition_scores(model, "v"), composition_scores(merged, "v"),
                               rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(ov_circuit(model.blocks[1].attn, 2),
                               ov_circuit(merged.blocks[1].attn, 2), rtol=1e-12, atol=1e-15)


# ------------------------------------------------------------------------------------------------
# Bad arguments, named

@pytest.mark.parametrize("call, error, message", [
    (lambda model, cache: residual_components(model, {"embed": cache["embed"]}), ValueError,
     r"^residual_components: the cache holds no blocks\.0\.attn\.result, blocks\.0\.mlp_out, .*"
     r"names=attribution_names\(model\)"),
    (lambda model, cache: residual_components(nn.Linear(2, 2), cache), TypeError,
     r"^residual_components: model must be a language model of blocks"),
    (lambda model, cache: direct_logit_attribution(model, cache, np.array([1])), ValueError,
     r"^direct_logit_attribution: tokens must be one token id per sequence, shape \(2,\), got "
     r"\(1,\)"),
    (lambda model, cache: direct_logit_attribution(model, cache, np.array([1, V])), IndexError,
     r"^direct_logit_attribution: tokens must lie in \[0, 13\)"),
    (lambda model, cache: direct_logit_attribution(model, cache, np.array([1.0, 2.0])), TypeError,
     r"^direct_logit_attribution: tokens must be integers"),
    (lambda model, cache: direct_logit_attribution(model, cache, np.array([1, 2]), 7), ValueError,
     r"^direct_logit_attribution: position 7 is outside the cache's 7 positions"),
    (lambda model, cache: composition_scores(model, "o"), ValueError,
     r"^composition_scores: kind must be one of 'q', 'k', 'v'"),
    (lambda model, cache: composition_scores(model.blocks[0], "q"), TypeError,
     r"^composition_scores: model must have `blocks`"),
    (lambda model, cache: ov_circuit(model.blocks[0].attn, 4), ValueError,
     r"^ov_circuit: head 4 of an attention of 4 heads"),
    (lambda model, cache: qk_circuit(model.blocks[0], 0), TypeError,
     r"^qk_circuit: attention must be an nn.MultiHeadAttention"),
])
def test_bad_arguments_are_named(call, error, message):
    model = small_model()
    _, cache = model.run_with_cache(some_ids())
    with pytest.raises(error, match=message):
        call(model, cache)


def test_a_block_that_adds_something_else_is_refused():
    model = small_model()
    decoder = nn.TransformerDecoderBlock(E, H)
    model.blocks[1] = decoder
    with pytest.raises(TypeError, match=r"^attribution_names: block 1 of the model "
                                        r"\(TransformerDecoderBlock\) has no attention `attn`"):
        attribution_names(model)


# ------------------------------------------------------------------------------------------------
# TransformerLens, where installed: the same numbers on the GPT-2 fixture

@pytest.fixture(scope="module")
def lens():
    """TransformerLens's bridge on the GPT-2 fixture (float64, raw weights: no LayerNorm folded
    in, as its `boot_transformers` loads by default), with each head's result cached."""
    torch = pytest.importorskip("torch", reason="torch is not installed: no TransformerLens "
                                                "reference")
    transformer_lens = pytest.importorskip("transformer_lens", reason="TransformerLens is not "
                                           "installed: an optional reference for chapter 4's "
                                           "circuits")
    bridge = transformer_lens.TransformerBridge.boot_transformers(str(GPT2_TINY),
                                                                  dtype=torch.float64)
    bridge.set_use_attn_result(True)
    with torch.no_grad():
        _, cache = bridge.run_with_cache(torch.tensor(IDS))
    return torch, bridge, cache


def test_transformer_lens_agrees_on_the_results_the_pieces_and_the_attributions(lens):
    torch, bridge, reference = lens
    model = nn.CausalTransformer.from_pretrained(GPT2_TINY, dtype=np.float64)
    _, cache = model.run_with_cache(IDS)
    for i in range(len(model.blocks)):
        np.testing.assert_allclose(cache[f"blocks.{i}.attn.result"],
                                   reference[f"blocks.{i}.attn.hook_result"].numpy(),
                                   rtol=0, atol=1e-12)
    pieces = residual_components(model, cache)
    stack = np.stack(list(pieces.values()))                            # (pieces, B, T, E)
    with torch.no_grad():
        scaled = reference.apply_ln_to_stack(torch.tensor(stack), layer=-1).numpy()
    tokens = IDS[:, -1]
    rows = model.ln.weight.data * model.head.weight.data[tokens]        # (B, E)
    attributions = direct_logit_attribution(model, cache, tokens)
    np.testing.assert_allclose(np.stack([attributions[name] for name in pieces]),
                               (scaled[:, :, -1] * rows).sum(axis=-1), rtol=0, atol=1e-12)


@pytest.mark.parametrize("kind", ["Q", "K", "V"])
def test_transformer_lens_agrees_on_the_composition_scores(lens, kind):
    """TransformerLens indexes [earlier layer, earlier head, later layer, later head]."""
    torch, bridge, _ = lens
    model = nn.CausalTransformer.from_pretrained(GPT2_TINY, dtype=np.float64)
    with torch.no_grad():
        reference = bridge.all_composition_scores(kind).scores.numpy()
    np.testing.assert_allclose(composition_scores(model, kind), reference.transpose(2, 3, 0, 1),
                               rtol=0, atol=1e-12)
