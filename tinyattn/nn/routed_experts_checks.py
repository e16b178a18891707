"""Chapter 5. What makes an argument of the routed experts (nn/routed_experts.py) bad."""


def groups_fit(num_experts, top_k, num_groups=1, top_groups=1, **_):
    """RoutedExperts: top_k of the experts; the groups divide the experts, top_groups of them;
    when groups are dropped, two experts at least in a group (its score is the sum of its two
    best) and top_k experts in the groups kept."""
    if top_k > num_experts:
        raise ValueError(f"top_k {top_k} is more than num_experts {num_experts}")
    if num_experts % num_groups:
        raise ValueError(f"num_groups {num_groups} must divide num_experts {num_experts} (each "
                         f"group holds as many experts)")
    if top_groups > num_groups:
        raise ValueError(f"top_groups {top_groups} is more than num_groups {num_groups}")
    per_group = num_experts // num_groups
    if top_groups < num_groups and per_group < 2:
        raise ValueError(f"a group's score is the sum of its two best experts' scores, but "
                         f"num_groups {num_groups} leaves {per_group} expert in each")
    if top_k > top_groups * per_group:
        raise ValueError(f"top_k {top_k} is more than the {top_groups * per_group} experts of "
                         f"the top_groups {top_groups} groups kept")


def some_tokens(self, x):
    if x.size == 0:
        raise ValueError(f"needs at least one token, got an input of shape {x.shape}")


def bias_to_update(self, speed=0.001):
    """RoutedExperts.update_choice_bias: a choice bias to move, and a forward whose choice it
    balances."""
    if self.choice_bias is None:
        raise ValueError("these experts have no choice bias (choice_bias=False, as Qwen3-MoE's): "
                         "there is nothing to update")
    if self.selected_experts is None:
        raise ValueError("no forward has chosen experts yet: the update balances the loads of "
                         "the last forward, so call it after a training step")


def softmax_routed(layers):
    """load_balancing_loss: expert layers with softmax scores (the loss is Qwen3-MoE's; DeepSeek-V3
    balances with its choice bias instead), each run forward."""
    if not layers:
        raise ValueError("there are no expert layers to balance")
    sigmoid = [layer for layer in layers if layer.scoring != "softmax"]
    if sigmoid:
        raise ValueError(f"the loss is Qwen3-MoE's, over softmax scores; these experts score "
                         f"with {sigmoid[0].scoring!r} (DeepSeek-V3 balances with its choice "
                         f"bias instead: update_choice_bias)")
    if any(layer.scores is None for layer in layers):
        raise ValueError("no forward has routed tokens yet: the loss is over the last forward")
