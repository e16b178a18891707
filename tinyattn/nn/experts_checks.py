"""Chapter 2. What makes an argument of nn/experts.py's mixture of experts bad."""

def top_k_of_the_experts(num_experts, top_k=2, **_):
    if top_k > num_experts:
        raise ValueError(f"top_k {top_k} is more than num_experts {num_experts}")


def some_tokens(self, x):
    if x.size == 0:
        raise ValueError(f"needs at least one token, got an input of shape {x.shape}")
