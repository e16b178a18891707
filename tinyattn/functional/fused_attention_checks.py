"""Chapter 2. What makes an argument of FlashAttention's and block-sparse attention's doors
(functional/fused_attention.py) bad."""
import numpy as np

from tinyattn.arrays import data_of, numeric_array
from tinyattn.functional.checks import default_scale


def layout_and_scale_fit(query, key, value, layout, block_size, scale=None, **_):
    """layout holds booleans (an array, a list or a tensor) broadcasting to (..., Lb, Sb): the
    pairs of blocks of the inputs' batch; the default scale has a width E. Returns the layout as
    a NumPy array."""
    default_scale(query, scale)
    layout = numeric_array(data_of(layout), "layout")
    if layout.dtype != np.bool_:
        raise TypeError(f"layout must hold booleans (True: the pair of blocks is visible), got "
                        f"dtype {layout.dtype}")
    L, S = query.shape[-2], key.shape[-2]
    batch = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
    pairs = batch + (-(-L // block_size), -(-S // block_size))             # (..., Lb, Sb)
    try:
        fits = layout.ndim >= 2 and np.broadcast_shapes(layout.shape, pairs) == pairs
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"layout of shape {layout.shape} does not broadcast to (..., Lb, Sb) = "
                         f"{pairs}: L = {L} queries and S = {S} keys in blocks of {block_size} "
                         f"make {pairs[-2]} x {pairs[-1]} pairs of blocks")
    return {"layout": layout}
