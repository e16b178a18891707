"""The benchmark's hand-written NumPy references compute what tinyattn computes (the speed is
measured by `python -m tinyattn bench`, never in a test)."""
import numpy as np
import pytest

from tinyattn.tools import bench
from tinyattn.tools.bench import attention, generation, overhead


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


def test_rounds_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    assert "must be at least 1, got 0" in capsys.readouterr().err


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
