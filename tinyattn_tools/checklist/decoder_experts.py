"""The checklist's rows for the decoder block, the encoder-decoder model and the mixture of
experts.

A mixture of experts is a smooth function of its inputs only while no token changes experts, so
its rows keep the routing fixed: the inputs are built so that no two logits of a token are close,
compared with the change a finite-difference step can make to a logit (`routing_margin` measures
both; tests/test_experts.py checks that no call of the check routes a token differently). Each
of those rows checks the output and aux_loss together.
"""
import numpy as np

import tinyattn as ta
import tinyattn.nn as nn
from tinyattn_tools.checklist.cases import LayerCase, layer

MEMORY_PADDING = np.array([[True, True, True, False],
                           [True, False, False, False]])[:, None, None, :]   # (B, 1, 1, S)


def encoder_decoder():
    ta.manual_seed(0)
    model = nn.EncoderDecoder(src_vocab=7, tgt_vocab=6, embed_dim=8, num_heads=2, num_layers=1,
                              max_len=8, hidden_dim=16)
    src_ids = np.array([[1, 4, 4, 2, 0], [6, 5, 1, 0, 0]])
    tgt_ids = np.array([[0, 3, 5, 2], [0, 1, 1, 4]])
    src_mask = src_ids != 0                                  # id 0 is padding
    return (lambda *parameters: model(src_ids, tgt_ids, src_mask)), model.parameters()


def experts_and_tokens(top_k):
    """MixtureOfExperts(4, 4 experts, top_k) and tokens x (2, 3, 4) routed far from any tie.

    The router's weight is the identity plus a little noise, so expert e's logit is about the
    token's feature e; each token's features are the levels 1.5, 0.5, -0.5, -1.5, rotated, plus
    a little noise. So a token's logits lie about 1 apart, every expert is some token's first
    choice, and expert 0 is more tokens' choice than the others: the shares f_e are not uniform
    (uniform shares would make aux_loss = sum_e P_e = 1, whose gradient is 0).
    """
    ta.manual_seed(0)
    moe = nn.MixtureOfExperts(4, 4, top_k=top_k, hidden_dim=4)
    random = np.random.default_rng(0)
    moe.router.weight.data[...] = np.eye(4) + 0.1 * random.standard_normal((4, 4))
    levels = np.array([1.5, 0.5, -0.5, -1.5])
    rotated = np.stack([np.roll(levels, t) for t in (0, 1, 2, 3, 0, 0)])     # (6, 4)
    x = rotated + 0.1 * random.standard_normal((6, 4))
    return moe, ta.tensor(x.reshape(2, 3, 4), requires_grad=True)


def fixed_routing_experts(top_k):
    """A build function checking the output and aux_loss of `experts_and_tokens(top_k)`."""
    def build():
        moe, x = experts_and_tokens(top_k)
        return (lambda x, *parameters: (moe(x), moe.aux_loss)), [x, *moe.parameters()]
    return build


def routing_margin(moe, x, eps=1e-6):
    """(margin, largest step): the smallest gap between two logits of one token, and the most
    that a finite-difference step of size eps on one element of x or of the router's weight can
    move a logit. (Random directions are not used on these small inputs.)"""
    logits = x.data.reshape(-1, moe.embed_dim) @ moe.router.weight.data.T       # (N, n)
    margin = np.diff(np.sort(logits, axis=-1), axis=-1).min()
    return margin, eps * max(np.abs(x.data).max(), np.abs(moe.router.weight.data).max())


LAYER_CASES = [
    # x (B, L, E) = (2, 3, 4) attending to memory (B, S, E) = (2, 4, 4)
    LayerCase("TransformerDecoderBlock",
              layer(lambda: nn.TransformerDecoderBlock(4, 2, hidden_dim=8), (2, 3, 4), (2, 4, 4))),
    LayerCase("TransformerDecoderBlock, memory padding",
              layer(lambda: nn.TransformerDecoderBlock(4, 2, hidden_dim=8), (2, 3, 4), (2, 4, 4),
                    memory_mask=MEMORY_PADDING)),
    LayerCase("EncoderDecoder (random directions)", encoder_decoder, directions=3),
    LayerCase("MixtureOfExperts top-1, fixed routing", fixed_routing_experts(top_k=1)),
    LayerCase("MixtureOfExperts top-2, fixed routing", fixed_routing_experts(top_k=2)),
]
