"""Chapter 2. Self-attention and cross-attention: a decoder block, and a small encoder-decoder
model.

Both are the same multi-head attention; what differs is where its inputs come from and which mask
it uses:

                    queries from          keys and values from         mask
    self-attention  the sequence x        the same sequence x          causal in a decoder: target
                                                                       position i sees j <= i
    cross-attention the decoder's x       the encoder's output,        padding only: every target
                    (target, length L)    `memory` (source, length S)  position sees every real
                                                                       source position

Self-attention mixes a sequence with itself; cross-attention is how the decoder reads the source:
its weights (B, H, L, S) say, for every target position, which source positions it took from, so a
trained translation model draws its alignment there (demo 9).

    encoder  source ids (B, S) -> embed + positions -> TransformerBlocks (not causal) -> memory
    decoder  target ids (B, L) -> embed + positions -> TransformerDecoderBlocks (causal
             self-attention, cross-attention to memory) -> LayerNorm -> Linear -> logits

as in "Attention Is All You Need" (Vaswani et al., 2017), with the LayerNorm before each sub-layer
(pre-LN) instead of after it.
"""
import numpy as np

from tinyattn.arguments import at_least, between, door, floating_dtype, number, optional
from tinyattn.engine import no_grad
from tinyattn.nn import checks
from tinyattn.nn import decoder_checks
from tinyattn.nn.layers import Dropout, Embedding, FeedForward, LayerNorm, Linear
from tinyattn.nn.module import Module
from tinyattn.nn.multi_head_attention import MultiHeadAttention
from tinyattn.nn.positions import PositionalEncoding
from tinyattn.nn.transformer import TransformerBlock
from tinyattn.arrays import data_of


class TransformerDecoderBlock(Module):
    """Pre-LN decoder block: three sub-layers, each added to the residual stream x (B, L, E).

        x = x + self_attn(ln1(x))                     causal: queries, keys, values all from x
        x = x + cross_attn(ln2(x), memory, memory)    queries from x, keys and values from memory
        x = x + ff(ln3(x))                            each position on its own

    forward(x, memory, memory_mask=None, return_weights=False): `memory` is the encoder's output
    (B, S, E); with return_weights, the self- and cross-attention weights come with the output.
    `memory_mask` means what `attn_mask` means in `F.scaled_dot_product_attention` (True = the
    source position takes part) and broadcasts to the cross-attention scores (B, H, L, S): a
    (B, 1, 1, S) mask hides padding in the source. (A (B, S) mask would be lined up with (L, S),
    not with the batch: give it its two middle axes.) The self-attention needs no mask but the
    causal one: the decoder's own sequence is not padded on the left.
    """

    @door(checks.heads_fit, embed_dim=at_least(1), num_heads=at_least(1),
          hidden_dim=optional(at_least(1)), dropout=between(0, 1), scale=optional(number),
          dtype=floating_dtype)
    def __init__(self, embed_dim, num_heads, hidden_dim=None, dropout=0.0, scale=None,
                 dtype=None):
        self.embed_dim = embed_dim
        self.ln1 = LayerNorm(embed_dim, dtype=dtype)
        self.self_attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, scale=scale,
                                            dtype=dtype)
        self.ln2 = LayerNorm(embed_dim, dtype=dtype)
        self.cross_attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, scale=scale,
                                             dtype=dtype)
        self.ln3 = LayerNorm(embed_dim, dtype=dtype)
        self.ff = FeedForward(embed_dim, hidden_dim, dropout=dropout, dtype=dtype)
        self.dropout = Dropout(dropout)

    @door(decoder_checks.memory_mask_fits, x="(B, L, embed_dim)", memory="(B, S, embed_dim)",
          return_weights=bool)
    def forward(self, x, memory, memory_mask=None, return_weights=False):
        """The output (B, L, E); with return_weights, (output, self-attention weights
        (B, H, L, L), cross-attention weights (B, H, L, S))."""
        attended, self_weights = self.self_attn(self.ln1(x), is_causal=True)   # (B, L, E)
        x = x + self.dropout(attended)                                          # (B, L, E)
        read, cross_weights = self.cross_attn(self.ln2(x), memory, memory,
                                              attn_mask=memory_mask)            # (B, L, E)
        x = x + self.dropout(read)                                              # (B, L, E)
        x = x + self.ff(self.ln3(x))                                            # (B, L, E)
        return (x, self_weights, cross_weights) if return_weights else x


class EncoderDecoder(Module):
    """A small encoder-decoder transformer: source ids (B, S) and target ids (B, L) -> logits
    (B, L, tgt_vocab) for the next target token at every target position.

    The encoder runs once over the whole source with self-attention that is not causal (every
    source position sees every other). Its output, `memory` (B, S, E), is what every decoder
    block's cross-attention reads: the only way source information reaches the target. The
    decoder's self-attention is causal, so training feeds the whole target at once ("teacher
    forcing": the input is the target shifted right behind a start token) and position i still
    predicts token i + 1 from tokens <= i only.

    `src_mask` (B, S) booleans marks the real source tokens (True) and the padding (False); it
    hides the padding from the encoder's self-attention and from every cross-attention. (PyTorch's
    `src_key_padding_mask` means the opposite: True = padding.) Positions are the sinusoidal table
    of `nn.PositionalEncoding`, the same for source and target; `max_len` bounds both lengths.
    """

    @door(checks.heads_fit, src_vocab=at_least(1), tgt_vocab=at_least(1), embed_dim=at_least(1),
          num_heads=at_least(1), num_layers=at_least(1), max_len=at_least(1),
          hidden_dim=optional(at_least(1)), dropout=between(0, 1), scale=optional(number),
          dtype=floating_dtype)
    def __init__(self, src_vocab, tgt_vocab, embed_dim, num_heads, num_layers, max_len=256,
                 hidden_dim=None, dropout=0.0, scale=None, dtype=None):
        self.src_vocab, self.tgt_vocab, self.max_len = src_vocab, tgt_vocab, max_len
        self.embed_dim = embed_dim
        self.src_embed = Embedding(src_vocab, embed_dim, dtype=dtype)
        self.tgt_embed = Embedding(tgt_vocab, embed_dim, dtype=dtype)
        self.positions = PositionalEncoding(embed_dim, max_len)
        self.encoder = [TransformerBlock(embed_dim, num_heads, hidden_dim=hidden_dim,
                                         dropout=dropout, scale=scale, dtype=dtype)
                        for _ in range(num_layers)]
        self.encoder_ln = LayerNorm(embed_dim, dtype=dtype)
        self.decoder = [TransformerDecoderBlock(embed_dim, num_heads, hidden_dim=hidden_dim,
                                                dropout=dropout, scale=scale, dtype=dtype)
                        for _ in range(num_layers)]
        self.decoder_ln = LayerNorm(embed_dim, dtype=dtype)
        self.head = Linear(embed_dim, tgt_vocab, dtype=dtype)

    @door(decoder_checks.source_and_target_fit, return_weights=bool)
    def forward(self, src_ids, tgt_ids, src_mask=None, return_weights=False):
        """Logits (B, L, tgt_vocab); with return_weights, also the decoder blocks' self- and
        cross-attention weights, {"self": [(B, H, L, L)], "cross": [(B, H, L, S)]}."""
        memory = self.encode(src_ids, src_mask)                     # (B, S, E)
        return self.decode(tgt_ids, memory, src_mask, return_weights)

    @door(decoder_checks.source_fits)
    def encode(self, src_ids, src_mask=None):
        """The memory (B, S, E): the source, each position having attended to the whole source."""
        src_ids = np.asarray(data_of(src_ids))                      # (B, S)
        padding = padding_mask(src_mask)             # (B, 1, 1, S) or None
        x = self.positions(self.src_embed(src_ids))                 # (B, S, E)
        for block in self.encoder:
            x = block(x, attn_mask=padding)                         # (B, S, E)
        return self.encoder_ln(x)                                   # (B, S, E)

    @door(decoder_checks.target_fits, memory="(B, S, embed_dim)", return_weights=bool)
    def decode(self, tgt_ids, memory, src_mask=None, return_weights=False):
        """Logits (B, L, tgt_vocab) of the target given the memory (see forward)."""
        tgt_ids = np.asarray(data_of(tgt_ids))                      # (B, L)
        padding = padding_mask(src_mask)         # (B, 1, 1, S) or None
        x = self.positions(self.tgt_embed(tgt_ids))                 # (B, L, E)
        weights = {"self": [], "cross": []}
        for block in self.decoder:
            x, self_weights, cross_weights = block(x, memory, padding, return_weights=True)
            weights["self"].append(self_weights)                    # (B, H, L, L)
            weights["cross"].append(cross_weights)                  # (B, H, L, S)
        logits = self.head(self.decoder_ln(x))                      # (B, L, tgt_vocab)
        return (logits, weights) if return_weights else logits

    @no_grad()
    @door(decoder_checks.start_and_source_fit, max_new_tokens=at_least(0), start_id=at_least(0))
    def greedy_decode(self, src_ids, max_new_tokens, start_id, src_mask=None):
        """Translate greedily: (B, 1 + max_new_tokens) NumPy ids, `start_id` then the token of
        largest logit at every step.

        The source is encoded once; each step runs the decoder over the whole target written so
        far (no cache) and appends the argmax of the last position's logits. Every row runs all
        `max_new_tokens` steps: cut it at your end token. (A model with dropout should be put in
        eval() mode first.)
        """
        memory = self.encode(src_ids, src_mask)                     # (B, S, E)
        written = np.full((len(memory), 1), start_id)               # (B, 1)
        for _ in range(max_new_tokens):
            logits = self.decode(written, memory, src_mask)         # (B, T, tgt_vocab)
            next_ids = logits.data[:, -1].argmax(axis=-1)           # (B,)
            written = np.concatenate([written, next_ids[:, None]], axis=1)   # (B, T + 1)
        return written


def padding_mask(src_mask):
    """src_mask (B, S) booleans, True for the real source tokens, as an attention mask
    (B, 1, 1, S) that broadcasts over heads and queries; None stays None."""
    if src_mask is None:
        return None
    return np.asarray(src_mask)[:, None, None, :]                               # (B, 1, 1, S)
