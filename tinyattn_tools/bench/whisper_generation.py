"""Transcribing with whisper-tiny's shape: the time of chapter 6's Whisper (nn/whisper.py)
encoding 30 seconds of audio and writing 32 tokens greedily, against Hugging Face transformers'
WhisperForConditionalGeneration doing the same, when transformers and PyTorch are installed.

The model is built from WHISPER_TINY (openai/whisper-tiny's config: 80 mel bands, 30 seconds =
3,000 frames read as 1,500 audio positions, width 384, 4 encoder and 4 decoder layers of 6 heads,
feed-forward 1536, 51,865 tokens: 37,760,640 parameters) with random float32 weights: no
download, and speed does not depend on what the weights are. With no end token (eos_token_id
None), both write exactly 32 tokens. `save_pretrained` writes the weights and transformers reads
them back, so both run the same model: before anything is timed, they must write the same tokens.

What each runs: the encoder once over the features (1, 80, 3000), then 32 steps of the decoder,
the first over the prompt (<|startoftranscript|>), each later one over the newest token alone
with the key/value cache (the self-attention's keys grow by one; the cross-attention's, the
audio's, are computed at the first step and kept). Ours is `Whisper.generate`; transformers' the
same loop written over its model's forward with its cache (`cache`), which is what its
`generate` runs under its Whisper-specific rules (forced and suppressed tokens), left out here.
Timed in processor seconds, interleaved: a round runs each once; the ratio is the median of
per-round ratios. The encoder alone is timed too, in rounds of its own, to say where the time goes.
"""
import statistics
import tempfile
import time

import numpy as np

import tinyattn as ta
from tinyattn.nn.whisper import WHISPER_TINY, Whisper, WhisperSettings
from tinyattn_tools.bench.gpt2_generation import transformers_found
from tinyattn_tools.bench.open_generation import said
from tinyattn_tools.bench.timing import interleaved, median_ratio

NEW_TOKENS = 32
WHISPER_ROUNDS = 5              # at most: a round encodes 30 s of audio twice


def whisper_model(seed=0, **sizes):
    """A Whisper of WHISPER_TINY's sizes (or with `sizes` changed), no end token, random float32
    weights, eval mode."""
    ta.manual_seed(seed)
    settings = WhisperSettings(**{**WHISPER_TINY, "eos_token_id": None, **sizes})
    return Whisper(settings, dtype=np.float32).eval()


def transformers_model(model, folder):
    """The same model in transformers: written by save_pretrained into `folder`, read back."""
    import torch
    import transformers
    transformers.utils.logging.disable_progress_bar()
    model.save_pretrained(folder)
    return transformers.WhisperForConditionalGeneration.from_pretrained(
        folder, dtype=torch.float32).eval()


def tinyattn_runs(model, new_tokens):
    """(transcribe, encode): greedy generation of `new_tokens` tokens, and the encoder alone."""
    def transcribe(features, prompt):
        return model.generate(features, prompt, new_tokens)                 # (B, T + new)

    def encode(features, prompt):
        with ta.no_grad():
            return model.encoder(features).data                             # (B, N, E)
    return transcribe, encode


def transformers_runs(torch, theirs, new_tokens):
    """(transcribe, encode) in transformers: its encoder once, then `new_tokens` steps of its
    decoder with its cache, each choosing the argmax."""
    def transcribe(features, prompt):
        with torch.no_grad():
            audio = theirs.model.encoder(torch.from_numpy(features))         # (B, N, E)
            ids, new, cache = torch.from_numpy(prompt), torch.from_numpy(prompt), None
            for _ in range(new_tokens):
                out = theirs(encoder_outputs=audio, decoder_input_ids=new, cache=cache,
                             use_cache=True)
                cache = out.cache
                new = out.logits[:, -1].argmax(dim=-1, keepdim=True)           # (B, 1)
                ids = torch.cat([ids, new], dim=1)                              # (B, T + 1)
            return ids.numpy()

    def encode(features, prompt):
        with torch.no_grad():
            return theirs.model.encoder(torch.from_numpy(features)).last_hidden_state.numpy()
    return transcribe, encode


def bench_whisper(rounds, torch=None, **sizes):
    """Part 13, with at most WHISPER_ROUNDS rounds: prints the time of a transcription (and of
    its encoder) with each and the ratio; returns {"tinyattn": seconds, "tinyattn_encoder":
    seconds, "transformers": ..., "transformers_encoder": ..., "ratio": tinyattn's speed /
    transformers'} (without transformers' entries when it was not measured)."""
    rounds = min(rounds, WHISPER_ROUNDS)
    model = whisper_model(**sizes)
    s = model.settings
    frames = 2 * s.max_source_positions
    said(f"Transcribing on whisper-tiny's shape ({s.num_mel_bins} mel bands x {frames} frames = "
         f"{frames / 100:g} s of audio, width {s.d_model}, {s.encoder_layers}+{s.decoder_layers} "
         f"layers of {s.encoder_heads} heads, {s.vocab_size} tokens: "
         f"{sum(p.size for p in model.parameters()):,} parameters), random float32 weights: the "
         f"audio encoded once, {NEW_TOKENS} tokens written greedily with the cache; {rounds} "
         f"interleaved rounds (at most {WHISPER_ROUNDS}), processor time", indent="")
    features = np.random.default_rng(0).standard_normal(
        (1, s.num_mel_bins, frames)).astype(np.float32)                     # (1, M, 2N)
    prompt = np.array([[s.decoder_start_token_id]], dtype=np.int64)         # (1, 1)
    runs = {"tinyattn": tinyattn_runs(model, NEW_TOKENS)}
    missing = [name for name, found in (("torch", torch), ("transformers", transformers_found()))
               if not found]
    with tempfile.TemporaryDirectory() as folder:
        if missing:
            print(f"   ({' and '.join(missing)} not installed: tinyattn is measured alone)")
        else:
            runs["transformers"] = transformers_runs(torch, transformers_model(model, folder),
                                                     NEW_TOKENS)
            check_same_tokens(runs["tinyattn"][0], runs["transformers"][0], features, prompt)
            said(f"the same {NEW_TOKENS} tokens as transformers, checked first")
        times = interleaved({name: run[0] for name, run in runs.items()}, (features, prompt),
                            rounds, clock=time.process_time)
        encoder_times = interleaved({name: run[1] for name, run in runs.items()},
                                    (features, prompt), rounds, clock=time.process_time)
    figures = {}
    for name in runs:
        whole, encoder = (statistics.median(times[name]), statistics.median(encoder_times[name]))
        figures.update({name: whole, f"{name}_encoder": encoder})
        print(f"   {name:<13} {whole:7.3f} s a transcription: the encoder {encoder:6.3f} s, "
              f"{NEW_TOKENS} decoder steps {whole - encoder:6.3f} s")
    if "transformers" in runs:
        figures["ratio"] = median_ratio(times, "transformers", "tinyattn")
        said(f"tinyattn transcribes at {figures['ratio']:.2f}x transformers' speed (median over "
             f"rounds of the per-round ratio)")
    return figures


def check_same_tokens(ours, theirs, features, prompt):
    """The two write the same tokens, or an AssertionError."""
    mine, reference = ours(features, prompt), theirs(features, prompt)
    if not np.array_equal(mine, reference):
        raise AssertionError(f"bench: transformers writes other tokens than tinyattn: "
                             f"{reference.tolist()} against {mine.tolist()}")
