"""The error function of ops/erf.py, against Python's math.erf (accurate to about an ulp) on a
dense grid that covers every interval of its tables, the cutoff, tiny and negative inputs; against
torch.erf; and its time against np.tanh's (printed, not asserted)."""
import math
import time

import numpy as np
import pytest

from tinyattn.ops.erf import erf

EXACT = np.frompyfunc(math.erf, 1, 1)
# the largest relative error allowed: a few units in the last place of each dtype
MOST = {np.float64: 4e-15, np.float32: 4e-7}


def grid(dtype):
    """Every region of erf: a dense sweep of [-8, 8] (every interval of its table, their ends, and
    the cutoff within it), tiny numbers down to the smallest normal ones, both signs, 0 and
    infinities."""
    tiny = np.geomspace(np.finfo(dtype).tiny, 1.0, 3000)
    points = np.concatenate([np.linspace(-8.0, 8.0, 400_001), tiny, -tiny,
                             np.arange(0.0, 8.0, 1 / 64), [0.0, -0.0, np.inf, -np.inf]])
    return points.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_erf_is_math_erf_to_a_few_units_in_the_last_place(dtype):
    x = grid(dtype)
    got = erf(x)
    want = EXACT(x.astype(np.float64)).astype(np.float64)
    assert got.dtype == dtype and got.shape == x.shape
    relative = np.abs(got - want) / np.maximum(np.abs(want), np.finfo(dtype).tiny)
    print(f"erf, {np.dtype(dtype)}: largest relative error {relative.max():.2g}")
    assert relative.max() <= MOST[dtype]
    np.testing.assert_array_equal(erf(-x), -got)                 # odd, exactly
    assert np.isnan(erf(np.array([np.nan], dtype))).all()
    with np.errstate(all="raise"):                  # nothing overflows or underflows
        huge = np.array([np.finfo(dtype).max, -np.finfo(dtype).max, 1e30, -40.0], dtype)
        np.testing.assert_allclose(erf(huge), [1.0, -1.0, 1.0, -1.0], rtol=MOST[dtype])


def test_erf_keeps_shapes_and_reads_other_arrays_as_float64():
    x = np.linspace(-2, 2, 24).reshape(2, 3, 4).transpose(2, 0, 1)[:, ::2]   # not contiguous
    np.testing.assert_allclose(erf(x), EXACT(x).astype(float), rtol=4e-15)
    assert erf(np.float32(0.5)).shape == () and erf(np.float32(0.5)).dtype == np.float32
    assert erf(np.arange(3)).dtype == np.float64
    assert erf(np.zeros((0, 3), np.float32)).shape == (0, 3)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_erf_is_torch_erf(dtype):
    torch = pytest.importorskip("torch", reason="the reference needs torch (pip install torch)")
    x = np.random.default_rng(0).standard_normal(100_000).astype(dtype) * 3
    theirs = torch.erf(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(erf(x), theirs, rtol=MOST[np.dtype(dtype).type] * 2,
                               atol=np.finfo(dtype).tiny)


def test_erf_time_against_np_tanh():
    """Interleaved, the best of 5: erf's time over np.tanh's on a million numbers (printed)."""
    for dtype in (np.float64, np.float32):
        x = np.random.default_rng(0).standard_normal(1_000_000).astype(dtype) * 2
        best = {erf: math.inf, np.tanh: math.inf}
        for _ in range(5):
            for function in best:
                start = time.perf_counter()
                function(x)
                best[function] = min(best[function], time.perf_counter() - start)
        print(f"erf / np.tanh, {np.dtype(dtype)}: {best[erf] / best[np.tanh]:.1f}x the time")
