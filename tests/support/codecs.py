"""What the codec unit tests (tests/unit/routes/test_codec_*.py) share: the request a bare body
expects, a call as the handler makes it, the frames and body a codec makes of events, and the
wire's envelopes and usage — with no server, no HTTP and no model."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from mockserver.context import Options
from mockserver.errors import APIError
from mockserver.profiles import Endpoint, profile_named
from mockserver.routes import params
from mockserver.routes.codec import Call, Chunk, ChunkFrame, Codec
from mockserver.spine.events import Candidate, Event, Token
from mockserver.spine.request import GenerationRequest, Origin, Prompt, Sampling, Source
from mockserver.spine.result import Result
from mockserver.wire.json import dumps

Json = dict[str, Any]

CREATED = 1_700_000_000
# The fields of the request a bare body asks for, beside its model, prompts and sampling.
BARE: Json = {"n": 1, "seed": 0, "context_window": 8192}


def png_url(width: int, height: int) -> str:
    """A data URL of a PNG header (all the codec reads of an image is its size)."""
    chunk = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return "data:image/png;base64," + base64.b64encode(data).decode()


# ---- to_generation ----------------------------------------------------------------------


def generation(
    endpoint: Endpoint, model: str, prompts: tuple[Prompt, ...], sampling: Sampling, **fields: Any
) -> GenerationRequest:
    """The expected request: the defaults a bare body gets, and ``fields`` changed."""
    return GenerationRequest(endpoint=endpoint, model=model, prompts=prompts, sampling=sampling, **{**BARE, **fields})


def copied_origin(codec: Codec, body: Any, origin: Origin) -> tuple[int, bytes, Source, frozenset[str]]:
    """What the request ``to_generation`` makes keeps of ``origin``: seed, canonical bytes,
    where it came from (as far as a backend reads it: its surface and session) and content faults."""
    gen = codec.to_generation(body, profile_named("openai"), Options(), origin)
    return gen.seed, gen.canonical, Source(surface=gen.surface, session=gen.session), gen.content_faults


def refusal(codec: Codec, body: Any, profile: str, options: Options, error: type[APIError]) -> APIError:
    """The error ``to_generation`` refuses ``body`` with, of exactly the type ``error``."""
    with pytest.raises(error) as raised:
        codec.to_generation(body, profile_named(profile), options, Origin())
    assert type(raised.value) is error
    return raised.value


# ---- encode: the non-streamed body ----------------------------------------------------------


def head(rid: str, obj: str, model: str) -> Json:
    """The fields every body or chunk starts with; profiles add theirs after them."""
    return {"id": rid, "object": obj, "created": CREATED, "model": model}


def wire_usage(style: str, prompt: int, completion: int, reasoning: int = 0) -> Json:
    """Chat's and completions' ``usage`` in a profile's style of details: ``openai``, ``null``
    or ``none`` (the counts alone)."""
    counts = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    if style == "null":
        return {**counts, "prompt_tokens_details": None, "completion_tokens_details": None}
    if style == "none":
        return counts
    return {
        **counts,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def make_call(codec: Codec, body: Any, profile: str, rid: str, include_usage: bool = False) -> Call:
    """A call as the handler makes it (its service tier read from the body and profile)."""
    prof = profile_named(profile)
    gen = codec.to_generation(body, prof, Options(), Origin(seed=1))
    tier = params.service_tier(body, prof, codec.endpoint)
    return Call(gen, body, prof, rid, CREATED, include_usage=include_usage, service_tier=tier)


def fold(events: list[Event]) -> Result:
    result = Result()
    for event in events:
        result.apply(event)
    return result


def tok(text: str, logprob: float | None, *top: tuple[str, float]) -> Token:
    """A sampled token and its alternatives ``(text, logprob)``."""
    return Token(text, text.encode(), text, logprob, tuple(Candidate(t, t.encode(), lp) for t, lp in top))


def assert_encodes(codec: Codec, call: Call, events: list[Event], expected: Json) -> None:
    """The body of the folded events is ``expected``, its keys in the same order."""
    body = codec.encode(call, fold(events))
    assert body == expected
    assert list(body) == list(expected)  # the keys in the order the wire has them


# ---- encode_event / encode_end: the stream -------------------------------------------------


def stream(codec: Codec, call: Call, events: list[Event]) -> tuple[list[ChunkFrame], Result]:
    """The frames the codec makes of each event, folding first, as the handler does."""
    result, frames = Result(), []
    for event in events:
        result.apply(event)
        frames += codec.encode_event(call, event, result)
    frames += codec.encode_end(call, result)
    return frames, result


def as_json(frame: ChunkFrame) -> Json:
    return frame.to_json() if isinstance(frame, Chunk) else frame


def assert_chunk_bytes_are_objects(frames: list[ChunkFrame], include_usage: bool) -> None:
    """Every frame but the usage chunk is a Chunk, whose fast bytes are its object's JSON."""
    chunks = [f for f in frames if isinstance(f, Chunk)]
    assert len(chunks) == len(frames) - include_usage  # every frame but the usage chunk
    for chunk in chunks:
        assert chunk.json_bytes() == dumps(chunk.to_json())
        assert json.loads(chunk.json_bytes()) == chunk.to_json()


def fast_rows(stream_rows: list[Any]) -> list[Any]:
    """Each stream row's (profile, fields, events), without and with ``include_usage``."""
    return [
        *[pytest.param(*row.values[:2], False, row.values[3], id=row.id) for row in stream_rows],
        *[pytest.param(*row.values[:2], True, row.values[3], id=f"{row.id}-usage") for row in stream_rows],
    ]


def streamed_choices(frames: list[ChunkFrame]) -> Iterator[Json]:
    """Every choice of every chunk of a stream, in the order sent."""
    for frame in frames:
        yield from as_json(frame)["choices"]


def streamed_usage(frames: list[ChunkFrame]) -> Json | None:
    """The usage a client reads off a stream: the last a chunk carries."""
    usage = None
    for frame in frames:
        chunk = as_json(frame)
        if chunk.get("usage") is not None:
            usage = chunk["usage"]
    return usage
