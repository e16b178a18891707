"""`python -m tinyattn bench`: what the engine costs on top of the NumPy it calls.

Each benchmark runs the same computation written three ways -- with tinyattn, by hand in NumPy
(forward and backward written out), and in PyTorch when it happens to be installed -- interleaved
(A B C A B C ...) so that a noisy neighbour on a shared machine slows all of them alike. What is
reported is the median over rounds of the per-round ratio, never a lone absolute time. BLAS runs on
one thread, so that the ratios compare the work done, not how it was spread over cores.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

import tinyattn as ta

BLAS_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def run_with_one_blas_thread(argv):
    """Start this command again with BLAS limited to one thread, unless it already is.

    The limit must be set before NumPy loads its BLAS, and `import tinyattn` has loaded it by now.
    """
    if all(os.environ.get(name) == "1" for name in BLAS_THREAD_VARIABLES):
        return
    env = dict(os.environ, **{name: "1" for name in BLAS_THREAD_VARIABLES})
    os.execve(sys.executable, [sys.executable, "-m", "tinyattn", *argv], env)


# ------------------------------------------------------------------------------------------------
# 1. Per-op overhead: a long chain of tiny elementwise ops, where the engine's bookkeeping dominates.
#    Each step of the chain is four ops: x = tanh(x * w + b) * 0.5, with w and b requiring grad.

CHAIN_OPS = 2000
OPS_PER_STEP = 4


def chain_inputs(seed=0):
    random = np.random.default_rng(seed)
    return (random.standard_normal((8, 8)), 0.5 * random.standard_normal((8, 8)),
            0.1 * random.standard_normal((8, 8)))


def chain_tinyattn(x0, w0, b0):
    x, w, b = (ta.tensor(a, requires_grad=True) for a in (x0, w0, b0))
    h = x
    for _ in range(CHAIN_OPS // OPS_PER_STEP):
        h = (h * w + b).tanh() * 0.5
    h.sum().backward()
    return x.grad, w.grad, b.grad


def chain_numpy(x0, w0, b0):
    h, saved = x0, []
    for _ in range(CHAIN_OPS // OPS_PER_STEP):
        t = np.tanh(h * w0 + b0)
        saved.append((h, t))
        h = t * 0.5
    grad_h, grad_w, grad_b = np.ones_like(h), np.zeros_like(w0), np.zeros_like(b0)
    for h, t in reversed(saved):
        grad_pre = grad_h * 0.5 * (1 - t * t)      # through * 0.5 and tanh
        grad_b += grad_pre
        grad_w += grad_pre * h
        grad_h = grad_pre * w0
    return grad_h, grad_w, grad_b


def chain_torch(torch):
    def run(x0, w0, b0):
        x, w, b = (torch.tensor(a, requires_grad=True) for a in (x0, w0, b0))
        h = x
        for _ in range(CHAIN_OPS // OPS_PER_STEP):
            h = (h * w + b).tanh() * 0.5
        h.sum().backward()
        return x.grad.numpy(), w.grad.numpy(), b.grad.numpy()
    return run


# ------------------------------------------------------------------------------------------------
# 2. Multi-head self-attention, forward and backward, where the matrix products dominate: here the
#    engine should cost almost nothing on top of the same computation written by hand.

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
    scores = (q @ k.swapaxes(-1, -2)) * scale                                  # (B, H, T, T)
    exps = np.exp(scores - scores.max(axis=-1, keepdims=True))
    weights = exps / exps.sum(axis=-1, keepdims=True)
    merged = (weights @ v).transpose(0, 2, 1, 3).reshape(B * T, E)            # (B*T, E)
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


def bench_mha(rounds, dtype):
    implementations = {"tinyattn": mha_tinyattn, "numpy": mha_numpy}
    inputs = mha_inputs(dtype)
    results = {name: fn(*inputs) for name, fn in implementations.items()}
    tolerance = 1e-3 if dtype == np.float32 else 1e-8
    for got, want in zip(results["tinyattn"], results["numpy"]):
        if got.dtype != dtype or want.dtype != dtype:
            raise AssertionError(f"bench: an array came out {got.dtype}, not {np.dtype(dtype)}")
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)
    times = interleaved(implementations, inputs, rounds)
    ratio = median_ratio(times, "tinyattn", "numpy")
    print(f"   {np.dtype(dtype).name:<8} tinyattn {statistics.median(times['tinyattn']) * 1e3:6.1f} ms"
          f"   numpy {statistics.median(times['numpy']) * 1e3:6.1f} ms"
          f"   tinyattn / numpy {ratio:5.2f}x")
    return ratio


# ------------------------------------------------------------------------------------------------

def interleaved(implementations, inputs, rounds):
    """Seconds per call of each implementation, one list entry per round, run A B C A B C ..."""
    times = {name: [] for name in implementations}
    for _ in range(rounds):
        for name, fn in implementations.items():
            start = time.perf_counter()
            fn(*inputs)
            times[name].append(time.perf_counter() - start)
    return times


def median_ratio(times, name, baseline):
    return statistics.median(t / b for t, b in zip(times[name], times[baseline]))


def check_agreement(implementations, inputs):
    """All implementations must compute the same gradients before their speed means anything."""
    results = {name: fn(*inputs) for name, fn in implementations.items()}
    reference = results["numpy"]
    for name, result in results.items():
        for got, want in zip(result, reference):
            if not np.allclose(got, want, rtol=1e-6, atol=1e-9):
                raise AssertionError(f"bench: {name} computes different gradients than numpy")


def bench_chain(rounds, torch=None):
    implementations = {"tinyattn": chain_tinyattn, "numpy": chain_numpy}
    if torch is not None:
        implementations["pytorch"] = chain_torch(torch)
    inputs = chain_inputs()
    check_agreement(implementations, inputs)
    interleaved(implementations, inputs, 2)   # warm up
    times = interleaved(implementations, inputs, rounds)
    print(f"1. Per-op overhead: a chain of {CHAIN_OPS} elementwise ops on an (8, 8) tensor, "
          f"forward + backward, {rounds} interleaved rounds")
    for name in implementations:
        per_op = statistics.median(times[name]) / CHAIN_OPS * 1e6
        label = {"numpy": "numpy, by hand"}.get(name, name)
        print(f"   {label:<16} {per_op:7.2f} us/op")
    ratios = {"tinyattn / numpy": median_ratio(times, "tinyattn", "numpy")}
    if torch is not None:
        ratios["tinyattn / pytorch"] = median_ratio(times, "tinyattn", "pytorch")
    for label, ratio in ratios.items():
        print(f"   {label:<20} {ratio:5.2f}x   (median of per-round ratios)")
    return ratios


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def main(argv):
    parser = argparse.ArgumentParser(prog="python -m tinyattn bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=positive_int, default=30,
                        help="interleaved rounds (default 30)")
    args = parser.parse_args(argv)
    try:
        import torch
        torch.set_num_threads(1)
        print(f"PyTorch {torch.__version__} found: it is measured too.")
    except ImportError:
        torch = None
        print("PyTorch is not installed: comparing with NumPy only.")
    print(f"NumPy {np.__version__}, BLAS threads: {os.environ.get('OPENBLAS_NUM_THREADS')}\n")
    bench_chain(args.rounds, torch)
    sizes = ", ".join(f"{name}={value}" for name, value in MHA_SIZES.items())
    print(f"\n2. Multi-head self-attention, forward + backward ({sizes}), {args.rounds} "
          "interleaved rounds, against the same computation by hand in NumPy")
    for dtype in (np.float32, np.float64):
        bench_mha(args.rounds, dtype)
