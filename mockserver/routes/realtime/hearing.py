"""What a Realtime session hears in input audio mockserver did not speak.

Speech mockserver made carries its text (:mod:`mockserver.voice.modem`) and is heard at once.
Other audio (a recording of a person, a tone) is transcribed as ``/v1/audio/transcriptions``
transcribes it: by the engine, a generation seeded by the audio's bytes, so the same audio is
heard as the same words in every session and on every run. The transcript is made in a task
when the audio is committed (as OpenAI's ``input_audio_transcription.completed`` arrives after
the item), and a response waits for the transcripts still being made before it reads the
conversation. A transcription session streams the transcript (:func:`deltas`); there the carried
text of mockserver's speech is the engine's decided answer, so scripted rules and faults apply to it too.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from mockserver.context import ServerContext
from mockserver.spine import seeding
from mockserver.spine.events import TextDelta
from mockserver.spine.request import GenerationRequest
from mockserver.voice.transcribe import Heard, generation

__all__ = ["MODEL", "deltas", "transcript"]

MODEL = "gpt-4o-transcribe"  # what transcribes a session's audio when its config names no model


def _generation(
    ctx: ServerContext, pcm: bytes, heard: Heard, model: str, session: str | None, stream: bool, scored: bool = False
) -> GenerationRequest:
    canonical = seeding.digest(b"realtime-audio", pcm, model.encode())
    return generation(
        heard,
        model=model,
        prompt=None,
        temperature=0.0,
        seed=seeding.derive_seed(canonical, ctx.seed),
        context_window=ctx.options.models.context_window(model, ctx.profile),
        session=session,
        canonical=canonical,
        stream=stream,
        scored=scored,
    )


async def transcript(ctx: ServerContext, pcm: bytes, heard: Heard, model: str, session: str | None) -> str:
    """The words ``heard`` (``pcm``, 24 kHz 16-bit mono) says, by the engine."""
    result = await ctx.engine.complete(_generation(ctx, pcm, heard, model, session, False))
    choice = result.choices.get(0)
    return choice.text.strip() if choice is not None else ""


async def deltas(
    ctx: ServerContext, pcm: bytes, heard: Heard, model: str, session: str | None, scored: bool
) -> AsyncIterator[tuple[str, list[dict[str, Any]]]]:
    """The words ``heard`` says as the engine makes them (leading whitespace left out), each with
    its tokens' logprobs when ``scored`` (the session's ``include``: real ones, the model's)."""
    began = False
    gen = _generation(ctx, pcm, heard, model, session, True, scored)
    async for event in await ctx.engine.events(gen):
        if isinstance(event, TextDelta) and event.text:
            text = event.text if began else event.text.lstrip()
            if text:
                began = True
                yield text, [{"token": t.token, "logprob": t.logprob, "bytes": list(t.bytes)} for t in event.tokens]
