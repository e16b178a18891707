"""Generation on GPT-2 small's shape: tokens per second of `CausalTransformer.generate` (with its
key/value cache) against Hugging Face transformers' `GPT2LMHeadModel.generate`, when transformers
and PyTorch are installed.

The model is GPT-2 small (12 layers, 12 heads, width 768, 1,024 positions, 50,257 tokens, tied
head: 124M parameters) in float32 with random weights: speed does not depend on what the weights
are. tinyattn draws them; `save_pretrained` writes them, and transformers reads them from there,
so both run the same model, and both must write the same tokens (greedy decoding; with random
weights the tokens mean nothing) before anything is timed.

A step of writing one token is a product of the new token's vector with every weight matrix,
124M multiply-adds, most of them the head's 768 x 50,257: reading 500 MB of weights per token, so
both are bound by memory and BLAS, and what differs is what each framework adds per op. The
prompt step runs the whole prompt, but both compute the head for its last position only (what
`forward(..., last_only=True)` is for).

Timed in processor seconds (`time.process_time`), interleaved: on a shared machine the time spent
waiting for a core is left out for both alike.
"""
import tempfile
import time

import numpy as np

import tinyattn as ta
from tinyattn_tools.bench.timing import interleaved, median_ratio

GPT2_SMALL = dict(vocab_size=50257, embed_dim=768, num_heads=12, num_layers=12, max_len=1024)
PROMPT_LENGTH, NEW_TOKENS = 16, 48
GPT2_ROUNDS = 5     # at most: a round writes 2 x 48 tokens of a 124M-parameter model


def gpt2_model(seed=0, **sizes):
    """A GPT-2-shaped CausalTransformer of random float32 weights (GPT2_SMALL, or `sizes`)."""
    ta.manual_seed(seed)
    return ta.nn.CausalTransformer(**{**GPT2_SMALL, **sizes}, positional="learned",
                                   tied_head=True, dtype=np.float32).eval()


def transformers_model(model, folder):
    """The same model in transformers: written by save_pretrained into `folder`, read back."""
    import transformers
    transformers.utils.logging.disable_progress_bar()
    model.save_pretrained(folder)
    return transformers.GPT2LMHeadModel.from_pretrained(folder).eval()


def transformers_found():
    try:
        import transformers  # noqa: F401  (only asked whether it is there)
    except ImportError:
        return False
    return True


def transformers_generate(torch, model):
    def run(prompt, new_tokens):
        with torch.no_grad():
            ids = torch.from_numpy(prompt)
            return model.generate(ids, max_new_tokens=new_tokens, do_sample=False,
                                  attention_mask=torch.ones_like(ids), pad_token_id=0).numpy()
    return run


def tinyattn_generate(model):
    def run(prompt, new_tokens):
        return model.generate(prompt, new_tokens, temperature=0)
    return run


def bench_gpt2_generation(rounds, torch=None, prompt_length=PROMPT_LENGTH, new_tokens=NEW_TOKENS,
                          **sizes):
    """Part 6, with at most GPT2_ROUNDS rounds: prints tokens per second of each and their ratio;
    returns {name: tokens per second}, and "ratio" (tinyattn's speed / transformers') when
    transformers was measured."""
    rounds = min(rounds, GPT2_ROUNDS)
    model = gpt2_model(**sizes)
    shape = ("{num_layers} layers, {num_heads} heads, width {embed_dim}, vocabulary {vocab_size}"
             .format(**{**GPT2_SMALL, **sizes}))
    print(f"Generation on GPT-2 small's shape ({shape},\n   float32, random weights): "
          f"{new_tokens} tokens after a {prompt_length}-token prompt, greedy, with the key/value "
          f"cache;\n   {rounds} interleaved rounds (at most {GPT2_ROUNDS}), processor time")
    implementations = {"tinyattn": tinyattn_generate(model)}
    missing = [name for name, found in (("torch", torch), ("transformers", transformers_found()))
               if not found]
    with tempfile.TemporaryDirectory() as folder:
        if missing:
            print(f"   ({' and '.join(missing)} not installed: tinyattn is measured alone)")
        else:
            implementations["transformers"] = transformers_generate(
                torch, transformers_model(model, folder))
        prompt = np.random.default_rng(0).integers(0, model.embed.num_embeddings,
                                                   (1, prompt_length))
        inputs = (prompt, new_tokens)
        tokens = {name: generate(*inputs) for name, generate in implementations.items()}
        if any(not np.array_equal(ids, tokens["tinyattn"]) for ids in tokens.values()):
            raise AssertionError("bench: transformers wrote other tokens than tinyattn")
        times = interleaved(implementations, inputs, rounds, clock=time.process_time)
    speeds = {name: new_tokens / float(np.median(seconds)) for name, seconds in times.items()}
    for name, speed in speeds.items():
        print(f"   {name:<13} {speed:6.1f} tokens/s")
    if "transformers" in times:
        speeds["ratio"] = median_ratio(times, "transformers", "tinyattn")
        print(f"   tinyattn writes {speeds['ratio']:.2f}x as many tokens per second as "
              f"transformers (median over rounds of the per-round ratio)")
    return speeds
