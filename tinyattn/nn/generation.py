"""Chapter 2. Writing text: `generate`, one token at a time, and the key/value cache that makes each
step cheap.

A model writing text predicts one token, appends it, and runs again on the longer sequence. Run
plainly, every step recomputes the keys and values of the whole prefix. But with causal attention,
a token's key and value depend only on the tokens up to it (in every layer), so they never change
once computed: each step can compute the new token's alone, and take the others from a cache. A
step then costs one token's projections and one query against the S keys of the prefix, instead
of a forward pass over all S tokens.

The cache is passed down the forward (nn/kv_cache.py): `model(ids, cache=cache)` gives the new
tokens the positions after the cached ones, lets its causal mask show them every cached key, and
hands each block its layer's LayerCache, which the attention (nn/positions.py) extends with the
new keys and values, (B, H, T, D), after the cached ones. With rotary positions the keys are
cached rotated, each by its own position.

What a function chapter 4's `hooks` attaches to "k" or "v" sees during generation: the hook
comes before the cache puts its keys in front, so it gets the keys (values) of the new tokens
alone, (B, H, T, D): the whole prompt at the first step, then one token per step, as
TransformerLens's hook_k does with its cache. What it returns is what the cache keeps.
"""
import numpy as np

from tinyattn import rng
from tinyattn.arguments import at_least, between, door, optional
from tinyattn.engine import no_grad
from tinyattn.nn import causal_transformer_checks
from tinyattn.nn.causal_transformer import CausalTransformer
from tinyattn.nn.module import extends
from tinyattn.arrays import data_of


@extends(CausalTransformer)
@no_grad()
@door(causal_transformer_checks.prompt_fits, max_new_tokens=at_least(0), temperature=between(0),
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

    The cache: the first step runs the prompt and fills the KVCache; each later
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
    window = self.max_len if self.positional in ("sinusoidal", "learned") else None
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


def samplable(logits, step, caller="CausalTransformer.generate"):
    """Logits (B, V) a token can be drawn from: no NaN, no +inf, and in every row a logit above
    -inf (a -inf alone is a token ruled out, weight 0); the error begins with `caller`."""
    nan, inf = np.isnan(logits).any(axis=-1), (logits == np.inf).any(axis=-1)     # (B,)
    ruled_out = (logits == -np.inf).all(axis=-1)                                   # (B,)
    if nan.any() or inf.any() or ruled_out.any():
        row = int(np.argmax(nan | inf | ruled_out))
        what = "NaN" if nan[row] else "+inf" if inf[row] else "only -inf"
        raise ValueError(f"{caller}: step {step}, row {row}: the logits hold "
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
