"""Chapter 6. CLIP (Radford et al. 2021, "Learning Transferable Visual Models From Natural Language
Supervision"): pictures and words in one space.

The idea: two transformers, one reading images and one reading texts, each end in a vector of the
same size, and are trained so that a picture and its caption point the same way. Given a batch of
B pictures and their B captions, every picture is compared with every caption; the right pairs lie
on the diagonal of that B x B table, and the loss asks each picture to pick out its own caption
among the B, and each caption its own picture. Nothing says what a picture shows; the captions
do, so the classes are any words: a new classifier is a list of captions ("a photo of a dog").

    vision tower  a ViT read at its class token       (B, C, H, W) -> (B, E_v)
    text tower    a causal transformer read at each   (B, T) -> (B, E_t)
                  text's end-of-text token
    projections   two Linears without bias            (B, proj) each     get_*_features
    similarity    e^t times the cosine of every       (B_img, B_txt)     forward
                  picture with every text
    loss          a softmax over the batch, both      ()                 contrastive_loss
                  ways, the diagonal the target

The vision tower is chapter 6 part 1's Vision Transformer (nn/vit.py) with CLIP's changes: the
patch embedding has no bias, the class token is a vector (E,), a LayerNorm comes after the
positions and before the blocks ("pre_layrnorm", so spelt in transformers), and the final
LayerNorm is applied to the class token alone. The text tower is a GPT (chapter 1's blocks under a
causal mask, learned positions) that reads, instead of predicting a next token, its hidden state at
each text's end-of-text token: the one place where the causal mask has let the whole text in.
Both towers' blocks are chapter 1's pre-LN TransformerBlock with one change, the feed-forward's
activation: quick-GELU, x sigmoid(1.702 x), the sigmoid's close fit to GELU = x Phi(x) that
OpenAI's CLIP was trained with (`quick_gelu` below).

The learned temperature. The cosines lie in [-1, 1]; a softmax over numbers that close would be
nearly uniform, so they are multiplied by e^t, t a learned scalar (`logit_scale`, the log of an
inverse temperature, started at ln(1 / 0.07) = 2.66; OpenAI's training clipped it at ln 100, a
trainer's business, not the model's). Learning t through e^t keeps the scale positive, and its
gradient is the loss's gradient along the logits themselves: d loss / dt = sum_ij (d loss / d
S_ij) S_ij.

The contrastive loss and its gradient, in the paper's names (its Figure 3): with the logits
S = e^t I_e T_e^T (B x B: I_e, T_e the unit-length image and text features, row i of both from
pair i), row i of S scores picture i against every caption in the batch; read as a
classification over the B captions whose right class is i, its loss is the cross-entropy

    L_img = -(1/B) sum_i log softmax(S_i,:)_i,     and for the captions, by columns,
    L_txt = -(1/B) sum_j log softmax(S_:,j)_j,     L = (L_img + L_txt) / 2.

Cross-entropy's gradient on its logits is the predicted distribution minus the one-hot target
(d/dS_ik of -log softmax(S_i,:)_i = softmax(S_i,:)_k - [k = i]); the targets of all rows
together are the identity I, so

    d L_img / d S = (R - I) / B,   R = softmax of each row of S,
    d L_txt / d S = (C - I) / B,   C = softmax of each column of S,
    d L / d S     = (R - I) / (2B) + (C - I) / (2B).

Every entry off the diagonal is pushed down by the probability the model gave that wrong pair,
each diagonal entry up by what it lacked from 1: the other B - 1 pairs of the batch are the
negatives, and the more pairs, the more negatives (CLIP trained on batches of 32,768). Below S
the chain rule is the autograd's: through e^t (above), the matrix product, and the normalisation
x / |x|, whose Jacobian (I - xhat xhat^T) / |x| passes on only the part of the gradient that
turns the vector, none that lengthens it (the loss sees directions only).

transformers' CLIPModel computes the same (its loss averages the two cross-entropies);
OpenAI's ViT-B/32, openai/clip-vit-base-patch32's config, is CLIP_VIT_B_32 below. The activations
it names (`Module.hook`, chapter 4): each tower's tokens with their positions, "vision.embed" (B,
1 + P, E_v) and "text.embed" (B, T, E_t), and their blocks' ("vision.blocks.N.attn.weights" (B,
H, 1 + P, 1 + P), "text.blocks.N.attn.weights" (B, H, T, T), causal). nn/clip_checkpoints.py
reads and writes transformers' CLIPModel folders.
"""
import numpy as np

import tinyattn.functional as F
from tinyattn import rng
from tinyattn.arguments import at_least, between, door, floating_dtype, integer
from tinyattn.nn import clip_checks as checks
from tinyattn.nn.layers import Dropout, Embedding, LayerNorm, Linear
from tinyattn.nn.module import Module, Parameter
from tinyattn.nn.multi_head_attention import MultiHeadAttention
from tinyattn.nn.transformer import TransformerBlock
from tinyattn.ops import concatenate

# openai/clip-vit-base-patch32: the keyword arguments of CLIP that make it (151M parameters)
CLIP_VIT_B_32 = dict(
    vision=dict(image_size=224, patch_size=32, num_channels=3, embed_dim=768, num_heads=12,
                num_layers=12, hidden_dim=3072),
    text=dict(vocab_size=49408, max_positions=77, embed_dim=512, num_heads=8, num_layers=12,
              hidden_dim=2048, eos_token_id=49407),
    projection_dim=512, layer_norm_eps=1e-5)


def quick_gelu(x):
    """x sigmoid(1.702 x): GELU, x Phi(x), with the normal's distribution Phi replaced by the
    logistic sigmoid that fits it best at scale 1.702 (Hendrycks & Gimpel 2016). Within 0.021 of
    GELU everywhere; OpenAI's CLIP was trained with it, so its weights expect it."""
    return x * F.sigmoid(1.702 * x)


class QuickGELUFeedForward(Module):
    """Chapter 1's FeedForward, Linear(E, hidden) -> activation -> Linear(hidden, E), with
    quick-GELU as its activation (transformers' CLIPMLP: fc1, fc2)."""

    def __init__(self, embed_dim, hidden_dim, dtype=None):
        self.embed_dim = embed_dim
        self.up = Linear(embed_dim, hidden_dim, dtype=dtype)
        self.down = Linear(hidden_dim, embed_dim, dtype=dtype)

    def forward(self, x):
        return self.down(quick_gelu(self.up(x)))        # (..., E) -> (..., hidden) -> (..., E)


class CLIPBlock(TransformerBlock):
    """Chapter 1's pre-LN TransformerBlock, x + attn(ln1(x)) then x + ff(ln2(x)), its forward
    unchanged, with the quick-GELU feed-forward (transformers' CLIPEncoderLayer); its dropout is
    off, CLIP has none."""

    def __init__(self, embed_dim, num_heads, hidden_dim, layer_norm_eps=1e-5, dtype=None):
        self.embed_dim = embed_dim
        self.ln1 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.attn = MultiHeadAttention(embed_dim, num_heads, dtype=dtype)
        self.ln2 = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.ff = QuickGELUFeedForward(embed_dim, hidden_dim, dtype=dtype)
        self.dropout = Dropout(0.0)


class VisionTower(Module):
    """Images (B, C, H, W) -> one vector each (B, E): a pre-LayerNormed ViT read at its class
    token (transformers' CLIPVisionTransformer's pooler_output)."""

    activations = ("embed",)

    @door(checks.vision_sizes_fit, patch_size=at_least(1), num_channels=at_least(1),
          embed_dim=at_least(1), num_heads=at_least(1), num_layers=at_least(1),
          hidden_dim=at_least(1), layer_norm_eps=between(0), dtype=floating_dtype)
    def __init__(self, image_size=224, patch_size=32, num_channels=3, embed_dim=768,
                 num_heads=12, num_layers=12, hidden_dim=3072, layer_norm_eps=1e-5, dtype=None):
        self.image_size, self.patch_size, self.num_channels = image_size, patch_size, num_channels
        P = (image_size // patch_size) ** 2                                 # patches per image
        self.patch_embed = Linear(num_channels * patch_size ** 2, embed_dim, bias=False,
                                  dtype=dtype)
        self.class_embedding = Parameter(
            (embed_dim ** -0.5 * rng.generator.standard_normal(embed_dim)).astype(dtype))
        self.positions = Parameter(
            (0.02 * rng.generator.standard_normal((1 + P, embed_dim))).astype(dtype))
        self.pre_ln = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)
        self.blocks = [CLIPBlock(embed_dim, num_heads, hidden_dim, layer_norm_eps, dtype)
                       for _ in range(num_layers)]
        self.post_ln = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)

    def forward(self, pixel_values):
        B = pixel_values.shape[0]
        patches = F.patchify(pixel_values, self.patch_size)                 # (B, P, C p p)
        tokens = self.patch_embed(patches)                                  # (B, P, E)
        E = self.class_embedding.shape[0]
        cls = self.class_embedding.reshape(1, 1, E)[np.zeros(B, dtype=np.intp)]  # (B, 1, E)
        x = concatenate([cls, tokens], axis=1) + self.positions             # (B, 1 + P, E)
        x = self.pre_ln(self.hook("embed", x))                              # (B, 1 + P, E)
        for block in self.blocks:       # no mask: every token sees every token
            x = block(x)                                                    # (B, 1 + P, E)
        return self.post_ln(x[:, 0])                                        # (B, E) class token


class TextTower(Module):
    """Token ids (B, T) -> one vector each (B, E): a causal transformer read at each text's end
    (transformers' CLIPTextTransformer's pooler_output).

    The end is each row's first `eos_token_id` (OpenAI's tokenizer ends every text with
    <|endoftext|>, 49407, and may pad with it too). Configs written before transformers' PR
    #24773 say eos_token_id 2, which is no token of CLIP's text; transformers then reads each row
    at its largest id, which is the end-of-text token when it is the vocabulary's last (OpenAI's
    original code, `text.argmax(dim=-1)`); so does this model."""

    activations = ("embed",)

    @door(checks.text_sizes_fit, vocab_size=at_least(1), max_positions=at_least(1),
          embed_dim=at_least(1), num_heads=at_least(1), num_layers=at_least(1),
          hidden_dim=at_least(1), eos_token_id=integer, layer_norm_eps=between(0),
          dtype=floating_dtype)
    def __init__(self, vocab_size=49408, max_positions=77, embed_dim=512, num_heads=8,
                 num_layers=12, hidden_dim=2048, eos_token_id=49407, layer_norm_eps=1e-5,
                 dtype=None):
        self.max_positions, self.eos_token_id = max_positions, eos_token_id
        self.token_embed = Embedding(vocab_size, embed_dim, dtype=dtype)
        self.positions = Parameter(
            (0.02 * rng.generator.standard_normal((max_positions, embed_dim))).astype(dtype))
        self.blocks = [CLIPBlock(embed_dim, num_heads, hidden_dim, layer_norm_eps, dtype)
                       for _ in range(num_layers)]
        self.final_ln = LayerNorm(embed_dim, eps=layer_norm_eps, dtype=dtype)

    def forward(self, input_ids):
        B, T = input_ids.shape
        x = self.token_embed(input_ids) + self.positions[:T]                # (B, T, E)
        x = self.hook("embed", x)                                           # (B, T, E)
        for block in self.blocks:       # causal: token i sees tokens 0..i
            x = block(x, is_causal=True)                                    # (B, T, E)
        x = self.final_ln(x)                                                # (B, T, E)
        if self.eos_token_id == 2:      # a legacy config: the largest id is the end
            ends = input_ids.argmax(axis=-1)                                # (B,)
        else:                           # the first end-of-text token of each row
            ends = (input_ids == self.eos_token_id).argmax(axis=-1)         # (B,)
        return x[np.arange(B), ends]                                        # (B, E)


class CLIP(Module):
    """Two towers and a temperature: see the top of the file. `vision` and `text` are the keyword
    arguments of VisionTower and TextTower (whose doors check them; `layer_norm_eps` is both
    towers' unless one gives its own); both project to `projection_dim`. `logit_scale` is t, the
    logits' log scale (e^t multiplies the cosines).

    The class token is drawn from a normal distribution of standard deviation E^-1/2, the
    positions of 0.02 (transformers' initialisation), the Linears and the token table as chapter
    1's."""

    def __init__(self, vision, text, projection_dim=512, logit_scale=2.6592, layer_norm_eps=1e-5,
                 dtype=None):
        self.vision = VisionTower(**{"layer_norm_eps": layer_norm_eps, **vision}, dtype=dtype)
        self.text = TextTower(**{"layer_norm_eps": layer_norm_eps, **text}, dtype=dtype)
        self.visual_projection = Linear(self.vision.post_ln.normalized_shape[0], projection_dim,
                                        bias=False, dtype=dtype)
        self.text_projection = Linear(self.text.final_ln.normalized_shape[0], projection_dim,
                                      bias=False, dtype=dtype)
        self.logit_scale = Parameter(np.array(logit_scale, dtype=dtype))

    @door(checks.images_fit)
    def get_image_features(self, pixel_values):
        """Each image's projected features (B, proj), not normalised (transformers 5's
        get_image_features(...).pooler_output)."""
        return self.visual_projection(self.vision(pixel_values))           # (B, proj)

    @door(checks.ids_fit)
    def get_text_features(self, input_ids):
        """Each text's projected features (B, proj), not normalised, from its ids (B, T)
        (transformers 5's get_text_features(...).pooler_output)."""
        return self.text_projection(self.text(input_ids))                  # (B, proj)

    @door(checks.ids_and_images_fit)
    def forward(self, input_ids, pixel_values):
        """logits_per_image (B_img, B_txt): e^t times the cosine of each image with each text."""
        images = self.visual_projection(self.vision(pixel_values))         # (B_img, proj)
        texts = self.text_projection(self.text(input_ids))                 # (B_txt, proj)
        images = images / (images ** 2).sum(axis=-1, keepdims=True).sqrt()  # I_e, unit length
        texts = texts / (texts ** 2).sum(axis=-1, keepdims=True).sqrt()     # T_e
        return self.logit_scale.exp() * (images @ texts.transpose())       # (B_img, B_txt)

    @door(checks.pairs_fit)
    def contrastive_loss(self, input_ids, pixel_values):
        """The symmetric contrastive loss of B pairs, text i captioning image i: the mean of the
        image rows' and the text columns' cross-entropies, the diagonal the target (derived at
        the top of the file)."""
        logits_per_image = self.forward(input_ids, pixel_values)           # (B, B)
        pairs = np.arange(logits_per_image.shape[0])                        # row i's class is i
        image_loss = F.cross_entropy(logits_per_image, pairs)              # each image's row
        text_loss = F.cross_entropy(logits_per_image.transpose(), pairs)   # each text's column
        return (image_loss + text_loss) / 2.0
