"""Demo 14 (GPT-2 small in tinyattn), in its quick mode: the whole pipeline on the small GPT-2 of
random weights in tests/fixtures/gpt2-tiny; its parts on inputs whose answers are known; and what
it says without the weights."""
import contextlib
import importlib
import io
import math

import numpy as np
import pytest

import regenerate
import tinyattn as ta

demo = importlib.import_module("14_gpt2")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(the numbers main returns, the output folder, what it printed)."""
    folder = tmp_path_factory.mktemp("demo14")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        numbers = demo.main([str(folder), "--quick"])
    return numbers, folder, printed.getvalue()


def test_the_quick_run_says_its_weights_are_random_and_draws_no_conclusion(run):
    """Random weights: no comparison with demo 11, nothing about the literature's induction heads;
    what it says instead is that the weights are random and that every step ran."""
    numbers, _, printed = run
    assert "Quick run: the weights are random (tests/fixtures/gpt2-tiny)" in printed
    assert "every step of the pipeline runs" in printed
    for conclusion in ("Olsson et al. 2022 expect", "this run agrees", "this run does not agree",
                       "Wang et al. 2022 name", "demo 11's tiny GPT:", "to compare with"):
        assert conclusion not in printed
    assert "random weights: no comparison with demo 11's tiny GPT" in printed
    assert "random weights: no head was trained to copy" in printed
    assert numbers["agrees"] is None and "random weights" in numbers["agreement"]


def test_the_likeliest_next_tokens_are_the_models(run):
    numbers, _, _ = run
    model = ta.nn.CausalTransformer.from_pretrained(demo.FIXTURE)
    tokenizer = demo.GPT2Tokenizer.from_pretrained(demo.FIXTURE)
    for number, prompt in enumerate(demo.PROMPTS):
        probabilities = numbers[f"top_probabilities_{number}"]
        assert len(probabilities) == demo.TOP and probabilities == sorted(probabilities)[::-1]
        with ta.no_grad():
            logits = model([tokenizer.encode(prompt)]).data[0, -1]
        best = [tokenizer.decode([token]) for token in np.argsort(logits)[::-1][:demo.TOP]]
        assert numbers[f"top_tokens_{number}"] == best
        expected = np.exp(np.sort(logits)[::-1][:demo.TOP] - np.log(np.exp(logits).sum()))
        np.testing.assert_allclose(probabilities, expected, rtol=1e-4)


def test_the_continuations_are_generates(run):
    numbers, _, _ = run
    model = ta.nn.CausalTransformer.from_pretrained(demo.FIXTURE)
    tokenizer = demo.GPT2Tokenizer.from_pretrained(demo.FIXTURE)
    prompt = np.array([tokenizer.encode(demo.CONTINUED)])
    greedy = model.generate(prompt, demo.QUICK["continuation_length"], temperature=0)
    assert numbers["greedy"] == tokenizer.decode(greedy[0, prompt.shape[1]:].tolist())
    assert numbers["sampled"] != numbers["greedy"]
    assert numbers["cached_tokens_per_second"] > 0 and numbers["recomputed_tokens_per_second"] > 0


def test_the_perplexity_scores_every_token_once(run):
    numbers, _, _ = run
    assert numbers["validation_characters"] == demo.QUICK["validation_characters"]
    assert numbers["validation_characters"] / numbers["validation_tokens"] > 2
    # random weights: near a uniform guess over 50,257 tokens (10.8 nats), not better
    assert 9 < numbers["nats_per_token"] < 20 and math.isfinite(numbers["nats_per_character"])
    ratio = numbers["nats_per_token"] / numbers["nats_per_character"]
    assert ratio == pytest.approx(numbers["validation_characters"] / numbers["validation_tokens"],
                                  rel=0.01)


@pytest.mark.parametrize("count, window", [(10, 4), (2, 128), (300, 128), (257, 128)])
def test_scoring_windows_score_each_token_once_with_half_a_window_before_it(count, window):
    scored = []
    for number, (begin, end, first) in enumerate(demo.scoring_windows(count, window)):
        assert end - begin <= window and begin < first <= end
        assert number == 0 or first - begin >= window // 2
        scored.extend(range(first, end))
    assert scored == list(range(1, count))


def test_the_validation_text_is_demo_11s():
    tiny_gpt = importlib.import_module("11_tiny_gpt")
    text = tiny_gpt.documentation_text()
    assert demo.validation_text() == text[int(0.9 * len(text)):]
    assert demo.validation_text(100) == text[int(0.9 * len(text)):][:100]


def test_the_induction_score_of_a_head_that_copies_is_1():
    repeat, length = 5, 11
    copying = np.zeros((length, length))
    for query in range(1 + repeat, 1 + 2 * repeat):
        copying[query, query - repeat + 1] = 1.0
    previous = np.eye(length, k=-1)                                # the token before
    weights = np.stack([copying, previous])[None, None]            # (1, 1, 2, T, T)
    np.testing.assert_array_equal(demo.induction_scores(weights, repeat), [[1.0, 0.0]])


def test_the_sequences_repeat_after_endoftext():
    ids = demo.repeated_random_tokens(3, 7)
    assert ids.shape == (3, 15) and (ids[:, 0] == demo.ENDOFTEXT).all()
    np.testing.assert_array_equal(ids[:, 1:8], ids[:, 8:])
    assert (ids[:, 1:] < demo.ENDOFTEXT).all()


def test_agreement_with_the_literature():
    scores = np.zeros((12, 12))
    scores[5, 5] = scores[6, 9] = 0.9
    said, agrees = demo.agreement(scores)
    assert agrees and said.endswith("both of the heads Wang et al. 2022 name, 5.5 and 6.9, among "
                                    "them: this run agrees")
    scores[6, 9], scores[0, 3] = 0.1, 0.5
    said, agrees = demo.agreement(scores)
    assert agrees is False and said.startswith("0.3 in the first layer")
    assert "1 of the heads" in said and said.endswith("does not agree")
    assert demo.agreement(np.zeros((2, 4)))[1] is None


def test_the_induction_numbers_and_picture(run):
    numbers, folder, _ = run
    scores = np.array(numbers["induction_scores"])
    assert scores.shape == (2, 4) and ((0 <= scores) & (scores <= 1)).all()
    assert numbers["induction_head_count"] == len(numbers["induction_heads"])
    assert numbers["first_copy_loss"] > 5 and numbers["second_copy_loss"] > 5    # random weights
    pytest.importorskip("matplotlib")
    assert (folder / "gpt2_induction_heads.png").stat().st_size > 10_000


def test_the_readme_entry_takes_the_demos_numbers(run):
    numbers, _, _ = run
    run_time = dict(wall_seconds=1.0, processor_seconds=1.0, cpu_count=2, load_average=1.0,
                    tiny_gpt_nats_per_character=1.3)
    entry = regenerate.readme_entry("14_gpt2", {"14_gpt2": {**numbers, **run_time}})
    assert entry.startswith("14. [`14_gpt2.py`]")
    assert "pictures/gpt2_induction_heads.png" in entry
    assert f"{numbers['parameters']:,} parameters" in entry


def test_without_the_weights_it_says_how_to_get_them(tmp_path):
    with pytest.raises(SystemExit, match=r"^14_gpt2.py: GPT-2's weights are not in .* \(no "
                                         r"config.json, model.safetensors, vocab.json, "
                                         r"merges.txt\). Get them with `python -m tinyattn "
                                         r"download gpt2`"):
        demo.main([str(tmp_path / "out"), "--weights", str(tmp_path)])
    assert list(tmp_path.iterdir()) == []
