"""A pre-LayerNorm transformer block, and a small causal language model made of them, which can
write: `generate`, with a key/value cache.

    x = x + attention(layer_norm(x))        tokens look at each other
    x = x + feed_forward(layer_norm(x))     each token is transformed on its own

The residual connections (`x + ...`) give the gradient a direct path through every block; putting
the LayerNorm before each sub-layer ("pre-LN", as in GPT-2) keeps deep stacks trainable without a
learning-rate warm-up.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn import arguments, rng
from tinyattn.arguments import (at_least, between, door, floating_dtype, heads_fit, number,
                                one_of, optional)
from tinyattn.engine import no_grad
from tinyattn.nn.layers import Dropout, Embedding, FeedForward, LayerNorm, Linear, \
    PositionalEncoding
from tinyattn.nn import pretrained
from tinyattn.nn.module import Module
from tinyattn.nn.multi_head_attention import (KVCache, MultiHeadAttention, attention_call_fits,
                                              cache_fits)
from tinyattn.plumbing import data_of

POSITIONAL = ("sinusoidal", "learned", "rope", "alibi", "none")
ABSOLUTE = ("sinusoidal", "learned")        # a table of max_len rows: no position beyond it


def mask_and_cache_fit(self, x, attn_mask=None, is_causal=False, cache=None):
    attention_call_fits(self.attn.num_heads, x, x, attn_mask, is_causal, cache)


class TransformerBlock(Module):
    """Pre-LN block: x + attn(ln1(x)), then x + ff(ln2(x)). Inputs and outputs are (B, T, E).

    `rope=True` gives the attention rotary positions; `cache` (a KVCache) is passed to it.
    `layer_norm_eps` is the eps of both LayerNorms (GPT-2's config calls it layer_norm_epsilon).
    """

    @door(heads_fit, embed_dim=at_least(1), num_heads=at_least(1),
          hidden_dim=optional(at_least(1)), dropout=between(0, 1), scale=optional(number),
          dtype=floating_dtype, rope=bool, layer_norm_eps=between(0))
    def __init__(self, embed_dim, num_heads, hidden_dim=None, dropout=0.0, scale=None,
                 dtype=None, rope=False, layer_norm_eps=1e-5):
        self.embed_dim = embed_dim
        self.ln1 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dropout=dropout, scale=scale,
                                       dtype=dtype, rope=rope)
        self.ln2 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.ff = FeedForward(embed_dim, hidden_dim, dropout=dropout, dtype=dtype)
        self.dropout = Dropout(dropout)

    def forward(self, x, attn_mask=None, is_causal=False, cache=None):
        return self.forward_with_weights(x, attn_mask, is_causal, cache)[0]

    @door(mask_and_cache_fit, x="(B, T, embed_dim)", is_causal=bool)
    def forward_with_weights(self, x, attn_mask=None, is_causal=False, cache=None):
        """(output, attention weights (B, H, T, S))."""
        attended, weights = self.attn(self.ln1(x), attn_mask=attn_mask, is_causal=is_causal,
                                      cache=cache)
        x = x + self.dropout(attended)          # (B, T, E)
        return x + self.ff(self.ln2(x)), weights


def heads_fit_positions(embed_dim, num_heads, positional="sinusoidal", **_):
    heads_fit(embed_dim, num_heads, rope=positional == "rope")


def ids_and_cache_fit(self, ids, return_weights=False, cache=None, **_):
    """The ids a (B, T) integer array within the vocabulary, the cache one KVCache per block, and
    for absolute positions, the sequence within the table's length."""
    ids_fit(self, ids)
    if cache is not None and not (isinstance(cache, list)
                                  and all(isinstance(c, KVCache) for c in cache)):
        raise TypeError(f"cache must be a list of KVCache, one per block (from empty_cache()), "
                        f"got {type(cache).__name__}")
    if cache is not None and len(cache) != len(self.blocks):
        raise ValueError(f"cache holds {len(cache)} layers, the model {len(self.blocks)}; make "
                         f"it with empty_cache()")
    shape = np.shape(data_of(ids))
    attention = self.blocks[0].attn
    for block_cache in cache or []:
        cache_fits(block_cache, "ids", shape, self.dtype, attention.num_heads, attention.head_dim)
    start = len(cache[0]) if cache else 0
    if self.positional in ABSOLUTE and start + shape[1] > self.max_len:
        raise ValueError(f"a sequence of {start + shape[1]} tokens is longer than max_len "
                         f"{self.max_len}, the length of the {self.positional} position table")


def ids_fit(model, ids):
    """ids: a (B, T) array (or list, or tensor) of integers in [0, vocab_size)."""
    arguments.ids("ids", ids, model.embed.num_embeddings, "tokens")
    if np.ndim(data_of(ids)) != 2:
        raise ValueError(f"ids must be (B, T), got shape {np.shape(data_of(ids))}")


def gpt2_shaped(self, folder):
    """What GPT-2's layout can hold (nn/pretrained.py): learned positions, a tied head without
    bias, attention scaled by 1/sqrt(head_dim) or not at all."""
    differences = [what for what, differs in (
        (f"{self.positional} positions (not learned)", self.positional != "learned"),
        ("an output head of its own (not tied to the embedding)", not self.tied_head),
        (f"scale {self.blocks[0].attn.scale} (not None or 1.0)",
         self.blocks[0].attn.scale not in (None, 1.0))) if differs]
    if differences:
        raise ValueError(f"GPT-2's layout holds a model with learned positions, a head tied to "
                         f"the embedding and the default scale; this one has "
                         f"{' and '.join(differences)}")


def prompt_fits(self, ids, **_):
    arguments.ids("ids", ids, self.embed.num_embeddings, "tokens")
    shape = np.shape(data_of(ids))
    if len(shape) != 2 or shape[1] == 0:
        raise ValueError(f"ids must be (B, T) with T >= 1, got shape {shape}")


class CausalTransformer(Module):
    """A small GPT-style language model: token ids (B, T) -> next-token logits (B, T, vocab_size).

    embedding (+ positions) -> num_layers causal TransformerBlocks -> LayerNorm -> Linear.
    `scale` is passed to every attention layer (None: 1 / sqrt(head_dim); 1.0: unscaled).

    `positional` says how the model knows where a token is (tinyattn/functional/positions.py):
      "sinusoidal"  the fixed table of "Attention Is All You Need", added to the embeddings
      "learned"     an nn.Embedding(max_len, embed_dim) of positions, added to the embeddings
      "rope"        every attention layer rotates its queries and keys (F.rope)
      "alibi"       every attention layer adds ALiBi's distance penalty to its scores
      "none"        nothing: a layer cannot tell orders apart (one causal layer sees, before each
                    position, a multiset of tokens; from the second on, the causal mask lets
                    some order in: demo 8)
    The first two are tables of max_len rows, so sequences are at most max_len long; the last
    three have no length limit (max_len is then unused).

    GPT-2 is this model with learned positions, tanh GELU (F.gelu), `layer_norm_eps` from its
    config, and `tied_head=True`: the output head is the token embedding itself, without bias,
    logits = ln(x) @ embed.weight^T, so the one Parameter `embed.weight` gets the gradients of
    both its uses (listed once by `parameters()` and `state_dict()`, as "embed.weight").
    `from_pretrained` reads GPT-2's own weights, `save_pretrained` writes them
    (tinyattn/nn/pretrained.py: GPT-2's checkpoint layout). `hidden_dim` is the feed-forward
    width (default 4 * embed_dim).
    """

    @door(heads_fit_positions, vocab_size=at_least(1), embed_dim=at_least(1),
          num_heads=at_least(1), num_layers=at_least(1), max_len=at_least(1),
          dropout=between(0, 1), scale=optional(number), dtype=floating_dtype,
          positional=one_of(*POSITIONAL), hidden_dim=optional(at_least(1)),
          layer_norm_eps=between(0), tied_head=bool)
    def __init__(self, vocab_size, embed_dim, num_heads, num_layers, max_len=256, dropout=0.0,
                 scale=None, dtype=None, positional="sinusoidal", hidden_dim=None,
                 layer_norm_eps=1e-5, tied_head=False):
        self.positional, self.max_len, self.num_heads = positional, max_len, num_heads
        self.tied_head = tied_head
        self.embed = Embedding(vocab_size, embed_dim, dtype=dtype)
        if positional == "sinusoidal":
            self.positions = PositionalEncoding(embed_dim, max_len)
        elif positional == "learned":
            self.positions = Embedding(max_len, embed_dim, dtype=dtype)
        self.blocks = [TransformerBlock(embed_dim, num_heads, hidden_dim, dropout=dropout,
                                        scale=scale, dtype=dtype, rope=positional == "rope",
                                        layer_norm_eps=layer_norm_eps)
                       for _ in range(num_layers)]
        self.ln = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.head = Linear(embed_dim, vocab_size, bias=not tied_head, dtype=dtype)
        if tied_head:       # one Parameter in two places: its gradient sums both uses
            self.head.weight = self.embed.weight        # (vocab_size, E): Linear's (out, in)

    @door(ids_and_cache_fit, return_weights=bool, last_only=bool)
    def forward(self, ids, return_weights=False, cache=None, last_only=False):
        """Logits (B, T, vocab_size); with return_weights, also each block's attention weights.
        `last_only=True` gives the last position's logits alone, (B, 1, vocab_size): all that
        generation reads, for one row of the head's product (E x vocab_size) instead of T.

        `cache` (a list of one KVCache per block, from `empty_cache()`) holds the keys and values
        of the tokens seen so far: the ids are then the next tokens of the same sequences, at the
        positions after the cached ones, and the logits are those the model gives them in the
        whole sequence. The cache grows by the ids' length.
        """
        ids = np.asarray(data_of(ids))                                  # (B, T)
        start = len(cache[0]) if cache else 0                           # tokens already cached
        T = ids.shape[1]
        x = self.embed(ids)                                             # (B, T, E)
        if self.positional == "sinusoidal":
            x = self.positions(x, offset=start)                         # (B, T, E)
        elif self.positional == "learned":
            x = x + self.positions(np.arange(start, start + T))         # (B, T, E) + (T, E)
        bias = None
        if self.positional == "alibi":
            bias = F.alibi_bias(self.num_heads, T, x.dtype, offset=start)   # (H, T, start + T)
        weights = []
        for block, block_cache in zip(self.blocks, cache or [None] * len(self.blocks)):
            x, block_weights = block.forward_with_weights(x, bias, is_causal=True,
                                                          cache=block_cache)   # (B, T, E)
            weights.append(block_weights)                               # (B, H, T, start + T)
        if last_only:
            x = x[:, -1:]                                               # (B, 1, E)
        logits = self.head(self.ln(x))                                  # (B, T or 1, vocab_size)
        return (logits, weights) if return_weights else logits

    @classmethod
    @door(dtype=floating_dtype)
    def from_pretrained(cls, folder, dtype=np.float32):
        """GPT-2 from a folder in Hugging Face's layout (config.json and model.safetensors, as
        `python -m tinyattn download gpt2` fetches them, or as transformers' `save_pretrained`
        writes them), in eval mode, its parameters of `dtype`. How GPT-2's names and layout map
        onto this model: tinyattn/nn/pretrained.py. A folder that is not such a folder (a file
        missing, a config asking for what this model does not do, weights that disagree with
        the config) is a FileNotFoundError or ValueError naming the folder and what is wrong."""
        try:
            settings, state = pretrained.read_gpt2(folder)
        except (OSError, ValueError) as error:
            raise type(error)(f"CausalTransformer.from_pretrained: {error}") from None
        model = cls(**settings, dtype=dtype)
        model.load_state_dict(state)
        return model.eval()

    @door(gpt2_shaped)
    def save_pretrained(self, folder):
        """Write config.json and model.safetensors of this model to `folder` (made if missing) in
        GPT-2's layout, which `from_pretrained` and transformers' `GPT2LMHeadModel.from_pretrained`
        read: a model trained here runs there. Only a GPT-2-shaped model fits that layout: learned
        positions, a tied head, the default scale or none (scale=1.0). Each file is written whole
        or not at all."""
        pretrained.write_gpt2(folder, self)

    def empty_cache(self):
        """One empty KVCache per block, for `forward(ids, cache=...)`."""
        return [KVCache() for _ in self.blocks]

    @no_grad()
    @door(prompt_fits, max_new_tokens=at_least(0), temperature=between(0),
          top_k=optional(at_least(1)), use_cache=bool)
    def generate(self, ids, max_new_tokens, temperature=1.0, top_k=None, use_cache=True):
        """Continue each row of `ids` (B, T) by max_new_tokens tokens: (B, T + max_new_tokens).

        At each step the next token is drawn from softmax(logits / temperature) of the last
        position, restricted to the top_k largest logits when top_k is given (`next_tokens`);
        temperature=0 takes the largest. Draws come from the generator `ta.manual_seed` seeds.
        No graph is recorded. As in PyTorch, dropout is active in training mode: call `eval()`.
        Logits that cannot be sampled from (a NaN, a +inf, or a row all -inf: the softmax of any
        of them is NaN) raise a ValueError naming the step and the row, as torch.multinomial
        refuses them; also at temperature 0, where argmax would return the NaN's index.

        The cache: the first step runs the prompt and fills one KVCache per layer; each later
        step runs the newest token alone, its positions continuing from the cache. The logits are
        those of running the whole prefix, up to rounding (matrix products of other shapes add
        in another order), and so are the tokens. `use_cache=False` runs the whole prefix at every
        step instead, as nanoGPT's generate does (and Hugging Face's with the same argument): the
        same tokens, as slow as that is (bench 5 and demos 11 and 14 measure the difference).

        With absolute positions (sinusoidal, learned) the context is the last max_len tokens, as
        in nanoGPT. Once the sequence is longer than that, the window slides by one token at every
        step, every kept token changes position, and so do all their keys and values: the cache is
        rebuilt from the window at each step (no faster than without one, but still exact). rope,
        alibi and none have no length limit: the cache keeps growing.

        ids: integers in [0, vocab_size), an array or tensor (B, T) with T >= 1; max_new_tokens
        an int >= 0; temperature >= 0; top_k None or an int >= 1 (above the vocabulary size it
        means all of it); use_cache True or False. Returns a NumPy int64 array.
        """
        ids = np.asarray(data_of(ids), dtype=np.int64)                  # (B, T)
        window = self.max_len if self.positional in ABSOLUTE else None
        cache = None
        for step in range(max_new_tokens):
            start = 0 if window is None else max(0, ids.shape[1] - window)
            if not use_cache:                       # the whole prefix (its window), every step
                logits = self(ids[:, start:], last_only=True)               # (B, 1, vocab)
            elif cache is None or start > 0:        # first step, or the window has slid
                cache = self.empty_cache()
                logits = self(ids[:, start:], cache=cache, last_only=True)  # (B, 1, vocab)
            else:
                logits = self(ids[:, -1:], cache=cache, last_only=True)     # (B, 1, vocab)
            last = logits.data[:, -1]                                   # (B, vocab)
            samplable(last, step)
            chosen = next_tokens(last, temperature, top_k)              # (B,)
            ids = np.concatenate([ids, chosen[:, None]], axis=1)        # (B, T + 1)
        return ids


def samplable(logits, step):
    """Logits (B, V) a token can be drawn from: no NaN, no +inf, and in every row a logit above
    -inf (a -inf alone is a token ruled out, weight 0)."""
    nan, inf = np.isnan(logits).any(axis=-1), (logits == np.inf).any(axis=-1)     # (B,)
    ruled_out = (logits == -np.inf).all(axis=-1)                                   # (B,)
    if nan.any() or inf.any() or ruled_out.any():
        row = int(np.argmax(nan | inf | ruled_out))
        what = "NaN" if nan[row] else "+inf" if inf[row] else "only -inf"
        raise ValueError(f"CausalTransformer.generate: step {step}, row {row}: the logits hold "
                         f"{what}, so there is no distribution to draw from: the model's "
                         f"numbers overflowed or are NaN (np.isfinite on each parameter tells)")


def next_tokens(logits, temperature, top_k=None):
    """One token id per row of `logits` (B, V), a NumPy array: the largest when temperature is 0,
    otherwise a draw from softmax(logits / temperature) over the top_k largest logits (all of
    them when top_k is None; a logit tied with the k-th largest is kept too, as in nanoGPT)."""
    if temperature == 0:
        return logits.argmax(axis=-1)                                   # (B,)
    logits = logits.astype(np.float64)                                  # (B, V)
    # exp((logits - max) / temperature): the softmax's numerator, over the same denominator for
    # every token. Subtracting the max before dividing keeps the largest at exp(0) = 1 for any
    # temperature; a tiny one sends the others to -inf (weight 0): the argmax, as it should; an
    # infinite one gives every token weight 1.
    with np.errstate(over="ignore"):
        scaled = (logits - logits.max(axis=-1, keepdims=True)) / temperature     # (B, V) <= 0
    weights = np.exp(scaled)                                            # (B, V), unnormalised
    if top_k is not None and top_k < logits.shape[-1]:
        kth_largest = np.sort(logits, axis=-1)[:, -top_k, None]         # (B, 1)
        weights = np.where(logits < kth_largest, 0.0, weights)          # (B, V): top_k kept
    cumulative = weights.cumsum(axis=-1)                                # (B, V)
    # inverse transform sampling: a uniform number u in [0, total), and the first token whose
    # cumulative weight exceeds it (a token of weight 0 can never be that one)
    u = rng.generator.random((len(logits), 1)) * cumulative[:, -1:]     # (B, 1)
    return (cumulative <= u).sum(axis=-1)                               # (B,)
