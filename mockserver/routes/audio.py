"""``/v1/audio/speech``, ``/v1/audio/transcriptions`` and ``/v1/audio/translations``.

Speech is synthesised (:mod:`mockserver.voice.speech`): a file, streamed in chunks, or SSE
``speech.audio.delta`` / ``speech.audio.done`` events. A transcription reads the uploaded file
(:mod:`mockserver.voice.formats`), hears it (:mod:`mockserver.voice.transcribe`) and asks the
engine for the transcript, shaped as ``response_format`` asks; gpt-4o models stream
``transcript.text.delta`` / ``transcript.text.done``. Decoding and encoding run in a thread:
the event loop keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import AsyncIterator
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import BaseRoute, Route

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.http.body import json_body
from mockserver.http.sse import Frame, Framing, event_stream
from mockserver.routes.handler import source_of
from mockserver.schemas.audio import SPEECH_MODELS, TRANSCRIBE_MODELS, SpeechRequest, TranscriptionForm
from mockserver.schemas.common import validated
from mockserver.spine import seeding
from mockserver.spine.events import TextDelta, Token
from mockserver.spine.result import Result
from mockserver.voice import formats, speech, transcripts
from mockserver.voice.transcribe import EXTENSIONS, Heard, generation, hear, language_name
from mockserver.wire import headers as h
from mockserver.wire.json import dumps

__all__ = ["routes"]

_GPT4O = ("gpt-4o-transcribe", "gpt-4o-mini-transcribe")
_SHAPE_FIELDS = frozenset({"response_format", "timestamp_granularities", "include", "stream"})


def _known(model: str, names: tuple[str, ...], param: str = "model") -> None:
    if not any(model == n or model.startswith(n + "-") for n in names):
        raise InvalidRequest(f"Invalid value for '{param}': '{model}' is not one of {list(names)}.", param=param)


async def create_speech(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    _, data = await json_body(request)
    body = validated(SpeechRequest, data)
    _known(body.model, SPEECH_MODELS)
    if body.stream_format == "sse" and body.model.startswith("tts-1"):
        raise InvalidRequest(
            f"stream_format 'sse' is not supported for the model '{body.model}'.", param="stream_format"
        )
    name = body.voice if isinstance(body.voice, str) else body.voice.get("id")
    if not name:
        raise InvalidRequest("Invalid value for 'voice': a custom voice needs its 'id'.", param="voice")
    # How it is delivered (a file, or SSE) changes nothing of what is said.
    said_by = {k: v for k, v in data.items() if k != "stream_format"}
    seed = body.seed if body.seed is not None else seeding.derive_seed(seeding.canonical(said_by), ctx.seed)
    said = await asyncio.to_thread(speech.speak, body.input, name, body.speed, body.response_format, seed)
    headers = {h.name(h.SEED): str(seed)}
    if body.stream_format == "sse":
        return event_stream(_speech_events(said, body.input), Framing(named=False, done=False), headers)
    return StreamingResponse(_pieces(said.audio), media_type=said.content_type, headers=headers)


async def _pieces(audio: bytes) -> AsyncIterator[bytes]:
    for piece in speech.chunks(audio):
        yield piece


async def _speech_events(said: speech.Speech, text: str) -> AsyncIterator[Frame]:
    for piece in speech.chunks(said.audio):
        yield {"type": "speech.audio.delta", "audio": speech.b64(piece)}
    tokens = len(_tokenizer().encode(text))
    out = speech.audio_tokens(said.seconds)
    yield {
        "type": "speech.audio.done",
        "usage": {"input_tokens": tokens, "output_tokens": out, "total_tokens": tokens + out},
    }


def _tokenizer() -> Any:
    from mockserver.gpt.tokenizer import Tokenizer

    return Tokenizer.shipped()


async def create_transcription(request: Request) -> Response:
    return await _transcribe(request, translate=False)


async def create_translation(request: Request) -> Response:
    return await _transcribe(request, translate=True)


async def _read_form(request: Request) -> tuple[TranscriptionForm, bytes, dict[str, Any]]:
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        raise InvalidRequest("This endpoint takes a multipart/form-data body with the audio in 'file'.", param="file")
    try:
        form = await request.form()
    except Exception as exc:  # a malformed multipart body (Starlette's parser says why)
        raise InvalidRequest(f"Could not read the multipart body: {exc}", param="file") from None
    upload = form.get("file")
    if not isinstance(upload, UploadFile):
        raise InvalidRequest("Missing required parameter: 'file'.", param="file")
    extension = (upload.filename or "").rsplit(".", 1)[-1].lower() if "." in (upload.filename or "") else ""
    if extension not in EXTENSIONS:
        raise InvalidRequest(
            f"Invalid file format. Supported formats: {list(EXTENSIONS)}", param="file", code="invalid_value"
        )
    audio = await upload.read()
    fields: dict[str, Any] = {k: v for k, v in form.items() if isinstance(v, str) and not k.endswith("[]")}
    for key in ("timestamp_granularities", "include"):
        values = [v for v in (*form.getlist(key + "[]"), *form.getlist(key)) if isinstance(v, str)]
        fields[key] = tuple(values)
    return validated(TranscriptionForm, fields), audio, fields


def _check(body: TranscriptionForm, translate: bool) -> None:
    _known(body.model, ("whisper-1",) if translate else TRANSCRIBE_MODELS)
    gpt4o = body.model.startswith(_GPT4O)
    if gpt4o and body.response_format not in ("json", "text"):
        raise InvalidRequest(
            f"response_format '{body.response_format}' is not compatible with model '{body.model}'."
            " Use 'json' or 'text'.",
            param="response_format",
        )
    if body.timestamp_granularities and body.response_format != "verbose_json":
        raise InvalidRequest(
            "timestamp_granularities is only supported with response_format 'verbose_json'.",
            param="timestamp_granularities",
        )
    if body.include and (not gpt4o or body.response_format != "json"):
        raise InvalidRequest(
            "include[]=logprobs needs a gpt-4o transcription model and response_format 'json'.", param="include"
        )


async def _transcribe(request: Request, translate: bool) -> Response:
    ctx: ServerContext = request.app.state.ctx
    body, audio, fields = await _read_form(request)
    _check(body, translate)
    if not audio:
        raise InvalidRequest("The audio file is empty.", param="file", code="invalid_value")
    try:
        heard = await asyncio.to_thread(_decoded_and_heard, audio)  # one trip to a thread for both
    except formats.NotAudio:
        raise InvalidRequest(
            "The audio file could not be decoded or its format is not supported.", param="file", code="invalid_value"
        ) from None
    # What is heard depends on the audio and what is asked of it, not on the shape of the answer.
    asked = {k: v for k, v in fields.items() if k not in _SHAPE_FIELDS}
    canonical = seeding.digest(b"audio", audio, json.dumps(asked, sort_keys=True, default=list))
    seed = body.seed if body.seed is not None else seeding.derive_seed(canonical, ctx.seed)
    scope = request.scope
    source = source_of(scope, b"", "chat", False, False)
    gpt4o = body.model.startswith(_GPT4O)
    stream = body.stream and gpt4o
    gen = generation(
        heard,
        model=body.model,
        prompt=body.prompt,
        temperature=body.temperature,
        seed=seed,
        context_window=ctx.options.models.context_window(body.model, ctx.profile_of(scope)),
        session=source.session,
        canonical=canonical,
        stream=stream,
        instruction="Translate the audio into English." if translate else "Transcribe the audio.",
        scored=bool(body.include) or body.response_format == "verbose_json",
    )
    headers = {h.name(h.SEED): str(seed)}
    if stream:
        _by, first, rest = await ctx.engine.open(gen)
        return event_stream(_transcript_events(body, heard, first, rest), Framing(named=False, done=False), headers)
    result = await ctx.engine.complete(gen)
    return _transcript_response(body, heard, result, headers, translate)


def _decoded_and_heard(audio: bytes) -> Heard:
    return hear(*formats.decode(audio))


def _logprobs(tokens: list[Token]) -> list[dict[str, Any]]:
    return [{"token": t.token, "logprob": t.logprob, "bytes": list(t.bytes)} for t in tokens]


def _tokens_usage(body: TranscriptionForm, heard: Heard, result: Result) -> dict[str, Any]:
    text_in = len(_tokenizer().encode(body.prompt)) if body.prompt else 0
    audio_in = speech.audio_tokens(heard.seconds)
    out = result.usage.completion_tokens if result.usage is not None else len(result.choice(0).tokens)
    return {
        "type": "tokens",
        "input_tokens": text_in + audio_in,
        "input_token_details": {"text_tokens": text_in, "audio_tokens": audio_in},
        "output_tokens": out,
        "total_tokens": text_in + audio_in + out,
    }


def _transcript_response(
    body: TranscriptionForm, heard: Heard, result: Result, headers: dict[str, str], translate: bool
) -> Response:
    choice = result.choice(0)
    text = choice.text
    fmt = body.response_format
    if fmt == "text":
        return PlainTextResponse(text + "\n", headers=headers)
    seconds = round(heard.seconds, 3)
    spoken = heard.spoken
    if fmt in ("srt", "vtt"):
        found = transcripts.segments(text, heard.seconds, spoken)
        rendered = transcripts.srt(found) if fmt == "srt" else transcripts.vtt(found)
        return PlainTextResponse(rendered, headers=headers)
    usage: dict[str, Any] = (
        _tokens_usage(body, heard, result)
        if body.model.startswith(_GPT4O)
        else {"type": "duration", "seconds": math.ceil(heard.seconds)}
    )
    answer: dict[str, Any] = {"text": text}
    if fmt == "verbose_json":
        answer = {
            "task": "translate" if translate else "transcribe",
            "language": "english" if translate else language_name(body.language),
            "duration": seconds,
            "text": text,
        }
        grains = body.timestamp_granularities or ("segment",)
        if "segment" in grains:
            mean = _mean_logprob(choice.tokens)
            answer["segments"] = [
                {
                    "id": s.id,
                    "seek": 0,
                    "start": s.start,
                    "end": s.end,
                    "text": s.text,
                    "tokens": list(s.tokens),
                    "temperature": body.temperature,
                    "avg_logprob": mean,
                    "compression_ratio": transcripts.compression_ratio(s.text),
                    "no_speech_prob": 0.0 if spoken is not None else 0.01,
                }
                for s in transcripts.segments(text, heard.seconds, spoken)
            ]
        if "word" in grains:
            answer["words"] = [
                {"word": w.word, "start": w.start, "end": w.end} for w in transcripts.words(text, heard.seconds, spoken)
            ]
    elif body.include:
        answer["logprobs"] = _logprobs(choice.tokens)
    answer["usage"] = usage
    return Response(dumps(answer), media_type="application/json", headers=headers)


def _mean_logprob(tokens: list[Token]) -> float:
    scored = [t.logprob for t in tokens if t.logprob is not None]
    return round(sum(scored) / len(scored), 6) if scored else 0.0


async def _transcript_events(
    body: TranscriptionForm, heard: Heard, first: Any, rest: AsyncIterator[Any]
) -> AsyncIterator[Frame]:
    result = Result()
    events: list[Any] = [first] if first is not None else []
    want = bool(body.include)

    def delta(event: TextDelta) -> dict[str, Any]:
        frame: dict[str, Any] = {"type": "transcript.text.delta", "delta": event.text}
        if want:
            frame["logprobs"] = _logprobs(list(event.tokens))
        return frame

    for event in events:
        result.apply(event)
        if isinstance(event, TextDelta) and event.text:
            yield delta(event)
    async for event in rest:
        result.apply(event)
        if isinstance(event, TextDelta) and event.text:
            yield delta(event)
    choice = result.choice(0)
    done: dict[str, Any] = {"type": "transcript.text.done", "text": choice.text}
    if want:
        done["logprobs"] = _logprobs(choice.tokens)
    done["usage"] = _tokens_usage(body, heard, result)
    yield done


def routes() -> list[BaseRoute]:
    return [
        Route("/v1/audio/speech", create_speech, methods=["POST"]),
        Route("/v1/audio/transcriptions", create_transcription, methods=["POST"]),
        Route("/v1/audio/translations", create_translation, methods=["POST"]),
    ]
