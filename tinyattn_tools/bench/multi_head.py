"""Multi-head self-attention, forward and backward, where the matrix products dominate: here the
engine should cost almost nothing on top of the same computation written by hand in NumPy (and
should run about as fast as PyTorch, when it is installed).
"""
import statistics

import numpy as np

import tinyattn as ta
from tinyattn_tools.bench.timing import check_agreement, interleaved, median_ratio
from tinyattn_tools.checklist.ops import np_attention

MHA_SIZES = dict(batch=8, length=128, embed_dim=256, num_heads=8)


def mha_inputs(dtype, seed=0, batch=8, length=128, embed_dim=256, num_heads=8):
    ta.manual_seed(seed)
    layer = ta.nn.MultiHeadAttention(embed_dim, num_heads).to(dtype)
    random = np.random.default_rng(seed)
    x = random.standard_normal((batch, length, embed_dim)).astype(dtype)
    grad_out = random.standard_normal((batch, length, embed_dim)).astype(dtype)
    return layer, x, grad_out


def mha_parameters(layer):
    return [p for proj in (layer.q_proj, layer.k_proj, layer.v_proj, layer.out_proj)
            for p in (proj.weight, proj.bias)]


def mha_tinyattn(layer, x, grad_out):
    x = ta.Tensor(x, requires_grad=True)
    layer.zero_grad()
    out, _ = layer(x)
    out.backward(grad_out)
    return [out.data, x.grad] + [p.grad for p in mha_parameters(layer)]


def mha_numpy(layer, x, grad_out):
    """Multi-head self-attention forward and backward, written out by hand with NumPy."""
    Wq, bq, Wk, bk, Wv, bv, Wo, bo = (p.data for p in mha_parameters(layer))
    B, T, E = x.shape
    H = layer.num_heads
    D = E // H
    scale = 1.0 / D ** 0.5
    rows = x.reshape(B * T, E)
    q, k, v = ((rows @ W.T + b).reshape(B, T, H, D).transpose(0, 2, 1, 3)      # (B, H, T, D)
               for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
    heads, weights = np_attention(q, k, v, scale=scale)               # (B, H, T, D), (B, H, T, T)
    merged = heads.transpose(0, 2, 1, 3).reshape(B * T, E)                    # (B*T, E)
    out = merged @ Wo.T + bo
    # backward
    grad_rows = grad_out.reshape(B * T, E)
    grad_Wo, grad_bo = grad_rows.T @ merged, grad_rows.sum(axis=0)
    grad_heads = (grad_rows @ Wo).reshape(B, T, H, D).transpose(0, 2, 1, 3)   # (B, H, T, D)
    grad_weights = grad_heads @ v.swapaxes(-1, -2)                             # (B, H, T, T)
    grad_v = weights.swapaxes(-1, -2) @ grad_heads
    grad_scores = weights * (grad_weights - (grad_weights * weights).sum(axis=-1, keepdims=True))
    grad_scores *= scale
    grad_q, grad_k = grad_scores @ k, grad_scores.swapaxes(-1, -2) @ q
    grad_x, grad_params = np.zeros_like(rows), []
    for grad, W in ((grad_q, Wq), (grad_k, Wk), (grad_v, Wv)):
        grad = grad.transpose(0, 2, 1, 3).reshape(B * T, E)
        grad_params += [grad.T @ rows, grad.sum(axis=0)]
        grad_x += grad @ W
    return [out.reshape(B, T, E), grad_x.reshape(B, T, E)] + grad_params + [grad_Wo, grad_bo]


def mha_torch(torch):
    """The same layer in PyTorch, with the same weights: projections, torch's SDPA, backward."""
    def run(layer, x, grad_out):
        weights = [torch.tensor(p.data, requires_grad=True) for p in mha_parameters(layer)]
        Wq, bq, Wk, bk, Wv, bv, Wo, bo = weights
        x = torch.tensor(x, requires_grad=True)
        B, T, E = x.shape
        H = layer.num_heads
        q, k, v = ((x @ W.T + b).reshape(B, T, H, E // H).transpose(1, 2)      # (B, H, T, D)
                   for W, b in ((Wq, bq), (Wk, bk), (Wv, bv)))
        heads = torch.nn.functional.scaled_dot_product_attention(q, k, v)     # (B, H, T, D)
        out = heads.transpose(1, 2).reshape(B, T, E) @ Wo.T + bo
        out.backward(torch.tensor(grad_out))
        return [out.detach().numpy(), x.grad.numpy()] + [w.grad.numpy() for w in weights]
    return run


def bench_mha(rounds, dtype, torch=None):
    implementations = {"tinyattn": mha_tinyattn, "numpy": mha_numpy}
    if torch is not None:
        implementations["pytorch"] = mha_torch(torch)
    inputs = mha_inputs(dtype)
    tolerance = 1e-3 if dtype == np.float32 else 1e-8
    check_agreement(implementations, inputs, rtol=tolerance, atol=tolerance)
    times = interleaved(implementations, inputs, rounds)
    line = f"   {np.dtype(dtype).name:<8}" + "".join(
        f" {name} {statistics.median(times[name]) * 1e3:6.1f} ms " for name in implementations)
    ratios = {f"tinyattn / {name}": median_ratio(times, "tinyattn", name)
              for name in implementations if name != "tinyattn"}
    print(line + "  " + "  ".join(f"{label} {ratio:5.2f}x" for label, ratio in ratios.items()))
    return ratios


def bench_attention(rounds, torch=None):
    """Part 2: multi-head self-attention forward and backward, in float32 and float64."""
    sizes = ", ".join(f"{name}={value}" for name, value in MHA_SIZES.items())
    print(f"Multi-head self-attention, forward + backward ({sizes}), {rounds} interleaved rounds")
    return {np.dtype(dtype).name: bench_mha(rounds, dtype, torch)
            for dtype in (np.float32, np.float64)}
