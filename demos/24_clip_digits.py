"""Demo 24: CLIP on digits and words, and zero-shot classification by captions it never saw.

What it shows: chapter 6's CLIP (`nn.CLIP`) trained contrastively in the engine on pictures and
words. The pictures are scikit-learn's bundled handwritten digits (8 x 8 pixels, one channel,
1,797 of them); each is paired with a caption written from its label in one of four phrasings
("a photo of the digit seven", "the number seven", "a handwritten 7", "seven"; num2words spells
the numbers). Nothing tells the model that a picture shows a 7: it learns only which caption goes
with which picture. Then, on held-out pictures, three measurements:

- zero-shot classification: each picture is given the class of the closest of ten captions in a
  fifth phrasing, never seen in training ("a picture of a seven", where "picture" is a word the
  model never trained on, and "a eight" is left as the template writes it), beside the same by
  a training phrasing, and against a supervised Vision Transformer (`nn.ViT`, chapter 6 part 1)
  of the same size, trained on the same pictures with their labels for as many steps;
- retrieval both ways, in held-out groups of ten pairs (one picture of each digit, each caption
  in a training phrasing drawn at random): how often a picture's closest caption is its own
  (image -> text), and how often a caption's closest picture is its own (text -> image); chance is
  1 in 10 either way;
- the image-text similarity matrix, as a picture (`clip_digits.png`): the cosines of held-out
  pictures with the ten unseen-phrasing captions, beside the training loss.

The recipe: both towers 32 wide, 2 layers of 2 heads, patches of 2 x 2 pixels (16 patches and a
class token), captions of 7 word tokens (a word-level vocabulary, plus one end-of-text id that
also pads), projections to 16; AdamW at 3e-3. Each training batch holds one picture of each
digit, so that no two pictures in it share a caption's class: the contrastive loss counts every
pair off the diagonal as wrong, and two sevens with "seven" would be a pair wrongly pushed apart.
The pixels are scaled to [-0.5, 0.5].

    python demos/24_clip_digits.py [output folder] [--quick]

It needs scikit-learn and num2words (`pip install scikit-learn num2words`, the `demos` extra);
without them it says so and stops. `--quick` trains each model for 200 steps (what the tests run).
The full run's time, as `dev/regenerate.py` measured it, ends the demo's entry on docs/demos.md.
"""
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
import tinyattn.nn as nn

# %% [markdown]
# The data: the digits, split once into training and held-out pictures, and the captions, one
# phrasing at a time, as word ids padded with the end-of-text id to 7 tokens.

# %%
SEED = 0                        # of the split, the weights and the batches
HELD_OUT = 397                  # pictures never trained on (1,400 train)
TRAINING_PHRASINGS = ("a photo of the digit {word}", "the number {word}", "a handwritten {digit}",
                      "{word}")
UNSEEN_PHRASING = "a picture of a {word}"          # zero-shot prompts: never seen in training
CONTEXT = 7                     # tokens per caption: at most 6 words and the end-of-text id


def missing_packages():
    """The names of the packages this demo needs that are not installed."""
    missing = []
    for module, package in (("sklearn", "scikit-learn"), ("num2words", "num2words")):
        try:
            __import__(module)
        except ImportError:
            missing.append(package)
    return missing


def load_digits():
    """(images (N, 1, 8, 8) float32 in [-0.5, 0.5], labels (N,) int64): scikit-learn's digits,
    whose pixels are 0 ... 16."""
    from sklearn.datasets import load_digits as bundled_digits
    digits = bundled_digits()
    images = (digits.images / 16.0 - 0.5).astype(np.float32)[:, None]      # (N, 1, 8, 8)
    return images, digits.target.astype(np.int64)


def split(count, random):
    """(training indices, held-out indices): a random HELD_OUT of `count` held out."""
    order = random.permutation(count)
    return order[HELD_OUT:], order[:HELD_OUT]


def caption(phrasing, digit):
    from num2words import num2words
    return phrasing.format(word=num2words(digit), digit=digit)


def vocabulary():
    """Every word of every phrasing of every digit (the unseen one's too, so that its prompts can
    be written), sorted; the end-of-text id is the next one, len(words)."""
    phrasings = TRAINING_PHRASINGS + (UNSEEN_PHRASING,)
    return sorted({word for phrasing in phrasings for digit in range(10)
                   for word in caption(phrasing, digit).split()})


def encode(texts, words):
    """Word ids (len(texts), CONTEXT), each text ended, then padded, by the end-of-text id."""
    index = {word: i for i, word in enumerate(words)}
    ids = np.full((len(texts), CONTEXT), len(words), dtype=np.int64)       # all end-of-text
    for row, text in enumerate(texts):
        tokens = [index[word] for word in text.split()]
        ids[row, :len(tokens)] = tokens
    return ids


def one_of_each_digit(labels, pool, random):
    """Ten indices from `pool`, the first a picture of 0, the second of 1, ...: a batch."""
    return np.array([random.choice(pool[labels[pool] == digit]) for digit in range(10)])


# %% [markdown]
# The models: CLIP's two towers at a toy's size, and the supervised ViT it is compared with, of
# the vision tower's size.

# %%
TOWER = dict(embed_dim=32, num_heads=2, num_layers=2, hidden_dim=128)
PROJECTION = 16
LEARNING_RATE = 3e-3
FULL = dict(steps=1500, print_every=100)
QUICK = dict(steps=200, print_every=50)


def build_clip(vocab_size):
    return nn.CLIP(vision=dict(image_size=8, patch_size=2, num_channels=1, **TOWER),
                   text=dict(vocab_size=vocab_size + 1, max_positions=CONTEXT,
                             eos_token_id=vocab_size, **TOWER),
                   projection_dim=PROJECTION, dtype=np.float32)


def build_vit():
    return nn.ViT(image_size=8, patch_size=2, num_channels=1, num_labels=10, dtype=np.float32,
                  **TOWER)


# %% [markdown]
# Training: at each step one picture of each digit; CLIP pairs each with a caption in a phrasing
# drawn at random and takes its contrastive loss, the ViT takes the cross-entropy of its labels.
# Both draw the same pictures (generators seeded alike).

# %%
def train(model, loss_of, images, labels, pool, steps, print_every, label):
    """AdamW for `steps` batches of one picture of each digit from `pool`; the loss of each step."""
    optimizer = ta.optim.AdamW(model.parameters(), lr=LEARNING_RATE)
    random = np.random.default_rng(SEED)
    losses, start = [], time.perf_counter()
    for step in range(1, steps + 1):
        batch = one_of_each_digit(labels, pool, random)
        phrasings = random.integers(0, len(TRAINING_PHRASINGS), len(batch))
        loss = loss_of(model, images[batch], labels[batch], phrasings)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % print_every == 0 or step == 1:
            recent = np.mean(losses[-print_every:])            # the steps since the last line
            print(f"  {label:<14} step {step:>4}/{steps}   loss {recent:.3f}   "
                  f"{time.perf_counter() - start:5.1f} s", flush=True)
    return losses


def clip_loss(captions):
    """CLIP's loss of a batch, its captions taken from `captions` (phrasing, digit) -> ids (T,)."""
    def loss_of(model, images, labels, phrasings):
        ids = np.stack([captions[phrasing, digit] for phrasing, digit in zip(phrasings, labels)])
        return model.contrastive_loss(ids, images)                         # (B, T), (B, 1, 8, 8)
    return loss_of


def vit_loss(model, images, labels, phrasings):
    return F.cross_entropy(model(images), labels)                          # (B, 10) logits


# %% [markdown]
# The measurements: the unit-length features of pictures and captions, their cosines, and the
# nearest caption (zero-shot) or picture (retrieval).

# %%
@ta.no_grad()
def unit_features(model, images=None, ids=None):
    """The unit-length image features of `images`, or text features of `ids`, as NumPy (N, 16)."""
    model.eval()
    features = (model.get_image_features(images) if ids is None
                else model.get_text_features(ids)).data
    model.train()
    return features / np.linalg.norm(features, axis=-1, keepdims=True)


def zero_shot(model, images, words, phrasing=UNSEEN_PHRASING):
    """(predicted digit of each picture, cosines (N, 10)) by the ten prompts of `phrasing`."""
    prompts = encode([caption(phrasing, digit) for digit in range(10)], words)
    cosines = unit_features(model, images=images) @ unit_features(model, ids=prompts).T
    return cosines.argmax(axis=1), cosines                                 # (N,), (N, 10)


def retrieval(model, images, labels, captions, groups, random):
    """(image -> text, text -> image): the shares of right first choices within `groups` groups of
    ten held-out pairs, one picture of each digit, each caption in a training phrasing drawn at
    random."""
    right_texts = right_images = 0
    for _ in range(groups):
        batch = one_of_each_digit(labels, np.arange(len(labels)), random)
        phrasings = random.integers(0, len(TRAINING_PHRASINGS), 10)
        ids = np.stack([captions[phrasing, digit] for digit, phrasing in enumerate(phrasings)])
        cosines = unit_features(model, images=images[batch]) @ unit_features(model, ids=ids).T
        right_texts += int((cosines.argmax(axis=1) == np.arange(10)).sum())   # a picture's row
        right_images += int((cosines.argmax(axis=0) == np.arange(10)).sum())  # a caption's column
    return right_texts / (10 * groups), right_images / (10 * groups)


@ta.no_grad()
def vit_accuracy(model, images, labels):
    model.eval()
    predicted = model(images).data.argmax(axis=1)
    model.train()
    return float((predicted == labels).mean())


# %% [markdown]
# `main` runs it all and returns the numbers.

# %%
RETRIEVAL_GROUPS = 40


def main(argv=None):
    args = demo_tools.parse(__doc__, argv)
    missing = missing_packages()
    if missing:
        print(f"Demo 24 needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'}"
              f" not installed: `pip install {' '.join(missing)}` (or the `demos` extra).")
        return {}
    settings = QUICK if args.quick else FULL
    random = np.random.default_rng(SEED)
    images, labels = load_digits()
    train_pool, held_out = split(len(labels), random)
    words = vocabulary()
    captions = {(phrasing, digit): encode([caption(TRAINING_PHRASINGS[phrasing], digit)], words)[0]
                for phrasing in range(len(TRAINING_PHRASINGS)) for digit in range(10)}
    print(f"{len(labels):,} digits of 8 x 8 pixels: {len(train_pool):,} to train on, "
          f"{len(held_out)} held out; a vocabulary of {len(words)} words and the end-of-text id")
    for phrasing in TRAINING_PHRASINGS:
        print(f"  training phrasing: {caption(phrasing, 7)!r}")
    print(f"  unseen phrasing (zero-shot prompts): {caption(UNSEEN_PHRASING, 7)!r}")

    ta.manual_seed(SEED)
    clip = build_clip(len(words))
    ta.manual_seed(SEED)
    vit = build_vit()
    print(f"\nCLIP ({sum(p.size for p in clip.parameters()):,} parameters) and the supervised ViT "
          f"({sum(p.size for p in vit.parameters()):,}), {settings['steps']} steps of 10 pictures "
          f"each:")
    start = time.process_time()
    losses = train(clip, clip_loss(captions), images, labels, train_pool, settings["steps"],
                   settings["print_every"], "CLIP")
    clip_seconds = time.process_time() - start
    start = time.process_time()
    vit_losses = train(vit, vit_loss, images, labels, train_pool, settings["steps"],
                       settings["print_every"], "ViT")
    vit_seconds = time.process_time() - start

    predicted, cosines = zero_shot(clip, images[held_out], words)
    zero_shot_accuracy = float((predicted == labels[held_out]).mean())
    seen, _ = zero_shot(clip, images[held_out], words, TRAINING_PHRASINGS[0])
    supervised_accuracy = vit_accuracy(vit, images[held_out], labels[held_out])
    image_to_text, text_to_image = retrieval(clip, images[held_out], labels[held_out], captions,
                                             RETRIEVAL_GROUPS, np.random.default_rng(SEED + 1))
    numbers = {"steps": settings["steps"], "held_out": len(held_out),
               "first_loss": losses[0], "last_loss": float(np.mean(losses[-20:])),
               "vit_last_loss": float(np.mean(vit_losses[-20:])),
               "clip_seconds": clip_seconds, "vit_seconds": vit_seconds,
               "zero_shot_accuracy": zero_shot_accuracy, "vit_accuracy": supervised_accuracy,
               "seen_phrasing_accuracy": float((seen == labels[held_out]).mean()),
               "seen_prompt": caption(TRAINING_PHRASINGS[0], 7),
               "image_to_text": image_to_text, "text_to_image": text_to_image,
               "retrieval_pairs": 10 * RETRIEVAL_GROUPS,
               "unseen_prompt": caption(UNSEEN_PHRASING, 7)}
    print_results(numbers)
    demo_tools.print_pictures(plot(cosines, labels[held_out], losses,
                                   args.output / "clip_digits.png"))
    return numbers


def print_results(numbers):
    print(f"\nCLIP's loss {numbers['first_loss']:.2f} at the first step, {numbers['last_loss']:.2f}"
          f" over the last 20 ({numbers['clip_seconds']:.0f} s of processor time; the ViT's "
          f"{numbers['vit_seconds']:.0f} s)")
    demo_tools.print_table(
        ["on the held-out pictures", "right", "chance"],
        [[f"CLIP, zero-shot by {numbers['unseen_prompt']!r} ...",
          f"{numbers['zero_shot_accuracy']:.1%}", "10%"],
         [f"CLIP, by the training phrasing {numbers['seen_prompt']!r} ...",
          f"{numbers['seen_phrasing_accuracy']:.1%}", "10%"],
         ["supervised ViT, its labels", f"{numbers['vit_accuracy']:.1%}", "10%"],
         ["CLIP retrieval, image -> text", f"{numbers['image_to_text']:.1%}", "10%"],
         ["CLIP retrieval, text -> image", f"{numbers['text_to_image']:.1%}", "10%"]],
        title=f"{numbers['held_out']} held-out pictures (retrieval: {numbers['retrieval_pairs']} "
              f"pairs in groups of ten, one picture of each digit)")


def plot(cosines, labels, losses, path):
    """The cosines of three held-out pictures of each digit with the ten prompts, and the loss."""
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    rows = np.concatenate([np.flatnonzero(labels == digit)[:3] for digit in range(10)])
    figure, (matrix, curve) = plt.subplots(1, 2, figsize=(10, 5.2),
                                           gridspec_kw=dict(width_ratios=(1, 1.2)))
    shown = matrix.imshow(cosines[rows], cmap="viridis", aspect="auto")
    matrix.set(xticks=range(10), yticks=range(1, 30, 3), yticklabels=labels[rows][1::3],
               xlabel=f"prompt: {UNSEEN_PHRASING.format(word='…')} (0 ... 9)",
               ylabel="held-out picture of (3 of each digit)", title="cosine, picture x prompt")
    figure.colorbar(shown, ax=matrix, fraction=0.05)
    curve.plot(np.arange(1, len(losses) + 1), losses, color="tab:blue", linewidth=0.8)
    curve.axhline(np.log(10), color="gray", linestyle=":", linewidth=1)
    curve.annotate("ln 10: guessing among 10 pairs", (len(losses), np.log(10)), ha="right",
                   va="bottom", color="gray")
    curve.set(xlabel="training step", ylabel="contrastive loss", title="CLIP's training loss")
    curve.grid(alpha=0.3)
    figure.tight_layout()
    return demo_tools.save_figure(figure, path, dpi=110)


PAGE_ENTRY = """\
24. [`24_clip_digits.py`](../demos/24_clip_digits.py) — CLIP (chapter 6's `nn.CLIP`) trained
    contrastively on scikit-learn's 8 x 8 handwritten digits paired with captions in four phrasings
    ("a photo of the digit seven", "the number seven", "a handwritten 7", "seven"), {steps:,} steps
    of ten pairs (one picture of each digit). Its loss falls from {first_loss:.2f} (ln 10, a guess)
    to {last_loss:.2f} (the mean of the last 20 steps). On {held_out} held-out pictures, zero-shot
    by prompts in a phrasing never seen in training ("{unseen_prompt}"), it names the digit of
    {zero_shot_accuracy:.1%} of them ({seen_phrasing_accuracy:.1%} by a training phrasing,
    "{seen_prompt}"), where a supervised ViT of the vision tower's size, trained as long on the
    same pictures with their labels, gets {vit_accuracy:.1%} (chance 10%). Retrieval in held-out
    groups of ten pairs: image -> text {image_to_text:.1%}, text -> image {text_to_image:.1%}.

    ![the cosines of held-out pictures with the ten unseen prompts, and the training
    loss](pictures/clip_digits.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
