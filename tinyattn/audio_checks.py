"""Chapter 6. What makes an argument of audio.py bad: a waveform that is not one channel of real
numbers, a sampling rate other than the 16 kHz Whisper was trained on."""
import numpy as np

SAMPLING_RATE = 16_000


def waveform_fits(waveform, sampling_rate, **_):
    """log_mel_spectrogram: a 1-d array of real numbers (one channel), sampled at 16 kHz."""
    if isinstance(sampling_rate, bool) or sampling_rate != SAMPLING_RATE:
        raise ValueError(f"sampling_rate must be {SAMPLING_RATE} (Whisper's filters are made for "
                         f"16 kHz audio: resample it first), got {sampling_rate!r}")
    array = np.asarray(waveform)
    if array.ndim != 1:
        raise ValueError(f"the waveform must be 1-d (one channel of samples), got shape "
                         f"{array.shape}: average the channels of a stereo recording first")
    if array.dtype.kind not in "iuf":
        raise TypeError(f"the waveform must hold real numbers, got {array.dtype}")
    if not np.isfinite(array).all():
        raise ValueError("the waveform holds NaN or infinite samples")
