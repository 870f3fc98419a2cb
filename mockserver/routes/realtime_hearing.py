"""What a Realtime session hears in input audio mockserver did not speak.

Speech mockserver made carries its text (:mod:`mockserver.voice.modem`) and is heard at once.
Other audio (a recording of a person, a tone) is transcribed as ``/v1/audio/transcriptions``
transcribes it: by the engine, a generation seeded by the audio's bytes, so the same audio is
heard as the same words in every session and on every run. The transcript is made in a task
when the audio is committed (as OpenAI's ``input_audio_transcription.completed`` arrives after
the item), and a response waits for the transcripts still being made before it reads the
conversation.
"""

from __future__ import annotations

from mockserver.context import ServerContext
from mockserver.spine import seeding
from mockserver.voice.transcribe import Heard, generation

__all__ = ["MODEL", "transcript"]

MODEL = "gpt-4o-transcribe"  # what transcribes a session's audio when its config names no model


async def transcript(ctx: ServerContext, pcm: bytes, heard: Heard, model: str, session: str | None) -> str:
    """The words ``heard`` (``pcm``, 24 kHz 16-bit mono) says, by the engine."""
    canonical = seeding.digest(b"realtime-audio", pcm, model.encode())
    gen = generation(
        heard,
        model=model,
        prompt=None,
        temperature=0.0,
        seed=seeding.derive_seed(canonical, ctx.seed),
        context_window=ctx.options.models.context_window(model, ctx.profile),
        session=session,
        canonical=canonical,
        stream=False,
    )
    result = await ctx.engine.complete(gen)
    choice = result.choices.get(0)
    return choice.text.strip() if choice is not None else ""
