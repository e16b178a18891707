"""Demo 19 (demo 11's tiny GPT changed one step at a time towards Qwen3), in its quick mode: what
it prints, that each model is the one before it with one change, the sizes it counts, and how it
reads the seeds."""
import contextlib
import importlib
import io
import re

import numpy as np
import pytest

import tinyattn as ta
import tinyattn.functional as F
from tinyattn.nn.families import FIXED

demo = importlib.import_module("19_what_changed")
E, H, L, K = demo.EMBED_DIM, demo.NUM_HEADS, demo.NUM_LAYERS, demo.KV_HEADS
D = E // H
VOCAB = 11


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """The quick run's numbers, what it printed, and its output folder."""
    folder = tmp_path_factory.mktemp("demo19")
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        numbers = demo.main([str(folder), "--quick"])
    return numbers, printed.getvalue(), folder


def build(index, dtype=np.float64, seed=0, **options):
    ta.manual_seed(seed)
    return demo.LADDER[index][2](VOCAB, dtype, **options)


def test_the_table_prints_each_model_with_its_numbers(run):
    numbers, printed, _ = run
    rows = [line.split() for line in printed.splitlines() if re.match(r"\s+[0-5]\s+\S", line)]
    assert [row[0] for row in rows] == ["0", "1", "2", "3", "4", "5"]
    for i, (_, change, _) in enumerate(demo.LADDER):
        line = " ".join(rows[i])
        against = "" if i == 0 else (
            f"{numbers[f'change_{i}']:+.3f} ({numbers[f'change_spread_{i}'][0]:+.3f} to "
            f"{numbers[f'change_spread_{i}'][1]:+.3f}) "
            f"{'clear' if numbers[f'clear_{i}'] else 'noise'} ")
        assert line == (f"{i} {change} {numbers[f'loss_{i}']:.3f} {against}"
                        f"{numbers[f'step_ratio_{i}']:.2f}x {numbers[f'parameters_{i}']:,} "
                        f"{numbers[f'cache_bytes_{i}']:,} {numbers[f'largest_score_{i}']:.1f}")
    assert numbers["step_ratio_0"] == 1.0 and all(numbers[f"step_ratio_{i}"] > 0
                                                  for i in range(6))
    flat = " ".join(printed.split())
    assert (f"held-out loss {numbers['high_loss_4']:.3f} without, {numbers['high_loss_5']:.3f} "
            f"with QK-norm, a paired difference of {numbers['high_change']:+.3f}") in flat
    for lr, prefix in (("0.01", ""), ("0.1", "high_")):
        for i, name in ((4, "GQA"), (5, "QK-norm")):
            assert (f"{lr} {i} {name} {numbers[f'{prefix}largest_score_{i}']:.1f} "
                    f"{numbers[f'{prefix}saturated_{i}']:.1%}") in flat


def largest_score(model, ids):
    """The largest score over every layer and head, query head h scored on key head h // (H /
    K), the keys after the query left out."""
    _, cache = model.run_with_cache(ids)
    largest = 0.0
    for i in range(L):
        q, k = cache[f"blocks.{i}.attn.q"], cache[f"blocks.{i}.attn.k"]    # (B, H or K, T, D)
        for h in range(H):
            scores = q[:, h] @ k[:, h // (H // K)].swapaxes(-1, -2) / np.sqrt(D)   # (B, T, T)
            largest = max(largest, np.abs(np.tril(scores)).max())
    return largest


def test_the_attention_extremes_are_read_from_the_scores_and_weights():
    """Queries and keys 30 times larger give scores some 900 times larger and sharper rows."""
    model = build(4)
    ids = np.random.default_rng(0).integers(0, VOCAB, (2, 16))
    largest, saturated = demo.attention_extremes(model, ids)
    assert largest == pytest.approx(largest_score(model, ids), rel=1e-12)
    assert 0 <= saturated < 0.2
    for block in model.blocks:
        for name in ("q", "k"):
            block.attn.attach(name, lambda x: x * 30.0)
    sharper_largest, sharper_saturated = demo.attention_extremes(model, ids)
    assert sharper_largest == pytest.approx(largest_score(model, ids), rel=1e-12)
    assert sharper_largest > 300 * largest and sharper_saturated > saturated + 0.3


def test_every_seed_is_scored_and_the_losses_are_its_means(run):
    numbers, _, _ = run
    for i in range(6):
        assert len(numbers[f"losses_{i}"]) == len(demo.QUICK["seeds"])
        assert numbers[f"loss_{i}"] == pytest.approx(np.mean(numbers[f"losses_{i}"]))
        # 3 steps: below a uniform guess over the characters (4.6), which N(0, 1) embeddings
        # start above, far from trained
        assert 2.5 < numbers[f"loss_{i}"] < np.log(len(set(demo.tiny_gpt.documentation_text())))
    assert len(numbers["high_losses_5"]) == len(demo.QUICK["seeds"])


def test_the_parameters_each_change_adds_or_removes(run):
    numbers, _, _ = run
    gelu, gated = numbers["feed_forward_parameters"]
    assert gelu == 8 * E * E + 5 * E and gated == 3 * E * demo.gated_hidden_dim(E)
    assert abs(gelu - gated) < 3 * E / 2           # the nearest hidden width: equal parameters
    # RMSNorm drops each LayerNorm's bias: two a block and the last
    assert numbers["parameters_0"] - numbers["parameters_1"] == (2 * L + 1) * E
    # SwiGLU: the feed-forwards' difference, and the attention's four biases and the head's
    vocab = (numbers["parameters_1"] - numbers["parameters_2"] - L * (gelu - gated)
             - L * 4 * E)
    assert vocab == len(set(demo.tiny_gpt.documentation_text()))
    # rotary positions: no parameters in the table, none in the rotation
    assert numbers["parameters_2"] == numbers["parameters_3"]
    # grouped-query attention: k_proj and v_proj give K heads of D instead of H
    assert numbers["parameters_3"] - numbers["parameters_4"] == L * 2 * E * D * (H - K)
    # QK-norm: one weight of D for the queries, one for the keys, each layer
    assert numbers["parameters_5"] - numbers["parameters_4"] == L * 2 * D


def test_the_cache_keeps_the_key_value_heads_of_each_model(run):
    numbers, _, _ = run
    for i in range(6):
        heads = K if i >= 4 else H
        assert numbers[f"cache_bytes_{i}"] == 2 * L * heads * D * 4    # float32 keys and values


def test_the_cache_bytes_are_what_the_cache_holds():
    for i in (0, 4):
        model = build(i, np.float32)
        cache = model.empty_cache()
        with ta.no_grad():
            model(np.zeros((1, 5), dtype=np.int64), cache=cache)
        assert cache.nbytes == 5 * 2 * L * (H if i == 0 else K) * D * 4
        assert demo.cache_bytes_per_token(model) == cache.nbytes // 5


def test_model_2_is_model_3_with_the_table_in_place_of_the_rotation():
    """Model 3's weights in model 2 (no table), its attention's queries and keys turned as model
    3 turns them, give model 3's logits: the rotation is the only change between them."""
    rotary = build(3)
    without_table = build(2, positional="none")
    renamed = {"ln1": "attn_norm", "ln2": "mlp_norm", "ff": "mlp", "ln": "norm"}
    state = rotary.state_dict()
    without_table.load_state_dict({
        name: state[".".join(renamed.get(part, part) for part in name.split("."))]
        for name in without_table.state_dict()})
    ids = np.random.default_rng(0).integers(0, VOCAB, (2, 9))
    expected = rotary(ids).data
    assert not np.allclose(without_table(ids).data, expected, atol=1e-3)   # no positions at all
    for block in without_table.blocks:
        for name in ("q", "k"):
            block.attn.attach(name, F.rope_rotate_half)
    np.testing.assert_allclose(without_table(ids).data, expected, rtol=1e-12, atol=1e-12)


def test_models_3_to_5_are_llamas_and_qwen3s_switches():
    llama, qwen3 = demo.decoder_settings(VOCAB), demo.decoder_settings(VOCAB, K, qk_norm=True)
    for settings, family in ((llama, "llama"), (qwen3, "qwen3")):
        assert settings.model_type == family
        assert all(getattr(settings, key) == value for key, value in FIXED[family].items())
    assert (llama.num_kv_heads, qwen3.num_kv_heads) == (H, K)
    assert not (llama.qkv_bias or llama.out_bias or llama.mlp_bias or llama.tied_head)


def test_the_models_of_a_seed_see_the_same_batches():
    """Two copies of a model trained side by side, stepping in a rotated order, learn alike."""
    models = {"first": build(0, np.float32), "second": build(0, np.float32)}
    data = np.random.default_rng(1).integers(0, VOCAB, 500)
    trained = demo.train_side_by_side(models, data, dict(steps=3, warmup_steps=1), 0, 1e-2)
    assert trained["first"][0] == trained["second"][0] and len(trained["first"][1]) == 3
    np.testing.assert_array_equal(models["first"].head.weight.data,
                                  models["second"].head.weight.data)


def test_a_change_is_clear_only_when_the_seeds_agree_beyond_their_spread():
    before = [2.0, 2.1, 2.2]
    mean, spread, clear = demo.paired_difference([1.9, 1.99, 2.11], before)
    assert mean == pytest.approx(-0.1) and spread == pytest.approx((-0.11, -0.09)) and clear
    # differences -0.1, +0.05, -0.02: t = 0.41, below 4.303
    assert not demo.paired_difference([1.9, 2.15, 2.18], before)[2]
    # the same sign in every seed is not enough: -0.01, -0.2, -0.01 gives t = 1.5
    assert not demo.paired_difference([1.99, 1.9, 2.19], before)[2]
    assert demo.change_read(-0.1234, True) == "lower by 0.123"
    assert demo.change_read(0.05, True) == "higher by 0.050"
    assert demo.change_read(-0.5, False) == "within the noise"


def test_the_picture_is_drawn(run):
    pytest.importorskip("matplotlib")
    assert (run[2] / "what_changed.png").stat().st_size > 20_000
