"""Chapter 6's patches (tinyattn/functional/patches.py): patchify against NumPy and against a strided
convolution (the patch embedding it replaces), unpatchify as DiT's output layer lays its tokens,
their gradients, and their refusals."""
import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F

rng = np.random.default_rng(0)


def np_patchify(images, p):
    """Patch by patch, with loops: the reference."""
    B, C, H, W = images.shape
    tokens = [images[:, :, i:i + p, j:j + p].reshape(B, C * p * p)
              for i in range(0, H, p) for j in range(0, W, p)]
    return np.stack(tokens, axis=1)                                     # (B, P, C p p)


def test_patchify_cuts_row_by_row_in_channel_row_column_order():
    images = rng.standard_normal((2, 3, 8, 12))
    np.testing.assert_array_equal(F.patchify(ta.tensor(images), 4).data, np_patchify(images, 4))


def test_a_linear_on_the_patches_is_the_strided_convolution():
    """Conv2d(C, E, kernel_size=p, stride=p) at every window, written out: the flattened window
    times the flattened kernel."""
    images, weight, bias = rng.standard_normal((2, 3, 8, 8)), rng.standard_normal((5, 3, 4, 4)), \
        rng.standard_normal(5)
    convolved = np.empty((2, 5, 2, 2))
    for i in range(2):
        for j in range(2):
            window = images[:, :, 4 * i:4 * i + 4, 4 * j:4 * j + 4]
            convolved[:, :, i, j] = np.einsum("bcxy,ecxy->be", window, weight) + bias
    tokens = F.patchify(ta.tensor(images), 4).data @ weight.reshape(5, -1).T + bias
    np.testing.assert_allclose(tokens, convolved.reshape(2, 5, 4).transpose(0, 2, 1), atol=1e-12)


def test_unpatchify_reads_row_column_channel_tokens_back_into_the_image():
    B, C, p, h, w = 2, 3, 4, 2, 3
    tokens = rng.standard_normal((B, h * w, p * p * C))
    image = F.unpatchify(ta.tensor(tokens), p, C, h * p, w * p).data
    for n in range(h * w):
        i, j = divmod(n, w)
        patch = image[:, :, i * p:(i + 1) * p, j * p:(j + 1) * p]               # (B, C, p, p)
        np.testing.assert_array_equal(patch.transpose(0, 2, 3, 1).reshape(B, -1), tokens[:, n])


def test_gradients_and_float32():
    images = ta.tensor(rng.standard_normal((1, 2, 4, 6)), requires_grad=True)
    assert ta.gradcheck(lambda x: F.patchify(x, 2), [images])
    tokens = ta.tensor(rng.standard_normal((1, 6, 8)), requires_grad=True)
    assert ta.gradcheck(lambda t: F.unpatchify(t, 2, 2, 4, 6), [tokens])
    assert F.patchify(ta.tensor(np.zeros((1, 1, 2, 2), np.float32)), 2).dtype == np.float32


@pytest.mark.parametrize("call, message", [
    (lambda: F.patchify(ta.tensor(np.zeros((1, 3, 8, 12))), 5),
     r"^patchify: images of height 8 and width 12 cannot be cut into patches of 5 x 5"),
    (lambda: F.patchify(ta.tensor(np.zeros((3, 8, 8))), 4), r"^patchify: images"),
    (lambda: F.unpatchify(ta.tensor(np.zeros((1, 6, 48))), 4, 3, 8, 16),
     r"^unpatchify: an image of 3 channels, 8 x 16, in patches of 4 x 4 is 8 tokens of 48 "
     r"numbers, got tokens of shape \(1, 6, 48\)"),
])
def test_refusals_name_the_function_and_the_sizes(call, message):
    with pytest.raises(ValueError, match=message):
        call()
