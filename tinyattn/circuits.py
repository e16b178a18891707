"""Chapter 4. Reading circuits (Elhage et al. 2021, "A Mathematical Framework for Transformer
Circuits"): the residual stream as a sum of what each piece wrote into it, direct logit
attribution, and the QK and OV circuits of the heads, with the composition scores between heads
of two layers. `tinyattn.interpretability` has every function of this file.

The residual stream is a sum. A block reads the stream and adds to it (x + attn(ln1(x)), then
x + ff(ln2(x))) and writes it nowhere else, so the stream the last block leaves is

    resid_post = embed + sum over blocks of (attn.out + mlp_out)
    attn.out   = sum over heads h of result_h + out_proj.bias

where result_h ("blocks.N.attn.result", nn/hooks.py) is head h's output times its columns of
out_proj. `residual_components` lists these pieces, as arrays (B, T, E) read from a cache.

Direct logit attribution. The logits are head(ln(x)), x the last resid_post. LayerNorm is not
linear, ln(x) = (x - mean(x)) / sigma * w + b with sigma = sqrt(var(x) + eps), but with sigma
held at the value the run computed it is: x - mean(x) is the sum of each piece c minus its own
mean. So the logit of token t, with u_t the head's row for t, is

    logit_t = sum over pieces c of ((c - mean(c)) / sigma * w) . u_t  +  b . u_t  +  head.bias_t

and each term of the sum is what that piece adds to the logit directly: through the final
LayerNorm and the head, with no layer in between (a head whose output moves later heads counts
through them, not here). `direct_logit_attribution` returns the terms, the two constant ones as
"ln.bias" and "head.bias", so that they add up to the logit exactly. TransformerLens does the
same (`apply_ln_to_stack`: each piece centred and divided by the cached scale).

What holding sigma costs: the terms describe this run, they are not what the logit would be
without a piece. Remove c and sigma changes too (LayerNorm divides the whole stream by its
size), and so do the later layers that read c: ablation (interpretability.py) measures that. A
piece that grows makes sigma grow, so the real logit moves less than its attribution says; and
the attribution of a piece near the stream's mean direction is shrunk by the centring.

The QK and OV circuits. In Elhage et al.'s notation (columns are vectors), head h of an attention
layer has W_Q^h, W_K^h, W_V^h (D, E), its rows of q_proj, k_proj and v_proj, and W_O^h (E, D), its
columns of out_proj:

    W_QK^h = W_Q^h^T W_K^h    (E, E)   the score of query x on key y is x^T W_QK y, times the scale
    W_OV^h = W_O^h W_V^h      (E, E)   what the head adds to the stream for a key y it attends to

(`qk_circuit`, `ov_circuit`). W_E W_OV^T W_U^T, embeddings to logits, says which token a head
makes more likely for each token it attends to: a copying head's largest entry in each row is the
token itself (demo 15).

Composition. A head of a later layer reads the stream into which earlier heads wrote: its query,
its key or its value can read what an earlier head's OV circuit wrote (Q-, K-, V-composition).
Elhage et al. measure how much with

    ||W_A W_B||_F / (||W_A||_F ||W_B||_F)

with W_B = W_OV of the earlier head and W_A = W_QK^T (Q), W_QK (K) or W_OV (V) of the later one
(x^T W_QK y: an earlier head's output W_OV z in the query x gives z^T W_OV^T W_QK y, in the key
y gives x^T W_QK W_OV z). It is 1 when W_A reads exactly the directions W_B writes (with
matching singular values), 0 when W_A ignores them all. What it does not mean: it is a property
of the weights alone, not of any input (a head may write little on real text); it ignores the
LayerNorms in between, the biases and positions (rotary positions turn q and k by their
positions, which the raw W_QK does not see); and it is not near 0 for weights in random
directions, but about 1 / sqrt(E) (the expected ||W_A W_B||^2 of a random rotation is
||W_A||^2 ||W_B||^2 / E): compare it with that, or with the same model before training (demo 15
does both). `composition_scores` reads the raw weights: no LayerNorm weight folded in, W_O not
centred (TransformerLens folds and centres by default when it loads a model).

Computed with thin factors. W_QK and W_OV have rank D: each is L R, L (E, D), R (D, E), and

    ||L R||_F^2 = trace(R^T L^T L R) = trace((L^T L) (R R^T))
    ||L_A R_A L_B R_B||_F^2 = trace(M^T (L_A^T L_A) M (R_B R_B^T)),   M = R_A L_B   (D, D)

so no (E, E) matrix is made: GPT-2 small's 144 heads make 10,000 pairs of 64 x 64 products
instead of 768 x 768 ones.
"""
import numpy as np

from tinyattn import circuits_checks
from tinyattn.arguments import door, integer
from tinyattn.engine import no_grad
from tinyattn.nn.lora import weight_of


# ------------------------------------------------------------------------------------------------
# The residual stream as a sum

@door(circuits_checks.attribution_names_fit)
def attribution_names(model):
    """The activations that `residual_components` and `direct_logit_attribution` read, for
    `model.run_with_cache(ids, names=attribution_names(model))`: "embed", each block's
    "attn.result" and "mlp_out" (if it has one), the last block's "resid_post"."""
    return circuits_checks.names_read(model)


@door(circuits_checks.cache_fits)
def residual_components(model, cache):
    """{name: array (B, T, E)}: the pieces that the last block's resid_post is the sum of, in the
    order they were added: "embed" (tokens and their positions), then for each block N each head
    h's result ("blocks.N.attn.result.h"), the attention's bias ("blocks.N.attn.bias", if it has
    one: out_proj's bias, at every position) and the feed-forward's output ("blocks.N.mlp_out",
    if the block has one). `cache` is run_with_cache's, of the model in eval mode (dropout off),
    holding at least `attribution_names(model)`.

    `model` is a language model of `blocks` (as nn.CausalTransformer is), each adding to the
    stream its attention's output `attn` (an nn.MultiHeadAttention) and, if it names one, its
    feed-forward's "mlp_out", and nothing else: a TransformerBlock, or an attention-only block.
    """
    components = {"embed": cache["embed"]}                              # (B, T, E)
    for i, block in enumerate(model.blocks):
        results = cache[f"blocks.{i}.attn.result"]                      # (B, T, H, E)
        for h in range(results.shape[2]):
            components[f"blocks.{i}.attn.result.{h}"] = results[:, :, h]     # (B, T, E)
        bias = block.attn.out_proj.bias
        if bias is not None:
            components[f"blocks.{i}.attn.bias"] = np.broadcast_to(bias.data, results.shape[:2]
                                                                   + bias.shape)   # (B, T, E)
        if "mlp_out" in block.activations:
            components[f"blocks.{i}.mlp_out"] = cache[f"blocks.{i}.mlp_out"]        # (B, T, E)
    return components


# ------------------------------------------------------------------------------------------------
# Direct logit attribution

@door(circuits_checks.attribution_fits, position=integer)
def direct_logit_attribution(model, cache, tokens, position=-1):
    """{name: array (B,)}: how much each piece of the residual stream (`residual_components`)
    adds directly to the logit of `tokens` (ints (B,), one token per sequence) at `position`,
    through the final LayerNorm `model.ln`, its scale sigma taken from the cache (the last
    resid_post's) and held fixed, and the head `model.head` (see the top of this file). Two more
    entries hold the constant terms: "ln.bias", the LayerNorm's bias read by the head, and, if
    the head has a bias, "head.bias". All of them add up to the logit.

        piece c:    ((c - mean(c)) / sigma * w) . u_t     w the LayerNorm's weight, u_t the
        ln.bias:    b . u_t                               head's row for token t (the token
        head.bias:  head.bias[t]                          embedding, for a tied head)
    """
    components = residual_components(model, cache)
    stream = cache[f"blocks.{len(model.blocks) - 1}.resid_post"][:, position]     # (B, E)
    centred = stream - stream.mean(axis=-1, keepdims=True)                       # (B, E)
    inv_sigma = 1.0 / np.sqrt((centred * centred).mean(axis=-1, keepdims=True)
                              + model.ln.eps)                                     # (B, 1)
    with no_grad():
        directions = weight_of(model.head).data[tokens]                           # (B, E) u_t
    read = model.ln.weight.data * directions                                      # (B, E) w u_t
    attributions = {}
    for name, piece in components.items():
        piece = piece[:, position]                                                # (B, E)
        centred_piece = piece - piece.mean(axis=-1, keepdims=True)                # (B, E)
        attributions[name] = (centred_piece * inv_sigma * read).sum(axis=-1)      # (B,)
    attributions["ln.bias"] = (model.ln.bias.data * directions).sum(axis=-1)      # (B,)
    if model.head.bias is not None:
        attributions["head.bias"] = model.head.bias.data[tokens]                  # (B,)
    return attributions


# ------------------------------------------------------------------------------------------------
# The QK and OV circuits, and composition

@no_grad()
def head_weights(attention):
    """(W_Q, W_K, W_V, W_O) of every head of `attention`, NumPy arrays: W_Q, W_K, W_V (H, D, E),
    each head's rows of q_proj, k_proj, v_proj; W_O (H, E, D), its columns of out_proj. (Head h
    owns the features h*D ... (h+1)*D - 1: nn/multi_head_attention.py.) A LoRA adapter's update
    is included (`weight_of`)."""
    H, D, E = attention.num_heads, attention.head_dim, attention.embed_dim
    rows = [weight_of(linear).data.reshape(H, D, E)
            for linear in (attention.q_proj, attention.k_proj, attention.v_proj)]   # (H, D, E)
    W_O = weight_of(attention.out_proj).data.reshape(E, H, D).transpose(1, 0, 2)    # (H, E, D)
    return (*rows, W_O)


@door(circuits_checks.a_head_of, head=integer)
def qk_circuit(attention, head):
    """W_QK = W_Q^T W_K (E, E) of head `head` of `attention` (an nn.MultiHeadAttention, e.g.
    `model.blocks[1].attn`): the score of a query x on a key y is x^T W_QK y, times the scale
    (biases and positions aside)."""
    W_Q, W_K, _, _ = head_weights(attention)
    return W_Q[head].T @ W_K[head]                                      # (E, D) @ (D, E)


@door(circuits_checks.a_head_of, head=integer)
def ov_circuit(attention, head):
    """W_OV = W_O W_V (E, E) of head `head` of `attention`: what the head adds to the residual
    stream for each key it attends to, W_OV y (out_proj's bias aside)."""
    _, _, W_V, W_O = head_weights(attention)
    return W_O[head] @ W_V[head]                                        # (E, D) @ (D, E)


@door(circuits_checks.composition_fits)
def composition_scores(model, kind):
    """Elhage et al.'s composition scores ||W_A W_B||_F / (||W_A||_F ||W_B||_F) of every head of a
    later layer (A) with every head of an earlier one (B), from the raw weights (no LayerNorm
    folded in, W_O not centred): an array (layers, heads, layers, heads) in the weights' dtype,
    indexed [later layer, later head, earlier layer, earlier head], zero where the second layer
    is not earlier than the first (TransformerLens's `all_composition_scores` is indexed the
    other way round, earlier first).

    `kind` is "q", "k" or "v" (either case): W_B is the earlier head's W_OV, W_A the later one's
    W_QK^T (its query reads B), W_QK (its key reads B) or W_OV (its value reads B). A head with
    all-zero weights composes with nothing: 0. `model` has `blocks`, each with an `attn` (an
    nn.MultiHeadAttention).
    """
    heads = [head_weights(block.attn) for block in model.blocks]
    W_Q, W_K, W_V, W_O = (np.stack(arrays) for arrays in zip(*heads))   # (layers, H, ., .)
    # each circuit as thin factors L (E, D) R (D, E); the later head's A by kind, B its W_OV
    L_A, R_A = {"q": (W_K.swapaxes(-1, -2), W_Q),                       # W_QK^T = W_K^T W_Q
                "k": (W_Q.swapaxes(-1, -2), W_K),                       # W_QK = W_Q^T W_K
                "v": (W_O, W_V)}[kind]                                  # W_OV = W_O W_V
    L_B, R_B = W_O, W_V                                                 # (layers, H, E, D), (D, E)
    gram_A = L_A.swapaxes(-1, -2) @ L_A                                 # (layers, H, D, D)
    gram_B = R_B @ R_B.swapaxes(-1, -2)                                 # (layers, H, D, D)
    norm_A = frobenius(gram_A, R_A @ R_A.swapaxes(-1, -2))              # (layers, H)
    norm_B = frobenius(L_B.swapaxes(-1, -2) @ L_B, gram_B)              # (layers, H)
    layers, H = norm_A.shape
    scores = np.zeros((layers, H, layers, H), dtype=W_Q.dtype)
    for later in range(1, layers):
        M = R_A[later][:, None, None] @ L_B[None, :later]               # (H, later, H, D, D)
        product = (M.swapaxes(-1, -2) @ gram_A[later][:, None, None] @ M
                   @ gram_B[None, :later])                              # (H, later, H, D, D)
        squared = np.trace(product, axis1=-2, axis2=-1)                 # (H, later, H)
        norms = norm_A[later][:, None, None] * norm_B[None, :later]     # (H, later, H)
        # rounding can leave a square of a near-zero norm just below 0: no square root of it
        root = np.sqrt(np.maximum(squared, 0.0))
        scores[later, :, :later] = np.divide(root, norms, out=np.zeros_like(root),
                                             where=norms > 0)
    return scores


def frobenius(gram_left, gram_right):
    """||L R||_F from L^T L and R R^T (..., D, D): sqrt(trace((L^T L) (R R^T)))."""
    squared = np.trace(gram_left @ gram_right, axis1=-2, axis2=-1)      # (...)
    return np.sqrt(np.maximum(squared, 0.0))
