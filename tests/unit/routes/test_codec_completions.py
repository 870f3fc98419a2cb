"""The completions codec as pure functions: a body becomes a GenerationRequest, and folded
events become the body and the stream chunks — with no server, no HTTP and no model."""

from __future__ import annotations

from typing import Any

import pytest

from mockserver.context import Options
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.profiles import Models, profile_named
from mockserver.routes.codec import Call, ChunkFrame
from mockserver.routes.completions import CODEC
from mockserver.schemas.completions import CompletionRequest
from mockserver.spine.events import (
    Event,
    Finished,
    PromptLogprobs,
    PromptPosition,
    Refusal,
    Scored,
    Started,
    TextDelta,
    Usage,
)
from mockserver.spine.request import GenerationRequest, JsonFormat, Origin, Prompt, Sampling, Source
from tests.support.codecs import (
    as_json,
    assert_chunk_bytes_are_objects,
    assert_encodes,
    copied_origin,
    fast_rows,
    fold,
    generation,
    head,
    make_call,
    png_url,
    refusal,
    stream,
    streamed_choices,
    streamed_usage,
    tok,
    wire_usage,
)

MODEL = "gpt-3.5-turbo-instruct"


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
    return generation("completions", model, prompts, sampling, **fields)


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
            {"prompt": ["a", "b"], "images": [png_url(1, 1), png_url(600, 600)]},
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
    assert copied_origin(CODEC, _body({}), origin) == (
        5,
        b"c",
        Source(surface=source.surface, session=source.session),  # what a backend reads of it
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
            # gpt-3.5-turbo-instruct reads cl100k ids: up to 100,277 (mockserver.gpt.vocabularies)
            {"logit_bias": {"100277": 1}},
            "openai",
            Options(vocab_size=10),
            InvalidRequest,
            "logit_bias",
            id="bias-vocab",
        ),
        pytest.param(
            {"stop_token_ids": [-1]}, "vllm", Options(), InvalidRequest, "stop_token_ids", id="stop-token-negative"
        ),
        pytest.param(
            {"model": "m", "stop_token_ids": [10]},
            "vllm",
            Options(vocab_size=10),
            InvalidRequest,
            "stop_token_ids",
            id="stop-vocab",
        ),
        pytest.param({"n": 2, "best_of": 1}, "openai", Options(), InvalidRequest, "best_of", id="best-of-below-n"),
        pytest.param(
            {"best_of": 3, "n": 2, "stream": True}, "openai", Options(), InvalidRequest, "best_of", id="best-of-stream"
        ),
        pytest.param(
            {"images": ["data:text/plain;base64,AAAA"]}, "fireworks", Options(), InvalidRequest, "images[0]", id="image"
        ),
        pytest.param(
            {"images": [png_url(1, 1), "data:image/png;base64,AAAA"]},
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
    assert refusal(CODEC, _body(fields), profile, options, error).param == param


# ---- encode: the non-streamed body ----------------------------------------------------------

HEAD = head("cmpl-test", "text_completion", MODEL)
ENVELOPES: dict[str, dict[str, Any]] = {
    # OpenAI documents no service_tier on completions: the field is absent.
    "openai": {**HEAD, "system_fingerprint": "fp_mockserver"},
    "vllm": {**HEAD, "system_fingerprint": None},
    "together": HEAD,
    "nebius": {**HEAD, "service_tier": "auto"},
    "nebul": HEAD,
}


def _call(profile: str, fields: dict[str, Any], include_usage: bool = False) -> Call:
    return make_call(CODEC, _body(fields), profile, "cmpl-test", include_usage)


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
    TextDelta(0, "Hi", (tok("Hi", -0.5, ("Hi", -0.5), ("Yo", -1.0)),)),
    TextDelta(0, " you", (tok(" you", -0.25, (" me", -0.2)),)),
    Finished(0, "length"),
    Usage(1, 2),
]
ECHO: list[Event] = [
    Started(0),
    TextDelta(0, "Say", (tok("Say", None),), echo=True),
    TextDelta(0, "!", (tok("!", -0.5, ("!", -0.5)),)),
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
        {**ENVELOPES["openai"], "choices": [_choice("Hello world")], "usage": wire_usage("openai", 2, 2)},
        id="text",
    ),
    pytest.param(
        "openai",
        {"prompt": ["p", "q"], "n": 2},
        FOUR,
        {
            **ENVELOPES["openai"],
            "choices": [_choice("a", 0), _choice("b", 1, "length"), _choice("c", 2), _choice("d", 3, "length")],
            "usage": wire_usage("openai", 4, 4),
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
            "usage": wire_usage("openai", 1, 2),
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
            "usage": wire_usage("openai", 1, 1),
        },
        id="echo-first-token-unscored",
    ),
    pytest.param(
        "openai",
        {},
        [Started(0), TextDelta(0, "Well. "), Refusal(0, "I can't."), Finished(0, "stop"), Usage(1, 4)],
        {**ENVELOPES["openai"], "choices": [_choice("Well. I can't.")], "usage": wire_usage("openai", 1, 4)},
        id="refusal-is-text",
    ),
    pytest.param(
        "vllm",
        {"n": 2},
        STOPPED,
        {
            **ENVELOPES["vllm"],
            "choices": [_choice("one", stop_reason="\n"), _choice("x", 1, stop_reason=None)],
            "usage": wire_usage("null", 2, 2),
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
            "usage": wire_usage("null", 2, 1),
        },
        id="vllm-prompt-logprobs",
    ),
    pytest.param(
        "together",
        {},
        HELLO,
        {**ENVELOPES["together"], "choices": [_choice("Hello world", finish="eos")], "usage": wire_usage("none", 2, 2)},
        id="together-eos",
    ),
    pytest.param(
        "nebius",
        {},
        HELLO,
        {**ENVELOPES["nebius"], "choices": [_choice("Hello world")], "usage": wire_usage("none", 2, 2)},
        id="nebius-service-tier",
    ),
    pytest.param(
        "nebul",
        {},
        HELLO,
        {
            **ENVELOPES["nebul"],
            "choices": [_choice("Hello world", stop_reason=None)],
            "usage": wire_usage("null", 2, 2),
        },
        id="nebul-null-details",
    ),
    pytest.param(
        "openai",
        {},
        [Started(0), Finished(0, "length")],
        {**ENVELOPES["openai"], "choices": [_choice("", finish="length")], "usage": wire_usage("openai", 0, 0)},
        id="empty-no-usage-event",
    ),
]


@pytest.mark.parametrize(("profile", "fields", "events", "expected"), ENCODE_ROWS)
def test_encode(profile: str, fields: dict[str, Any], events: list[Event], expected: dict[str, Any]) -> None:
    assert_encodes(CODEC, _call(profile, fields), events, expected)


# ---- encode_event / encode_end: the stream -------------------------------------------------


def _frame(choice: dict[str, Any], envelope: dict[str, Any] = ENVELOPES["openai"]) -> dict[str, Any]:
    return {**envelope, "choices": [choice]}


def _token_lp(token: str, logprob: float, top: dict[str, float], offset: int) -> dict[str, Any]:
    """The legacy ``logprobs`` of a chunk of one token."""
    return {"tokens": [token], "token_logprobs": [logprob], "top_logprobs": [top], "text_offset": [offset]}


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
            {**ENVELOPES["openai"], "choices": [], "usage": wire_usage("openai", 2, 2)},
        ],
        id="include-usage",
    ),
    pytest.param(
        "openai",
        {"logprobs": 1},
        False,
        LOGPROBS,
        [
            _frame(_choice("Hi", finish=None, lp=_token_lp("Hi", -0.5, {"Hi": -0.5, "Yo": -1.0}, 0))),
            _frame(_choice(" you", finish=None, lp=_token_lp(" you", -0.25, {" me": -0.2, " you": -0.25}, 2))),
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
    frames, _ = stream(CODEC, _call(profile, fields, include_usage), events)
    assert [as_json(f) for f in frames] == expected


FAST_ROWS = [
    *fast_rows(STREAM_ROWS),
    pytest.param("nebius", {}, True, HELLO, id="nebius-usage"),
    pytest.param("openai", {"prompt": ["p", "q"], "n": 2}, True, FOUR, id="four-choices"),
]


@pytest.mark.parametrize(("profile", "fields", "include_usage", "events"), FAST_ROWS)
def test_chunk_bytes_are_its_object(
    profile: str, fields: dict[str, Any], include_usage: bool, events: list[Event]
) -> None:
    frames, _ = stream(CODEC, _call(profile, fields, include_usage), events)
    assert_chunk_bytes_are_objects(frames, include_usage)


# ---- stream and non-stream agree -----------------------------------------------------------

FINISH_FIELDS = ("finish_reason", "stop_reason")


def _client_fold(frames: list[ChunkFrame]) -> dict[str, Any]:
    """What a client makes of a stream: text joined per index, logprobs lists concatenated,
    the last finish fields, and the usage chunk's usage."""
    choices: dict[int, dict[str, Any]] = {}
    for c in streamed_choices(frames):
        s = choices.setdefault(c["index"], {"text": "", "logprobs": None})
        s["text"] += c["text"]
        if c["logprobs"] is not None:
            lp = s["logprobs"] or {k: [] for k in c["logprobs"]}
            for k, v in c["logprobs"].items():
                lp[k] += v
            s["logprobs"] = lp
        s["finish"] = {k: c[k] for k in FINISH_FIELDS if k in c}
    return {"choices": choices, "usage": streamed_usage(frames)}


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
    frames, result = stream(CODEC, call, events)
    assert _client_fold(frames) == _body_view(CODEC.encode(call, fold(events)))
    assert CODEC.encode(call, result) == CODEC.encode(call, fold(events))  # the stream's own fold is the same
