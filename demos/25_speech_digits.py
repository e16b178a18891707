"""Demo 25: a Whisper that hears digits, trained in this repository's engine on speech it
synthesises, transcribing a voice it never heard.

What it shows: the whole of Whisper's recipe on a problem small enough to train on a laptop CPU.
Digit strings of 3 to 6 digits ("3 7 1 9") are spoken by the text-to-speech engine espeak-ng
(Debian's package `espeak-ng`: `sudo apt-get install espeak-ng`; no download at run time) in
several English voices, each utterance at its own speed and pitch, and Gaussian noise is added at
a stated signal-to-noise ratio (a new draw at every step). One voice is held out of training. A
tiny `nn.Whisper` (log-mel features of 200 frames, 10 ms each, in 40 mel bands; 2 encoder and 2
decoder layers of width 64; a vocabulary of the ten digits, a start token, an end token and
padding) is trained with teacher forcing and Adam, then transcribes by greedy `generate`. It
prints the character error rate (edit distance / length of the true string) on new strings of
the voices it trained on and of the held-out voice, a few transcripts, and draws one utterance's
cross-attention: which audio frames each written token attends to, under its log-mel
spectrogram, as "Listen, Attend and Spell" (Chan et al. 2016) drew its alignments. Nothing tells
the model where a digit is spoken: where it hears well, the picture shows the tokens walking
along the audio, one digit's sound after the other.

    python demos/25_speech_digits.py [output folder] [--quick] [--whisper-tiny FOLDER]

With `--whisper-tiny FOLDER` (openai/whisper-tiny's files from the Hugging Face hub:
config.json, model.safetensors, tokenizer.json), it also transcribes a synthesised sentence with
the real weights. `--quick` synthesises fewer utterances and trains for a few steps (what the
tests run). The figures measured on a full run are on docs/demos.md, with the run's time; the
model's products are small, so BLAS runs on one thread.
"""
import math
import os
import pathlib
import shutil
import subprocess
import tempfile
import time
import wave

import numpy as np

import demo_tools
import tinyattn as ta
import tinyattn.functional as F
from tinyattn.audio import log_mel_spectrogram
from tinyattn.nn.whisper import Whisper, WhisperSettings

# %% [markdown]
# The speech: espeak-ng speaks each digit string, spaced ("3 7 1 9", so that it says digits, not
# a number), into a WAV file at 22,050 Hz; it is resampled to Whisper's 16 kHz by linear
# interpolation and trimmed of the silence around it. Each utterance has its voice, speed (words a
# minute) and pitch (0-99); the held-out voice speaks only the test strings.

# %%
SEED = 0
VOICES = ["en-gb", "en-gb-scotland", "en-gb-x-rp", "en-gb-x-gbclan", "en-029"]  # trained on
HELD_OUT = "en-us"                                      # never heard in training
SPEEDS, PITCHES = (180, 260), (25, 75)                  # drawn uniformly per utterance
SNR_DB = 15.0                                           # signal-to-noise ratio of the added noise
DIGITS = (3, 6)                                         # the fewest and most digits of a string
ENGINE_RATE, RATE = 22050, 16000                        # espeak-ng's sampling rate, Whisper's
INSTALL = ("espeak-ng, the speech engine this demo synthesises its data with, is not installed: "
           "`sudo apt-get install espeak-ng` (Debian, Ubuntu), then run the demo again.")


def has_engine():
    return shutil.which("espeak-ng") is not None


def can_run_in_full():
    """Whether this machine has the speech engine (regenerate includes the demo only then)."""
    return has_engine()


def speak(text, voice, speed, pitch, folder):
    """The waveform of `text` spoken by espeak-ng, float64 in [-1, 1] at 16 kHz, silence trimmed.
    (espeak-ng's `--stdout` writes a WAV header with a wrong length: it writes a file.)"""
    path = os.path.join(folder, "utterance.wav")
    subprocess.run(["espeak-ng", "-v", voice, "-s", str(speed), "-p", str(pitch), "-w", path,
                    text], check=True, capture_output=True)
    with wave.open(path) as file:
        rate, frames = file.getframerate(), file.readframes(file.getnframes())
    samples = np.frombuffer(frames, dtype="<i2") / 32768.0                 # (S,) at `rate`
    times = np.arange(int(len(samples) * RATE / rate)) / RATE              # (S',) at 16 kHz
    waveform = np.interp(times, np.arange(len(samples)) / rate, samples)   # (S',)
    sounding = np.flatnonzero(np.abs(waveform) > 0.01 * np.abs(waveform).max())
    return waveform[sounding[0]:sounding[-1] + 1]


def synthesise(voices, count, random, folder):
    """`count` utterances: (waveforms, digit strings, voices), each of a random voice of
    `voices`, length, speed and pitch."""
    waveforms, strings, spoken_by = [], [], []
    for _ in range(count):
        digits = "".join(map(str, random.integers(0, 10, random.integers(DIGITS[0],
                                                                          DIGITS[1] + 1))))
        voice = voices[random.integers(len(voices))]
        speed, pitch = random.integers(*SPEEDS), random.integers(*PITCHES)
        waveforms.append(speak(" ".join(digits), voice, speed, pitch, folder))
        strings.append(digits)
        spoken_by.append(voice)
    return waveforms, strings, spoken_by


def add_noise(waveform, random, snr_db=SNR_DB):
    """The waveform plus Gaussian noise whose power is the waveform's / 10^(snr_db / 10)."""
    power = float(np.mean(waveform ** 2))
    return waveform + random.normal(0.0, math.sqrt(power / 10.0 ** (snr_db / 10.0)),
                                    waveform.shape)


# %% [markdown]
# The model: Whisper's architecture at a toy's size. Its input is 200 frames of 40 mel bands
# (10 ms each; 100 audio positions after the stride-2 convolution); its text is a start token,
# up to 6 digits and an end token. The token and position embeddings start as N(0, 0.02^2), as
# transformers initialises Whisper (its init_std). From PyTorch's N(0, 1) default, the tied head
# would start the logits with a spread of sqrt(64) = 8 (the LayerNorm's output has norm
# sqrt(width)), a confident wrong guess, and the positions would drown the tokens.

# %%
CHUNK_SECONDS, MELS = 2, 40
START, EOS, PAD = 10, 11, 12                # after the digits 0-9
SETTINGS = WhisperSettings(vocab_size=13, num_mel_bins=MELS, d_model=64, encoder_layers=2,
                           encoder_heads=4, encoder_ffn_dim=256, decoder_layers=2,
                           decoder_heads=4, decoder_ffn_dim=256,
                           max_source_positions=CHUNK_SECONDS * 50,
                           max_target_positions=DIGITS[1] + 2, eos_token_id=EOS,
                           pad_token_id=PAD, decoder_start_token_id=START)
FULL = dict(train_utterances=600, test_utterances=100, steps=1200, batch=16, lr=2e-3,
            print_every=100)
QUICK = dict(train_utterances=48, test_utterances=8, steps=12, batch=8, lr=2e-3, print_every=4)


def build_model():
    ta.manual_seed(SEED)
    model = Whisper(SETTINGS, dtype=np.float32)
    random = np.random.default_rng(SEED)
    for embedding in (model.decoder.embed.weight, model.decoder.positions.weight):
        embedding.data[...] = random.normal(0.0, 0.02, embedding.shape)
    return model


def features(waveforms):
    """(B, MELS, 100 CHUNK_SECONDS) log-mel features, float32: the waveform padded with
    silence (or cut) to CHUNK_SECONDS, as Whisper pads to its 30."""
    return np.stack([log_mel_spectrogram(w, n_mels=MELS, chunk_length=CHUNK_SECONDS)
                     for w in waveforms])


def token_rows(strings):
    """(B, 2 + 6) ids: START, the digits, EOS, then PAD; decoder input is [:, :-1], targets
    [:, 1:], the PADs' targets left out of the loss."""
    rows = np.full((len(strings), DIGITS[1] + 2), PAD, dtype=np.int64)
    for row, digits in zip(rows, strings):
        row[:len(digits) + 2] = [START, *map(int, digits), EOS]
    return rows


# %% [markdown]
# Training: each step a batch of training utterances with fresh noise, the mean cross-entropy of
# every next token given the true ones before it (teacher forcing), Adam on the parameters that
# learn (the encoder's sinusoidal positions do not).

# %%
def loss_of(model, waveforms, strings, random):
    rows = token_rows(strings)                                              # (B, 8)
    noisy = [add_noise(w, random) for w in waveforms]
    logits = model(features(noisy), rows[:, :-1])                          # (B, 7, 13)
    targets = np.where(rows[:, 1:] == PAD, -100, rows[:, 1:])               # (B, 7)
    return F.cross_entropy(logits.reshape(-1, SETTINGS.vocab_size), targets.reshape(-1), -100)


def train(model, data, settings):
    waveforms, strings, _ = data
    optimizer = ta.optim.Adam(model.trainable_parameters(), lr=settings["lr"])
    random = np.random.default_rng(SEED + 1)
    losses, start, processor_start = [], time.perf_counter(), time.process_time()
    progress = demo_tools.Progress()
    for step in range(1, settings["steps"] + 1):
        lr = ta.optim.warmup_cosine_lr(step - 1, settings["lr"], settings["steps"] // 20,
                                       settings["steps"], settings["lr"] / 20)
        chosen = random.integers(0, len(strings), settings["batch"])
        loss = loss_of(model, [waveforms[i] for i in chosen], [strings[i] for i in chosen],
                       random)
        optimizer.zero_grad()
        optimizer.lr = lr
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % settings["print_every"] == 0 or step == settings["steps"]:
            print(f"  step {step:>5}/{settings['steps']}  loss {np.mean(losses[-20:]):.4f} "
                  f"(mean of the last 20)  {time.perf_counter() - start:6.1f} s", flush=True)
        progress(f"  step {step:>5}/{settings['steps']}")
    return losses, time.perf_counter() - start, time.process_time() - processor_start


# %% [markdown]
# Scoring: greedy transcripts, and the character error rate, the edit distance (insertions,
# deletions, substitutions) from the transcript to the true string, summed over the utterances
# and divided by the true strings' total length.

# %%
def transcribe(model, waveforms, random):
    noisy = [add_noise(w, random) for w in waveforms]
    start = np.full((len(waveforms), 1), START, dtype=np.int64)
    ids = model.generate(features(noisy), start, max_new_tokens=DIGITS[1] + 1)   # (B, <= 8)
    texts = []
    for row in ids[:, 1:]:
        row = list(row)
        row = row[:row.index(EOS)] if EOS in row else row
        texts.append("".join(str(i) if i < 10 else "?" for i in row))
    return texts


def edit_distance(a, b):
    """Levenshtein's distance between two strings, by the usual table, one row at a time."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def character_error_rate(heard, truth):
    return sum(edit_distance(h, t) for h, t in zip(heard, truth)) / sum(map(len, truth))


# %% [markdown]
# The alignment: one held-out utterance through the trained model with its own transcript as the
# decoder's input, and the last decoder layer's cross-attention weights averaged over the heads:
# a (tokens, audio positions) picture, each audio position two frames.

# %%
def alignment(model, waveform, heard, random):
    rows = np.array([[START, *map(int, heard)]], dtype=np.int64)           # (1, T)
    feature = features([add_noise(waveform, random)])                     # (1, M, 200)
    name = f"decoder.blocks.{SETTINGS.decoder_layers - 1}.cross_attn.weights"
    with ta.no_grad():
        _, cache = model.run_with_cache(feature, rows, names=[name])
    return feature[0], cache[name][0].mean(axis=0)                         # (M, 200), (T, 100)


def main(argv=None):
    args = command_line(argv)
    if not has_engine():
        print(INSTALL)
        return {"engine": False}
    settings = QUICK if args.quick else FULL
    random = np.random.default_rng(SEED)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        training = synthesise(VOICES, settings["train_utterances"], random, folder)
        seen = synthesise(VOICES, settings["test_utterances"], random, folder)
        held_out = synthesise([HELD_OUT], settings["test_utterances"], random, folder)
    seconds = sum(len(w) for w in training[0]) / RATE
    print(f"Synthesised {settings['train_utterances']} training utterances ({seconds:.0f} s of "
          f"speech; voices {', '.join(VOICES)}) and {settings['test_utterances']} test "
          f"utterances each of those voices and of the held-out voice {HELD_OUT}, in "
          f"{time.perf_counter() - start:.1f} s; noise at {SNR_DB:.0f} dB SNR")
    model = build_model()
    parameters = sum(p.size for p in model.trainable_parameters())
    print(f"Training a Whisper of {parameters:,} parameters for {settings['steps']} steps of "
          f"{settings['batch']} utterances")
    losses, wall, processor = train(model, training, settings)
    score_random = np.random.default_rng(SEED + 2)
    heard_seen = transcribe(model, seen[0], score_random)
    heard_held_out = transcribe(model, held_out[0], score_random)
    cer_seen = character_error_rate(heard_seen, seen[1])
    cer_held_out = character_error_rate(heard_held_out, held_out[1])
    print(f"Trained in {wall:.1f} s ({processor:.1f} s of processor time); loss "
          f"{losses[0]:.3f} -> {np.mean(losses[-20:]):.3f}")
    print(f"Character error rate: {cer_seen:.1%} on new strings of the voices it trained on, "
          f"{cer_held_out:.1%} on the held-out voice {HELD_OUT}")
    demo_tools.print_table(["voice", "spoken", "heard"],
                           [[HELD_OUT, t, h] for t, h in zip(held_out[1][:6], heard_held_out)],
                           title="The held-out voice's first transcripts:")
    feature, weights = alignment(model, held_out[0][0], heard_held_out[0], score_random)
    picture = plot(feature, weights, held_out[0][0], heard_held_out[0], held_out[1][0],
                   args.output / "speech_digits_alignment.png")
    demo_tools.print_pictures(picture)
    sentence = real_whisper(args.whisper_tiny)
    return {"engine": True, "voices": ", ".join(VOICES), "held_out_voice": HELD_OUT,
            "snr_db": SNR_DB, "parameters": parameters, "steps": settings["steps"],
            "batch": settings["batch"], "train_utterances": settings["train_utterances"],
            "test_utterances": settings["test_utterances"], "first_loss": losses[0],
            "last_loss": float(np.mean(losses[-20:])), "cer_seen": cer_seen,
            "cer_held_out": cer_held_out, "training_seconds": wall,
            "training_processor_seconds": processor, "whisper_tiny_heard": sentence}


# %% [markdown]
# The real Whisper, if its files are at hand: whisper-tiny transcribes a sentence espeak-ng
# speaks, prompted with its special tokens for English transcription without timestamps.

# %%
SENTENCE = "The quick brown fox jumps over the lazy dog."
PROMPT = ["<|startoftranscript|>", "<|en|>", "<|transcribe|>", "<|notimestamps|>"]


def real_whisper(folder):
    if folder is None:
        print("(No --whisper-tiny FOLDER: with openai/whisper-tiny's files, the demo also "
              "transcribes a synthesised sentence with the real weights.)")
        return None
    from tinyattn.nn.whisper_checkpoints import from_pretrained
    from tinyattn.tokenizer_json import TokenizerJSON
    model = from_pretrained(folder)
    tokenizer = TokenizerJSON.from_pretrained(folder)
    with tempfile.TemporaryDirectory() as temporary:
        waveform = speak(SENTENCE, HELD_OUT, 170, 50, temporary)
    feature = log_mel_spectrogram(waveform, n_mels=model.settings.num_mel_bins)[None]
    prompt = np.array([tokenizer.encode("".join(PROMPT))], dtype=np.int64)      # (1, 4)
    ids = model.generate(feature, prompt, max_new_tokens=40)                    # (1, <= 44)
    text_ids = [i for i in ids[0, prompt.shape[1]:].tolist()    # the special tokens come after
                if i < model.settings.eos_token_id]             # the text's, from <|endoftext|>
    heard = tokenizer.decode(text_ids).strip()
    print(f"whisper-tiny's weights, on espeak-ng's {HELD_OUT!r} saying {SENTENCE!r}: {heard!r}")
    return heard


# %% [markdown]
# Plumbing: the command line and the picture.

# %%
def command_line(argv):
    parser = demo_tools.argument_parser(__doc__)
    parser.add_argument("--whisper-tiny", metavar="FOLDER", type=pathlib.Path, default=None,
                        help="openai/whisper-tiny's files, to transcribe a sentence with them")
    args = parser.parse_args(argv)
    demo_tools.one_blas_thread()
    return args


def plot(feature, weights, waveform, heard, spoken, path):
    plt = demo_tools.pyplot()
    if plt is None:
        return None
    frames = int(math.ceil(len(waveform) / 160))                 # the frames that hold speech
    positions = (frames + 1) // 2
    figure, (top, bottom) = plt.subplots(2, 1, figsize=(8, 5.5), sharex=True,
                                         gridspec_kw={"height_ratios": [1, 1.2]},
                                         layout="constrained")
    top.imshow(feature[:, :2 * positions], origin="lower", aspect="auto", cmap="magma",
               extent=(0, positions * 0.02, 0, MELS))
    top.set(ylabel="mel band", title=f"log-mel spectrogram: {HELD_OUT} (held out) says "
                                     f"{' '.join(spoken)}")
    labels = ["start", *heard]
    bottom.imshow(weights[:, :positions], aspect="auto", cmap="viridis", origin="upper",
                  extent=(0, positions * 0.02, len(labels) - 0.5, -0.5))
    bottom.set_yticks(range(len(labels)), [f"{label} ->" for label in labels])
    bottom.set(xlabel="audio time (s)", ylabel="token written next from",
               title="cross-attention of the last decoder layer (mean over heads)")
    return demo_tools.save_figure(figure, path, dpi=110)


PAGE_ENTRY = """\
25. [`25_speech_digits.py`](../demos/25_speech_digits.py) — a Whisper of {parameters:,} parameters
    (2 + 2 layers, width 64, 200 frames of 40 mel bands) trained in tinyattn's engine for
    {steps:,} steps of {batch} on {train_utterances:,} digit strings spoken by espeak-ng (voices
    {voices}; random speed and pitch; Gaussian noise at {snr_db:.0f} dB SNR): character error rate
    {cer_seen:.1%} on new strings of those voices and {cer_held_out:.1%} on the held-out voice
    {held_out_voice} ({test_utterances} strings each). Below, one held-out utterance's log-mel
    spectrogram and the cross-attention of each token written against its audio frames.

    ![log-mel spectrogram and cross-attention](pictures/speech_digits_alignment.png)"""

PAGE_ENTRY_WITHOUT_RESULTS = """\
25. [`25_speech_digits.py`](../demos/25_speech_digits.py) — a tiny Whisper (2 + 2 layers, width
    64, 40 mel bands) trained in tinyattn's engine on digit strings spoken by the speech engine
    espeak-ng in several voices, at random speeds and pitches, with added noise. It needs
    espeak-ng (`sudo apt-get install espeak-ng`). Its numbers are not recorded here yet: run it
    to see the character error rate on new strings of the voices it trained on and on a voice
    held out of training, a few transcripts, and the cross-attention of one utterance under its
    log-mel spectrogram. (`python dev/regenerate.py 25` puts the measured numbers here.)"""

# %% [markdown]
# Run the demo (in a notebook, its quick version: the line it prints says how to run the full one).

# %%
if __name__ == "__main__":
    main()
