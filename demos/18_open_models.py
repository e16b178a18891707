"""Demo 18: Qwen3-0.6B and SmolLM2-135M, two of today's open models, in the engine of this
repository.

What it shows: chapter 5's one decoder running the real checkpoints of two families, read by
`nn.from_pretrained` (tinyattn/nn/open_checkpoints.py): Qwen3-0.6B (28 layers, 16 query heads on
8 key/value heads of 128, QK-norm) and SmolLM2-135M-Instruct (a Llama: 30 layers, 9 query heads on
3 key/value heads), their text cut into tokens by chapter 5's tokenizer from each folder's
tokenizer.json (`tinyattn.tokenizer.from_pretrained`) and put as a conversation by the folder's
chat template. For each model it

1. reads the model and its tokenizer, and prints the switches its config.json turns on;
2. asks the question of its model card's example as the card does, through the chat template
   with the generation prompt (Qwen3 in its non-thinking mode, `enable_thinking=False`, which its
   card shows), and writes the answer greedily, one token a step with the key/value cache, until
   the end of the turn (at most MAX_NEW_TOKENS tokens). The cards sample; greedy decoding gives
   the same answer on every run, and one that transformers must give too;
3. compares the answer with transformers' greedy answer on the same folder, token for token, when
   transformers is installed; and says whether SmolLM2's answer names Paris (its card asks for
   the capital of France).

    python -m tinyattn download qwen3-0.6b            # once, 1.5 GB
    python -m tinyattn download smollm2-135m          # once, 269 MB
    python demos/18_open_models.py [output folder] [--qwen3 FOLDER] [--smollm2 FOLDER] [--quick]

The weights: FOLDER, or the folder `python -m tinyattn download NAME` fills. Where a model's are
not there, and for both with `--quick` (what the tests run), the demo runs the fixture of that
model's family instead and says so: tests/fixtures/qwen3-tiny and llama-tiny, random weights that
transformers wrote, with a vocabulary of 64 tokens and no tokenizer. Then the prompt is the
fixture's token ids, and the answer is compared with the ids transformers wrote when it made the
fixture: every step runs but the text, and the numbers say nothing about the real models. The
demo draws no picture; its output folder is not written to.
"""
import json
import os
import textwrap

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.nn as nn
from tinyattn import tokenizer
from tinyattn_tools import download

# %% [markdown]
# The two models, each with its model card's example (the question, and what the card passes to
# the chat template) and the fixture of its family; and docs/demos.md's entries for this demo,
# with the weights and without, the first of which `dev/regenerate.py` fills with the numbers
# `main` returns.

# %%
MAX_NEW_TOKENS = 96
CARDS = {
    "qwen3-0.6b": dict(key="qwen3", title="Qwen3-0.6B", fixture="qwen3-tiny",
                       question="Give me a short introduction to large language model.",
                       variables={"enable_thinking": False}, expected=None),
    "smollm2-135m": dict(key="smollm2", title="SmolLM2-135M-Instruct", fixture="llama-tiny",
                         question="What is the capital of France.", variables={},
                         expected="Paris"),
}
FIXTURES = demo_tools.ROOT / "tests" / "fixtures"      # a notebook has no __file__
SHOWN = 240                     # at most this many characters of an answer on docs/demos.md

PAGE_ENTRY = """\
18. [`18_open_models.py`](../demos/18_open_models.py) — two of today's open models in the engine
    of this repository: Qwen3-0.6B ({qwen3_parameters:,} parameters) and SmolLM2-135M-Instruct
    ({smollm2_parameters:,}), their checkpoints read by `nn.from_pretrained` into chapter 5's one
    decoder, their prompts written by each folder's chat template and cut by chapter 5's
    tokenizer. Asked its model card's question, "{qwen3_question}" (in its non-thinking mode),
    Qwen3-0.6B answers greedily `{qwen3_answer_shown}` ({qwen3_answer_tokens} tokens;
    {qwen3_agreement}). SmolLM2, asked "{smollm2_question}", answers `{smollm2_answer_shown}`
    ({smollm2_answer_tokens} tokens; {smollm2_agreement}; {smollm2_expected_said})."""

PAGE_ENTRY_WITHOUT_RESULTS = """\
18. [`18_open_models.py`](../demos/18_open_models.py) — two of today's open models in the engine
    of this repository: Qwen3-0.6B and SmolLM2-135M-Instruct, their checkpoints read by
    `nn.from_pretrained` into chapter 5's one decoder, their prompts written by each folder's chat
    template and cut by chapter 5's tokenizer. It needs their weights, `python -m tinyattn
    download qwen3-0.6b` (1.5 GB) and `smollm2-135m` (269 MB), which the machine that wrote this
    list did not have: run it to see each model's switches, its greedy answer to its model card's
    question, whether transformers writes the same tokens on the same files, and whether SmolLM2
    names the capital of France. Without the weights, and in its quick run (the tests), it runs
    the same steps on the two families' fixtures (random weights, no tokenizer), and compares
    their tokens with those transformers wrote for them. (`python dev/regenerate.py` puts the
    measured answers here once the weights are there.)"""

# What the demo says where it runs a fixture in place of a model.
FIXTURE_SAYS = ("random weights (tests/fixtures/{fixture}, written by transformers), a vocabulary "
                "of 64 tokens and no tokenizer: the prompt is the fixture's token ids, and the "
                "answer is compared with the ids transformers wrote for it. Every step runs but "
                "the text; nothing here says anything about {title}.")


# %% [markdown]
# Where the weights are: the folder named on the command line, or the one `python -m tinyattn
# download NAME` fills; none (the fixture) with `--quick` or where the files are not there.

# %%
def missing_files(folder, name):
    """The files of model `name` (download.MODELS) that `folder` lacks (all, for None)."""
    return [file for file in download.MODELS[name].files
            if folder is None or not os.path.isfile(os.path.join(folder, file))]


def can_run_in_full():
    """Whether both models' weights are downloaded (regenerate includes the demo only then)."""
    return not any(missing_files(download.default_folder(name), name) for name in CARDS)


def command_line(argv):
    """The parsed command line, with `folders`: {name: its folder, or None for the fixture}."""
    parser = demo_tools.argument_parser(__doc__)
    for name, card in CARDS.items():
        parser.add_argument(f"--{card['key']}", metavar="FOLDER", default=None,
                            help=f"{card['title']}'s folder (default: "
                                 f"{download.default_folder(name)})")
    args = parser.parse_args(argv)
    demo_tools.one_blas_thread()
    args.folders = {}
    for name, card in CARDS.items():
        folder = getattr(args, card["key"]) or download.default_folder(name)
        lacks = missing_files(folder, name)
        if lacks and not args.quick:
            print(f"({card['title']}'s weights are not in {folder} (no {', '.join(lacks)}): "
                  f"`python -m tinyattn download {name}` fetches them, or --{card['key']} names a "
                  f"folder holding them. Its family's fixture runs instead.)")
        args.folders[name] = None if args.quick or lacks else folder
    return args


# %% [markdown]
# 1. The model and its tokenizer (Qwen3's page is nn/qwen3.py, SmolLM2's, a Llama, nn/llama.py),
# and the settings its config gives (nn/open_decoder.py's DecoderSettings).

# %%
def switches(settings):
    """The settings a reader compares between families, in a line."""
    s = settings
    said = [f"{s.model_type}: {s.num_layers} layers, width {s.hidden_size}, {s.num_heads} query "
            f"heads on {s.num_kv_heads} key/value heads of {s.head_dim}",
            f"feed-forward {s.intermediate_size} ({s.activation} gate)",
            f"rotary base {s.rope_theta:,.0f}"]
    said += [name for name, on in (
        ("QK-norm", s.qk_norm), ("biases in the attention", s.qkv_bias),
        (f"sliding layers (window {s.sliding_window})", "sliding" in s.kinds()),
        ("a tied head", s.tied_head)) if on]
    return ", ".join(said)


def end_of_turn(folder):
    """The ids that end the model's turn: generation_config.json's eos_token_id (one or a list)."""
    with open(os.path.join(folder, "generation_config.json"), encoding="utf-8") as file:
        ids = json.load(file).get("eos_token_id")
    return set(ids if isinstance(ids, list) else [ids])


# %% [markdown]
# 2. The card's question as a conversation (the chat template, with the generation prompt), and
# the answer written greedily: generate's step written out (nn/open_decoder.py), each new token
# run alone with the cache, stopping at the end of the turn.

# %%
def conversation(text_tokenizer, card):
    """(the text of the card's question as the model was trained to read a conversation, its
    ids (1, T))."""
    text = text_tokenizer.apply_chat_template([{"role": "user", "content": card["question"]}],
                                              add_generation_prompt=True,
                                              variables=card["variables"])
    return text, np.array([text_tokenizer.encode(text)])


def greedy_answer(model, prompt, stops, max_new_tokens):
    """The ids the model writes after `prompt` (1, T), taking the likeliest token each step,
    until one of `stops` (kept) or max_new_tokens of them: the tokens of
    `model.generate(prompt, max_new_tokens)` up to the end of the turn, without writing past it."""
    cache = model.empty_cache()
    new, answer = prompt, []
    with ta.no_grad():
        while len(answer) < max_new_tokens and not (answer and answer[-1] in stops):
            logits = model(new, cache=cache, last_only=True)            # (1, 1, vocab)
            answer.append(int(logits.data[0, -1].argmax()))
            new = np.array([answer[-1:]])                               # (1, 1)
    return answer


# %% [markdown]
# 3. transformers on the same folder: its greedy answer, and how many tokens the two share.

# %%
def transformers_answer(folder, prompt, stops, max_new_tokens):
    """transformers' greedy answer on the same folder (AutoModelForCausalLM in float32,
    `generate(do_sample=False)`, stopping at the same ids), or None without transformers."""
    try:
        import torch
        import transformers
    except ImportError:
        return None
    torch.set_num_threads(1)
    transformers.utils.logging.disable_progress_bar()
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = torch.from_numpy(prompt)
    with torch.no_grad():
        written = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=max_new_tokens, eos_token_id=sorted(stops),
                                 pad_token_id=min(stops), temperature=None, top_p=None,
                                 top_k=None)
    return written[0, prompt.shape[1]:].tolist()


def agreement(ours, theirs):
    """What the comparison with transformers says, in a few words."""
    if theirs is None:
        return "transformers is not installed: not compared"
    same = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b),
                min(len(ours), len(theirs)))
    if ours == theirs:
        return f"transformers writes the same {len(ours)} tokens"
    return (f"transformers writes the same first {same} tokens, then others (it writes "
            f"{len(theirs)} in all)")


# %% [markdown]
# The same steps on a fixture: its prompt's ids, and the ids transformers wrote after them.

# %%
def fixture_run(card):
    """(the fixture's model, its prompt's ids (1, T), our greedy ids, transformers' recorded)."""
    folder = FIXTURES / card["fixture"]
    model = nn.from_pretrained(folder)
    reference = ta.load_safetensors(folder / "reference.safetensors")
    prompt, recorded = reference["prompt_ids"], reference["generated_ids"]
    length = recorded.shape[1] - prompt.shape[1]
    ours = greedy_answer(model, prompt, stops=set(), max_new_tokens=length)
    return model, prompt, ours, recorded[0, prompt.shape[1]:].tolist()


# %% [markdown]
# `main` runs the three steps for each model (or its fixture) and returns the numbers.

# %%
def run_model(name, folder):
    """The three steps for model `name` from `folder` (None: its family's fixture): prints what
    they show and returns their numbers, named with the model's key ("qwen3_answer")."""
    card = CARDS[name]
    key = card["key"]
    if folder is None:
        model, prompt, ours, theirs = fixture_run(card)
        print(textwrap.fill(f"{card['title']}: its family's fixture, "
                            f"{FIXTURE_SAYS.format(**card)}", 100))
        text, answer = None, None
    else:
        model = nn.from_pretrained(folder)
        text_tokenizer = tokenizer.from_pretrained(folder)
        text, prompt = conversation(text_tokenizer, card)
        stops = end_of_turn(folder)
        ours = greedy_answer(model, prompt, stops, MAX_NEW_TOKENS)
        theirs = transformers_answer(folder, prompt, stops, MAX_NEW_TOKENS)
        answer = text_tokenizer.decode([token for token in ours if token not in stops])
        print(f"{card['title']} from {folder}:")
    parameters = sum(p.size for p in model.parameters())
    print(textwrap.fill(f"1. {parameters:,} parameters; {switches(model.settings)}", 100,
                        subsequent_indent="   "))
    if text is None:
        print(f"2. the prompt's ids {prompt[0].tolist()}, then greedily {ours}")
    else:
        print(f"2. the card's question as the chat template writes it ({prompt.shape[1]} tokens):"
              f"\n{textwrap.indent(text, '   | ')}\n   the answer, greedy ({len(ours)} tokens):"
              f"\n{textwrap.indent(answer, '   | ')}")
    said = agreement(ours, theirs)
    numbers = {f"{key}_source": "fixture" if folder is None else "weights",
               f"{key}_parameters": parameters, f"{key}_question": card["question"],
               f"{key}_prompt_tokens": prompt.shape[1], f"{key}_answer_tokens": len(ours),
               f"{key}_same_as_transformers": None if theirs is None else ours == theirs,
               f"{key}_agreement": said if folder is not None else
               said.replace("transformers writes", "transformers wrote")}
    print(f"3. {numbers[f'{key}_agreement']}")
    if answer is not None:
        shown = answer if len(answer) <= SHOWN else answer[:SHOWN].rsplit(" ", 1)[0] + " ..."
        numbers.update({f"{key}_answer": answer,
                        f"{key}_answer_shown": shown.replace("\n", "↵").replace("`", "'")})
        if card["expected"] is not None:
            named = card["expected"] in answer
            numbers[f"{key}_expected_said"] = (f"it {'names' if named else 'does not name'} "
                                               f"{card['expected']}")
            print(f"   {numbers[f'{key}_expected_said']}")
    return numbers


def main(argv=None):
    args = command_line(argv)
    numbers = {"quick": args.quick}
    if args.quick:
        print(textwrap.fill("Quick run: each model's family's fixture in place of the model "
                            "(random weights, no tokenizer). The real models: `python -m "
                            "tinyattn download qwen3-0.6b` and `smollm2-135m`, then `python "
                            "demos/18_open_models.py`.", 100) + "\n")
    for name, folder in args.folders.items():
        numbers.update(run_model(name, folder))
        print()
    return numbers


# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
