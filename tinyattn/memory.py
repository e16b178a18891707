"""Chapter 1. The one speed setting of the whole library, applied once by `import tinyattn`."""
import ctypes


def keep_freed_memory():
    """Ask the C allocator (glibc's malloc, on Linux) to keep the memory NumPy frees, for the
    arrays allocated next, instead of giving it back to the system.

    A training step allocates and frees arrays of the same sizes over and over: activations,
    gradients, and the temporaries of every formula written plainly (`0.5 * x * (1.0 + t)` makes
    three arrays as large as x). By default, glibc returns large freed blocks to the system, and
    the next allocations have the system hand them back page by page, each 4 KB page zero-filled
    on a page fault: processor time that is no part of the model's work. Raising both thresholds
    keeps that memory in the process (arrays up to 32 MB come from the heap, and up to 512 MB of
    it stays free for reuse), so the ops can be written as their formulas and still run at
    NumPy's speed; `dev/measure_tricks.py` measures what it saves on a training step. Elsewhere
    (macOS, Windows, another C library) nothing changes.
    """
    try:
        mallopt = ctypes.CDLL("libc.so.6").mallopt
    except (OSError, AttributeError):
        return
    mallopt(M_MMAP_THRESHOLD, 32 * 2**20)
    mallopt(M_TRIM_THRESHOLD, 512 * 2**20)


M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3        # glibc's names for mallopt's parameters
