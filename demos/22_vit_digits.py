"""Demo 22: a Vision Transformer learns handwritten digits.

What it shows: chapter 6's `nn.ViT` trained in tinyattn's engine on scikit-learn's bundled digits
(1,797 images of 8 x 8 pixels, 16 grey levels, classes 0 to 9), against two models of about the
same number of parameters: a multilayer perceptron (MLP) on the 64 pixels, and a ViT of one
layer, made wider to spend the same parameters; their held-out accuracy. Then what the trained
ViT learned to look at and where it thinks its patches are:

- attention rollout (Abnar & Zuidema 2020, "Quantifying Attention Flow in Transformers"): a
  layer's attention, averaged over its heads, is mixed half and half with the identity (the
  residual connection carries each token on), and the layers' matrices are multiplied, first
  layer on the right: how much of each patch reaches the class token through all the layers.
  Drawn over the digits;
- the learned position embeddings' cosine similarity, patch with patch, drawn as the ViT paper's
  Figure 7 (Dosovitskiy et al. 2020) draws it: one small map per patch, laid out where that patch
  is, showing how alike its position is to every other's. The model is given no grid: a table of
  17 rows, one per token, learned from nothing; whether neighbours come out alike is measured.

The ViT: patches of 2 x 2 pixels (16 patches and the class token, 17 tokens), width 32, 2 layers
of 4 heads, feed-forward 64 wide. The MLP: 64 pixels -> a hidden layer (GELU) -> 10. The
one-layer ViT: the width nearest the same parameters, its feed-forward twice as wide. All three
train with Adam at the same rate on the same batches of 64 images (a fixed split: 1,297 images
train, 500 are held out), pixels scaled to [-1, 1], in float32.

    python demos/22_vit_digits.py [output folder] [--quick]

The pictures are `vit_digits_rollout.png` (the rollout over held-out digits) and
`vit_digits_positions.png` (the positions' similarity) in the output folder (when matplotlib is
installed). `--quick` trains each model 30 steps (what the tests run; its numbers mean nothing).
The full run's time, as `dev/regenerate.py` measured it, ends the demo's entry on docs/demos.md.

The data is scikit-learn's, shipped inside the package (`sklearn.datasets.load_digits`), nothing
downloaded: `pip install scikit-learn` (or this repository's `demos` extra). Without it the demo
says so and stops.

Not drawn: the attention view (`python -m tinyattn view attention`) labels tokens by their text
and cannot show a token as its patch of pixels yet, so the ViT's heads are shown here by their
rollout only.
"""
import math

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn

# %% [markdown]
# The settings: the split, the three models' sizes, training in the full and the quick run, and
# the entry on docs/demos.md, which `dev/regenerate.py` fills with the numbers `main` returns.

# %%
HELD_OUT = 500                      # images held out of 1,797; the rest train
SPLIT_SEED = 0                      # the split's permutation
PATCH, WIDTH, HEADS, LAYERS, HIDDEN = 2, 32, 4, 2, 64      # the ViT: 16 patches of 2 x 2
BATCH, LEARNING_RATE = 64, 2e-3
SEED = 0                            # every model starts from it and sees the same batches
FULL = dict(steps=1500, eval_every=100, print_every=100)
QUICK = dict(steps=30, eval_every=10, print_every=30)
ROLLOUT_DRAWN = 10                  # held-out digits drawn with their rollout, one per class

PAGE_ENTRY = """\
22. [`22_vit_digits.py`](../demos/22_vit_digits.py) — **a ViT learns digits.** Chapter 6's ViT
    (patches of 2 x 2 pixels, width 32, 2 layers of 4 heads: {parameters_vit:,} parameters) trained
    {steps} steps on scikit-learn's 8 x 8 digits, against an MLP ({parameters_mlp:,} parameters)
    and a one-layer ViT of width {one_layer_width} ({parameters_one_layer:,}): held-out accuracy
    {accuracy_vit:.1%}, {accuracy_mlp:.1%} and {accuracy_one_layer:.1%} on {held_out} images. The
    attention rollout (Abnar & Zuidema 2020) puts {rollout_on_ink:.0%} of the class token's weight
    on the patches that hold ink (they are {ink_share:.0%} of the patches). The learned positions,
    drawn as the ViT paper's Figure 7, mean cosine similarity of a patch's with those of its row
    {row_cosine:.2f}, of its column {column_cosine:.2f}, of neither {other_cosine:.2f}; for
    {nearest_in_line} of the 16 patches the most similar position is in its row or column (6 of
    the 15 others are). So little structure after {steps} steps on 1,297 images: the paper's
    Figure 7 is of a model trained on 300 million.

    ![attention rollout over held-out digits](pictures/vit_digits_rollout.png)
    ![position embeddings' cosine similarity](pictures/vit_digits_positions.png)"""

PAGE_ENTRY_WITHOUT_RESULTS = """\
22. [`22_vit_digits.py`](../demos/22_vit_digits.py) — **a ViT learns digits.** Chapter 6's ViT
    trained on scikit-learn's 8 x 8 digits against an MLP and a one-layer ViT of the same
    parameters, its attention rollout over the digits and its learned positions' similarity. It
    needs scikit-learn (`pip install scikit-learn`), which the machine that wrote this list did
    not have."""


def can_run_in_full():
    """Whether scikit-learn, which holds the digits, is installed."""
    try:
        import sklearn.datasets  # noqa: F401
    except ImportError:
        return False
    return True


# %% [markdown]
# The data: scikit-learn's digits as images (N, 1, 8, 8) in [-1, 1], split once.

# %%
def digits():
    """(train images, train labels, held-out images, held-out labels): images (N, 1, 8, 8)
    float32 in [-1, 1] (the 16 grey levels 0 ... 16 scaled), labels (N,) ints; None without
    scikit-learn."""
    if not can_run_in_full():
        return None
    from sklearn.datasets import load_digits
    bunch = load_digits()
    images = (bunch.images / 8.0 - 1.0).astype(np.float32)[:, None]       # (1797, 1, 8, 8)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(images))
    train, held_out = order[HELD_OUT:], order[:HELD_OUT]
    return images[train], bunch.target[train], images[held_out], bunch.target[held_out]


def missing_data_note():
    return ("scikit-learn is not installed, and it holds the digits: `pip install scikit-learn` "
            "(or this repository's `demos` extra) to run this demo.")


# %% [markdown]
# The three models: the ViT, an MLP on the pixels, and a ViT of one layer as wide as the same
# parameters allow.

# %%
class MLP(nn.Module):
    """64 pixels -> `hidden` (GELU) -> 10 logits: the model that knows nothing of patches."""

    def __init__(self, pixels, hidden, classes, dtype=None):
        self.hidden = nn.Linear(pixels, hidden, dtype=dtype)
        self.out = nn.Linear(hidden, classes, dtype=dtype)

    def forward(self, images):
        x = images.reshape(images.shape[0], -1)                            # (B, 64)
        return self.out(F.gelu(self.hidden(x)))                            # (B, 10)


def parameter_count(model):
    return sum(p.data.size for p in model.parameters())


def vit(dtype=np.float32):
    return nn.ViT(image_size=8, patch_size=PATCH, num_channels=1, embed_dim=WIDTH,
                  num_heads=HEADS, num_layers=LAYERS, hidden_dim=HIDDEN, num_labels=10,
                  dtype=dtype)


def one_layer_vit(width, dtype=np.float32):
    return nn.ViT(image_size=8, patch_size=PATCH, num_channels=1, embed_dim=width,
                  num_heads=HEADS, num_layers=1, hidden_dim=2 * width, num_labels=10,
                  dtype=dtype)


def matched_sizes(target):
    """The MLP's hidden width and the one-layer ViT's width (a multiple of its heads) whose
    parameters come nearest `target`."""
    mlp_hidden = round((target - 10) / (64 + 1 + 10))       # 64 h + h + 10 h + 10 parameters
    widths = range(HEADS, 4 * WIDTH, HEADS)
    width = min(widths, key=lambda w: abs(parameter_count(one_layer_vit(w)) - target))
    return mlp_hidden, width


# %% [markdown]
# Training: demo_tools' loop (Adam, fresh batches from a seeded generator, held-out checkpoints).

# %%
def classification_score(model, batch):
    images, labels = batch
    logits = model(ta.tensor(images))                                      # (B, 10)
    accuracy = float((logits.data.argmax(axis=-1) == labels).mean())
    return F.cross_entropy(logits, labels), accuracy


def train_classifier(model, data, label, settings):
    """Train `model` on the training digits (batches drawn from SEED); demo_tools' curves."""
    train_images, train_labels, held_images, held_labels = data

    def make_batch(random, size):
        rows = random.integers(0, len(train_images), size)
        return train_images[rows], train_labels[rows]

    return demo_tools.train(model, make_batch, classification_score, (held_images, held_labels),
                            label, LEARNING_RATE, BATCH, SEED, settings["steps"],
                            settings["eval_every"], settings["print_every"])


def trained_vit(data, settings):
    """This demo's ViT trained as `settings` say (steps, eval_every, print_every), and its
    curves: demo 23 recognises its samples with it."""
    ta.manual_seed(SEED)
    model = vit()
    return model, train_classifier(model, data, "ViT", settings)


# %% [markdown]
# What the ViT looks at: attention rollout. Each layer's weights (B, H, T, T), averaged over the
# heads, mixed half and half with the identity, multiplied through the layers; the class token's
# row, without itself, is how much of each patch reaches it.

# %%
def attention_rollout(layer_weights):
    """[(B, H, T, T) per layer, first first] -> (B, T - 1): the class token's rollout on each
    patch (Abnar & Zuidema 2020), rows of the product summing to 1 over all T tokens."""
    B, _, T, _ = layer_weights[0].shape
    rollout = np.broadcast_to(np.eye(T), (B, T, T))
    for weights in layer_weights:
        mixed = 0.5 * weights.mean(axis=1) + 0.5 * np.eye(T)                # (B, T, T)
        rollout = mixed @ rollout                                          # (B, T, T)
    return rollout[:, 0, 1:]                                               # (B, P)


def rollout_of(model, images):
    names = [f"blocks.{i}.attn.weights" for i in range(len(model.blocks))]
    with ta.no_grad():
        _, cache = model.run_with_cache(images, names=names)
    return attention_rollout([cache[name].astype(np.float64) for name in names])


def patch_ink(images):
    """(B, P): whether each 2 x 2 patch holds any ink (a pixel above the background, -1)."""
    return (F.patchify(ta.tensor(images), PATCH).data > -1.0).any(axis=-1)


# %% [markdown]
# Where the ViT thinks its patches are: the cosine similarity of the learned positions, patch with
# patch (the class token's row left out), and how it compares neighbours with the others.

# %%
def position_similarity(model):
    """(P, P) cosine similarity of the patches' learned position embeddings."""
    table = model.positions.data[0, 1:].astype(np.float64)                 # (P, E)
    unit = table / np.linalg.norm(table, axis=-1, keepdims=True)
    return unit @ unit.T


def neighbours(side):
    """(P, P) bool: patches that touch, edge or corner, on a side x side grid (not itself)."""
    rows, columns = np.divmod(np.arange(side * side), side)
    distance = np.maximum(np.abs(rows[:, None] - rows), np.abs(columns[:, None] - columns))
    return distance == 1


def position_measures(similarity):
    """The mean similarity of a patch's position with its neighbours', with those of its row,
    of its column, and of neither (itself left out), and for how many patches the most similar
    other position is in the same row or column (the ViT paper's reading of its Figure 7)."""
    P = len(similarity)
    side = math.isqrt(P)
    rows, columns = np.divmod(np.arange(P), side)
    itself = np.eye(P, dtype=bool)
    same_row = (rows[:, None] == rows) & ~itself
    same_column = (columns[:, None] == columns) & ~itself
    neither = ~same_row & ~same_column & ~itself
    nearest = np.where(itself, -np.inf, similarity).argmax(axis=1)
    in_line = (same_row | same_column)[np.arange(P), nearest]
    return {"neighbour_cosine": float(similarity[neighbours(side)].mean()),
            "row_cosine": float(similarity[same_row].mean()),
            "column_cosine": float(similarity[same_column].mean()),
            "other_cosine": float(similarity[neither].mean()),
            "nearest_in_line": int(in_line.sum())}


# %% [markdown]
# The pictures: the rollout drawn over one held-out digit of each class, and Figure 7's grid.

# %%
def plot_rollout(images, labels, rollout, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    side = 8 // PATCH
    figure, axes = plt.subplots(2, len(images), figsize=(1.3 * len(images), 2.9))
    for i, (image, label, weights) in enumerate(zip(images, labels, rollout)):
        axes[0, i].imshow(image[0], cmap="gray_r")
        axes[0, i].set_title(str(label), fontsize=9)
        upsampled = np.kron(weights.reshape(side, side), np.ones((PATCH, PATCH)))
        axes[1, i].imshow(upsampled, cmap="inferno")
        axes[1, i].contour(image[0], levels=[0.0], colors="cyan", linewidths=0.8)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_ylabel("digit", fontsize=8)
    axes[1, 0].set_ylabel("rollout (ink outlined)", fontsize=8)
    figure.suptitle("Attention rollout: how much of each patch reaches the class token",
                    fontsize=10)
    figure.tight_layout()
    return demo_tools.save_figure(figure, path, dpi=120)


def plot_positions(similarity, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    side = math.isqrt(len(similarity))
    figure, axes = plt.subplots(side, side, figsize=(5.2, 5))
    for patch, ax in enumerate(axes.flat):
        image = ax.imshow(similarity[patch].reshape(side, side), cmap="viridis", vmin=-1, vmax=1)
        ax.set_xticks([])
        ax.set_yticks([])
    figure.colorbar(image, ax=axes, shrink=0.8, label="cosine similarity")
    figure.suptitle("Position embedding similarity (ViT paper, Figure 7):\neach patch's "
                    "position against every patch's", fontsize=10)
    return demo_tools.save_figure(figure, path, dpi=120)


# %% [markdown]
# `main` trains the three models, prints their accuracy, the rollout and the positions' measures,
# draws the pictures and returns the numbers.

# %%
def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    data = digits()
    if data is None:
        print(missing_data_note())
        return {}
    settings = QUICK if args.quick else FULL
    held_images, held_labels = data[2], data[3]
    target = parameter_count(vit())
    mlp_hidden, width = matched_sizes(target)
    builders = {"ViT": vit, "MLP": lambda: MLP(64, mlp_hidden, 10, dtype=np.float32),
                f"one-layer ViT": lambda: one_layer_vit(width)}
    print(f"scikit-learn's digits: {len(data[0])} training and {len(held_images)} held-out "
          f"images of 8 x 8; {settings['steps']} steps of {BATCH}, Adam (lr {LEARNING_RATE}), "
          f"float32, seed {SEED}.\n")
    models, curves = {}, {}
    for name, build in builders.items():
        ta.manual_seed(SEED)
        models[name] = build()
        curves[name] = train_classifier(models[name], data, name, settings)
    demo_tools.print_table(
        ["model", "parameters", "held-out accuracy", "held-out loss", "seconds"],
        [[name, f"{parameter_count(models[name]):,}",
          f"{curves[name]['held_out_accuracy'][-1]:.1%}",
          f"{curves[name]['held_out_loss'][-1]:.3f}", f"{curves[name]['seconds']:.1f}"]
         for name in models], title="Held-out accuracy after training:")

    model = models["ViT"]
    rollout = rollout_of(model, held_images)                               # (N, P)
    ink = patch_ink(held_images)                                           # (N, P)
    on_ink = float((rollout * ink).sum() / rollout.sum())
    similarity = position_similarity(model)
    measures = position_measures(similarity)
    print(f"\nAttention rollout: the class token's weight on the patches, over the held-out "
          f"images: {on_ink:.1%} on patches with ink ({ink.mean():.1%} of the patches); the "
          f"rest on blank ones.")
    print(f"Learned positions, mean cosine similarity of a patch's with those of its row "
          f"{measures['row_cosine']:.3f}, of its column {measures['column_cosine']:.3f}, of "
          f"neither {measures['other_cosine']:.3f}, of its neighbours (edge or corner) "
          f"{measures['neighbour_cosine']:.3f}; for {measures['nearest_in_line']} of "
          f"{len(similarity)} patches the most similar position is in its row or column.")
    drawn = [int(np.flatnonzero(held_labels == digit)[0]) for digit in range(ROLLOUT_DRAWN)]
    demo_tools.print_pictures(
        plot_rollout(held_images[drawn], held_labels[drawn], rollout[drawn],
                     args.output / "vit_digits_rollout.png"),
        plot_positions(similarity, args.output / "vit_digits_positions.png"))
    numbers = {"steps": settings["steps"], "held_out": len(held_images),
               "one_layer_width": width, "mlp_hidden": mlp_hidden,
               "rollout_on_ink": on_ink, "ink_share": float(ink.mean()), **measures}
    for key, name in (("vit", "ViT"), ("mlp", "MLP"), ("one_layer", "one-layer ViT")):
        numbers[f"parameters_{key}"] = parameter_count(models[name])
        numbers[f"accuracy_{key}"] = curves[name]["held_out_accuracy"][-1]
        numbers[f"loss_{key}"] = curves[name]["held_out_loss"][-1]
        numbers[f"seconds_{key}"] = curves[name]["seconds"]
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
