"""The benchmark's hand-written NumPy references compute what tinyattn computes (the speed is
measured by `python -m tinyattn bench`, never in a test)."""
import sys

import numpy as np
import pytest

from tinyattn.tools import bench
from tinyattn.tools.bench import attention, generation, long_attention, overhead


def test_the_hand_written_chain_matches_tinyattn():
    inputs = overhead.chain_inputs()
    for got, want in zip(overhead.chain_tinyattn(*inputs), overhead.chain_numpy(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-10), (np.float32, 1e-4)])
def test_the_hand_written_attention_matches_tinyattn(dtype, tolerance):
    inputs = attention.mha_inputs(dtype, batch=2, length=5, embed_dim=12, num_heads=3)
    results = attention.mha_tinyattn(*inputs), attention.mha_numpy(*inputs)
    assert len(results[0]) == len(results[1]) == 2 + 8       # output, dL/dx, 8 parameter grads
    for got, want in zip(*results):
        assert got.dtype == want.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tolerance, atol=tolerance)


def test_the_long_attention_bench_runs_flash_and_plain_attention_alike(capsys):
    inputs = long_attention.attention_inputs(length=13, width=4)
    plain = long_attention.sdpa_run(*inputs)
    for block_size in (1, 4, 13):
        for got, want in zip(long_attention.flash_run(block_size)(*inputs), plain):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert long_attention.visited_pairs(13, 4) == 1 + 2 + 3 + 4   # causal: on or below the diagonal
    ratios = long_attention.bench_flash(rounds=1, lengths=(13,), width=4, block_sizes=(4, 13))
    assert sorted(ratios) == [(13, 4), (13, 13)]
    assert "memory ratio" in capsys.readouterr().out


def test_rounds_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    assert "must be at least 1, got 0" in capsys.readouterr().err


def test_the_long_attention_variants_agree_with_their_references():
    long_attention.check_against_references(length=29, block_size=4, window=8, chunk_size=4)


def test_a_variant_that_computes_something_else_is_caught(monkeypatch):
    sliding_run = long_attention.sliding_run
    monkeypatch.setattr(long_attention, "sliding_run", lambda window: sliding_run(window + 1))
    with pytest.raises(AssertionError, match="sliding window"):
        long_attention.check_against_references(length=29, block_size=4, window=8, chunk_size=4)


def test_the_long_attention_bench_prints_its_table(capsys):
    ratios = long_attention.bench_long(1, flash_length=24, length=40, width=8, block_size=4,
                                       window=4, chunk_size=4)
    out = capsys.readouterr().out
    assert "plain causal SDPA" in out and "time / plain" in out and "peak / plain" in out
    assert set(ratios) == {"flash (block 4)", "sliding window (w = 4)", "linear, causal (C = 4)"}
    assert all(time > 0 and memory > 0 for time, memory in ratios.values())


def test_the_bench_has_a_long_attention_part_with_few_rounds(monkeypatch, capsys):
    calls = []
    monkeypatch.setitem(sys.modules, "torch", None)     # importing PyTorch takes seconds
    for part in ("bench_chain", "bench_mha"):
        monkeypatch.setattr(bench, part, lambda *args: None)
    monkeypatch.setattr(bench, "bench_long", lambda rounds, **sizes: calls.append((rounds, sizes)))
    bench.main(["--rounds", "30"])
    assert calls == [(bench.LONG_ROUNDS, bench.LONG_SIZES)]
    assert "3. Attention at long lengths" in capsys.readouterr().out
    bench.main(["--rounds", "2"])
    assert calls[-1][0] == 2


def test_generation_with_and_without_the_cache_agree():
    model = generation.gpt_model(embed_dim=16, num_layers=2, max_len=8)
    prompt = np.array([[3, 1, 4]])
    cached = generation.seeded(generation.cached, model)(prompt, 9)      # past max_len 8
    uncached = generation.seeded(generation.generate_without_cache, model)(prompt, 9)
    assert cached.shape == (1, 12)
    np.testing.assert_array_equal(cached, uncached)


def test_the_generation_bench_prints_its_table(capsys):
    speedups = generation.bench_generation(1, lengths=(3,))
    assert list(speedups) == [3] and speedups[3] > 0
    assert "cached tokens/s" in capsys.readouterr().out
