"""The benchmark's hand-written NumPy references compute what tinyattn computes (the speed is
measured by `python -m tinyattn bench`, never in a test)."""
import numpy as np
import pytest

from tinyattn.tools import bench
from tinyattn.tools.bench import attention, overhead, training

TINY_GPT = dict(vocab_size=11, embed_dim=8, num_heads=2, num_layers=2, max_len=6, batch=3,
                context=5)


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


def test_the_command_line_names_parts_and_rounds(capsys):
    assert bench.parse([]).parts == (1, 2, 3) and bench.parse(["3", "1"]).parts == [3, 1]
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    assert "must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["4"])
    assert "the parts are 1, 2 and 3, got 4" in capsys.readouterr().err


def test_the_training_step_lowers_the_loss_on_its_batch():
    model, ids, targets = training.training_inputs(np.float32, **TINY_GPT)
    step = training.tinyattn_trainer(model)
    parameters = model.parameters()
    losses = [float(step(ids, targets)[0]) for _ in range(5)]
    assert losses[-1] < losses[0]
    result = step(ids, targets)
    assert len(result) == 1 + 2 * len(parameters)       # loss, gradients, parameters
    assert all(array.dtype == np.float32 for array in result)


def test_the_training_row_runs_without_pytorch(monkeypatch, capsys):
    monkeypatch.setattr(training, "SIZES", TINY_GPT)
    assert training.bench_training_step(1, torch=None) == {}
    assert "tinyattn" in capsys.readouterr().out


def test_the_pytorch_training_step_is_the_same_step():
    """An extra check against PyTorch (skipped when it is not installed): same loss, gradients and
    AdamW step, in float64, for two steps."""
    torch = pytest.importorskip("torch")
    model, ids, targets = training.training_inputs(np.float64, **TINY_GPT)
    ours, theirs = training.tinyattn_trainer(model), training.torch_trainer(torch, model)
    for _ in range(2):
        for got, want in zip(ours(ids, targets), theirs(ids, targets)):
            np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
