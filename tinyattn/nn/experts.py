"""Chapter 2. A mixture of experts: a feed-forward layer of several feed-forward networks
("experts"), of which each token uses only a few, chosen for it by a learned router.

    1. route    a logit per expert for every token; keep the top_k largest     (N, n) -> (N, k)
    2. gate     softmax over the chosen logits: how much each chosen expert counts     (N, k)
    3. dispatch each expert runs on the tokens that chose it, and on no other   (n_e, E) -> (n_e, E)
    4. combine  each token's output is the gate-weighted sum of its experts' outputs    (N, E)
    5. balance  the Switch Transformer's load-balancing loss, kept in `aux_loss`          ()

with N tokens (every position of every sequence), n = num_experts, k = top_k, E = embed_dim and
n_e the number of tokens expert e received. Compute grows with k, parameters with n: that is the
point of the layer.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, door, floating_dtype, optional
from tinyattn.nn import experts_checks
from tinyattn.nn.layers import FeedForward, Linear
from tinyattn.nn.module import Module
from tinyattn.ops import concatenate


class MixtureOfExperts(Module):
    """A sparse mixture-of-experts feed-forward layer, routed as in Mixtral (Jiang et al., 2024):
    inputs (..., E) -> outputs (..., E).

        logits    = router(x)                              (N, n)   one score per expert
        chosen    = the top_k experts by logit             (N, k)   a constant: no gradient
        gates     = softmax(logits[chosen])                (N, k)   sum to 1 over the k chosen
        output    = sum_j gates_j * experts[chosen_j](x)   (N, E)

    Each expert computes only its own tokens: they are picked out by indexing, run through the
    expert, and put back in place by indexing with the inverse permutation; the engine's indexing
    op scatters the gradients back the same way.

    How the gradient gets through the routing: the choice of experts is an argsort, a step
    function of the logits, so it passes no gradient (a small change of the logits changes no
    choice, until one flips). The router learns through two other paths: through the gates (a
    chosen expert whose output helps gets a larger logit relative to the other chosen ones), and
    through the balance loss below. With top_k=1 the gate is the softmax of a single logit, always
    1, so the router learns through the balance loss only (the Switch Transformer, Fedus et al.
    2022, weights its one expert by the full softmax probability instead, which does carry a
    gradient).

    `aux_loss`, after a forward (None before the first), is the Switch Transformer's
    load-balancing loss

        aux_loss = n * sum_e f_e * P_e

    f_e: the share of the N * k token-to-expert assignments that went to expert e (counted, a
    constant); P_e: the mean over tokens of softmax(logits)_e over all n experts (differentiable).
    It is 1 when both are uniform, and grows as the tokens crowd onto few experts; add it, times a
    small weight (0.01 in the paper), to the training loss. Its gradient reaches the router
    through P only. `selected_experts` keeps the last forward's choice, (..., k) expert ids.

    Hugging Face's Mixtral (`load_balancing_loss_func`) divides the assignments by the number of
    tokens N instead of N * k: its f sums to k, and its loss is k times this one (2 for Mixtral,
    balanced routing gives k there, 1 here). A weight copied from there (`router_aux_loss_coef`)
    pulls k times more weakly here: multiply it by k for the same pull.

    What differs from the papers: the experts are `nn.FeedForward` (GELU) where Mixtral's are
    SwiGLU; no expert has a capacity (the Switch Transformer drops the tokens beyond it; here
    every expert takes all the tokens routed to it); and with top_k > 1, f_e counts assignments,
    where the Switch Transformer, routing each token to one expert, counts tokens.
    """

    @door(experts_checks.top_k_of_the_experts, embed_dim=at_least(1), num_experts=at_least(1),
          top_k=at_least(1), hidden_dim=optional(at_least(1)), dtype=floating_dtype)
    def __init__(self, embed_dim, num_experts, top_k=2, hidden_dim=None, dtype=None):
        self.embed_dim, self.num_experts, self.top_k = embed_dim, num_experts, top_k
        self.router = Linear(embed_dim, num_experts, bias=False, dtype=dtype)
        self.experts = [FeedForward(embed_dim, hidden_dim, dtype=dtype)
                        for _ in range(num_experts)]
        self.aux_loss = None
        self.selected_experts = None

    @door(experts_checks.some_tokens, x="(..., embed_dim)")
    def forward(self, x):
        *leading, E = x.shape
        n, k = self.num_experts, self.top_k
        tokens = x.reshape(-1, E)                                   # (N, E)
        N = len(tokens)

        # 1. route: the k experts of largest logit (ties go to the lower expert id)
        logits = self.router(tokens)                                # (N, n)
        chosen = np.argsort(-logits.data, axis=-1, kind="stable")[:, :k]   # (N, k), constant
        # 2. gate: softmax over the chosen logits only
        gates = F.softmax(logits[np.arange(N)[:, None], chosen], axis=-1)  # (N, k)
        # 3. dispatch: expert e runs on the tokens that chose it
        by_slot = dispatch(self.experts, tokens, chosen)            # (N, k, E)
        # 4. combine: the gate-weighted sum over each token's k experts
        combined = (by_slot * gates.reshape(N, k, 1)).sum(axis=1)   # (N, E)
        # 5. balance: n * sum_e f_e P_e
        assigned = np.bincount(chosen.ravel(), minlength=n) / (N * k)    # (n,) f, constant
        mean_probability = F.softmax(logits, axis=-1).mean(axis=0)  # (n,) P
        self.aux_loss = n * (mean_probability * assigned.astype(x.dtype)).sum()     # ()
        self.selected_experts = chosen.reshape(*leading, k)
        return combined.reshape(*leading, E)                        # (..., E)

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_experts={self.num_experts}, "
                f"top_k={self.top_k}")


def dispatch(experts, tokens, chosen):
    """The outputs (N, k, E) of each token's k chosen experts, for tokens (N, E) and chosen (N, k)
    expert ids: row t, j is experts[chosen[t, j]] applied to tokens[t]. Expert e runs once, on
    the n_e tokens that chose it, and on no other."""
    N, k = chosen.shape
    outputs, slots = [], []                     # `slots` says where each output belongs
    for e, expert in enumerate(experts):
        token_ids, choice = np.nonzero(chosen == e)                 # (n_e,), (n_e,)
        if len(token_ids):
            outputs.append(expert(tokens[token_ids]))              # (n_e, E)
            slots.append(token_ids * k + choice)                    # (n_e,) in [0, N * k)
    grouped = concatenate(outputs)                                  # (N * k, E), by expert
    # The slots are a permutation of 0 ... N*k - 1; indexing with its inverse puts the rows in
    # slot order: row t * k + j is the output of token t's j-th chosen expert.
    by_slot = grouped[np.argsort(np.concatenate(slots))]            # (N * k, E)
    return by_slot.reshape(N, k, -1)                                # (N, k, E)
