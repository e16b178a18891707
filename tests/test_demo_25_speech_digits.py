"""Demo 25 (a Whisper that hears digits), in its quick mode: espeak-ng's utterances at 16 kHz and
trimmed, the noise at its stated SNR, the token rows and the character error rate, the
cross-attention it draws (each token's weights over the audio sum to 1), and the one line it says
where the speech engine is missing. Skipped where espeak-ng is missing (CI installs it)."""
import importlib
import shutil

import numpy as np
import pytest
from references import run_quick

demo = importlib.import_module("25_speech_digits")
needs_engine = pytest.mark.skipif(shutil.which("espeak-ng") is None,
                                  reason="espeak-ng is not installed: sudo apt-get install "
                                         "espeak-ng (CI installs it)")


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng is not installed: sudo apt-get install espeak-ng (CI installs it)")
    folder = tmp_path_factory.mktemp("demo25")
    return (*run_quick(demo, folder), folder)


@needs_engine
def test_the_quick_run_trains_transcribes_and_scores(quick_run):
    numbers, printed, _ = quick_run
    assert numbers["engine"] is True and numbers["steps"] == demo.QUICK["steps"]
    assert numbers["last_loss"] < numbers["first_loss"]
    assert 0.0 <= numbers["cer_seen"] and 0.0 <= numbers["cer_held_out"]
    assert f"{numbers['cer_held_out']:.1%} on the held-out voice {demo.HELD_OUT}" in printed
    assert "No --whisper-tiny FOLDER" in printed and numbers["whisper_tiny_heard"] is None


@needs_engine
def test_the_alignment_is_drawn(quick_run):
    pytest.importorskip("matplotlib")
    _, printed, folder = quick_run
    assert (folder / "speech_digits_alignment.png").stat().st_size > 0
    assert f"picture: {folder / 'speech_digits_alignment.png'}" in printed


@needs_engine
def test_an_utterance_is_16_khz_trimmed_and_fits_the_chunk(tmp_path):
    slowest = demo.speak("8 8 8 8 8 8", "en-gb", demo.SPEEDS[0], 50, str(tmp_path))
    assert slowest.ndim == 1 and slowest.dtype == np.float64
    assert np.abs(slowest).max() <= 1.0
    # trimmed: it starts and ends with sound; six digits at the slowest speed fit in 2 seconds
    threshold = 0.01 * np.abs(slowest).max()
    assert abs(slowest[0]) > threshold and abs(slowest[-1]) > threshold
    assert demo.RATE < len(slowest) < demo.CHUNK_SECONDS * demo.RATE


@needs_engine
def test_the_cross_attention_of_each_token_sums_to_one_over_the_audio(tmp_path):
    model = demo.build_model()
    waveform = demo.speak("4 2", "en-us", 200, 50, str(tmp_path))
    feature, weights = demo.alignment(model, waveform, "42", np.random.default_rng(0))
    assert feature.shape == (demo.MELS, 100 * demo.CHUNK_SECONDS)
    assert weights.shape == (3, demo.SETTINGS.max_source_positions)
    np.testing.assert_allclose(weights.sum(axis=-1), 1.0, rtol=1e-5)


def test_noise_at_the_stated_signal_to_noise_ratio():
    waveform = np.sin(np.arange(200_000) * 0.05)
    noisy = demo.add_noise(waveform, np.random.default_rng(0), snr_db=10.0)
    ratio = np.mean(waveform ** 2) / np.mean((noisy - waveform) ** 2)
    assert 10.0 * np.log10(ratio) == pytest.approx(10.0, abs=0.05)


def test_token_rows_start_end_and_pad():
    rows = demo.token_rows(["307", "123456"])
    S, E, P = demo.START, demo.EOS, demo.PAD
    assert rows.tolist() == [[S, 3, 0, 7, E, P, P, P], [S, 1, 2, 3, 4, 5, 6, E]]


@pytest.mark.parametrize("heard, truth, distance", [("123", "123", 0), ("13", "123", 1),
                                                    ("1234", "123", 1), ("321", "123", 2),
                                                    ("", "123", 3), ("9", "", 1)])
def test_edit_distance(heard, truth, distance):
    assert demo.edit_distance(heard, truth) == distance


def test_the_character_error_rate_is_the_edits_over_the_true_length():
    assert demo.character_error_rate(["13", "4567"], ["123", "456"]) == pytest.approx(2 / 6)


def test_without_the_engine_the_demo_says_how_to_install_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(demo.shutil, "which", lambda name: None)
    assert demo.main([str(tmp_path), "--quick"]) == {"engine": False}
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed == [demo.INSTALL] and "sudo apt-get install espeak-ng" in printed[0]
