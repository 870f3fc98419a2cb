"""The completions codec as pure functions: a body becomes a GenerationRequest, and folded
events become the body and the stream chunks — with no server, no HTTP and no model."""

from __future__ import annotations

import base64
import json
import struct
import zlib
from typing import Any

import pytest

from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.http.sse import dumps
from mockserver.profiles import Models, profile_named
from mockserver.routes import params
from mockserver.routes.codec import Call, Chunk, Frame, Options
from mockserver.routes.completions import CODEC
from mockserver.schemas.completions import CompletionRequest
from mockserver.spine.events import (
    Candidate,
    Event,
    Finished,
    PromptLogprobs,
    PromptPosition,
    Refusal,
    Scored,
    Started,
    TextDelta,
    Token,
    Usage,
)
from mockserver.spine.request import GenerationRequest, JsonFormat, Origin, Prompt, Sampling, Source
from mockserver.spine.result import Result

CREATED = 1_700_000_000
MODEL = "gpt-3.5-turbo-instruct"


def _png_url(width: int, height: int) -> str:
    """A data URL of a PNG header (all the codec reads of an image is its size)."""
    chunk = b"IHDR" + struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk))
    return "data:image/png;base64," + base64.b64encode(data).decode()


def _body(fields: dict[str, Any]) -> CompletionRequest:
    return CompletionRequest.model_validate({"model": MODEL, "prompt": "Say", **fields})


COMPLETIONS_SAMPLING = Sampling(max_tokens=16)  # OpenAI's completions default: 16 tokens


def _gen(
    *,
    model: str = MODEL,
    prompts: tuple[Prompt, ...] = (Prompt(text="Say"),),
    sampling: Sampling = COMPLETIONS_SAMPLING,
    **fields: Any,
) -> GenerationRequest:
    """The expected request: the defaults a bare body gets, and ``fields`` changed."""
    defaults: dict[str, Any] = {"n": 1, "seed": 0, "context_window": 8192}
    return GenerationRequest(
        endpoint="completions", model=model, prompts=prompts, sampling=sampling, **{**defaults, **fields}
    )


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}}

# ---- to_generation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "profile", "options", "expected"),
    [
        pytest.param({}, "openai", Options(), _gen(), id="bare-openai-16"),
        pytest.param({}, "together", Options(), _gen(sampling=Sampling(max_tokens=None)), id="bare-together-unset"),
        pytest.param(
            {},
            "fireworks",
            Options(),
            _gen(sampling=Sampling(max_tokens=16, keep_stop=True, truncate=True)),
            id="bare-fireworks",
        ),
        pytest.param({"max_tokens": 0}, "openai", Options(), _gen(sampling=Sampling(max_tokens=0)), id="max-tokens-0"),
        pytest.param(
            {"prompt": ["a", "b"]},
            "openai",
            Options(),
            _gen(prompts=(Prompt(text="a"), Prompt(text="b"))),
            id="prompt-list",
        ),
        pytest.param(
            {"prompt": [1, 2, 3]}, "openai", Options(), _gen(prompts=(Prompt(token_ids=(1, 2, 3)),)), id="token-ids"
        ),
        pytest.param(
            {"prompt": [[1, 2], [3]]},
            "openai",
            Options(),
            _gen(prompts=(Prompt(token_ids=(1, 2)), Prompt(token_ids=(3,)))),
            id="token-id-lists",
        ),
        pytest.param(
            {"prompt": ["def f(", "class A"], "suffix": "return x"},
            "openai",
            Options(),
            _gen(prompts=(Prompt(text="def f(", suffix="return x"), Prompt(text="class A", suffix="return x"))),
            id="suffix-on-every-prompt",
        ),
        pytest.param(
            {"prompt": ["a", "b"], "images": [_png_url(1, 1), _png_url(600, 600)]},
            "fireworks",
            Options(),
            # 1×1: one tile (255); 600×600: four tiles (170·4 + 85 = 765), both on the first prompt
            _gen(
                prompts=(Prompt(text="a", image_tokens=255 + 765), Prompt(text="b")),
                sampling=Sampling(max_tokens=16, keep_stop=True, truncate=True),
            ),
            id="images-first-prompt",
        ),
        pytest.param(
            {"logprobs": 2}, "openai", Options(), _gen(sampling=Sampling(max_tokens=16, logprobs=2)), id="logprobs-2"
        ),
        pytest.param(
            {"logprobs": 0}, "openai", Options(), _gen(sampling=Sampling(max_tokens=16, logprobs=0)), id="logprobs-0"
        ),
        pytest.param(
            {"logprobs": 20},
            "together",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, logprobs=20)),
            id="logprobs-20-together",
        ),
        pytest.param(
            {"echo": True, "logprobs": 1, "max_tokens": 0},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=0, logprobs=1, echo=True)),
            id="echo-loglikelihood",
        ),
        pytest.param(
            {"temperature": 0, "top_p": 0.5, "top_k": 5, "stop": ["\n\n", "###"], "seed": 7},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=16, temperature=0.0, top_p=0.5, top_k=5, stop=("\n\n", "###"))),
            id="sampling-fields",
        ),
        pytest.param(
            {"min_tokens": 4, "stop_token_ids": [9], "logit_bias": {"3": 2.5}, "prompt_logprobs": 2},
            "vllm",
            Options(vocab_size=10),
            _gen(
                sampling=Sampling(
                    max_tokens=16, min_tokens=4, stop_token_ids=(9,), logit_bias=((3, 2.5),), prompt_logprobs=2
                )
            ),
            id="vllm-extras",
        ),
        pytest.param({"n": 2, "best_of": 5}, "openai", Options(), _gen(n=2, best_of=5), id="n-best-of"),
        pytest.param({"stream": True}, "openai", Options(), _gen(stream=True), id="stream"),
        pytest.param(
            {"response_format": {"type": "json_object", "schema": SCHEMA}},
            "fireworks",
            Options(),
            _gen(response_format=JsonFormat(SCHEMA), sampling=Sampling(max_tokens=16, keep_stop=True, truncate=True)),
            id="fireworks-json-schema",
        ),
        pytest.param(
            {"response_format": {"type": "json_object"}},
            "together",
            Options(),
            _gen(response_format=JsonFormat(), sampling=Sampling(max_tokens=None)),
            id="json-object",
        ),
        pytest.param(
            {"model": "m"},
            "openai",
            Options(models=Models({"m": 100})),
            _gen(model="m", context_window=100),
            id="window",
        ),
    ],
)
def test_to_generation(fields: dict[str, Any], profile: str, options: Options, expected: GenerationRequest) -> None:
    assert CODEC.to_generation(_body(fields), profile_named(profile), options, Origin()) == expected


def test_to_generation_copies_the_origin() -> None:
    source = Source(surface="completions", session="w2", target="/v1/completions")
    origin = Origin(seed=5, canonical=b"c", source=source, content_faults=frozenset({"content.off_schema"}))
    gen = CODEC.to_generation(_body({}), profile_named("openai"), Options(), origin)
    assert (gen.seed, gen.canonical, gen.source, gen.content_faults) == (
        5,
        b"c",
        source,
        frozenset({"content.off_schema"}),
    )


@pytest.mark.parametrize(
    ("fields", "profile", "options", "error", "param"),
    [
        pytest.param({"echo": True, "suffix": "x"}, "openai", Options(), InvalidRequest, "suffix", id="echo-suffix"),
        pytest.param({"logprobs": 6}, "openai", Options(), InvalidRequest, "logprobs", id="logprobs-limit"),
        pytest.param({"best_of": 21}, "openai", Options(), InvalidRequest, "best_of", id="best-of-limit"),
        pytest.param({"min_tokens": 20}, "vllm", Options(), InvalidRequest, "min_tokens", id="min-over-default-16"),
        pytest.param(
            {"logit_bias": {"10": 1}}, "openai", Options(vocab_size=10), InvalidRequest, "logit_bias", id="bias-vocab"
        ),
        pytest.param(
            {"stop_token_ids": [-1]}, "vllm", Options(), InvalidRequest, "stop_token_ids", id="stop-token-negative"
        ),
        pytest.param(
            {"stop_token_ids": [10]}, "vllm", Options(vocab_size=10), InvalidRequest, "stop_token_ids", id="stop-vocab"
        ),
        pytest.param({"n": 2, "best_of": 1}, "openai", Options(), InvalidRequest, "best_of", id="best-of-below-n"),
        pytest.param(
            {"best_of": 3, "n": 2, "stream": True}, "openai", Options(), InvalidRequest, "best_of", id="best-of-stream"
        ),
        pytest.param(
            {"images": ["data:text/plain;base64,AAAA"]}, "fireworks", Options(), InvalidRequest, "images[0]", id="image"
        ),
        pytest.param(
            {"images": [_png_url(1, 1), "data:image/png;base64,AAAA"]},
            "fireworks",
            Options(),
            InvalidRequest,
            "images[1]",
            id="second-image",
        ),
        pytest.param(
            {"response_format": {"type": "json_object", "schema": {"type": "nope"}}},
            "fireworks",
            Options(),
            InvalidRequest,
            "response_format.schema",
            id="bad-schema",
        ),
        pytest.param(
            {"model": "zzz"},
            "openai",
            Options(models=Models(reject_unknown=True)),
            NotFound,
            "model",
            id="unknown-model",
        ),
    ],
)
def test_to_generation_refuses(
    fields: dict[str, Any], profile: str, options: Options, error: type[APIError], param: str
) -> None:
    with pytest.raises(error) as raised:
        CODEC.to_generation(_body(fields), profile_named(profile), options, Origin())
    assert type(raised.value) is error
    assert raised.value.param == param


# ---- encode: the non-streamed body ----------------------------------------------------------

HEAD = {"id": "cmpl-test", "object": "text_completion", "created": CREATED, "model": MODEL}
ENVELOPES: dict[str, dict[str, Any]] = {
    # OpenAI documents no service_tier on completions: the field is absent.
    "openai": {**HEAD, "system_fingerprint": "fp_mockserver"},
    "vllm": {**HEAD, "system_fingerprint": None},
    "together": HEAD,
    "nebius": {**HEAD, "service_tier": "auto"},
    "nebul": HEAD,
}
USAGE_OPENAI_DETAILS = {
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {
        "reasoning_tokens": 0,
        "audio_tokens": 0,
        "accepted_prediction_tokens": 0,
        "rejected_prediction_tokens": 0,
    },
}
USAGE_NULL_DETAILS = {"prompt_tokens_details": None, "completion_tokens_details": None}


def _usage(prompt: int, completion: int, details: dict[str, Any] | None = None) -> dict[str, Any]:
    counts = {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
    return {**counts, **(details or {})}


def _call(profile: str, fields: dict[str, Any], include_usage: bool = False) -> Call:
    """A call as the handler makes it (its service tier read from the body and profile)."""
    body, prof = _body(fields), profile_named(profile)
    gen = CODEC.to_generation(body, prof, Options(), Origin(seed=1))
    tier = params.service_tier(body, prof, CODEC.endpoint)
    return Call(gen, body, prof, "cmpl-test", CREATED, include_usage=include_usage, service_tier=tier)


def _fold(events: list[Event]) -> Result:
    result = Result()
    for event in events:
        result.apply(event)
    return result


def _tok(text: str, logprob: float | None, *top: tuple[str, float]) -> Token:
    return Token(text, text.encode(), text, logprob, tuple(Candidate(t, t.encode(), lp) for t, lp in top))


def _choice(text: str, index: int = 0, finish: str | None = "stop", lp: Any = None, **more: Any) -> dict[str, Any]:
    return {"text": text, "index": index, "logprobs": lp, "finish_reason": finish, **more}


HELLO: list[Event] = [Started(0), TextDelta(0, "Hello"), TextDelta(0, " world"), Finished(0, "stop"), Usage(2, 2)]
# Two prompts × n=2: choices 0..3, prompt-major; arriving out of order.
FOUR: list[Event] = [
    *(Started(i) for i in (2, 0, 3, 1)),
    TextDelta(3, "d"),
    TextDelta(0, "a"),
    TextDelta(2, "c"),
    TextDelta(1, "b"),
    *(Finished(i, "length") for i in (1, 3)),
    *(Finished(i, "stop") for i in (0, 2)),
    Usage(4, 4),
]
LOGPROBS: list[Event] = [
    Started(0),
    TextDelta(0, "Hi", (_tok("Hi", -0.5, ("Hi", -0.5), ("Yo", -1.0)),)),
    TextDelta(0, " you", (_tok(" you", -0.25, (" me", -0.2)),)),
    Finished(0, "length"),
    Usage(1, 2),
]
ECHO: list[Event] = [
    Started(0),
    TextDelta(0, "Say", (_tok("Say", None),), echo=True),
    TextDelta(0, "!", (_tok("!", -0.5, ("!", -0.5)),)),
    Finished(0, "length"),
    Usage(1, 1),
]
STOPPED: list[Event] = [
    Started(0),
    TextDelta(0, "one"),
    Finished(0, "stop", "\n"),
    Started(1),
    TextDelta(1, "x"),
    Finished(1, "stop"),
    Usage(2, 2),
]
PROMPT_LP: list[Event] = [
    PromptLogprobs(0, (None, PromptPosition(Scored(4, "ay", -0.75, 2), (Scored(1, "Sa", -0.5, 1),)))),
    Started(0),
    TextDelta(0, "ok"),
    Finished(0, "length"),
    Usage(2, 1),
]

ENCODE_ROWS = [
    pytest.param(
        "openai",
        {},
        HELLO,
        {**ENVELOPES["openai"], "choices": [_choice("Hello world")], "usage": _usage(2, 2, USAGE_OPENAI_DETAILS)},
        id="text",
    ),
    pytest.param(
        "openai",
        {"prompt": ["p", "q"], "n": 2},
        FOUR,
        {
            **ENVELOPES["openai"],
            "choices": [_choice("a", 0), _choice("b", 1, "length"), _choice("c", 2), _choice("d", 3, "length")],
            "usage": _usage(4, 4, USAGE_OPENAI_DETAILS),
        },
        id="two-prompts-n2-prompt-major",
    ),
    pytest.param(
        "openai",
        {"logprobs": 1},
        LOGPROBS,
        {
            **ENVELOPES["openai"],
            "choices": [
                _choice(
                    "Hi you",
                    finish="length",
                    # the sampled token joins the alternatives when it is not among them
                    lp={
                        "tokens": ["Hi", " you"],
                        "token_logprobs": [-0.5, -0.25],
                        "top_logprobs": [{"Hi": -0.5, "Yo": -1.0}, {" me": -0.2, " you": -0.25}],
                        "text_offset": [0, 2],
                    },
                )
            ],
            "usage": _usage(1, 2, USAGE_OPENAI_DETAILS),
        },
        id="logprobs-legacy",
    ),
    pytest.param(
        "openai",
        {"echo": True, "logprobs": 0, "max_tokens": 1},
        ECHO,
        {
            **ENVELOPES["openai"],
            "choices": [
                _choice(
                    "Say!",
                    finish="length",
                    lp={
                        "tokens": ["Say", "!"],
                        "token_logprobs": [None, -0.5],
                        "top_logprobs": [None, {"!": -0.5}],
                        "text_offset": [0, 3],
                    },
                )
            ],
            "usage": _usage(1, 1, USAGE_OPENAI_DETAILS),
        },
        id="echo-first-token-unscored",
    ),
    pytest.param(
        "openai",
        {},
        [Started(0), TextDelta(0, "Well. "), Refusal(0, "I can't."), Finished(0, "stop"), Usage(1, 4)],
        {**ENVELOPES["openai"], "choices": [_choice("Well. I can't.")], "usage": _usage(1, 4, USAGE_OPENAI_DETAILS)},
        id="refusal-is-text",
    ),
    pytest.param(
        "vllm",
        {"n": 2},
        STOPPED,
        {
            **ENVELOPES["vllm"],
            "choices": [_choice("one", stop_reason="\n"), _choice("x", 1, stop_reason=None)],
            "usage": _usage(2, 2, USAGE_NULL_DETAILS),
        },
        id="vllm-stop-reason",
    ),
    pytest.param(
        "vllm",
        {"prompt_logprobs": 1},
        PROMPT_LP,
        {
            **ENVELOPES["vllm"],
            "choices": [
                _choice(
                    "ok",
                    finish="length",
                    stop_reason=None,
                    prompt_logprobs=[
                        None,
                        {
                            "4": {"logprob": -0.75, "rank": 2, "decoded_token": "ay"},
                            "1": {"logprob": -0.5, "rank": 1, "decoded_token": "Sa"},
                        },
                    ],
                )
            ],
            "usage": _usage(2, 1, USAGE_NULL_DETAILS),
        },
        id="vllm-prompt-logprobs",
    ),
    pytest.param(
        "together",
        {},
        HELLO,
        {**ENVELOPES["together"], "choices": [_choice("Hello world", finish="eos")], "usage": _usage(2, 2)},
        id="together-eos",
    ),
    pytest.param(
        "nebius",
        {},
        HELLO,
        {**ENVELOPES["nebius"], "choices": [_choice("Hello world")], "usage": _usage(2, 2)},
        id="nebius-service-tier",
    ),
    pytest.param(
        "nebul",
        {},
        HELLO,
        {
            **ENVELOPES["nebul"],
            "choices": [_choice("Hello world", stop_reason=None)],
            "usage": _usage(2, 2, USAGE_NULL_DETAILS),
        },
        id="nebul-null-details",
    ),
    pytest.param(
        "openai",
        {},
        [Started(0), Finished(0, "length")],
        {**ENVELOPES["openai"], "choices": [_choice("", finish="length")], "usage": _usage(0, 0, USAGE_OPENAI_DETAILS)},
        id="empty-no-usage-event",
    ),
]


@pytest.mark.parametrize(("profile", "fields", "events", "expected"), ENCODE_ROWS)
def test_encode(profile: str, fields: dict[str, Any], events: list[Event], expected: dict[str, Any]) -> None:
    body = CODEC.encode(_call(profile, fields), _fold(events))
    assert body == expected
    assert list(body) == list(expected)  # the keys in the order the wire has them


# ---- encode_event / encode_end: the stream -------------------------------------------------


def _stream(call: Call, events: list[Event]) -> tuple[list[Frame], Result]:
    """The frames the codec makes of each event, folding first, as the handler does."""
    result, frames = Result(), []
    for event in events:
        result.apply(event)
        frames += CODEC.encode_event(call, event, result)
    frames += CODEC.encode_end(call, result)
    return frames, result


def _as_json(frame: Frame) -> dict[str, Any]:
    return frame.to_json() if isinstance(frame, Chunk) else frame


def _frame(choice: dict[str, Any], envelope: dict[str, Any] = ENVELOPES["openai"]) -> dict[str, Any]:
    return {**envelope, "choices": [choice]}


STREAM_ROWS = [
    pytest.param(
        "openai",
        {},
        False,
        HELLO,
        [_frame(_choice("Hello", finish=None)), _frame(_choice(" world", finish=None)), _frame(_choice(""))],
        id="text-no-role-chunk",
    ),
    pytest.param(
        "openai",
        {},
        True,
        HELLO,
        [
            {**_frame(_choice("Hello", finish=None)), "usage": None},
            {**_frame(_choice(" world", finish=None)), "usage": None},
            {**_frame(_choice("")), "usage": None},
            {**ENVELOPES["openai"], "choices": [], "usage": _usage(2, 2, USAGE_OPENAI_DETAILS)},
        ],
        id="include-usage",
    ),
    pytest.param(
        "openai",
        {"logprobs": 1},
        False,
        LOGPROBS,
        [
            _frame(
                _choice(
                    "Hi",
                    finish=None,
                    lp={
                        "tokens": ["Hi"],
                        "token_logprobs": [-0.5],
                        "top_logprobs": [{"Hi": -0.5, "Yo": -1.0}],
                        "text_offset": [0],
                    },
                )
            ),
            _frame(
                _choice(
                    " you",
                    finish=None,
                    lp={
                        "tokens": [" you"],
                        "token_logprobs": [-0.25],
                        "top_logprobs": [{" me": -0.2, " you": -0.25}],
                        "text_offset": [2],
                    },
                )
            ),
            _frame(_choice("", finish="length")),
        ],
        id="logprobs-offsets-run-on",
    ),
    pytest.param(
        "openai",
        {},
        False,
        [Started(0), Refusal(0, "No."), Finished(0, "stop")],
        [_frame(_choice("No.", finish=None)), _frame(_choice(""))],
        id="refusal-as-text",
    ),
    pytest.param(
        "vllm",
        {"n": 2},
        False,
        STOPPED,
        [
            _frame(_choice("one", finish=None, stop_reason=None), ENVELOPES["vllm"]),
            _frame(_choice("", stop_reason="\n"), ENVELOPES["vllm"]),
            _frame(_choice("x", 1, finish=None, stop_reason=None), ENVELOPES["vllm"]),
            _frame(_choice("", 1, stop_reason=None), ENVELOPES["vllm"]),
        ],
        id="vllm-stop-reason",
    ),
    pytest.param(
        "together",
        {},
        False,
        HELLO,
        [
            _frame(_choice("Hello", finish=None), HEAD),
            _frame(_choice(" world", finish=None), HEAD),
            _frame(_choice("", finish="eos"), HEAD),
        ],
        id="together-eos",
    ),
]


@pytest.mark.parametrize(("profile", "fields", "include_usage", "events", "expected"), STREAM_ROWS)
def test_stream_frames(
    profile: str, fields: dict[str, Any], include_usage: bool, events: list[Event], expected: list[dict[str, Any]]
) -> None:
    frames, _ = _stream(_call(profile, fields, include_usage), events)
    assert [_as_json(f) for f in frames] == expected


FAST_ROWS = [
    *[pytest.param(*row.values[:2], False, row.values[3], id=row.id) for row in STREAM_ROWS],
    *[pytest.param(*row.values[:2], True, row.values[3], id=f"{row.id}-usage") for row in STREAM_ROWS],
    pytest.param("nebius", {}, True, HELLO, id="nebius-usage"),
    pytest.param("openai", {"prompt": ["p", "q"], "n": 2}, True, FOUR, id="four-choices"),
]


@pytest.mark.parametrize(("profile", "fields", "include_usage", "events"), FAST_ROWS)
def test_chunk_bytes_are_its_object(
    profile: str, fields: dict[str, Any], include_usage: bool, events: list[Event]
) -> None:
    frames, _ = _stream(_call(profile, fields, include_usage), events)
    chunks = [f for f in frames if isinstance(f, Chunk)]
    assert len(chunks) == len(frames) - include_usage  # every frame but the usage chunk
    for chunk in chunks:
        assert chunk.json_bytes() == dumps(chunk.to_json())
        assert json.loads(chunk.json_bytes()) == chunk.to_json()


# ---- stream and non-stream agree -----------------------------------------------------------

FINISH_FIELDS = ("finish_reason", "stop_reason")


def _client_fold(frames: list[Frame]) -> dict[str, Any]:
    """What a client makes of a stream: text joined per index, logprobs lists concatenated,
    the last finish fields, and the usage chunk's usage."""
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for frame in frames:
        chunk = _as_json(frame)
        if chunk.get("usage") is not None:
            usage = chunk["usage"]
        for c in chunk["choices"]:
            s = choices.setdefault(c["index"], {"text": "", "logprobs": None})
            s["text"] += c["text"]
            if c["logprobs"] is not None:
                lp = s["logprobs"] or {k: [] for k in c["logprobs"]}
                for k, v in c["logprobs"].items():
                    lp[k] += v
                s["logprobs"] = lp
            s["finish"] = {k: c[k] for k in FINISH_FIELDS if k in c}
    return {"choices": choices, "usage": usage}


def _body_view(body: dict[str, Any]) -> dict[str, Any]:
    choices = {
        c["index"]: {"text": c["text"], "logprobs": c["logprobs"], "finish": {k: c[k] for k in FINISH_FIELDS if k in c}}
        for c in body["choices"]
    }
    return {"choices": choices, "usage": body["usage"]}


AGREE_ROWS = [pytest.param(*row.values[:3], id=row.id) for row in ENCODE_ROWS if "prompt-logprobs" not in str(row.id)]
AGREE_ROWS += [
    pytest.param("vllm", {}, PROMPT_LP[1:], id="vllm-length"),
    pytest.param("openai", {"logprobs": 2, "n": 2}, [*LOGPROBS[:3], *FOUR[5:8:2]], id="mixed-choices"),
]


@pytest.mark.parametrize(("profile", "fields", "events"), AGREE_ROWS)
def test_stream_agrees_with_body(profile: str, fields: dict[str, Any], events: list[Event]) -> None:
    call = _call(profile, fields, include_usage=True)
    frames, result = _stream(call, events)
    assert _client_fold(frames) == _body_view(CODEC.encode(call, _fold(events)))
    assert CODEC.encode(call, result) == CODEC.encode(call, _fold(events))  # the stream's own fold is the same
