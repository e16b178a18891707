"""The checklist's rows for chapter 6's CLIP (tinyattn/nn/clip.py): its block (chapter 1's, with
quick-GELU) under a causal mask, and the whole model's contrastive loss against the images and
every parameter (both towers, both projections, the temperature logit_scale).

LayerNorms start with gains of one and biases of zero, where a backward that forgot either could
pass: every row here draws them at random first (vit.py's `off_their_start`).
"""
import numpy as np

import tinyattn.nn as nn
from tinyattn.nn.clip import CLIPBlock
from tinyattn_tools.checklist.cases import LayerCase
from tinyattn_tools.checklist.vit import built

# a small CLIP: 8 x 8 images of 2 channels in patches of 4 (4 patches), texts of 5 tokens out
# of 11, towers 8 and 6 wide, projections to 4
SMALL = dict(vision=dict(image_size=8, patch_size=4, num_channels=2, embed_dim=8, num_heads=2,
                         num_layers=1, hidden_dim=12),
             text=dict(vocab_size=11, max_positions=6, embed_dim=6, num_heads=2, num_layers=1,
                       hidden_dim=10, eos_token_id=10),
             projection_dim=4)
# three texts, each ending at its first 10 (then padding with it)
IDS = np.array([[3, 7, 10, 10, 10], [1, 2, 5, 4, 10], [6, 10, 0, 10, 9]])

LAYER_CASES = [
    LayerCase("CLIPBlock, quick-GELU, causal",
              built(lambda: CLIPBlock(8, 2, 12), (2, 3, 8),
                    output=lambda block, x: block(x, is_causal=True))),
    LayerCase("CLIP, contrastive loss of images and texts (random directions)",
              built(lambda: nn.CLIP(**SMALL), (3, 2, 8, 8),
                    output=lambda model, images: model.contrastive_loss(IDS, images)),
              directions=4),
]
