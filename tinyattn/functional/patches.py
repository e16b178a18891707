"""Chapter 6. Images as tokens: an image cut into square patches, each flattened into one vector
(ViT, Dosovitskiy et al. 2020; DiT, Peebles & Xie 2023), and the patches put back together.

An image (B, C, H, W) with patches of p x p pixels has P = (H / p) (W / p) patches, read row by row
(left to right, top to bottom). Each patch becomes a token of C p p numbers:

    patchify    (B, C, H, W) -> (B, P, C p p)     a token's numbers in the order (c, i, j): channel,
                                                  then the pixel's row and column in the patch
    unpatchify  (B, P, p p C) -> (B, C, H, W)     the inverse of a model's output tokens, whose
                                                  numbers are in the order (i, j, c), as DiT's
                                                  final layer writes them

Why a Linear on patchify's tokens is transformers' "patch embedding" Conv2d(C, E, kernel_size=p,
stride=p): with that stride the kernel's windows are exactly the patches, none overlapping, and at
each window the convolution computes sum over (c, i, j) of weight[e, c, i, j] x[c, i, j] + bias[e]
— the dot product of the flattened window with the flattened kernel. So the Conv2d is
`tokens @ weight.reshape(E, C p p).T + bias`, a matmul over the patches, the kernel flattened in the
(c, i, j) order patchify uses.

Both are reshapes and transposes (ops/shape.py), so their gradients are those ops' own: every
number moves, none is computed.
"""
from tinyattn.arguments import at_least, door
from tinyattn.functional import patches_checks as checks


@door(checks.patches_fit, images="(B, C, H, W)", patch_size=at_least(1))
def patchify(images, patch_size):
    """The patches of `images` (B, C, H, W), p = patch_size dividing H and W, as tokens
    (B, P, C p p), P = (H / p) (W / p), each flattened in the (channel, row, column) order."""
    B, C, H, W = images.shape
    p = patch_size
    h, w = H // p, W // p                                       # patches down and across
    grid = images.reshape(B, C, h, p, w, p)                     # (B, C, h, p, w, p)
    grid = grid.transpose(0, 2, 4, 1, 3, 5)                     # (B, h, w, C, p, p)
    return grid.reshape(B, h * w, C * p * p)                    # (B, P, C p p)


@door(checks.tokens_fit, tokens="(B, P, N)", patch_size=at_least(1), channels=at_least(1),
      height=at_least(1), width=at_least(1))
def unpatchify(tokens, patch_size, channels, height, width):
    """The image (B, channels, height, width) whose patches are `tokens` (B, P, p p C), each
    token's numbers in the (row, column, channel) order of DiT's output layer; p = patch_size."""
    B = tokens.shape[0]
    p, C = patch_size, channels
    h, w = height // p, width // p
    grid = tokens.reshape(B, h, w, p, p, C)                     # (B, h, w, p, p, C)
    grid = grid.transpose(0, 5, 1, 3, 2, 4)                     # (B, C, h, p, w, p)
    return grid.reshape(B, C, height, width)                    # (B, C, H, W)
