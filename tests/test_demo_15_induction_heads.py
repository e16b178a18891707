"""Demo 15 (induction heads forming in a two-layer attention-only transformer), in its quick mode:
an induction head appears in the second layer and in no other, with a previous-token head in the
first; the loss on the repeated half falls with them; switching them off through hooks undoes it;
and the demo's measures on inputs whose answers are known."""
import importlib
import json

import numpy as np
import pytest

import regenerate
import tinyattn as ta

demo = importlib.import_module("15_induction_heads")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo15")
    return demo.main([str(folder), "--quick"]), folder


def test_an_induction_head_appears_in_the_second_layer_only(run):
    """The threshold, 0.4: a head that spreads its weight evenly over what it may see scores
    `chance_induction_score` (under 0.1 for these spans), so above 0.4 a head puts more than
    five times that on the one key after the previous occurrence, out of 6 to 32 keys; and 0.4
    is what demo 14 asks of GPT-2's heads. A first-layer head cannot be an induction head (its
    keys hold a token, not the token before it), so finding one there would be a bug."""
    numbers, _ = run
    assert numbers["threshold"] == demo.THRESHOLD == 0.4
    assert numbers["chance_induction_score"] < demo.THRESHOLD / 4
    assert numbers["induction_heads"] and all(name.startswith("1.")
                                              for name in numbers["induction_heads"])
    assert numbers["best_first_layer_induction_score"] < demo.THRESHOLD
    assert numbers["first_layer_induction_score_ever"] < demo.THRESHOLD    # at no evaluation
    assert np.array(numbers["induction_scores"]).shape == (demo.LAYERS, demo.HEADS)


def test_a_previous_token_head_appears_in_the_first_layer(run):
    numbers, _ = run
    assert numbers["previous_token_heads"] and all(name.startswith("0.")
                                                   for name in numbers["previous_token_heads"])
    assert numbers["best_second_layer_previous_token_score"] < demo.THRESHOLD


def test_the_repeated_half_loss_falls_with_the_heads_and_the_first_half_does_not(run):
    """The phase change: the repeated half from near a guess to far below it, the first half at a
    guess or above; the heads cross the threshold within three evaluations of the fall."""
    numbers, _ = run
    guess = numbers["guess_loss"]
    assert numbers["repeated_loss_start"] > guess - 0.3
    assert numbers["repeated_loss_final"] < guess - 2
    assert numbers["first_loss_final"] > guess - 0.3
    window = 3 * numbers["eval_every"]
    for step in (numbers["induction_step"], numbers["previous_token_step"]):
        assert step is not None and abs(step - numbers["phase_change_step"]) <= window
    assert 0 < numbers["fall_begins"] <= numbers["phase_change_step"] <= numbers["fall_ends"] \
        <= numbers["steps"]


def test_ablating_the_heads_found_undoes_the_copying(run):
    numbers, _ = run
    trained = numbers["repeated_loss_final"]
    assert numbers["ablated_induction_loss"] > trained + 2
    assert numbers["ablated_previous_token_loss"] > trained + 1
    assert numbers["ablated_both_loss"] >= max(numbers["ablated_induction_loss"],
                                               numbers["ablated_previous_token_loss"]) - 0.2
    alone = np.array(numbers["ablated_alone_losses"])
    assert alone.shape == (demo.LAYERS, demo.HEADS) and (alone > 0).all()


def test_patching_the_induction_heads_brings_the_copy_back_and_attribution_sees_it(run):
    """Head outputs reach the logits through linear maps and one LayerNorm: attribution patching
    agrees there. The stream that layer 1 reads feeds the induction heads' softmax: there
    attribution patching misses most of the effect (a weight moving to a new key)."""
    numbers, _ = run
    assert numbers["clean_metric"] > numbers["corrupted_metric"] + 2
    lost = numbers["clean_metric"] - numbers["corrupted_metric"]
    measured = np.array(numbers["patched_heads_measured"]) / lost
    estimated = np.array(numbers["patched_heads_estimated"]) / lost
    assert measured.shape == estimated.shape == (demo.LAYERS, demo.HEADS)
    best = max(numbers["induction_heads"], key=lambda name: measured[demo_head(name)])
    assert measured[demo_head(best)] > 0.2
    assert numbers["induction_heads_largest_gap"] < 0.1
    assert f"{best} {measured[demo_head(best)]:+.0%} (estimated" in \
        numbers["patching_induction_heads"]
    stream = np.array(numbers["patched_stream_measured"])
    assert stream.shape == (2 * numbers["patching_span"],)
    assert numbers["stream_restored"] > 0.03
    assert numbers["stream_estimated"] < numbers["stream_restored"] / 2
    assert numbers["stream_verdict"].startswith("attribution patching estimates only")
    assert demo.stream_verdict(0.09, -0.0001).startswith("attribution patching estimates only "
                                                         "0.0%:")


def test_k_composition_rises_with_the_phase_change(run):
    """From the weights alone: before training, the second layer's keys read the previous-token
    heads' output as much as random directions would (1/sqrt(E)); after, far more than that,
    more than the other pairs of heads, and more than their queries and values do; the rise made
    half of itself within three evaluations of the loss's half fall."""
    numbers, _ = run
    random = numbers["random_composition"]
    assert random == pytest.approx(1 / np.sqrt(demo.WIDTH))
    assert abs(numbers["k_composition_start"] - random) < 0.02
    assert numbers["k_composition_end"] > numbers["k_composition_start"] + 0.05
    assert numbers["k_composition_end"] > numbers["k_composition_others_end"] + 0.02
    assert numbers["k_composition_end"] > max(numbers["q_composition_end"],
                                              numbers["v_composition_end"]) + 0.02
    window = 3 * numbers["eval_every"]
    assert abs(numbers["k_composition_rise_step"] - numbers["phase_change_step"]) <= window


def test_the_induction_heads_ov_circuits_copy(run):
    """Each induction head's OV circuit pushes the token it attends to for a third of the tokens
    or more (chance: 1 / 64); no first-layer head, nor any head before training, does."""
    numbers, _ = run
    copying = np.array(numbers["copying_shares"])
    assert copying.shape == (demo.LAYERS, demo.HEADS)
    for name in numbers["induction_heads"]:
        assert copying[demo_head(name)] > 1 / 3
        assert f"{name} {copying[demo_head(name)]:.0%}" in numbers["copying_induction_heads"]
    assert numbers["chance_copying"] == 1 / demo.VOCAB
    assert numbers["copying_first_layer_most"] < 0.15
    assert numbers["copying_before_training_most"] < 0.1


def test_direct_logit_attribution_names_the_induction_heads(run):
    """The pieces of the stream that push the right token most are the induction heads, each
    ten times more than any other piece."""
    numbers, _ = run
    found = {f"blocks.{name.replace('.', '.attn.result.')}" for name in numbers["induction_heads"]}
    assert set(numbers["attribution_ranking"][:len(found)]) == found
    assert min(numbers["attribution_induction_heads"]) > 10 * numbers["attribution_largest_other"]
    assert numbers["attribution_top"].startswith(numbers["attribution_ranking"][0].split(".")[1])


def test_the_demos_attribution_adds_up_to_the_mean_right_token_logit():
    """logit_attribution averages direct_logit_attribution over the repeated half: its pieces add
    up to the mean logit of the right tokens there (an untrained model will do)."""
    ta.manual_seed(0)
    model = demo.AttentionOnlyTransformer()
    ids = demo.repeated_spans(np.random.default_rng(0), 3, 5)
    logits = model(ids).data
    positions = np.arange(5, 9)
    right = logits[np.arange(3)[:, None], positions, ids[:, positions + 1]]      # (3, 4)
    assert sum(demo.logit_attribution(model, ids).values()) == pytest.approx(right.mean(),
                                                                             abs=1e-5)


def demo_head(name):
    """"1.2" -> (1, 2)"""
    layer, head = name.split(".")
    return int(layer), int(head)


def test_the_scores_of_heads_that_copy_and_look_back_are_1():
    n, length = 5, 10
    copying = np.zeros((length, length))
    copying[np.arange(n, 2 * n), np.arange(n, 2 * n) - n + 1] = 1.0
    previous = np.eye(length, k=-1)
    weights = np.stack([copying, previous])[None, None]                 # (1, 1, 2, T, T)
    np.testing.assert_array_equal(demo.induction_scores(weights, n), [[1.0, 0.0]])
    np.testing.assert_array_equal(demo.previous_token_scores(weights), [[0.0, 1.0]])


def test_the_chance_score_is_that_of_even_causal_attention():
    scores = []
    for n in demo.HELD_OUT_SPANS:
        even = np.tril(np.ones((2 * n, 2 * n)))
        even /= even.sum(axis=-1, keepdims=True)
        scores.append(demo.induction_scores(even[None, None, None], n)[0, 0])
    assert demo.chance_induction_score() == pytest.approx(np.mean(scores), rel=1e-12)


def test_the_sequences_the_halves_and_the_corruption():
    random = np.random.default_rng(0)
    ids = demo.repeated_spans(random, 3, 7)
    assert ids.shape == (3, 14) and (ids[:, :7] == ids[:, 7:]).all()
    losses = np.arange(13.0)[None]                                      # predicting 1 ... 13
    assert demo.half_losses(losses, 7) == (np.mean(range(6)), np.mean(range(7, 13)))
    corrupted = demo.corrupted_copy(ids, random)
    assert (corrupted[:, 7:] == ids[:, 7:]).all() and (corrupted[:, :7] != ids[:, :7]).any()


def test_the_steps_of_the_phase_change():
    steps = np.array([0, 10, 20, 30, 40])
    losses = [4.0, 3.9, 2.0, 1.0, 0.5]                                  # a fall of 3.5
    assert demo.step_of_fall(steps, losses, 0.5) == 20                  # to 2.25 or below
    assert demo.step_of_fall(steps, losses, 0.1) == 20                  # 3.65
    assert demo.step_of_fall(steps, losses, 0.9) == 40                  # 0.85
    scores = np.zeros((5, 2, 3))
    scores[3:, 1, 2] = 0.5
    assert demo.first_step_above(steps, scores, 1) == 30
    assert demo.first_step_above(steps, scores, 0) is None
    assert demo.heads_above(scores[-1]) == [(1, 2)]


def test_the_readme_entry_and_the_pictures(run):
    numbers, folder = run
    assert json.loads(json.dumps(numbers)) == numbers
    run_time = dict(wall_seconds=1.0, processor_seconds=1.0, cpu_count=2, load_average=1.0)
    entry = regenerate.readme_entry("15_induction_heads",
                                    {"15_induction_heads": {**numbers, **run_time}})
    assert entry.startswith("15. [`15_induction_heads.py`]")
    assert numbers["induction_heads_shown"] in " ".join(entry.split())
    page = (folder / "induction_heads_attention.html").read_text()
    assert "induction heads: attention after training" in page
    pytest.importorskip("matplotlib")
    for picture in ("induction_heads.png", "induction_heads_attention.png"):
        assert (folder / picture).stat().st_size > 10_000
