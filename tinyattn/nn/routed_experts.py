"""Chapter 5. Experts as Qwen3-MoE and DeepSeek-V3 ship them: chapter 2's mixture of experts
(nn/experts.py) with each family's router.

    1. score     s = softmax(router(x)) over the n experts (Qwen3-MoE, as Mixtral), or
                 s = sigmoid(router(x)), each expert on its own (DeepSeek-V3)            (N, n)
    2. choose    the top_k experts by s + b, among the experts of the top_groups best of
                 num_groups groups; b is DeepSeek-V3's choice_bias (none in Qwen), a group's
                 score the sum of its two best s + b; a constant: no gradient            (N, k)
    3. weigh     g = s of the chosen experts (not s + b: the bias chooses, it does not weigh),
                 divided by their sum with norm_topk_prob, times routed_scaling_factor   (N, k)
    4. dispatch  each expert, a SwiGLU feed-forward (nn.GatedFeedForward), runs on the tokens
                 that chose it, and on no other                                   (n_e, E)
    5. combine   sum_j g_j expert_j(x), plus the shared experts' output, which every token
                 gets (DeepSeekMoE)                                                  (N, E)

with N tokens (every position of every sequence), n = num_experts, k = top_k, E = embed_dim.
With softmax scores and norm_topk_prob the weights are the softmax of the chosen logits alone,
which is chapter 2's MixtureOfExperts (Mixtral's routing).

Where each piece comes from:

    shared experts       DeepSeekMoE (Dai et al. 2024): a few experts that every token uses
                         hold what all tokens need, so the routed ones can specialise
    sigmoid scores, b    DeepSeek-V3 (2024), "auxiliary-loss-free load balancing" (Wang et al.
                         2024): during training b_i is lowered a little after a step in which
                         expert i got more than its share of tokens, raised after one in which it
                         got less; since b only chooses, the balance costs the loss nothing (no
                         auxiliary loss pulls on the router). b is a Parameter without grad,
                         loaded from the checkpoint (e_score_correction_bias); in training,
                         calling `update_choice_bias()` after each step applies that rule
    group-limited        DeepSeek-V2's device-limited routing, V3's node-limited: the experts in
                         num_groups groups of consecutive ids (one group per device or node), a
                         token's experts taken from its top_groups best groups only, so that it
                         travels to few machines
    routed_scaling_      DeepSeek-V3 (2.5): the routed experts' sum scaled against the shared
    factor               expert's
    norm_topk_prob       Qwen3-MoE (true in its released models) and DeepSeek-V3: the k weights
                         sum to 1 (to routed_scaling_factor)

Which layers have experts is the decoder's business (DeepSeek-V3's first 3 layers are dense:
first_k_dense_replace; Qwen3-MoE's mlp_only_layers and decoder_sparse_step): DecoderSettings'
`experts.dense_layers`. Ties between scores go to the lower expert id; transformers' torch.topk
leaves them to the implementation. Like transformers, nothing balances the load at inference:
b moves only when update_choice_bias is called.
"""
import dataclasses

import numpy as np

import tinyattn.functional as F
from tinyattn.arguments import at_least, between, door, floating_dtype, one_of, optional
from tinyattn.nn import routed_experts_checks as checks
from tinyattn.nn.experts import dispatch
from tinyattn.nn.layers import Linear
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.open_layers import ACTIVATIONS, GatedFeedForward

SCORES = {"softmax": lambda logits: F.softmax(logits, axis=-1), "sigmoid": F.sigmoid}


@dataclasses.dataclass(frozen=True)
class ExpertSettings:
    """A decoder's routed experts (DecoderSettings' `experts`): RoutedExperts' arguments, and
    `dense_layers`, the layers that keep a dense feed-forward instead (their indices)."""

    num_experts: int
    top_k: int
    hidden_dim: int
    scoring: str = "softmax"
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    num_groups: int = 1
    top_groups: int = 1
    choice_bias: bool = False
    shared_hidden_dim: int = None
    dense_layers: tuple = ()

    def layer_arguments(self):
        """The keyword arguments of RoutedExperts these settings give."""
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)
                if field.name != "dense_layers"}


class RoutedExperts(Module):
    """A feed-forward layer of `num_experts` SwiGLU experts, `top_k` of them for each token, as
    Qwen3-MoE and DeepSeek-V3 route them (see the top of this file): inputs (..., E) -> outputs
    (..., E).

        scores   = softmax or sigmoid of router(x)                  (N, n)
        chosen   = top_k of scores + choice_bias, group-limited     (N, k)   a constant
        gates    = scores[chosen] (/ their sum) * routed_scaling_factor        (N, k)
        output   = sum_j gates_j * experts[chosen_j](x) + shared(x)            (N, E)

    `experts` is a list of nn.GatedFeedForward(E, hidden_dim); `router` an nn.Linear(E, n,
    bias=False); `choice_bias` (n,) a Parameter without grad when asked for, else None; `shared`
    a GatedFeedForward(E, shared_hidden_dim) (DeepSeek's n_shared_experts experts, side by side
    in one, as its checkpoints hold them), or None. The gradient reaches the router through the
    gates only: the choice is a step function of the scores. `selected_experts` keeps the last
    forward's choice, (..., k) expert ids, which `update_choice_bias` reads, and `scores` its
    scores (N, n), a Tensor of the graph, which `load_balancing_loss` reads.
    """

    @door(checks.groups_fit, embed_dim=at_least(1), num_experts=at_least(1), top_k=at_least(1),
          hidden_dim=at_least(1), scoring=one_of(*SCORES), norm_topk_prob=bool,
          routed_scaling_factor=between(0), num_groups=at_least(1), top_groups=at_least(1),
          choice_bias=bool, shared_hidden_dim=optional(at_least(1)),
          activation=one_of(*ACTIVATIONS), dtype=floating_dtype)
    def __init__(self, embed_dim, num_experts, top_k, hidden_dim, scoring="softmax",
                 norm_topk_prob=True, routed_scaling_factor=1.0, num_groups=1, top_groups=1,
                 choice_bias=False, shared_hidden_dim=None, activation="silu", dtype=None):
        self.embed_dim, self.num_experts, self.top_k = embed_dim, num_experts, top_k
        self.scoring, self.norm_topk_prob = scoring, norm_topk_prob
        self.routed_scaling_factor = float(routed_scaling_factor)
        self.num_groups, self.top_groups = num_groups, top_groups
        self.router = Linear(embed_dim, num_experts, bias=False, dtype=dtype)
        self.choice_bias = Parameter(np.zeros(num_experts, dtype=dtype or np.float64),
                                     requires_grad=False) if choice_bias else None
        self.experts = [GatedFeedForward(embed_dim, hidden_dim, activation, dtype=dtype)
                        for _ in range(num_experts)]
        self.shared = None if shared_hidden_dim is None else \
            GatedFeedForward(embed_dim, shared_hidden_dim, activation, dtype=dtype)
        self.selected_experts = self.scores = None

    @door(checks.some_tokens, x="(..., embed_dim)")
    def forward(self, x):
        *leading, E = x.shape
        k = self.top_k
        tokens = x.reshape(-1, E)                                   # (N, E)
        N = len(tokens)

        # 1. score every expert
        scores = SCORES[self.scoring](self.router(tokens))          # (N, n)
        # 2. choose: the top_k by score + bias, in the best groups (constants)
        chosen = self.choice(scores.data)                           # (N, k)
        # 3. weigh by the chosen scores, without the bias
        gates = scores[np.arange(N)[:, None], chosen]               # (N, k)
        if self.norm_topk_prob:      # DeepSeek's code adds 1e-20: no 0 / 0 if every s is 0
            gates = gates / (gates.sum(axis=-1, keepdims=True) + 1e-20)     # (N, k)
        gates = gates * self.routed_scaling_factor                  # (N, k)
        # 4. dispatch: expert e runs on the tokens that chose it (chapter 2's dispatch)
        by_slot = dispatch(self.experts, tokens, chosen)            # (N, k, E)
        # 5. combine: the gate-weighted sum over each token's k experts, and the shared ones
        combined = (by_slot * gates.reshape(N, k, 1)).sum(axis=1)   # (N, E)
        if self.shared is not None:
            combined = combined + self.shared(tokens)               # (N, E)
        self.selected_experts = chosen.reshape(*leading, k)
        self.scores = scores                                        # (N, n)
        return combined.reshape(*leading, E)                        # (..., E)

    @door(checks.bias_to_update, speed=between(0))
    def update_choice_bias(self, speed=0.001):
        """DeepSeek-V3's auxiliary-loss-free balancing, one step of it, called after a training
        step: from the last forward's choice, each expert's load c_i (the tokens sent to it) and
        the mean load c = N k / n,

            b_i <- b_i + speed * sign(c - c_i)

        an overloaded expert's bias falls, an underloaded one's rises, so that the next steps
        choose it less or more. `speed` is the paper's bias update speed gamma (0.001 for most
        of its training). The gradient plays no part: b is a constant of the forward."""
        loads = np.bincount(self.selected_experts.ravel(), minlength=self.num_experts)   # (n,)
        mean_load = self.selected_experts.size / self.num_experts
        step = np.sign(mean_load - loads).astype(self.choice_bias.dtype)             # (n,)
        self.choice_bias.data += speed * step

    def choice(self, scores):
        """The top_k experts of each token, (N, k) ids, from the scores (N, n) (a NumPy array):
        by score + choice_bias, among the experts of the token's top_groups best groups."""
        N, n = scores.shape
        G = self.num_groups
        biased = scores if self.choice_bias is None else scores + self.choice_bias.data  # (N, n)
        if self.top_groups < G:
            grouped = biased.reshape(N, G, n // G)                          # (N, G, n / G)
            group_scores = np.sort(grouped, axis=-1)[..., -2:].sum(axis=-1)     # (N, G)
            dropped = np.argsort(-group_scores, axis=-1, kind="stable")[:, self.top_groups:]
            grouped = grouped.copy()
            grouped[np.arange(N)[:, None], dropped] = -np.inf              # out of the running
            biased = grouped.reshape(N, n)                                  # (N, n)
        return np.argsort(-biased, axis=-1, kind="stable")[:, :self.top_k]  # (N, k)

    def extra_repr(self):
        shared = "" if self.shared is None else ", shared"
        return (f"embed_dim={self.embed_dim}, num_experts={self.num_experts}, "
                f"top_k={self.top_k}, scoring={self.scoring!r}{shared}")


@door(checks.softmax_routed)
def load_balancing_loss(layers):
    """Qwen3-MoE's auxiliary loss over the last forward of its expert layers (`layers`, a list
    of RoutedExperts with softmax scores): the Switch Transformer's balance loss in transformers'
    convention, which for one layer is k times chapter 2's MixtureOfExperts.aux_loss (f divided
    by the rows, not by the N k choices: nn/experts.py says why), pooled over the layers as
    transformers' load_balancing_loss_func pools them,

        loss = n sum_e f_e P_e      f_e = the tokens sent to expert e, counted over every layer,
                                          / the rows R (N tokens a layer, times the layers)
                                    P_e = the sum of expert e's score over every layer's rows / R

    so the f sum to k (each row, a token, goes to k experts) and the P to 1; a router spreading
    its tokens and its probabilities evenly scores k, one that sends everything to the same k
    experts with all its probability on them scores n. The gradient reaches each router through
    P alone (f counts a choice: a constant). In training, router_aux_loss_coef (config.json:
    0.001 in Qwen3-MoE's releases) times it is added to the language-model loss. Pooled, the
    product f_e P_e mixes the layers: it is not the mean of each layer's own loss."""
    n = layers[0].num_experts
    counts = sum(np.bincount(layer.selected_experts.ravel(), minlength=n)
                 for layer in layers)                                   # (n,) over every layer
    rows = sum(len(layer.scores) for layer in layers)                   # R
    score_sums = sum(layer.scores.sum(axis=0) for layer in layers)      # (n,) over every layer
    assigned = (counts / rows).astype(score_sums.dtype)                 # (n,) f, constant
    return n * (score_sums * (1.0 / rows) * assigned).sum()             # ()
