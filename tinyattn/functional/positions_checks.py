"""Chapter 2. What makes an argument of functional/positions.py bad."""


def pairs_of_features(x, **_):
    """rope rotates pairs of features: an even number of them."""
    if x.shape[-1] % 2:
        raise ValueError(f"the last axis of x holds pairs of features, so it must be even; got x "
                         f"of shape {x.shape}")
