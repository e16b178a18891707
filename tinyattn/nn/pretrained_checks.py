"""Chapter 3. What GPT-2's layout can hold, which `save_pretrained` (nn/pretrained.py) checks
first."""

def gpt2_shaped(self, folder):
    """save_pretrained: what GPT-2's layout can hold (nn/pretrained.py): learned positions, a tied
    head without bias, attention scaled by 1/sqrt(head_dim) or not at all."""
    differences = [what for what, differs in (
        (f"{self.positional} positions (not learned)", self.positional != "learned"),
        ("an output head of its own (not tied to the embedding)", not self.tied_head),
        (f"scale {self.blocks[0].attn.scale} (not None or 1.0)",
         self.blocks[0].attn.scale not in (None, 1.0))) if differs]
    if differences:
        raise ValueError(f"GPT-2's layout holds a model with learned positions, a head tied to "
                         f"the embedding and the default scale; this one has "
                         f"{' and '.join(differences)}")
