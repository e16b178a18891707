"""Chapter 1. The random generator behind parameter initialisation and dropout.

`ta.manual_seed(n)` replaces it with a freshly seeded one, so a script run twice draws the same
numbers. Code that draws from it reads `rng.generator` at call time, never a copy made earlier.
"""
import numpy as np

generator = np.random.default_rng()


def manual_seed(seed):
    """Seed the generator used for initialisation and dropout."""
    global generator
    generator = np.random.default_rng(seed)
    return generator
