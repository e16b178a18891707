"""Functions on tensors: activations, softmax, normalisation, losses, and attention.

Everything here is composed from the ops in `tinyattn.ops`, except softmax and log-softmax, which
are fused ops of their own. Because of that, a gradient check of anything here also checks the
ops it is built from.
"""
from tinyattn import ops


def softmax(x, axis=-1):
    """exp(x) / sum(exp(x)) along `axis`, computed stably (see `ops.softmax.Softmax`)."""
    return ops.Softmax.apply(x, axis=axis)


def log_softmax(x, axis=-1):
    """log(softmax(x)) along `axis`, computed stably (see `ops.softmax.LogSoftmax`)."""
    return ops.LogSoftmax.apply(x, axis=axis)


def relu(x):
    """max(x, 0), elementwise."""
    return ops.Relu.apply(x)
