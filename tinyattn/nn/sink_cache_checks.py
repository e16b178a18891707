"""Chapter 5. What makes an argument of the sink cache (nn/sink_cache.py) bad."""


def streamable(self, model, window, sinks=4):
    """SinkCache: a family's model (an OpenDecoder) whose every layer is a full grouped-query
    attention layer (a latent layer caches latents, a sliding layer keeps its own window)."""
    if "OpenDecoder" not in (kind.__name__ for kind in type(model).__mro__):
        raise TypeError(f"model must be an OpenDecoder, got {type(model).__name__}")
    settings = model.settings
    if settings.latent is not None or "sliding" in settings.kinds():
        what = "latent attention" if settings.latent is not None else "sliding layers"
        raise ValueError(f"the sink cache keeps the keys and values of full grouped-query "
                         f"attention layers; this model has {what}")
