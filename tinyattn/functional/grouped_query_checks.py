"""Chapter 5. What makes an argument of grouped-query attention (functional/grouped_query.py)
bad."""
import numpy as np

from tinyattn.engine import Tensor
from tinyattn.functional.checks import attention_mask, default_scale


def heads_group_and_mask_fits(query, key, value, attn_mask=None, scale=None, **_):
    """The key/value heads K divide the query heads H; attn_mask None or a NumPy array (booleans
    or floats) broadcasting to the scores (B, H, L, S); the default scale has a width E."""
    (B, H, L, _), (K, S) = query.shape, key.shape[1:3]
    if H % K:
        raise ValueError(f"the {K} key/value heads must divide the {H} query heads into groups "
                         f"of equal size; got query {query.shape}, key {key.shape}")
    if isinstance(attn_mask, Tensor):
        raise TypeError("attn_mask must be a NumPy array here (booleans, or floats added to the "
                        "scores), not a tensor: grouped heads share one mask of each head")
    if attn_mask is not None:
        attention_mask(np.asarray(attn_mask), (B, H, L, S), query.dtype)
    default_scale(query, scale)
