"""Chapter 6. What makes an argument of functional/patches.py bad: a patch size that does not divide
the image, tokens that are not the patches of the image asked for."""


def patches_fit(images, patch_size):
    """patchify: the patch size divides the image's height and width."""
    H, W = images.shape[-2:]
    if H % patch_size or W % patch_size:
        raise ValueError(f"images of height {H} and width {W} cannot be cut into patches of "
                         f"{patch_size} x {patch_size}: the patch size must divide both")


def tokens_fit(tokens, patch_size, channels, height, width):
    """unpatchify: the image's sides are whole numbers of patches, and the tokens are its patches."""
    if height % patch_size or width % patch_size:
        raise ValueError(f"an image of height {height} and width {width} is no whole number of "
                         f"{patch_size} x {patch_size} patches")
    P = (height // patch_size) * (width // patch_size)
    N = patch_size * patch_size * channels
    if tokens.shape[1:] != (P, N):
        raise ValueError(f"an image of {channels} channels, {height} x {width}, in patches of "
                         f"{patch_size} x {patch_size} is {P} tokens of {N} numbers, got tokens of "
                         f"shape {tokens.shape}")
