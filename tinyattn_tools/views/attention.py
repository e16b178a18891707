"""`attention_view(tokens, weights, grads=None)`: where each head looks, layer by layer.

    logits, weights = model(ids, return_weights=True)     # [(B, H, T, T)], one per layer
    viz.attention_view(tokens, weights).save("attention.html")

For the chosen layer and head the page draws the weights twice: as lines from each query token
(left) to each key token (right), darker for a larger weight, and as a heatmap, a row per query
and a column per key. Hovering a token lights what it attends to (or what attends to it). Given
`grads`, the gradient of the loss with respect to the weights, dL/dA, is drawn beside them in a
second heatmap (red: raising that weight raises the loss; blue: lowers it). To get dL/dA, keep
the weights' gradients before backward:

    logits, weights = model(ids, return_weights=True)
    for layer_weights in weights:
        layer_weights.retain_grad()
    loss.backward()
    viz.attention_view(tokens, weights, grads=[w.grad for w in weights])

An image's patches can be the tokens, drawn as small pictures in place of text: a ViT's
self-attention over its 1 + P tokens, the class token first, labelled "[CLS]" (its weights
(B, H, 1 + P, 1 + P): run_with_cache's "blocks.N.attn.weights"), or text against the patches of
an image (the keys; the queries are `tokens`):

    _, cache = vit.run_with_cache(images)                               # (B, C, H, W)
    weights = [cache[f"blocks.{i}.attn.weights"] for i in range(len(vit.blocks))]
    viz.attention_view(None, weights, image=images, patch_size=vit.patch_size)

The patches are cut as F.patchify cuts them, row by row across the image, so token 1 + i is
patch i: at row i // (W / p) and column i % (W / p) of the grid. The pixels are drawn with the
image's smallest value black and its largest white (a model's images are normalized: their
numbers are not colours). The page decodes each patch's pixels once and copies them into a small
canvas wherever the patch is shown (a canvas inside the SVG, drawn by the page's own script: no
image file, no URL).

A long input is cut to its first `max_tokens` queries and keys (MAX_TOKENS by default), and the
page says what was left out. Where the masked weights are exactly 0 (a causal mask's), dL/dA is
greyed: a weight held at 0 cannot move, whatever its gradient. A query whose dL/dA row is 0 in
every layer and head is one whose output the loss does not read: dL/dA = dL/d(out) V^T is 0 when
dL/d(out) is. A next-token loss leaves the last token's row blank so (it has no next token to
predict), and the page says so beside the heatmap.

How large a view can be: the page draws one head at a time as SVG, one element per weight, and
holds every head's weights as text. Drawing a head takes time in proportion to its L x S weights,
and a page of every layer's heads takes time to open in proportion to its size; a page longer
than the browser's longest string does not open at all. So a view that would draw a head of more
than MAX_CELLS weights, or make a page of more than MAX_PAGE_BYTES, is refused here, saying what
to show instead, before anything is written. The limits are two sizes that dev/views.py measures
(docs/views.md has the times: a head switch, a page's opening).
"""
import base64

import numpy as np

from tinyattn.engine import Tensor
from tinyattn_tools.views.page import View, float32_base64, page

MAX_TOKENS = 64
MAX_CELLS = 128 * 128           # weights a head: its drawing's time grows with them
MAX_PAGE_BYTES = 100 * 10 ** 6  # a page's size: its opening's time grows with it
LINK_THRESHOLD = 0.01           # lines are drawn for weights at least this large


def attention_view(tokens, weights, grads=None, batch=0, max_tokens=MAX_TOKENS, title=None,
                   key_tokens=None, image=None, patch_size=None):
    """An interactive page of attention weights per layer and head, with dL/dA beside them.

    tokens:  one string per position, or a pair (query_tokens, key_tokens) when L != S
    key_tokens: the keys' tokens when they are another sequence than the queries'
             (cross-attention: a decoder's target tokens against its encoder's source tokens);
             `tokens` are then the queries'. The same as the pair (tokens, key_tokens)
    image, patch_size: an image (C, H, W), (H, W) or (B, C, H, W) (the row `batch` of it), C 1
             or 3, cut into patches of patch_size x patch_size pixels: the keys' tokens, drawn
             as pictures, after a class token "[CLS]" when there is one more key than patches;
             with tokens=None, the queries' too (a ViT's self-attention)
    weights: (H, L, S) or (B, H, L, S) (arrays or tensors: a MultiHeadAttention's weights), or a
             list of those, one per layer (a CausalTransformer's `return_weights=True`)
    grads:   dL/dA, in the same form as `weights`, or None
    batch:   the row of the batch shown, for (B, H, L, S) weights
    max_tokens: queries and keys beyond this many are left out, and the page says so
    """
    layers = _layers("weights", weights, batch)
    heads, length, keys = layers[0].shape
    gradients = None if grads is None else _layers("grads", grads, batch)
    if gradients is not None and ([g.shape for g in gradients] != [w.shape for w in layers]):
        raise ValueError(f"attention_view: grads must have the weights' shapes, "
                         f"{[w.shape for w in layers]}, got {[g.shape for g in gradients]}")
    pixels, key_patches = None, [None] * keys
    if image is not None:
        if key_tokens is not None:
            raise TypeError("attention_view: the key tokens are given twice, as key_tokens and "
                            "as the patches of image: give one")
        pixels, key_tokens, key_patches = _patches(image, patch_size, batch, keys)
        if tokens is None:
            tokens = key_tokens
    elif patch_size is not None:
        raise TypeError(f"attention_view: patch_size={patch_size!r} is given without an image")
    elif tokens is None:
        raise TypeError("attention_view: tokens is None: give one string per position, or an "
                        "image whose patches are the tokens")
    if key_tokens is not None:
        if isinstance(tokens, tuple) and len(tokens) == 2 and not isinstance(tokens[0], str):
            raise TypeError("attention_view: the key tokens are given twice, in the pair "
                            "(query_tokens, key_tokens) and as key_tokens: give one")
        query_patches = key_patches if tokens is key_tokens else [None] * length
        tokens = (tokens, key_tokens)
    else:
        query_patches = [None] * length
    queries, key_tokens = _tokens(tokens, length, keys)
    if not (isinstance(max_tokens, int) and max_tokens >= 1):
        raise ValueError(f"attention_view: max_tokens must be a positive int, got {max_tokens!r}")

    shown_length, shown_keys = min(length, max_tokens), min(keys, max_tokens)
    _check_size(len(layers), heads, shown_length, shown_keys, gradients is not None)
    shown = np.stack([w[:, :shown_length, :shown_keys] for w in layers])     # (layers, H, L, S)
    note = ""
    if (shown_length, shown_keys) != (length, keys):
        left_out = max(float(w[:, :shown_length, shown_keys:].sum(axis=-1).max(initial=0))
                       for w in layers)
        note = (f"Showing the first {shown_length} of {length} queries and {shown_keys} of "
                f"{keys} keys (max_tokens={max_tokens}). The weights a shown query puts on the "
                f"keys left out add up to at most {left_out:.3g}.")
    over = (f"{length} tokens" if queries == key_tokens
            else f"{length} query and {keys} key tokens")
    title = title or f"attention over {over}: {len(layers)} x {heads} (layers x heads)"
    shown_grads = None if gradients is None else np.stack(
        [g[:, :shown_length, :shown_keys] for g in gradients])
    note_grads = ("" if shown_grads is None
                  else _unread_queries_note(queries[:shown_length], shown_grads))
    patches = None
    if pixels is not None:
        count = 1 + max((i for i in query_patches[:shown_length] + key_patches[:shown_keys]
                         if i is not None), default=-1)           # the patches shown: the first
        patches = {"size": pixels.shape[1], "count": count,
                   "pixels": base64.b64encode(pixels[:count].tobytes()).decode("ascii"),
                   "queries": query_patches[:shown_length], "keys": key_patches[:shown_keys]}
    return attention_page(title, queries[:shown_length], key_tokens[:shown_keys], shown,
                          shown_grads, note, patches, note_grads)


def _unread_queries_note(queries, grads):
    """What the page says under dL/dA about the queries whose row is 0 in every layer and head
    (grads: (layers, H, L, S)), or "" when there are none."""
    unread = [q for q in range(grads.shape[2]) if not grads[:, :, q].any()]
    if not unread:
        return ""
    rows = ", ".join(f"{q} '{queries[q]}'" for q in unread)
    whose = "these queries'" if len(unread) > 1 else "this query's"
    return (f"Blank row{'s' if len(unread) > 1 else ''} {rows}: the loss does not depend on "
            f"{whose} output, so dL/dA = "
            f"dL/d(out) V^T is 0 there (a next-token loss has no target after the last token).")


def attention_page(title, queries, keys, weights, grads=None, note="", patches=None,
                   note_grads=""):
    """The view of `weights` (layers, H, L, S) and `grads` (the same, or None), unchecked: what
    attention_view makes once it has checked them (dev/views.py calls it to time pages past the
    limits). `patches`: None, or the pictures of the tokens that are patches: {"size": p,
    "count": n, "pixels": base64 of n patches' uint8 RGB (n, p, p, 3), "queries" and "keys":
    each token's patch number, or None for a token drawn as text}. `note_grads`: what the page
    says under dL/dA (attention_view's note on the rows the loss does not read)."""
    layers, heads, length, key_count = weights.shape
    data = {"title": title, "queries": queries, "keys": keys, "layers": layers, "heads": heads,
            "length": length, "keyCount": key_count, "weights": float32_base64(weights),
            "threshold": LINK_THRESHOLD, "note": note, "noteGrads": note_grads,
            "grads": None if grads is None else float32_base64(grads), "patches": patches}
    return View(title, page(title, "attention_view.js", data))


def _check_size(layers, heads, length, keys, with_grads):
    """Refuse a view larger than a browser draws at a usable speed (MAX_CELLS, MAX_PAGE_BYTES)."""
    if length * keys > MAX_CELLS:
        side = int(MAX_CELLS ** 0.5)
        raise ValueError(f"attention_view: a head of {length} x {keys} weights is more than this "
                         f"page draws at a usable speed (at most {MAX_CELLS:,} weights a head, "
                         f"{side} x {side}): show fewer tokens, max_tokens={side} or less")
    arrays = 2 if with_grads else 1
    page_bytes = arrays * 4 * -(-4 * layers * heads * length * keys // 3)   # base64 of float32
    if page_bytes > MAX_PAGE_BYTES:
        what = "weights and their dL/dA" if with_grads else "weights"
        raise ValueError(f"attention_view: {layers} layers x {heads} heads of {length} x {keys} "
                         f"{what} make a page of {page_bytes / 1e6:,.0f} MB, more than one "
                         f"opens at a usable speed ({MAX_PAGE_BYTES / 1e6:,.0f} MB): show "
                         "fewer layers (a slice of the list) or fewer tokens (max_tokens)")


def _layers(name, value, batch):
    """A list of (H, L, S) float arrays, one per layer, from any form attention_view takes."""
    given = list(value) if isinstance(value, (list, tuple)) else [value]
    if not given:
        raise ValueError(f"attention_view: {name} is an empty list: give one array per layer")
    layers = []
    for i, layer in enumerate(given):
        array = np.asarray(layer.data if isinstance(layer, Tensor) else layer)
        where = f"{name}[{i}]" if isinstance(value, (list, tuple)) else name
        if array.dtype.kind not in "fiu":
            raise TypeError(f"attention_view: {where} must hold numbers, got dtype {array.dtype}")
        if array.ndim == 4:
            if not 0 <= batch < array.shape[0]:
                raise ValueError(f"attention_view: batch {batch} is out of range for {where} of "
                                 f"shape {array.shape}")
            array = array[batch]
        elif array.ndim != 3:
            raise ValueError(f"attention_view: {where} must be (H, L, S), (B, H, L, S) or a list "
                             f"of those per layer, got shape {array.shape}")
        layers.append(np.asarray(array, dtype=np.float64))     # read, never written
    if any(layer.shape != layers[0].shape for layer in layers):
        raise ValueError(f"attention_view: every layer's {name} must have one shape (H, L, S), "
                         f"got {[layer.shape for layer in layers]}")
    return layers


def _patches(image, patch_size, batch, keys):
    """The patches of `image` as key tokens: (their pixels (P, p, p, 3) uint8 RGB, their labels,
    each key's patch number or None), with a class token "[CLS]" first when keys is P + 1."""
    array = np.asarray(image.data if isinstance(image, Tensor) else image)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"attention_view: image must hold numbers, got dtype {array.dtype}")
    if array.ndim == 4:
        if not 0 <= batch < array.shape[0]:
            raise ValueError(f"attention_view: batch {batch} is out of range for image of shape "
                             f"{array.shape}")
        array = array[batch]
    if array.ndim == 2:
        array = array[None]                                             # (1, H, W)
    if array.ndim != 3 or array.shape[0] not in (1, 3):
        raise ValueError(f"attention_view: image must be (C, H, W), (H, W) or (B, C, H, W) with "
                         f"C 1 or 3, got shape {np.shape(image)}")
    height, width = array.shape[1:]
    if not (isinstance(patch_size, int) and patch_size >= 1 and height % patch_size == 0
            and width % patch_size == 0):
        raise ValueError(f"attention_view: patch_size must be an int dividing the image's height "
                         f"and width, ({height}, {width}), got {patch_size!r}")
    p = patch_size
    across = width // p
    count = (height // p) * across
    if keys not in (count, count + 1):
        raise ValueError(f"attention_view: an image of ({height}, {width}) in patches of {p} "
                         f"has {count} patches, for weights of {keys} keys: give weights of "
                         f"{count} keys, or {count + 1} with a class token first")
    low, high = float(array.min()), float(array.max())
    scaled = (array - low) / (high - low) if high > low else np.zeros(array.shape)   # 0 to 1
    rgb = np.broadcast_to(np.round(scaled * 255).astype(np.uint8), (3, height, width))
    grid = rgb.reshape(3, height // p, p, across, p).transpose(1, 3, 2, 4, 0)  # (h, w, p, p, 3)
    pixels = np.ascontiguousarray(grid.reshape(count, p, p, 3))                # (P, p, p, 3)
    labels = [f"patch {i} (row {i // across}, column {i % across})" for i in range(count)]
    numbers = list(range(count))
    if keys == count + 1:
        labels, numbers = ["[CLS]"] + labels, [None] + numbers
    return pixels, labels, numbers


def _tokens(tokens, length, keys):
    """(query tokens, key tokens) as lists of strings, checked against L and S."""
    if isinstance(tokens, str):
        raise TypeError("attention_view: tokens must be a list of strings, one per position, "
                        "not one string")
    if isinstance(tokens, tuple) and len(tokens) == 2 and not isinstance(tokens[0], str):
        if isinstance(tokens[1], str):
            raise TypeError("attention_view: the key tokens must be a list of strings, one per "
                            "key, not one string")
        queries, key_tokens = [str(t) for t in tokens[0]], [str(t) for t in tokens[1]]
    else:
        queries = key_tokens = [str(t) for t in tokens]
    if (len(queries), len(key_tokens)) != (length, keys):
        raise ValueError(f"attention_view: {len(queries)} query and {len(key_tokens)} key tokens "
                         f"for weights of (L, S) = ({length}, {keys}): give one token per "
                         "position, or a pair (query_tokens, key_tokens) when L != S")
    return queries, key_tokens
