"""Chapter 2. What makes an argument of linear attention (functional/linear_attention.py) bad."""
from tinyattn.arguments import shapes


def causal_needs_L_keys(query, key, value, is_causal=False, **_):
    """Causal linear attention pairs query i with keys j <= i: as many keys as queries."""
    if is_causal and query.shape[-2] != key.shape[-2]:
        raise ValueError(f"causal attention needs as many keys as queries (L == Lk), got query "
                         f"{query.shape}, key {key.shape}, value {value.shape}")


def state_fits(query, key, value, state=None, eps=1e-6):
    """state: None, or the (S, z) pair a previous step returned."""
    if state is None:
        return
    if not (isinstance(state, tuple) and len(state) == 2):
        raise TypeError(f"state must be the (S, z) pair a previous step returned, or None, got "
                        f"{type(state).__name__}")
    shapes(query=(query, "(..., E)"), value=(value, "(..., Ev)"), S=(state[0], "(..., E, Ev)"),
           z=(state[1], "(..., E)"))
