"""One training step of a small GPT: forward, cross-entropy, backward and an AdamW step, in
tinyattn and in PyTorch (when installed) with the same weights and the same batch.

The model is the one nanoGPT trains on a laptop CPU (4 layers, 4 heads, 128 wide, context 64,
batch 12). At this size nothing dominates: matrix products of 768 rows, and many elementwise
passes (GELU, LayerNorm, softmax) over arrays of up to 768 x 512 numbers, so the whole engine is
timed at once. PyTorch's version is written as nanoGPT writes it, with its fused kernels
(`F.layer_norm`, `F.gelu`, `F.scaled_dot_product_attention`).
"""
import statistics

import numpy as np

import tinyattn as ta
import tinyattn.functional as F
from tinyattn_tools.bench.timing import check_agreement, interleaved, median_ratio

SIZES = dict(vocab_size=100, embed_dim=128, num_heads=4, num_layers=4, max_len=64, batch=12,
             context=64)
ADAMW = dict(lr=1e-3, betas=(0.9, 0.99), weight_decay=0.1)


def training_inputs(dtype, seed=0, **sizes):
    """A CausalTransformer and a batch of random ids with their next-id targets, of the SIZES (or
    of `sizes`)."""
    sizes = {**SIZES, **sizes}
    batch, context = sizes.pop("batch"), sizes.pop("context")
    ta.manual_seed(seed)
    model = ta.nn.CausalTransformer(**sizes, dtype=dtype)
    ids = np.random.default_rng(seed).integers(0, sizes["vocab_size"], (batch, context + 1))
    return model, ids[:, :-1], ids[:, 1:]                   # (B, T) inputs, (B, T) targets


def tinyattn_trainer(model):
    """A function taking one training step of `model` on (ids, targets); it returns the loss, the
    gradients and the parameters after the step."""
    parameters = model.parameters()
    optimizer = ta.optim.AdamW(parameters, **ADAMW)

    def step(ids, targets):
        logits = model(ids)                                  # (B, T, V)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return [loss.data] + [p.grad for p in parameters] + [p.data for p in parameters]
    return step


def torch_trainer(torch, model):
    """The same step in PyTorch, on a copy of `model`'s weights (same names, same layout)."""
    functional = torch.nn.functional
    weights = {name: torch.tensor(p.data, requires_grad=True)
               for name, p in model.named_parameters()}
    optimizer = torch.optim.AdamW(weights.values(), **ADAMW)
    E, H = model.embed.embedding_dim, model.blocks[0].attn.num_heads
    table = ta.functional.sinusoidal_positions(model.positions.max_len, E)
    positions = torch.tensor(table.astype(model.embed.weight.dtype))

    def linear(x, name):
        return functional.linear(x, weights[name + ".weight"], weights[name + ".bias"])

    def norm(x, name):
        return functional.layer_norm(x, (E,), weights[name + ".weight"], weights[name + ".bias"])

    def forward(ids):
        B, T = ids.shape
        x = weights["embed.weight"][ids] + positions[:T]                        # (B, T, E)
        for i in range(len(model.blocks)):
            block = f"blocks.{i}."
            h = norm(x, block + "ln1")
            q, k, v = (linear(h, f"{block}attn.{projection}").view(B, T, H, E // H).transpose(1, 2)
                       for projection in ("q_proj", "k_proj", "v_proj"))        # (B, H, T, D)
            heads = functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + linear(heads.transpose(1, 2).reshape(B, T, E), block + "attn.out_proj")
            hidden = linear(norm(x, block + "ln2"), block + "ff.up")              # (B, T, 4E)
            x = x + linear(functional.gelu(hidden, approximate="tanh"), block + "ff.down")
        return linear(norm(x, "ln"), "head")                                   # (B, T, V)

    def step(ids, targets):
        ids, targets = torch.from_numpy(ids), torch.from_numpy(targets)
        logits = forward(ids)
        loss = functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return ([loss.detach().numpy()] + [w.grad.numpy() for w in weights.values()]
                + [w.detach().numpy() for w in weights.values()])
    return step


def bench_training_step(rounds, torch=None):
    sizes = ", ".join(f"{name} {value}" for name, value in SIZES.items())
    print(f"One training step of a small GPT ({sizes}): forward, cross-entropy, backward, "
          f"AdamW; float32, {rounds} interleaved rounds")
    if torch is not None:       # first the same loss, gradients and step, in float64
        model, ids, targets = training_inputs(np.float64)
        steps = {"tinyattn": tinyattn_trainer(model), "pytorch": torch_trainer(torch, model)}
        check_agreement(steps, (ids, targets), rtol=1e-6, atol=1e-9, reference="pytorch")
    model, ids, targets = training_inputs(np.float32)
    implementations = {"tinyattn": tinyattn_trainer(model)}
    if torch is not None:
        implementations["pytorch"] = torch_trainer(torch, model)
    interleaved(implementations, (ids, targets), 1)          # warm up
    times = interleaved(implementations, (ids, targets), rounds)
    for name in implementations:
        seconds = statistics.median(times[name])
        print(f"   {name:<10} {seconds * 1e3:7.1f} ms per step, {ids.size / seconds:7.0f} tokens/s")
    if torch is None:
        return {}
    ratio = median_ratio(times, "tinyattn", "pytorch")
    print(f"   tinyattn / pytorch {ratio:5.2f}x   (median of per-round ratios)")
    return {"tinyattn / pytorch": ratio}
