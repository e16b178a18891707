"""tinyattn.audio (chapter 6): the log-mel spectrogram equals transformers' WhisperFeatureExtractor
on sines, noise, silence, a short and a too-long waveform, with 80 and 128 mel bands; the mel
filters are Slaney's; bad input is refused at the call."""
import numpy as np
import pytest

from tinyattn.audio import hertz_to_mel, log_mel_spectrogram, mel_filters, mel_to_hertz

RATE = 16_000


def waveforms():
    random = np.random.default_rng(0)
    time = np.arange(3 * RATE) / RATE
    return {
        "a 440 Hz sine": 0.5 * np.sin(2 * np.pi * 440.0 * time),
        "two sines, 3 s": (0.3 * np.sin(2 * np.pi * 150.0 * time)
                           + 0.2 * np.cos(2 * np.pi * 5e3 * time)),
        "noise": 0.1 * random.standard_normal(50_000),
        "silence": np.zeros(1_000),
        "short: 100 samples": random.standard_normal(100),
        "too long: 31 s": random.standard_normal(31 * RATE),
        "float32 noise": random.standard_normal(20_000).astype(np.float32),
    }


@pytest.mark.parametrize("n_mels", [80, 128])
@pytest.mark.parametrize("name", list(waveforms()))
def test_equals_whisper_feature_extractor(name, n_mels):
    transformers = pytest.importorskip("transformers", reason="the [reference] extra installs it")
    waveform = waveforms()[name]
    ours = log_mel_spectrogram(waveform, n_mels=n_mels)
    extractor = transformers.WhisperFeatureExtractor(feature_size=n_mels)
    theirs = extractor(waveform, sampling_rate=RATE).input_features[0]
    assert ours.shape == theirs.shape == (n_mels, 3000) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() <= 1e-4


def test_a_shorter_chunk():
    transformers = pytest.importorskip("transformers", reason="the [reference] extra installs it")
    waveform = waveforms()["two sines, 3 s"]
    ours = log_mel_spectrogram(waveform, chunk_length=2)
    extractor = transformers.WhisperFeatureExtractor(feature_size=80, chunk_length=2)
    theirs = extractor(waveform, sampling_rate=RATE).input_features[0]
    assert ours.shape == theirs.shape == (80, 200)
    assert np.abs(ours - theirs).max() <= 1e-4


@pytest.mark.parametrize("n_mels", [80, 128])
def test_mel_filters_equal_transformers(n_mels):
    audio_utils = pytest.importorskip("transformers.audio_utils",
                                      reason="the [reference] extra installs transformers")
    theirs = audio_utils.mel_filter_bank(num_frequency_bins=201, num_mel_filters=n_mels,
                                         min_frequency=0.0, max_frequency=8000.0,
                                         sampling_rate=RATE, norm="slaney", mel_scale="slaney")
    np.testing.assert_allclose(mel_filters(n_mels), theirs, rtol=1e-12, atol=1e-15)


def test_the_mel_scale():
    """Linear to 1 kHz (15 mels there), then 27 mels per factor 6.4; mel_to_hertz undoes it."""
    hertz = np.array([0.0, 200.0, 1000.0, 6400.0, 8000.0])
    mels = hertz_to_mel(hertz)
    np.testing.assert_allclose(mels[:4], [0.0, 3.0, 15.0, 42.0], rtol=1e-14)
    np.testing.assert_allclose(mel_to_hertz(mels), hertz, rtol=1e-14)


def test_silence_is_the_floor():
    """All bands at the 1e-10 floor: log10 = -10, (-10 + 4) / 4 = -1.5 everywhere."""
    assert np.array_equal(log_mel_spectrogram(np.zeros(10)), np.full((80, 3000), -1.5, np.float32))


def test_padding_and_cutting():
    """A waveform is padded with silence to 30 s, or cut: cutting after 30 s changes nothing."""
    noise = np.random.default_rng(1).standard_normal(31 * RATE)
    assert np.array_equal(log_mel_spectrogram(noise), log_mel_spectrogram(noise[:30 * RATE]))
    assert np.array_equal(log_mel_spectrogram(noise[:RATE]),
                          log_mel_spectrogram(np.concatenate([noise[:RATE], np.zeros(RATE)])))


@pytest.mark.parametrize("waveform, kwargs, error, message", [
    (np.zeros(100), dict(sampling_rate=44_100), ValueError, "sampling_rate must be 16000.*44100"),
    (np.zeros(100), dict(sampling_rate=8_000), ValueError, "sampling_rate must be 16000"),
    (np.zeros((2, 100)), {}, ValueError, r"1-d .* shape \(2, 100\)"),
    (np.zeros(()), {}, ValueError, r"1-d .* shape \(\)"),
    (np.array(["a"]), {}, TypeError, "real numbers"),
    (np.array([0.0, np.nan]), {}, ValueError, "the waveform holds NaN"),
    (np.zeros(100), dict(n_mels=0), ValueError, "n_mels must be at least 1"),
    (np.zeros(100), dict(chunk_length=1.5), TypeError, "chunk_length"),
])
def test_refusals(waveform, kwargs, error, message):
    with pytest.raises(error, match="^log_mel_spectrogram: .*" + message):
        log_mel_spectrogram(waveform, **kwargs)


def test_refused_when_called_with_keywords_only():
    """The door names the function even when no argument is positional."""
    with pytest.raises(ValueError, match="^log_mel_spectrogram: sampling_rate must be 16000"):
        log_mel_spectrogram(waveform=np.zeros(3), sampling_rate=8000)
