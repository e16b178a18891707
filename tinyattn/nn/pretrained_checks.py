"""Chapter 3. What GPT-2's layout can hold, which `save_pretrained` (nn/pretrained.py) checks
first: a save that cannot hold what the model computes refuses, naming what, rather than write a
file that computes something else."""
from tinyattn.nn.causal_transformer import CausalBlock, CausalTransformer
from tinyattn.nn.layers import Dropout, Embedding, FeedForward, LayerNorm, Linear
from tinyattn.nn.positions import MultiHeadAttention

# The layers a GPT-2 is made of, each exactly of its class: a subclass (a LoRALinear is a Linear)
# computes something else, which the layout has no place for.
GPT2_LAYERS = (CausalTransformer, Embedding, CausalBlock, LayerNorm, MultiHeadAttention, Linear,
               FeedForward, Dropout)


def gpt2_shaped(self, folder):
    """save_pretrained: what GPT-2's layout can hold (nn/pretrained.py): learned positions; a head
    without bias, tied to the embedding or not (tie_word_embeddings); attention scaled by
    1/sqrt(head_dim) or not at all, the same in every block, as are the LayerNorms' eps and the
    sizes; GPT-2's layers alone (no rotary positions), with no function a user attached to their
    hook points; one dtype."""
    attached = [f"{name or 'the model'} ({', '.join(layer.hooked)})"
                for name, layer in self.named_modules() if layer.hooked]
    differences = gpt2_differences(self) + ([f"functions attached to the hook points of "
                                             f"{', '.join(attached)}"] if attached else [])
    if differences:
        raise ValueError(f"GPT-2's layout holds a model with learned positions, GPT-2's layers "
                         f"and the default scale; this one has {' and '.join(differences)}")


def gpt2_differences(self, also=()):
    """What makes `self` other than a GPT-2's layers and settings (gpt2_shaped), as phrases; none
    for a GPT-2. Layers of the classes `also` count as GPT-2's (a later chapter's adapters, which
    it saves apart)."""
    attentions = [block.attn for block in self.blocks]
    norms = [layer for layer in self.modules() if isinstance(layer, LayerNorm)]
    others = [(name, layer) for name, layer in self.named_modules()
              if type(layer) not in GPT2_LAYERS + tuple(also)
              and layer is not getattr(self, "positions", None)]
    adapted = any(isinstance(layer, Linear) for _, layer in others)
    differences = [what for what, differs in (
        ("rotary positions (positional='rope')", any(a.rope for a in attentions)),
        (f"{self.positional} positions (not learned)", self.positional not in ("learned", "rope")),
        ("an output head with a bias", self.head.bias is not None),
        (f"scale {attentions[0].scale} (not None or 1.0)", attentions[0].scale not in (None, 1.0)),
        ("blocks of different scales, heads or widths",
         len({(a.scale, a.num_heads, a.embed_dim) for a in attentions}) > 1
         or len({block.ff.up.out_features for block in self.blocks}) > 1),
        ("LayerNorms of different eps", len({norm.eps for norm in norms}) > 1),
        ("parameters of several dtypes", len({p.dtype for p in self.parameters()}) > 1),
        ("layers GPT-2 does not have: "
         + ", ".join(f"{name} (a {type(layer).__name__})" for name, layer in others)
         + (" (merge_lora(model) folds LoRA adapters into plain Linear layers; save_lora saves "
            "the adapters alone)" if adapted else ""), others),
    ) if differs]
    return differences
