"""Demo 16: make it yours. LoRA fine-tunes demo 11's tiny GPT on other text, beside full
fine-tuning: what each learns, what each forgets, and what each costs.

What it shows: LoRA (Hu et al. 2021, tinyattn/nn/lora.py) freezes a trained model and learns, for
each attention projection W (q, k, v, out), a change B A of rank r: r (in + out) numbers instead of
out * in. Demo 11's model (the tiny GPT that learned Python's documentation topics, trained again
here for PRETRAIN["steps"] steps with demo 11's recipe, or read from demo 11's own checkpoint with
`--base`) is fine-tuned on other text that ships with Python, the source code of a few modules of
its standard library, four times from the same start: every weight (full fine-tuning), and LoRA at
ranks 1, 4 and 16. Each gets the same steps, batches and schedule. For each it prints

  * the parameters that train, and the bytes of AdamW's state for them (its two moving averages:
    counted from the optimizer's own arrays), and the processor time of a step;
  * the loss on held-out code (the new text: what it learned) and on held-out documentation (the
    old text: how much of it the model forgot), at the start and every FINE_TUNE["eval_every"]
    steps, drawn as paths in a picture, `lora.png`;
  * the size of the adapters saved alone (`save_lora`) against the whole model's checkpoint, and
    how far merging the adapters into the weights (`merge_lora`) moves the logits: float32's
    rounding, nothing more.

Then the same on GPT-2 small's shape (124M parameters; random weights, since speed does not depend
on them and the weights are a download): the processor time of one training step of 4 sequences of
128 tokens with LoRA of rank 8 on the attention, and with every weight training. `--quick` (what
the tests run) shortens everything, and times GPT-2 on the small GPT-2 of random weights in
tests/fixtures, read by `from_pretrained`.

    python demos/16_lora.py [output folder] [--quick] [--base tinyattn-demos/tiny_gpt.npz]

The learning rates are a choice, not a finding (FULL_LR and LORA_LR, to try others): full
fine-tuning takes the peak rate demo 11 trained the base with, LoRA ten times that, since its
update starts at zero and moves only through the thin B and A; alpha is ALPHA for every rank, as
Hu et al. do (section 4.1: alpha set once, to the first rank tried, then the rank changed without
retuning), so that ranks 1 and 16 run with the settings of rank 4.
"""
import importlib
import inspect
import sys
import time

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn

tiny_gpt = importlib.import_module("11_tiny_gpt")

# %% [markdown]
# The two texts, as demo 11's characters: the old one is demo 11's (Python's documentation
# topics), the new one the source code of some modules of Python's standard library, read with
# `inspect.getsource`. A character the base model never saw (a backtick, a dollar sign: a few of
# them) has no embedding, so it is left out. Each text: its first 90% to train on, the rest held
# out.

# %%
SEED = 0
MODULES = ("bisect", "calendar", "csv", "dataclasses", "difflib", "functools", "heapq", "pprint",
           "random", "string", "textwrap")


def source_code_text(vocabulary):
    """The source of MODULES, one after the other, without the characters outside `vocabulary`;
    and how many characters were left out."""
    code = "\n".join(inspect.getsource(importlib.import_module(name)) for name in MODULES)
    kept = "".join(character for character in code if character in vocabulary)
    return kept, len(code) - len(kept)


def held_out(data, count, seed):
    """`count` batches of demo 11's BATCH windows of `data`, drawn once with a generator of their
    own: every evaluation of every model scores the same windows."""
    random = np.random.default_rng(seed)
    return [tiny_gpt.random_windows(data, random, tiny_gpt.BATCH) for _ in range(count)]


# %% [markdown]
# The settings. Pretraining is demo 11's recipe (its model, batches and AdamW), shorter; each
# fine-tuning run takes FINE_TUNE["steps"] steps of demo 11's batch from the code's training part,
# with a warm-up, a cosine decay to a tenth of the rate, gradients clipped to norm 1 and no weight
# decay (which would pull a fully fine-tuned weight towards zero: forgetting of its own).

# %%
PRETRAIN = dict(steps=600, warmup_steps=50, eval_every=200, eval_batches=10)
PRETRAIN_QUICK = dict(steps=10, warmup_steps=3, eval_every=10, eval_batches=1)
FINE_TUNE = dict(steps=150, warmup_steps=10, eval_every=25, eval_batches=8)
FINE_TUNE_QUICK = dict(steps=4, warmup_steps=2, eval_every=2, eval_batches=1)
FULL_LR, LORA_LR, CLIP = 1e-3, 1e-2, 1.0
RANKS, ALPHA = (1, 4, 16), 4.0
METHODS = {"full": None, **{f"r{rank}": rank for rank in RANKS}}   # name: LoRA's rank (None: all)


def pretrained_base(train_data, val_data, vocabulary, settings):
    """Demo 11's model, trained on the documentation with demo 11's recipe for settings["steps"]
    steps (printing demo 11's table of losses)."""
    ta.manual_seed(SEED)
    model = tiny_gpt.build_model(len(vocabulary), tiny_gpt.POSITIONAL, **tiny_gpt.SIZES)
    batches = tiny_gpt.held_out_batches(train_data, val_data, settings["eval_batches"])
    tiny_gpt.train(model, train_data, batches, settings)
    return model


# %% [markdown]
# Fine-tuning, one method at a time, each from a fresh copy of the base: with a rank, `add_lora`
# freezes every weight and wraps each attention projection in a LoRALinear; the optimizer gets
# `model.trainable_parameters()`, the adapters (or, for full fine-tuning, every weight).

# %%
def fine_tune(base, rank, code_train, evaluation, settings):
    """Fine-tune a copy of `base` on the code (LoRA of `rank` on the attention projections, or
    every weight for rank None). Returns (the model, its history: the losses on both held-out
    sets at each evaluation, and what it cost)."""
    model = tiny_gpt.build_model(base.embed.num_embeddings, base.positional, **tiny_gpt.SIZES)
    model.load_state_dict(base.state_dict())
    ta.manual_seed(SEED)                            # the adapters' A, drawn alike for every run
    if rank is not None:
        nn.add_lora(model, rank, ALPHA)
    parameters = model.trainable_parameters()
    lr = FULL_LR if rank is None else LORA_LR
    optimizer = ta.optim.AdamW(parameters, lr=lr, betas=(0.9, 0.99), weight_decay=0.0)
    random = np.random.default_rng(SEED)            # the same batches for every method
    history = {"steps": [], "new": [], "old": [], "step_seconds": 0.0}

    def evaluate(step):
        history["steps"].append(step)
        for text in ("new", "old"):
            history[text].append(tiny_gpt.held_out_loss(model, evaluation[text]))

    evaluate(0)
    progress = demo_tools.Progress()
    for step in range(settings["steps"]):
        start = time.process_time()
        optimizer.lr = ta.optim.warmup_cosine_lr(step, lr, settings["warmup_steps"],
                                                 settings["steps"], lr / 10)
        ids, targets = tiny_gpt.random_windows(code_train, random, tiny_gpt.BATCH)
        loss = tiny_gpt.loss_of(model, ids, targets)
        optimizer.zero_grad()
        loss.backward()
        ta.optim.clip_grad_norm(parameters, CLIP)
        optimizer.step()
        history["step_seconds"] += time.process_time() - start
        if (step + 1) % settings["eval_every"] == 0 or step + 1 == settings["steps"]:
            evaluate(step + 1)
        progress(f"  fine-tuning ({'every weight' if rank is None else f'rank {rank}'}): "
                 f"step {step + 1}/{settings['steps']}")
    history["trainable"] = sum(p.size for p in parameters)
    history["optimizer_bytes"] = sum(state.nbytes for moments in (optimizer.m, optimizer.v)
                                     for state in moments.values())
    history["seconds_per_step"] = history["step_seconds"] / settings["steps"]
    return model, history


def saved_sizes(model, folder):
    """(bytes of the adapters saved alone, bytes of the whole model saved), from the files."""
    folder.mkdir(parents=True, exist_ok=True)
    nn.save_lora(model, folder / "adapters.safetensors")
    model.save(folder / "model.safetensors")
    return ((folder / "adapters.safetensors").stat().st_size,
            (folder / "model.safetensors").stat().st_size)


def merged_difference(model, ids):
    """The largest difference between the adapted model's logits and those of the same model
    with its adapters merged into the weights (merge_lora: a plain model again)."""
    with ta.no_grad():
        before = model(ids).data
        after = nn.merge_lora(model)(ids).data
    return float(np.abs(after - before).max())


# %% [markdown]
# GPT-2's shape: one training step (forward, loss, backward, AdamW) of 4 sequences of 128 random
# tokens, timed in processor seconds, with LoRA of rank 8 on the attention and with every weight
# training. The first step of each is not timed: it makes AdamW's state.

# %%
GPT2_SMALL = dict(vocab_size=50257, embed_dim=768, num_heads=12, num_layers=12, max_len=1024)
GPT2_BATCH, GPT2_TOKENS, GPT2_RANK = 4, 128, 8
GPT2_QUICK = dict(batch=1, tokens=16)           # on the fixture: 1 sequence of 16 tokens
FIXTURE = demo_tools.ROOT / "tests" / "fixtures" / "gpt2-tiny"


def gpt2_model(quick):
    """GPT-2 small's shape with random float32 weights; quick: the fixture's small GPT-2, read
    by `from_pretrained` as the real one is."""
    if quick:
        return nn.CausalTransformer.from_pretrained(FIXTURE).train()
    ta.manual_seed(SEED)
    return nn.CausalTransformer(**GPT2_SMALL, positional="learned", tied_head=True,
                                dtype=np.float32)


def gpt2_step_seconds(quick):
    """{"full": processor seconds of a step training every weight, "lora": of a step training
    adapters of GPT2_RANK on the attention, "parameters": the model's, "lora_trainable": the
    adapters', "batch": sequences, "tokens": per sequence}. The same model is timed fully first,
    then with adapters."""
    model = gpt2_model(quick)
    batch, length = ((GPT2_QUICK["batch"], GPT2_QUICK["tokens"]) if quick
                     else (GPT2_BATCH, GPT2_TOKENS))
    ids = np.random.default_rng(SEED).integers(0, model.embed.num_embeddings, (batch, length + 1))
    found = {"parameters": sum(p.size for p in model.parameters()), "tokens": length,
             "batch": batch,
             "full": second_step_seconds(model, ids)}
    nn.add_lora(model, GPT2_RANK)
    found["lora_trainable"] = sum(p.size for p in model.trainable_parameters())
    found["lora"] = second_step_seconds(model, ids)
    return found


def second_step_seconds(model, ids):
    """Processor seconds of the second of two training steps of `model`'s trainable parameters
    on `ids` (B, T + 1)."""
    parameters = model.trainable_parameters()
    optimizer = ta.optim.AdamW(parameters, lr=1e-4)
    seconds = []
    for _ in range(2):
        start = time.process_time()
        loss = tiny_gpt.loss_of(model, ids[:, :-1], ids[:, 1:])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        seconds.append(time.process_time() - start)
    return seconds[-1]


# %% [markdown]
# `main` runs the parts in order and returns the numbers.

# %%
def main(argv=None):
    args = command_line(argv)
    pretrain, settings = (PRETRAIN_QUICK, FINE_TUNE_QUICK) if args.quick else (PRETRAIN, FINE_TUNE)
    documentation = tiny_gpt.documentation_text()
    vocabulary = "".join(sorted(set(documentation)))
    docs_train, docs_val = tiny_gpt.split(tiny_gpt.encode(documentation, vocabulary))
    if args.base is None:
        print(f"The base: demo 11's model trained for {pretrain['steps']:,} steps on Python's "
              f"documentation topics ({len(documentation):,} characters)")
        base = pretrained_base(docs_train, docs_val, vocabulary, pretrain)
    else:
        base = read_base(args.base, vocabulary)
    code, left_out = source_code_text(vocabulary)
    code_train, code_val = tiny_gpt.split(tiny_gpt.encode(code, vocabulary))
    evaluation = {"new": held_out(code_val, settings["eval_batches"], SEED + 1),
                  "old": held_out(docs_val, settings["eval_batches"], SEED + 2)}
    print_the_texts(code, left_out, settings)

    histories, models = {}, {}
    for name, rank in METHODS.items():
        models[name], histories[name] = fine_tune(base, rank, code_train, evaluation, settings)
        print_run(name, histories[name])
    adapters_bytes, model_bytes = saved_sizes(models["r4"], args.output / "lora_r4")
    difference = merged_difference(models["r4"], evaluation["new"][0][0])
    print_the_table(histories, settings)
    print(f"\nSaved alone, the rank-4 adapters take {adapters_bytes / 1e3:,.0f} kB; the whole "
          f"model {model_bytes / 1e6:,.2f} MB. Merged into the weights (merge_lora), they leave "
          f"the logits within {difference:.1e} of the adapted model's (float32).")

    gpt2 = gpt2_step_seconds(args.quick)
    print_gpt2(gpt2, args.quick)
    picture = plot(histories, args.output / "lora.png")
    demo_tools.print_pictures(picture)
    return numbers(histories, base, pretrain, settings, code, left_out, adapters_bytes,
                   model_bytes, difference, gpt2, args)


# %% [markdown]
# Plumbing, what the experiment needs but is not about: the command line, the base from demo 11's
# checkpoint, what it prints, the picture, the numbers for the entry on docs/demos.md.

# %%
def command_line(argv):
    parser = demo_tools.argument_parser(__doc__)
    parser.add_argument("--base", metavar="CHECKPOINT",
                        help="fine-tune the model of demo 11's checkpoint (tinyattn-demos/"
                             "tiny_gpt.npz) instead of training a base")
    args = parser.parse_args(argv)
    demo_tools.one_blas_thread()
    return args


def read_base(path, vocabulary):
    """The model of demo 11's checkpoint, which must have demo 11's vocabulary and sizes."""
    try:
        model, its_vocabulary = tiny_gpt.load_checkpoint(path)
    except (OSError, ValueError) as error:
        raise SystemExit(f"16_lora.py: {error}") from None
    sizes = {"embed_dim": model.embed.embedding_dim, "num_heads": model.num_heads,
             "num_layers": len(model.blocks), "max_len": model.max_len}
    if its_vocabulary != vocabulary or sizes != tiny_gpt.SIZES:
        raise SystemExit(f"16_lora.py: {path} is not demo 11's model on this Python's "
                         f"documentation: its vocabulary or sizes differ")
    print(f"The base: demo 11's checkpoint {path}")
    return model


def print_the_texts(code, left_out, settings):
    print(f"\nThe new text: the source code of {len(MODULES)} modules of Python "
          f"{sys.version.split()[0]}'s standard library ({', '.join(MODULES)}): {len(code):,} "
          f"characters ({left_out} outside the base's vocabulary left out). Losses in nats per "
          f"character on {settings['eval_batches'] * tiny_gpt.BATCH} fixed held-out windows of "
          f"each text.\n")


def print_run(name, history):
    path = "  ".join(f"{step:>4}: {new:.3f} / {old:.3f}" for step, new, old in
                     zip(history["steps"], history["new"], history["old"]))
    print(f"{LABELS[name]:<14} step: code / documentation   {path}", flush=True)


LABELS = {"full": "full", **{f"r{rank}": f"LoRA, rank {rank}" for rank in RANKS}}


def print_the_table(histories, settings):
    base_new, base_old = histories["full"]["new"][0], histories["full"]["old"][0]
    rows = [[LABELS[name], f"{h['trainable']:,}", f"{h['optimizer_bytes'] / 1e3:,.0f} kB",
             f"{h['seconds_per_step'] * 1e3:.0f} ms", f"{h['new'][-1]:.3f}",
             f"{base_new - h['new'][-1]:+.3f}", f"{h['old'][-1]:.3f}",
             f"{h['old'][-1] - base_old:+.3f}"] for name, h in histories.items()]
    demo_tools.print_table(
        ["fine-tuning", "trainable", "AdamW state", "step", "code loss", "learned",
         "docs loss", "forgotten"], rows,
        f"After {settings['steps']} steps (the base: code {base_new:.3f}, documentation "
        f"{base_old:.3f}; step: processor time):")


def print_gpt2(gpt2, quick):
    shape = "the small GPT-2 of tests/fixtures" if quick else "GPT-2 small's shape"
    print(f"\nOne training step on {shape} ({gpt2['parameters']:,} parameters, random weights), "
          f"{gpt2['batch']} sequences of {gpt2['tokens']} tokens, processor time: every weight "
          f"{gpt2['full']:.2f} s; LoRA of rank {GPT2_RANK} on the attention "
          f"({gpt2['lora_trainable']:,} trainable) {gpt2['lora']:.2f} s "
          f"({gpt2['full'] / gpt2['lora']:.1f}x faster)")


def plot(histories, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    figure, axes = plt.subplots(figsize=(7.5, 5), layout="constrained")
    for (name, history), color in zip(histories.items(), ("black", "tab:blue", "tab:orange",
                                                          "tab:green")):
        axes.plot(history["new"], history["old"], "o-", color=color, markersize=4,
                  label=f"{LABELS[name]} ({history['trainable']:,} trained)")
        axes.annotate(f"step {history['steps'][-1]}", (history["new"][-1], history["old"][-1]),
                      xytext=(4, 4), textcoords="offset points", fontsize=8, color=color)
    start = histories["full"]
    axes.plot(start["new"][0], start["old"][0], "s", color="gray", markersize=9)
    axes.annotate("the base", (start["new"][0], start["old"][0]), xytext=(8, -4),
                  textcoords="offset points", color="gray")
    axes.set(xlabel="loss on held-out code (the new text), nats per character: falls to the "
                    "right",
             ylabel="loss on held-out documentation (the old text)",
             title="Fine-tuning on code: learned (right) against forgotten (up)")
    axes.invert_xaxis()                         # a lower loss on the code is further right
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="upper left")
    return demo_tools.save_figure(figure, path, dpi=110)


def numbers(histories, base, pretrain, settings, code, left_out, adapters_bytes, model_bytes,
            difference, gpt2, args):
    """What the run measured, under the names PAGE_ENTRY uses."""
    found = {"python_version": sys.version.split()[0], "modules": len(MODULES),
             "code_characters": len(code), "left_out": left_out,
             "pretrain_steps": None if args.base else pretrain["steps"],
             "steps": settings["steps"],
             "base_parameters": sum(p.size for p in base.parameters()),
             "base_new": histories["full"]["new"][0], "base_old": histories["full"]["old"][0],
             "full_lr": FULL_LR, "lora_lr": LORA_LR, "alpha": ALPHA,
             "adapters_kilobytes": adapters_bytes / 1e3, "model_megabytes": model_bytes / 1e6,
             "merged_difference": difference, "gpt2_rank": GPT2_RANK}
    for name, history in histories.items():
        found.update({f"trainable_{name}": history["trainable"],
                      f"optimizer_kilobytes_{name}": history["optimizer_bytes"] / 1e3,
                      f"step_milliseconds_{name}": history["seconds_per_step"] * 1e3,
                      f"new_{name}": history["new"][-1], f"old_{name}": history["old"][-1],
                      f"learned_{name}": history["new"][0] - history["new"][-1],
                      f"forgotten_{name}": history["old"][-1] - history["old"][0],
                      f"curve_new_{name}": history["new"], f"curve_old_{name}": history["old"]})
    found.update(gpt2_batch=gpt2["batch"], gpt2_tokens=gpt2["tokens"],
                 gpt2_parameters=gpt2["parameters"], gpt2_lora_trainable=gpt2["lora_trainable"],
                 gpt2_lora_step_seconds=gpt2["lora"], gpt2_full_step_seconds=gpt2["full"],
                 gpt2_ratio=gpt2["full"] / gpt2["lora"])
    return found


PAGE_ENTRY = """\
16. [`16_lora.py`](../demos/16_lora.py) — LoRA (Hu et al. 2021) against full fine-tuning.
    Demo 11's tiny GPT ({base_parameters:,} parameters), trained again with demo 11's recipe for
    {pretrain_steps:,} steps on Python's documentation, is fine-tuned for {steps} steps on the
    source code of {modules} modules of Python {python_version}'s standard library
    ({code_characters:,} characters), from a loss of {base_new:.2f} nats per character on
    held-out code and {base_old:.2f} on held-out documentation. Full fine-tuning (AdamW at
    {full_lr:g}; {trainable_full:,} parameters trained, {optimizer_kilobytes_full:,.0f} kB of AdamW
    state) ends at {new_full:.2f} on code and {old_full:.2f} on documentation. LoRA on the
    attention projections (AdamW at {lora_lr:g}, alpha {alpha:g}) ends at rank 1
    ({trainable_r1:,} parameters, {optimizer_kilobytes_r1:,.0f} kB) at {new_r1:.2f} and
    {old_r1:.2f}, at rank 4 ({trainable_r4:,}, {optimizer_kilobytes_r4:,.0f} kB) at
    {new_r4:.2f} and {old_r4:.2f}, at rank 16 ({trainable_r16:,},
    {optimizer_kilobytes_r16:,.0f} kB) at {new_r16:.2f} and {old_r16:.2f}. A step took
    {step_milliseconds_full:.0f} ms of processor time fully fine-tuned, {step_milliseconds_r4:.0f}
    ms with rank 4. The rank-4 adapters saved alone take {adapters_kilobytes:,.0f} kB (the whole
    model {model_megabytes:.1f} MB); merged into the weights, they move the logits by at most
    {merged_difference:.0e} (float32).

    On GPT-2 small's shape ({gpt2_parameters:,} parameters, random weights), one training step
    of {gpt2_batch} sequences of {gpt2_tokens} tokens took {gpt2_full_step_seconds:.1f} s of
    processor time training every weight, and {gpt2_lora_step_seconds:.1f} s training LoRA
    adapters of rank {gpt2_rank} on the attention ({gpt2_lora_trainable:,} parameters), on the
    machine named above.

    ![each fine-tuning's losses on code and on documentation, step by step](pictures/lora.png)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
