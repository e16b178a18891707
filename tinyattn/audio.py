"""Chapter 6. How Whisper hears: a waveform becomes a picture of its frequencies over time, the
log-mel spectrogram, which the model reads as a sequence of frames (nn/whisper.py).

A waveform is 16,000 numbers a second, the air pressure at each instant. What a listener tells
apart is which frequencies sound, how loud, and when. Four steps, as Whisper's feature extractor
takes them (`log_mel_spectrogram`):

    1. frames     cut the (padded) waveform into windows of n_fft = 400 samples (25 ms), one
                  every hop = 160 samples (10 ms): 100 frames a second
    2. spectrum   taper each window with a Hann window (no sharp edges, so no false frequencies)
                  and take its Fourier transform: the power |X_f|^2 of 201 frequencies, 0 to
                  8 kHz in steps of 40 Hz (the short-time Fourier transform, STFT)
    3. mel bands  sum the powers in n_mels triangular bands, narrow at low frequencies and wide
                  at high ones, as the ear resolves them (the mel scale): (n_mels, frames)
    4. log        loudness is heard on a log scale: log10 of the band powers, floored at 8
                  (80 dB) below the loudest, then (x + 4) / 4, to lie roughly in [-1, 1]

For Whisper the audio is always padded with silence (or cut) to chunk_length = 30 seconds first:
480,000 samples, 3,000 frames; its encoder always sees 30 seconds.
"""
import math

import numpy as np

from tinyattn.arguments import at_least, door
from tinyattn.audio_checks import SAMPLING_RATE, waveform_fits

N_FFT = 400             # samples in a frame: 25 ms at 16 kHz
HOP_LENGTH = 160        # samples between frames: 10 ms, 100 frames a second
MAX_FREQUENCY = 8000.0  # the highest frequency 16 kHz sampling holds (Nyquist's)


@door(waveform_fits, n_mels=at_least(1), chunk_length=at_least(1))
def log_mel_spectrogram(waveform, n_mels=80, chunk_length=30, sampling_rate=SAMPLING_RATE):
    """The log-mel spectrogram Whisper reads, (n_mels, chunk_length * 100) float32, of a 1-d
    waveform sampled at 16 kHz (the steps at the top of this file). Equal to transformers'
    `WhisperFeatureExtractor(feature_size=n_mels, chunk_length=chunk_length)(waveform,
    sampling_rate=16000).input_features[0]`. Computed in float64, returned in float32."""
    samples = chunk_length * SAMPLING_RATE
    audio = np.zeros(samples)                                       # (N,) silence, then
    kept = np.asarray(waveform, dtype=np.float64)[:samples]
    audio[:len(kept)] = kept                                        # (N,) the waveform, cut to N

    # 1. frames: centred, so frame t is about sample t * hop; the ends are mirrored ("reflect")
    padded = np.pad(audio, N_FFT // 2, mode="reflect")              # (N + n_fft,)
    frames = np.lib.stride_tricks.sliding_window_view(padded, N_FFT)[::HOP_LENGTH]
    #                                                                 (1 + N / hop, n_fft)
    # 2. spectrum: the Hann window is periodic, 0.5 - 0.5 cos(2 pi n / n_fft), n < n_fft
    hann = 0.5 - 0.5 * np.cos(2.0 * math.pi * np.arange(N_FFT) / N_FFT)   # (n_fft,)
    spectrum = np.fft.rfft(frames * hann, axis=-1)                  # (1 + N / hop, n_fft/2 + 1)
    power = np.abs(spectrum[:-1]) ** 2     # (N / hop, 201): Whisper drops the last frame
    # 3. mel bands
    filters = mel_filters(n_mels)                                   # (201, n_mels)
    mel = (power @ filters).T                                       # (n_mels, N / hop)
    # 4. log, floored 8 decades (80 dB) below the loudest band, scaled to about [-1, 1]
    log_mel = np.log10(np.maximum(mel, 1e-10))                      # (n_mels, N / hop)
    log_mel = np.maximum(log_mel, log_mel.max() - 8.0)              # (n_mels, N / hop)
    return ((log_mel + 4.0) / 4.0).astype(np.float32)               # (n_mels, N / hop)


def mel_filters(n_mels):
    """The (n_fft/2 + 1, n_mels) = (201, n_mels) weights that turn the power of each frequency
    into the power of each mel band: Slaney's triangles (librosa's `mel(htk=False,
    norm="slaney")`, transformers' `mel_filter_bank(norm="slaney", mel_scale="slaney")`).

    The band edges are n_mels + 2 points evenly spaced on the mel scale from 0 Hz to 8 kHz;
    band m rises linearly from edge m to edge m + 1 and falls to edge m + 2. Each triangle is
    then scaled by 2 / (its width in Hz), so that every band holds about the same energy of
    white noise (Slaney's normalisation): the wide high bands are not louder for being wide.
    """
    edges = mel_to_hertz(np.linspace(0.0, hertz_to_mel(MAX_FREQUENCY), n_mels + 2))  # (M + 2,)
    frequencies = np.linspace(0.0, SAMPLING_RATE // 2, N_FFT // 2 + 1)              # (201,)
    to_edge = edges[None, :] - frequencies[:, None]                                 # (201, M + 2)
    widths = np.diff(edges)                                                         # (M + 1,)
    rising = -to_edge[:, :-2] / widths[:-1]         # (201, M): 0 at the lower edge, 1 at the top
    falling = to_edge[:, 2:] / widths[1:]           # (201, M): 1 at the top, 0 at the upper edge
    triangles = np.maximum(0.0, np.minimum(rising, falling))                        # (201, M)
    return triangles * (2.0 / (edges[2:] - edges[:-2]))                             # (201, M)


def hertz_to_mel(hertz):
    """Slaney's mel scale: linear below 1 kHz (3 mels per 200 Hz, so 15 mels at 1 kHz), then
    logarithmic, 27 mels for every factor of 6.4."""
    hertz = np.asarray(hertz, dtype=np.float64)
    log_part = 15.0 + np.log(np.maximum(hertz, 1000.0) / 1000.0) * (27.0 / math.log(6.4))
    return np.where(hertz >= 1000.0, log_part, 3.0 * hertz / 200.0)


def mel_to_hertz(mels):
    """The inverse of hertz_to_mel."""
    mels = np.asarray(mels, dtype=np.float64)
    log_part = 1000.0 * np.exp((math.log(6.4) / 27.0) * (np.maximum(mels, 15.0) - 15.0))
    return np.where(mels >= 15.0, log_part, 200.0 * mels / 3.0)
