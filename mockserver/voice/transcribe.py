"""A transcript is a generation: what the audio asks of the engine, and the shapes of its answer.

Speech mockserver made carries its text (:mod:`mockserver.voice.modem`): that text is the
decided answer, which the model scores (real logprobs) and scripted rules may still override.
Any other audio is transcribed by the reference model, seeded by the audio's bytes, in at most
six tokens a second of it. Either way the request goes through the one engine: scripted rules
(matched by ``model``, e.g. ``whisper-1``, and by the prompt), faults, latency and the journal apply.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mockserver.spine.request import Answer, ChatMessage, GenerationRequest, Prompt, Sampling
from mockserver.voice import modem
from mockserver.voice.modem import Spoken

__all__ = ["EXTENSIONS", "Heard", "generation", "hear", "language_name"]

# The file formats OpenAI's transcription endpoints accept (by the file's extension).
EXTENSIONS = ("flac", "mp3", "mp4", "mpeg", "mpga", "m4a", "ogg", "oga", "opus", "wav", "webm")
# A stranger's audio is transcribed in at most this many tokens a second (a fast speaker's rate),
# and at least MIN_TOKENS: a scripted transcript is cut by the cap like any answer, so it is roomy.
TOKENS_PER_SECOND = 6
MIN_TOKENS = 24

_LANGUAGES = {
    "en": "english", "de": "german", "es": "spanish", "fr": "french", "it": "italian", "ja": "japanese",
    "ko": "korean", "nl": "dutch", "pl": "polish", "pt": "portuguese", "ru": "russian", "sv": "swedish",
    "tr": "turkish", "uk": "ukrainian", "zh": "chinese", "ar": "arabic", "hi": "hindi",
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Heard:
    """Audio as the transcriber hears it: its length and, if mockserver spoke it, its text."""

    seconds: float
    spoken: Spoken | None


def hear(samples: NDArray[np.float32], rate: int) -> Heard:
    return Heard(len(samples) / rate if rate else 0.0, modem.heard(samples, rate))


def language_name(code: str | None) -> str:
    """verbose_json's ``language``: the language's English name (english when none was given)."""
    return _LANGUAGES.get(code or "en", code or "english")


def generation(
    heard: Heard,
    *,
    model: str,
    prompt: str | None,
    temperature: float,
    seed: int,
    context_window: int,
    session: str | None,
    canonical: bytes,
    stream: bool,
    instruction: str = "Transcribe the audio.",
    scored: bool = False,
) -> GenerationRequest:
    """The generation a transcription asks for (a chat turn: the instruction, then the prompt);
    ``scored``: its tokens' logprobs are wanted (``include[]=logprobs``, verbose_json's segments)."""
    messages = [ChatMessage("system", instruction)]
    if prompt:
        messages.append(ChatMessage("user", prompt))
    else:
        messages.append(ChatMessage("user", "(audio)"))
    answers: tuple[Answer | None, ...] = ()
    if heard.spoken is not None:
        answers = (Answer(text=heard.spoken.text, finish_reason="stop"),)
        max_tokens = None
    else:
        max_tokens = max(MIN_TOKENS, math.ceil(heard.seconds * TOKENS_PER_SECOND))
    return GenerationRequest(
        endpoint="chat",
        model=model,
        prompts=(Prompt(messages=tuple(messages)),),
        n=1,
        # Temperature 0 lets Whisper raise it as it needs (OpenAI's words): here, to 1, so the
        # transcript is drawn by the audio's seed rather than the same greedy words for every clip.
        sampling=Sampling(temperature=temperature or 1.0, max_tokens=max_tokens, logprobs=0 if scored else None),
        seed=seed,
        context_window=context_window,
        canonical=canonical,
        stream=stream,
        surface="chat",
        session=session,
        answers=answers,
    )
