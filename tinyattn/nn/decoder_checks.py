"""Chapter 2. What makes an argument of nn/decoder.py's block and encoder-decoder bad: each door
names its rule."""
import numpy as np

from tinyattn import arguments
from tinyattn.arrays import TensorIndexError, data_of
from tinyattn.functional.checks import attention_mask


def memory_mask_fits(self, x, memory, memory_mask=None, **_):
    cross_scores = (len(x), self.cross_attn.num_heads, x.shape[1], memory.shape[1])  # (B, H, L, S)
    attention_mask(memory_mask, cross_scores, x.dtype, "memory_mask")


def sequence_fits(model, name, ids, vocab_size):
    """ids (B, T) within the vocabulary and max_len."""
    arguments.ids(name, ids, vocab_size, "tokens")
    shape = np.shape(data_of(ids))
    if len(shape) != 2 or shape[1] > model.max_len:
        raise ValueError(f"{name} must have shape (B, T) with T <= max_len {model.max_len}, got "
                         f"{shape}")


def src_mask_fits(src_mask, shape):
    """src_mask None, or booleans (True = a real token) of the source's shape (B, S)."""
    if src_mask is None:
        return
    src_mask = np.asarray(src_mask)
    if src_mask.dtype != np.bool_:
        raise TypeError(f"src_mask must be booleans (True = a real token), got dtype "
                        f"{src_mask.dtype}")
    if src_mask.shape != tuple(shape):
        raise ValueError(f"src_mask must have the source's shape (B, S) = {tuple(shape)}, got "
                         f"{src_mask.shape}")


def source_and_target_fit(self, src_ids, tgt_ids, src_mask=None, return_weights=False):
    source_fits(self, src_ids, src_mask)
    sequence_fits(self, "tgt_ids", tgt_ids, self.tgt_vocab)


def source_fits(self, src_ids, src_mask=None):
    sequence_fits(self, "src_ids", src_ids, self.src_vocab)
    src_mask_fits(src_mask, np.shape(data_of(src_ids)))


def target_fits(self, tgt_ids, memory, src_mask=None, return_weights=False):
    sequence_fits(self, "tgt_ids", tgt_ids, self.tgt_vocab)
    src_mask_fits(src_mask, memory.shape[:2])


def start_and_source_fit(self, src_ids, max_new_tokens, start_id, src_mask=None):
    if start_id >= self.tgt_vocab:
        raise TensorIndexError(f"start_id must lie in [0, {self.tgt_vocab}) "
                               f"({self.tgt_vocab} target tokens), got {start_id}")
    if 1 + max_new_tokens > self.max_len:
        raise ValueError(f"1 + max_new_tokens = {1 + max_new_tokens} target tokens exceed "
                         f"max_len {self.max_len}")
    source_fits(self, src_ids, src_mask)
