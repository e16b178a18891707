"""What chapter 4's hooks cost a training step: bench 3's small GPT (float32), four ways at once.

Chapter 4 adds no branch to a forward pass. `model.hooks(...)` attaches its functions through
chapter 1's `Module.attach` and detaches them when its `with` block ends, so a model outside the
block runs chapter 1's code: each named activation passes through `self.hook(name, x)`, which
returns x after one attribute lookup. Four models of the same weights take the same training
step, interleaved:

    never hooked     chapter 4 never touched it
    after hooks      it has been through `run_with_cache` and `with model.hooks(...)` on every
                     activation, and left them: "no hook" as a user meets it
    reading hooks    inside `with model.hooks(...)`, a function that reads (returns None) on every
                     activation of a `hook` line: what hooks cost while they are used (each
                     head's result, computed only when asked for, is not one)
    never hooked,    a second copy of the first, run last in each round: the ratio of two equal
    again            steps, which shows how much of a ratio is noise and the place in the round

The ratios to "never hooked" are reported, and so is what the `hook` lines cost in themselves:
the time of one call with nothing attached, times the calls a step makes (one per activation),
as a share of the step.
"""
import statistics
import time

import numpy as np

from tinyattn.nn.hooks import activation_points
from tinyattn_tools.bench.timing import check_agreement, interleaved, median_ratio
from tinyattn_tools.bench.training import SIZES, tinyattn_trainer, training_inputs


def hook_line_names(model):
    """The activations that the forward pass's `hook` lines name: all of `activation_names()`
    but each head's "result", which is no line of chapter 1 but computed only when asked for."""
    return [name for name, (layer, own_name) in activation_points(model).items()
            if own_name in layer.activations]


def the_models(dtype, **sizes):
    """{"never hooked", "after hooks", "reading hooks", "never hooked, again": a model of the same
    weights}, the ids and the targets; the reading functions stay attached (the `with` block that
    holds them is returned, to be left when done)."""
    models = {name: training_inputs(dtype, **sizes)[0] for name in
              ("never hooked", "after hooks", "reading hooks", "never hooked, again")}
    _, ids, targets = training_inputs(dtype, **sizes)
    used = models["after hooks"]
    used.run_with_cache(ids)
    with used.hooks({name: lambda x: None for name in used.activation_names()}):
        used(ids)
    reading = models["reading hooks"]
    block = reading.hooks({name: lambda x: None for name in hook_line_names(reading)})
    block.__enter__()
    return models, ids, targets, block


def hook_call_seconds(model, calls=100_000):
    """Seconds per `hook` call with nothing attached: the line every named activation runs."""
    layer, x = model.blocks[0].attn, np.zeros(1)
    start = time.perf_counter()
    for _ in range(calls):
        layer.hook("weights", x)
    return (time.perf_counter() - start) / calls


def bench_hooks(rounds, torch=None, **sizes):
    shown = ", ".join(f"{name} {value}" for name, value in {**SIZES, **sizes}.items())
    print(f"Chapter 4's hooks on one training step of a small GPT ({shown}): float32, "
          f"{rounds} interleaved rounds")
    models, ids, targets, block = the_models(np.float64, **sizes)   # first the same numbers
    try:
        check_agreement({name: tinyattn_trainer(model) for name, model in models.items()},
                        (ids, targets), rtol=0, atol=0, reference="never hooked")
    finally:
        block.__exit__(None, None, None)
    models, ids, targets, block = the_models(np.float32, **sizes)
    try:
        steps = {name: tinyattn_trainer(model) for name, model in models.items()}
        interleaved(steps, (ids, targets), 1)                          # warm up
        times = interleaved(steps, (ids, targets), rounds)
    finally:
        block.__exit__(None, None, None)
    ratios = {}
    for name in steps:
        print(f"   {name:<20} {statistics.median(times[name]) * 1e3:7.1f} ms per step", end="")
        if name != "never hooked":
            ratios[f"{name} / never hooked"] = median_ratio(times, name, "never hooked")
            print(f"   {ratios[f'{name} / never hooked']:5.3f}x   (median of per-round ratios)",
                  end="")
        print()
    calls = len(hook_line_names(models["never hooked"]))
    per_call = hook_call_seconds(models["never hooked"])
    share = calls * per_call / statistics.median(times["never hooked"])
    print(f"   the hook lines: {calls} calls per forward pass, {per_call * 1e9:.0f} ns each with "
          f"nothing attached: {share:.2e} of a step")
    ratios["hook lines / step"] = share
    return ratios
