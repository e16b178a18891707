"""Chapter 2. What makes an argument of the sparse patterns and layouts
(functional/sparse_patterns.py) bad."""
import numpy as np

from tinyattn.arguments import ids
from tinyattn.arrays import data_of, numeric_array


def positions_fit(length, positions, counted="positions", **_):
    """The global positions: ints in [0, length) ([] is none)."""
    positions = numeric_array(positions, "positions")
    ids("positions", positions.astype(int) if positions.size == 0 else positions,
                  length, counted)


def block_positions_fit(num_blocks, positions, **_):
    """The global blocks: ints in [0, num_blocks) ([] is none)."""
    positions_fit(num_blocks, positions, counted="blocks")


def layout_fits(layout, block_size, length, key_length=None, **_):
    """A layout of booleans whose last two axes are the blocks of the length queries and the
    key_length keys; returns it as a NumPy array."""
    layout = numeric_array(data_of(layout), "layout")
    S = length if key_length is None else key_length
    blocks = (-(-length // block_size), -(-S // block_size))                # (Lb, Sb)
    if layout.dtype != np.bool_:
        raise TypeError(f"layout must hold booleans, got dtype {layout.dtype}")
    if layout.shape[-2:] != blocks:
        raise ValueError(f"layout must have shape (..., {blocks[0]}, {blocks[1]}) for {length} "
                         f"queries and {S} keys in blocks of {block_size}, got {layout.shape}")
    return {"layout": layout}
