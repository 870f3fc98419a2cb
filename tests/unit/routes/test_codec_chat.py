"""The chat codec as pure functions: a body becomes a GenerationRequest, and folded events
become the body and the stream chunks — with no server, no HTTP and no model."""

from __future__ import annotations

from typing import Any

import pytest

from mockserver.context import Options
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.profiles import Models, profile_named
from mockserver.routes.chat import CODEC
from mockserver.routes.codec import Call, ChunkFrame
from mockserver.schemas.chat import ChatRequest
from mockserver.spine.events import (
    Event,
    Finished,
    PromptLogprobs,
    PromptPosition,
    Reasoning,
    Refusal,
    Scored,
    Started,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from mockserver.spine.request import (
    ChatMessage,
    ForcedCall,
    GenerationRequest,
    JsonFormat,
    Mirostat,
    Origin,
    Prompt,
    Sampling,
    Source,
    Tool,
)
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

MODEL = "gpt-4o-mini"
PNG = png_url(1, 1)  # high/auto detail: one tile, 170 + 85 = 255 tokens; low: 85


def _body(fields: dict[str, Any]) -> ChatRequest:
    return ChatRequest.model_validate({"model": MODEL, "messages": [{"role": "user", "content": "hi"}], **fields})


CHAT_SAMPLING = Sampling(max_tokens=None)  # chat's defaults on OpenAI: max_tokens unset fills the context


def _gen(
    *,
    model: str = MODEL,
    messages: tuple[ChatMessage, ...] = (ChatMessage("user", "hi"),),
    sampling: Sampling = CHAT_SAMPLING,
    **fields: Any,
) -> GenerationRequest:
    return generation("chat", model, (Prompt(messages=messages),), sampling, **fields)


WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "description": "Weather now", "parameters": WEATHER_SCHEMA},
}
STRICT_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "string"}},
    "required": ["a"],
    "additionalProperties": False,
}

# ---- to_generation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "profile", "options", "expected"),
    [
        pytest.param({}, "openai", Options(), _gen(), id="bare-openai"),
        pytest.param(
            {},
            "fireworks",
            Options(),
            _gen(sampling=Sampling(max_tokens=2000, keep_stop=True, truncate=True)),
            id="bare-fireworks-defaults",
        ),
        pytest.param({}, "vllm", Options(), _gen(), id="bare-vllm"),
        pytest.param({"max_tokens": 5}, "openai", Options(), _gen(sampling=Sampling(max_tokens=5)), id="max-tokens"),
        pytest.param(
            {"max_tokens": 5, "max_completion_tokens": 7},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=7)),
            id="max-completion-tokens-wins",
        ),
        pytest.param(
            {
                "temperature": 0.5,
                "top_p": 0.9,
                "top_k": 40,
                "min_p": 0.05,
                "presence_penalty": 0.5,
                "frequency_penalty": -0.5,
                "repetition_penalty": 1.2,
                "stop": ["\n", "END"],
            },
            "openai",
            Options(),
            _gen(
                sampling=Sampling(
                    max_tokens=None,
                    temperature=0.5,
                    top_p=0.9,
                    top_k=40,
                    min_p=0.05,
                    presence_penalty=0.5,
                    frequency_penalty=-0.5,
                    repetition_penalty=1.2,
                    stop=("\n", "END"),
                )
            ),
            id="sampling-fields",
        ),
        pytest.param(
            {"stop": "END"}, "openai", Options(), _gen(sampling=Sampling(max_tokens=None, stop=("END",))), id="stop-str"
        ),
        pytest.param(
            {"temperature": 1e-9, "top_k": -1},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, temperature=0.0, top_k=0)),
            id="vanishing-temperature-is-greedy",
        ),
        pytest.param(
            {"mirostat_target": 3.0},
            "fireworks",
            Options(),
            _gen(sampling=Sampling(max_tokens=2000, keep_stop=True, truncate=True, mirostat=Mirostat(3.0, 0.1))),
            id="mirostat",
        ),
        pytest.param(
            {"context_length_exceeded_behavior": "error", "include_stop_str_in_output": False},
            "fireworks",
            Options(),
            _gen(sampling=Sampling(max_tokens=2000)),
            id="fireworks-defaults-overridden",
        ),
        pytest.param(
            {
                "min_tokens": 2,
                "ignore_eos": True,
                "stop_token_ids": [7, 3],
                "include_stop_str_in_output": True,
                "logit_bias": {"9": -100, "2": 5},
                "truncate_prompt_tokens": 4,
                "prompt_logprobs": 1,
            },
            "vllm",
            Options(vocab_size=100),
            _gen(
                sampling=Sampling(
                    max_tokens=None,
                    min_tokens=2,
                    ignore_eos=True,
                    stop_token_ids=(7, 3),
                    keep_stop=True,
                    logit_bias=((2, 5.0), (9, -100.0)),
                    keep_prompt_tokens=4,
                    prompt_logprobs=1,
                )
            ),
            id="vllm-extras",
        ),
        pytest.param(
            {"logprobs": True, "top_logprobs": 3},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, logprobs=3)),
            id="logprobs-true-top-3",
        ),
        pytest.param(
            {"logprobs": True},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, logprobs=0)),
            id="logprobs-true",
        ),
        pytest.param({"logprobs": False}, "openai", Options(), _gen(), id="logprobs-false"),
        pytest.param(
            {"logprobs": 2},
            "together",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, logprobs=2)),
            id="logprobs-int-together",
        ),
        pytest.param(
            {"logprobs": 2},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, logprobs=2)),
            id="logprobs-int-lenient",
        ),
        pytest.param({"n": 2, "best_of": 3}, "openai", Options(), _gen(n=2, best_of=3), id="n-and-best-of"),
        pytest.param({"stream": True}, "openai", Options(), _gen(stream=True), id="stream"),
        pytest.param(
            {
                "messages": [
                    {"role": "system", "content": "Be brief."},
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "What is "},
                            {"type": "image_url", "image_url": {"url": PNG}},
                            {"type": "text", "text": "this?"},
                            {"type": "image_url", "image_url": {"url": PNG, "detail": "low"}},
                        ],
                    },
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}],
                    },
                    {"role": "tool", "tool_call_id": "c1", "content": "42"},
                ]
            },
            "openai",
            Options(),
            _gen(
                messages=(
                    ChatMessage("system", "Be brief."),
                    ChatMessage("user", "What is this?", 255 + 85),
                    ChatMessage(
                        "assistant",
                        '[{"function":{"arguments":"{}","name":"f"},"id":"c1","type":"function"}]',
                        calls=(ForcedCall("f", "{}", "c1"),),
                    ),
                    ChatMessage("tool", "42", call_id="c1"),
                )
            ),
            id="messages-images-and-calls",
        ),
        pytest.param(
            {
                "tools": [WEATHER],
                "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
                "parallel_tool_calls": False,
            },
            "openai",
            Options(),
            _gen(
                tools=(Tool("get_weather", "Weather now", WEATHER_SCHEMA),),
                tool_choice="required",
                tool_name="get_weather",
                parallel_tool_calls=False,
            ),
            id="tools-named-choice",
        ),
        pytest.param(
            {"tools": [WEATHER]},
            "openai",
            Options(),
            _gen(tools=(Tool("get_weather", "Weather now", WEATHER_SCHEMA),)),
            id="tools-auto",
        ),
        pytest.param(
            {
                "tools": [WEATHER, {"type": "function", "function": {"name": "now", "strict": True}}],
                "tool_choice": "none",
            },
            "openai",
            Options(),
            _gen(
                tools=(Tool("get_weather", "Weather now", WEATHER_SCHEMA), Tool("now", strict=True)), tool_choice="none"
            ),
            id="tools-none",
        ),
        pytest.param(
            {"tools": [WEATHER], "tool_choice": "required"},
            "openai",
            Options(),
            _gen(tools=(Tool("get_weather", "Weather now", WEATHER_SCHEMA),), tool_choice="required"),
            id="tools-required",
        ),
        pytest.param(
            {"functions": [{"name": "f"}, {"name": "g"}], "function_call": {"name": "g"}},
            "openai",
            Options(),
            _gen(tools=(Tool("f"), Tool("g")), tool_choice="required", tool_name="g", parallel_tool_calls=False),
            id="legacy-functions-named",
        ),
        pytest.param(
            {"functions": [{"name": "f"}]},
            "openai",
            Options(),
            _gen(tools=(Tool("f"),), parallel_tool_calls=False),
            id="legacy-functions-auto",
        ),
        pytest.param(
            {"response_format": {"type": "json_object"}},
            "openai",
            Options(),
            _gen(response_format=JsonFormat()),
            id="json-object",
        ),
        pytest.param(
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": STRICT_SCHEMA, "strict": True},
                }
            },
            "openai",
            Options(),
            _gen(response_format=JsonFormat(STRICT_SCHEMA, "answer", True)),
            id="json-schema-strict",
        ),
        pytest.param(
            {"response_format": {"type": "json_schema", "json_schema": {"name": "loose"}}},
            "openai",
            Options(),
            _gen(response_format=JsonFormat({"type": "object"}, "loose", False)),
            id="json-schema-without-schema",
        ),
        pytest.param({"response_format": {"type": "text"}}, "openai", Options(), _gen(), id="format-text"),
        pytest.param(
            {"model": "o3-mini", "reasoning_effort": "low"},
            "openai",
            Options(),
            _gen(model="o3-mini", think=16),
            id="o3-mini-effort-low",
        ),
        pytest.param({"model": "o3-mini"}, "openai", Options(), _gen(model="o3-mini", think=32), id="o3-mini-medium"),
        pytest.param(
            {"model": "my-thinker", "reasoning_effort": "high"},
            "openai",
            Options(reasoning_models=("my-*",)),
            _gen(model="my-thinker", think=64),
            id="reasoning-models-option",
        ),
        pytest.param(
            {"model": "m"},
            "openai",
            Options(models=Models({"m": 100})),
            _gen(model="m", context_window=100),
            id="window",
        ),
        pytest.param(
            {"model": "other"},
            "openai",
            Options(models=Models({"m": 100}, default_window=4096)),
            _gen(model="other", context_window=4096),
            id="window-unlisted",
        ),
    ],
)
def test_to_generation(fields: dict[str, Any], profile: str, options: Options, expected: GenerationRequest) -> None:
    assert CODEC.to_generation(_body(fields), profile_named(profile), options, Origin()) == expected


def test_to_generation_copies_the_origin() -> None:
    source = Source(surface="chat", session="worker-1", target="/v1/chat/completions", body=b"{}", stream=True)
    origin = Origin(seed=1234, canonical=b'{"canonical":1}', source=source, content_faults=frozenset({"content.x"}))
    assert copied_origin(CODEC, _body({"seed": 99}), origin) == (
        1234,
        b'{"canonical":1}',
        Source(surface=source.surface, session=source.session),  # what a backend reads of it
        frozenset({"content.x"}),
    )


@pytest.mark.parametrize(
    ("fields", "profile", "options", "error", "param"),
    [
        pytest.param(
            {"top_logprobs": 3}, "openai", Options(), InvalidRequest, "top_logprobs", id="top-without-logprobs"
        ),
        pytest.param(
            {"logprobs": False, "top_logprobs": 3}, "openai", Options(), InvalidRequest, "top_logprobs", id="top-false"
        ),
        pytest.param(
            {"logprobs": True, "top_logprobs": 21}, "openai", Options(), InvalidRequest, "top_logprobs", id="top-limit"
        ),
        pytest.param({"logprobs": 2}, "openai", Options(strict=True), InvalidRequest, "logprobs", id="strict-int"),
        pytest.param({"logprobs": -1}, "together", Options(), InvalidRequest, "logprobs", id="negative-int"),
        pytest.param(
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "openai",
            Options(),
            InvalidRequest,
            "tool_choice",
            id="unknown-tool",
        ),
        pytest.param({"tool_choice": "auto"}, "openai", Options(), InvalidRequest, "tool_choice", id="choice-no-tools"),
        pytest.param(
            {"functions": [{"name": "f"}], "function_call": {"name": "g"}},
            "openai",
            Options(),
            InvalidRequest,
            "function_call",
            id="unknown-function",
        ),
        pytest.param(
            {"tools": [WEATHER], "functions": [{"name": "f"}]},
            "openai",
            Options(),
            InvalidRequest,
            "functions",
            id="both",
        ),
        pytest.param(
            {"tools": [WEATHER, WEATHER]}, "openai", Options(), InvalidRequest, "tools[1].function.name", id="dup-tool"
        ),
        pytest.param(
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "nope"}}}]},
            "openai",
            Options(),
            InvalidRequest,
            "tools[0].function.parameters",
            id="bad-parameters",
        ),
        pytest.param(
            {"response_format": {"type": "json_schema"}},
            "openai",
            Options(),
            InvalidRequest,
            "response_format.json_schema",
            id="json-schema-missing",
        ),
        pytest.param(
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "strict": True, "schema": WEATHER_SCHEMA},
                }
            },
            "openai",
            Options(),
            InvalidRequest,
            "response_format.json_schema.schema",
            id="json-schema-not-strict-enough",
        ),
        pytest.param(
            {"min_tokens": 10, "max_tokens": 5}, "vllm", Options(), InvalidRequest, "min_tokens", id="min>max"
        ),
        pytest.param(
            # gpt-4o-mini reads o200k ids: up to 200,019 (mockserver.gpt.vocabularies)
            {"logit_bias": {"200019": 1}},
            "openai",
            Options(vocab_size=100),
            InvalidRequest,
            "logit_bias",
            id="bias-vocab",
        ),
        pytest.param({"logit_bias": {"5": 101}}, "openai", Options(), InvalidRequest, "logit_bias", id="bias-range"),
        pytest.param({"logit_bias": {"x": 1}}, "openai", Options(), InvalidRequest, "logit_bias", id="bias-key"),
        pytest.param(
            {"stop_token_ids": [5, 200019]},
            "vllm",
            Options(vocab_size=100),
            InvalidRequest,
            "stop_token_ids",
            id="stop-token-vocab",
        ),
        pytest.param({"top_k": 101}, "fireworks", Options(), InvalidRequest, "top_k", id="profile-limit"),
        pytest.param({"n": 3, "best_of": 2}, "openai", Options(), InvalidRequest, "best_of", id="best-of-below-n"),
        pytest.param(
            {"best_of": 2, "stream": True}, "openai", Options(), InvalidRequest, "best_of", id="best-of-stream"
        ),
        pytest.param(
            {"prompt_logprobs": 1, "stream": True}, "vllm", Options(), InvalidRequest, "prompt_logprobs", id="prompt-lp"
        ),
        pytest.param(
            {"reasoning_effort": "low"},
            "openai",
            Options(),
            InvalidRequest,
            "reasoning_effort",
            id="effort-no-reasoner",
        ),
        pytest.param(
            {"model": "o3-mini", "reasoning_effort": "extreme"},
            "openai",
            Options(),
            InvalidRequest,
            "reasoning_effort",
            id="effort-unknown",
        ),
        pytest.param(
            {
                "messages": [
                    {"role": "user", "content": [{"type": "image_url", "image_url": {"url": PNG, "detail": "x"}}]}
                ]
            },
            "openai",
            Options(),
            InvalidRequest,
            "messages[0].content[0].image_url.detail",
            id="image-detail",
        ),
        pytest.param(
            {
                "messages": [
                    {"role": "user", "content": "a"},
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}],
                    },
                ]
            },
            "openai",
            Options(),
            InvalidRequest,
            "messages[1].content[0].image_url",
            id="image-not-an-image",
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

HEAD = head("chatcmpl-test", "chat.completion", MODEL)
ENVELOPES: dict[str, dict[str, Any]] = {
    "openai": {**HEAD, "system_fingerprint": "fp_mockserver", "service_tier": "default"},
    "vllm": {**HEAD, "system_fingerprint": None},
    "fireworks": HEAD,
    "together": HEAD,
    "nebius": {**HEAD, "service_tier": "auto"},
    "nebulablock": {**HEAD, "system_fingerprint": None, "service_tier": None, "prompt_logprobs": None},
}


def _message(content: str | None, refusal: str | None = None, **more: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": content, "refusal": refusal, "annotations": [], **more}


def _choice(
    message: dict[str, Any], finish: str = "stop", index: int = 0, lp: Any = None, **more: Any
) -> dict[str, Any]:
    """One choice of a body; ``more``: the profile's extra fields (vLLM's stop_reason)."""
    return {"index": index, "message": message, "logprobs": lp, "finish_reason": finish, **more}


def _call(profile: str, fields: dict[str, Any], include_usage: bool = False) -> Call:
    return make_call(CODEC, _body(fields), profile, "chatcmpl-test", include_usage)


def _lp(text: str, logprob: float, *top: tuple[str, float]) -> dict[str, Any]:
    """One entry of chat's ``logprobs.content``."""
    alternatives = [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top]
    return {"token": text, "logprob": logprob, "bytes": list(text.encode()), "top_logprobs": alternatives}


HELLO: list[Event] = [Started(0), TextDelta(0, "Hello"), TextDelta(0, " world"), Finished(0, "stop"), Usage(5, 2)]
CALLS: list[Event] = [
    Started(0),
    ToolCallDelta(0, 0, "call_1", "get_weather"),
    ToolCallDelta(0, 0, arguments='{"city":'),
    ToolCallDelta(0, 0, arguments='"Paris"}'),
    ToolCallDelta(0, 1, "call_2", "now", "{}"),
    Finished(0, "tool_calls"),
    Usage(9, 12),
]
LEGACY_CALL: list[Event] = [
    Started(0),
    ToolCallDelta(0, 0, "call_1", "f"),
    ToolCallDelta(0, 0, arguments='{"x":1}'),
    Finished(0, "tool_calls"),
    Usage(4, 6),
]
TWO: list[Event] = [
    Started(1),
    TextDelta(1, "B"),
    Started(0),
    TextDelta(0, "A"),
    TextDelta(1, "b"),
    Finished(1, "length"),
    Finished(0, "stop"),
    Usage(3, 3),
]
LOGPROB_EVENTS: list[Event] = [
    Started(0),
    TextDelta(0, "Hi", (tok("Hi", -0.25, ("Hi", -0.25), ("Hey", -1.5)),)),
    TextDelta(0, " there", (tok(" there", -0.5, (" there", -0.5), (" you", -2.0)),)),
    Finished(0, "stop"),
    Usage(2, 2),
]
THINKING: list[Event] = [
    Started(0),
    Reasoning(0, "Let me "),
    Reasoning(0, "think."),
    TextDelta(0, "4"),
    Finished(0, "stop"),
    Usage(3, 5, reasoning_tokens=4),
]
STOPPED: list[Event] = [
    Started(0),
    Started(1),
    TextDelta(0, "one"),
    Finished(0, "stop", "END"),
    TextDelta(1, "two"),
    Finished(1, "length"),
    Usage(4, 5),
]
PROMPT_LP: list[Event] = [
    PromptLogprobs(0, (None, PromptPosition(Scored(5, "hi", -1.0, 1), (Scored(6, "ho", -2.0, 2),)))),
    Started(0),
    TextDelta(0, "ok"),
    Finished(0, "stop", 7),
    Usage(2, 1),
]

ENCODE_ROWS = [
    pytest.param(
        "openai",
        {},
        HELLO,
        {**ENVELOPES["openai"], "choices": [_choice(_message("Hello world"))], "usage": wire_usage("openai", 5, 2)},
        id="text",
    ),
    pytest.param(
        "openai",
        {"n": 2},
        TWO,
        {
            **ENVELOPES["openai"],
            "choices": [_choice(_message("A")), _choice(_message("Bb"), "length", index=1)],
            "usage": wire_usage("openai", 3, 3),
        },
        id="two-choices-in-index-order",
    ),
    pytest.param(
        "openai",
        {"logprobs": True, "top_logprobs": 2},
        LOGPROB_EVENTS,
        {
            **ENVELOPES["openai"],
            "choices": [
                _choice(
                    _message("Hi there"),
                    lp={
                        "content": [
                            _lp("Hi", -0.25, ("Hi", -0.25), ("Hey", -1.5)),
                            _lp(" there", -0.5, (" there", -0.5), (" you", -2.0)),
                        ],
                        "refusal": None,
                    },
                )
            ],
            "usage": wire_usage("openai", 2, 2),
        },
        id="logprobs-content",
    ),
    pytest.param(
        "together",
        {"logprobs": 2},
        LOGPROB_EVENTS,
        {
            **ENVELOPES["together"],
            "choices": [
                _choice(
                    _message("Hi there"),
                    "eos",
                    lp={
                        "tokens": ["Hi", " there"],
                        "token_logprobs": [-0.25, -0.5],
                        "top_logprobs": [{"Hi": -0.25, "Hey": -1.5}, {" there": -0.5, " you": -2.0}],
                        "text_offset": [0, 2],
                    },
                )
            ],
            "usage": wire_usage("none", 2, 2),
        },
        id="together-integer-logprobs-legacy-and-eos",
    ),
    pytest.param(
        "openai",
        {"tools": [WEATHER, {"type": "function", "function": {"name": "now"}}]},
        CALLS,
        {
            **ENVELOPES["openai"],
            "choices": [
                _choice(
                    _message(
                        None,
                        tool_calls=[
                            {
                                "id": "call_1",
                                "type": "function",
                                "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                            },
                            {"id": "call_2", "type": "function", "function": {"name": "now", "arguments": "{}"}},
                        ],
                    ),
                    "tool_calls",
                )
            ],
            "usage": wire_usage("openai", 9, 12),
        },
        id="tool-calls",
    ),
    pytest.param(
        "openai",
        {"functions": [{"name": "f"}]},
        LEGACY_CALL,
        {
            **ENVELOPES["openai"],
            "choices": [_choice(_message(None, function_call={"name": "f", "arguments": '{"x":1}'}), "function_call")],
            "usage": wire_usage("openai", 4, 6),
        },
        id="legacy-function-call",
    ),
    pytest.param(
        "openai",
        {},
        [Started(0), Refusal(0, "I can't "), Refusal(0, "help."), Finished(0, "stop"), Usage(2, 3)],
        {
            **ENVELOPES["openai"],
            "choices": [_choice(_message(None, "I can't help."))],
            "usage": wire_usage("openai", 2, 3),
        },
        id="refusal",
    ),
    pytest.param(
        "fireworks",
        {},
        THINKING,
        {
            **ENVELOPES["fireworks"],
            "choices": [_choice(_message("4", reasoning_content="Let me think."))],
            "usage": wire_usage("none", 3, 5),
        },
        id="reasoning-fireworks",
    ),
    pytest.param(
        "together",
        {},
        THINKING,
        {
            **ENVELOPES["together"],
            "choices": [_choice(_message("4", reasoning="Let me think."), "eos")],
            "usage": wire_usage("none", 3, 5),
        },
        id="reasoning-together",
    ),
    pytest.param(
        "openai",
        {},
        THINKING,
        {**ENVELOPES["openai"], "choices": [_choice(_message("4"))], "usage": wire_usage("openai", 3, 5, reasoning=4)},
        id="reasoning-openai-only-counted",
    ),
    pytest.param(
        "vllm",
        {"n": 2},
        STOPPED,
        {
            **ENVELOPES["vllm"],
            "choices": [
                _choice(_message("one"), stop_reason="END"),
                _choice(_message("two"), "length", index=1, stop_reason=None),
            ],
            "usage": wire_usage("null", 4, 5),
        },
        id="vllm-stop-reason",
    ),
    pytest.param(
        "vllm",
        {"prompt_logprobs": 1},
        PROMPT_LP,
        {
            **ENVELOPES["vllm"],
            "choices": [_choice(_message("ok"), stop_reason=7)],
            "usage": wire_usage("null", 2, 1),
            "prompt_logprobs": [
                None,
                {
                    "5": {"logprob": -1.0, "rank": 1, "decoded_token": "hi"},
                    "6": {"logprob": -2.0, "rank": 2, "decoded_token": "ho"},
                },
            ],
        },
        id="vllm-prompt-logprobs-and-stop-token",
    ),
    pytest.param(
        "nebius",
        {},
        HELLO,
        {**ENVELOPES["nebius"], "choices": [_choice(_message("Hello world"))], "usage": wire_usage("none", 5, 2)},
        id="nebius-service-tier",
    ),
    pytest.param(
        "nebulablock",
        {},
        HELLO,
        {
            **ENVELOPES["nebulablock"],
            "choices": [_choice(_message("Hello world"), stop_reason=None)],
            "usage": wire_usage("null", 5, 2),
        },
        id="nebulablock-null-extras",
    ),
    pytest.param(
        "openai",
        {"service_tier": "fast"},
        [Started(0), TextDelta(0, "x"), Finished(0, "length")],
        {
            **ENVELOPES["openai"],
            "service_tier": "priority",
            "choices": [_choice(_message("x"), "length")],
            "usage": wire_usage("openai", 0, 0),
        },
        id="tier-served-and-no-usage-event",
    ),
]


@pytest.mark.parametrize(("profile", "fields", "events", "expected"), ENCODE_ROWS)
def test_encode(profile: str, fields: dict[str, Any], events: list[Event], expected: dict[str, Any]) -> None:
    assert_encodes(CODEC, _call(profile, fields), events, _answered(profile, expected))


def _answered(profile: str, expected: dict[str, Any]) -> dict[str, Any]:
    """``expected`` with the ``model`` the profile answers the request's alias with (OpenAI's:
    the dated snapshot, ``gpt-4o-mini-2024-07-18``; the others echo it)."""
    return {**expected, "model": profile_named(profile).answered_model(expected["model"])}


# ---- encode_event / encode_end: the stream -------------------------------------------------


CHUNK_HEAD = head("chatcmpl-test", "chat.completion.chunk", MODEL)
CHUNK = {**CHUNK_HEAD, "system_fingerprint": "fp_mockserver", "service_tier": "default"}
VLLM_CHUNK = {**CHUNK_HEAD, "system_fingerprint": None}
ROLE = {"role": "assistant", "content": "", "refusal": None}


def _frame(delta: dict[str, Any], finish: str | None = None, index: int = 0, lp: Any = None) -> dict[str, Any]:
    return {**CHUNK, "choices": [{"index": index, "delta": delta, "logprobs": lp, "finish_reason": finish}]}


# vLLM streams: (choice, delta, finish fields) of each chunk, stop_reason on every one.
# Each choice's role delta goes with its first content (see mockserver.routes.chat).
VLLM_STEPS: list[tuple[int, dict[str, Any], dict[str, Any]]] = [
    (0, ROLE, {"finish_reason": None, "stop_reason": None}),
    (0, {"content": "one"}, {"finish_reason": None, "stop_reason": None}),
    (0, {}, {"finish_reason": "stop", "stop_reason": "END"}),
    (1, ROLE, {"finish_reason": None, "stop_reason": None}),
    (1, {"content": "two"}, {"finish_reason": None, "stop_reason": None}),
    (1, {}, {"finish_reason": "length", "stop_reason": None}),
]

STREAM_ROWS = [
    pytest.param(
        "openai",
        {},
        False,
        HELLO,
        [_frame(ROLE), _frame({"content": "Hello"}), _frame({"content": " world"}), _frame({}, "stop")],
        id="text",
    ),
    pytest.param(
        "openai",
        {"stream_options": {"include_usage": True}},
        True,
        HELLO,
        [
            {**_frame(ROLE), "usage": None},
            {**_frame({"content": "Hello"}), "usage": None},
            {**_frame({"content": " world"}), "usage": None},
            {**_frame({}, "stop"), "usage": None},
            {**CHUNK, "choices": [], "usage": wire_usage("openai", 5, 2)},
        ],
        id="include-usage",
    ),
    pytest.param(
        "openai",
        {"logprobs": True, "top_logprobs": 2},
        False,
        LOGPROB_EVENTS,
        [
            _frame(ROLE),
            _frame(
                {"content": "Hi"}, lp={"content": [_lp("Hi", -0.25, ("Hi", -0.25), ("Hey", -1.5))], "refusal": None}
            ),
            _frame(
                {"content": " there"},
                lp={"content": [_lp(" there", -0.5, (" there", -0.5), (" you", -2.0))], "refusal": None},
            ),
            _frame({}, "stop"),
        ],
        id="logprobs",
    ),
    pytest.param(
        "openai",
        {"tools": [WEATHER, {"type": "function", "function": {"name": "now"}}]},
        False,
        CALLS,
        [
            _frame(  # the role opens with the first call and content null, as OpenAI streams it
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": ""},
                        }
                    ],
                    "refusal": None,
                }
            ),
            _frame({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}),
            _frame({"tool_calls": [{"index": 0, "function": {"arguments": '"Paris"}'}}]}),
            _frame(
                {
                    "tool_calls": [
                        {"index": 1, "id": "call_2", "type": "function", "function": {"name": "now", "arguments": "{}"}}
                    ]
                }
            ),
            _frame({}, "tool_calls"),
        ],
        id="tool-calls",
    ),
    pytest.param(
        "openai",
        {"functions": [{"name": "f"}]},
        False,
        LEGACY_CALL,
        [
            _frame(
                {"role": "assistant", "content": None, "function_call": {"name": "f", "arguments": ""}, "refusal": None}
            ),
            _frame({"function_call": {"arguments": '{"x":1}'}}),
            _frame({}, "function_call"),
        ],
        id="legacy-function-call",
    ),
    pytest.param(
        "openai",
        {},
        False,
        [Started(0), Refusal(0, "No."), Finished(0, "stop")],
        [_frame({"role": "assistant", "content": None, "refusal": "No."}), _frame({}, "stop")],
        id="refusal",
    ),
    pytest.param(
        "openai",
        {},
        False,
        [Started(0), Reasoning(0, "hmm"), TextDelta(0, "4"), Finished(0, "stop")],
        [_frame(ROLE), _frame({"content": "4"}), _frame({}, "stop")],
        id="reasoning-not-sent-on-openai",
    ),
    pytest.param(
        "vllm",
        {"n": 2},
        False,
        STOPPED,
        [{**VLLM_CHUNK, "choices": [{"index": i, "delta": d, "logprobs": None, **f}]} for i, d, f in VLLM_STEPS],
        id="vllm-stop-reason",
    ),
]


@pytest.mark.parametrize(("profile", "fields", "include_usage", "events", "expected"), STREAM_ROWS)
def test_stream_frames(
    profile: str, fields: dict[str, Any], include_usage: bool, events: list[Event], expected: list[dict[str, Any]]
) -> None:
    frames, _ = stream(CODEC, _call(profile, fields, include_usage), events)
    assert [as_json(f) for f in frames] == [_answered(profile, chunk) for chunk in expected]


def test_openai_answers_an_alias_with_its_snapshot_and_a_dated_name_as_sent() -> None:
    assert profile_named("openai").answered_model("gpt-4o-mini") == "gpt-4o-mini-2024-07-18"
    assert as_json(CODEC.encode(_call("openai", {}), fold([Finished(0, "stop")])))["model"] == (
        "gpt-4o-mini-2024-07-18"
    )
    dated = _call("openai", {"model": "gpt-4o-2024-05-13"})
    assert as_json(CODEC.encode(dated, fold([Finished(0, "stop")])))["model"] == "gpt-4o-2024-05-13"
    assert profile_named("fireworks").answered_model("gpt-4o-mini") == "gpt-4o-mini"  # no such data: echoed


def test_reasoning_streams_in_the_profiles_field() -> None:
    call = _call("fireworks", {})
    frames, _ = stream(CODEC, call, [Started(0), Reasoning(0, "hmm"), TextDelta(0, "4"), Finished(0, "stop")])
    assert [as_json(f)["choices"][0]["delta"] for f in frames] == [
        {"role": "assistant", "content": None, "reasoning_content": "hmm", "refusal": None},  # content unknown yet
        {"content": "4"},
        {},
    ]


def test_together_legacy_logprobs_offsets_run_across_chunks() -> None:
    frames, _ = stream(CODEC, _call("together", {"logprobs": 1}), LOGPROB_EVENTS)
    offsets = [as_json(f)["choices"][0]["logprobs"] for f in frames]
    assert [lp and lp["text_offset"] for lp in offsets] == [None, [0], [2], None]


@pytest.mark.parametrize(
    ("profile", "include_usage", "expected"),
    [("fireworks", False, True), ("fireworks", True, False), ("together", False, True), ("openai", False, False)],
)
def test_usage_on_last_chunk(profile: str, include_usage: bool, expected: bool) -> None:
    assert _call(profile, {}, include_usage).usage_on_last_chunk is expected


FAST_ROWS = [
    *fast_rows(STREAM_ROWS),
    pytest.param("nebulablock", {}, True, HELLO, id="nebulablock-usage"),
    pytest.param("nebius", {}, False, HELLO, id="nebius"),
]


@pytest.mark.parametrize(("profile", "fields", "include_usage", "events"), FAST_ROWS)
def test_chunk_bytes_are_its_object(
    profile: str, fields: dict[str, Any], include_usage: bool, events: list[Event]
) -> None:
    frames, _ = stream(CODEC, _call(profile, fields, include_usage), events)
    assert_chunk_bytes_are_objects(frames, include_usage)


# ---- stream and non-stream agree -----------------------------------------------------------


def _client_fold(frames: list[ChunkFrame], reasoning_field: str | None) -> dict[str, Any]:
    """What a client makes of a stream: each choice's message joined from its deltas, the
    last finish fields, logprobs concatenated, and the usage chunk's usage."""
    choices: dict[int, dict[str, Any]] = {}
    for c in streamed_choices(frames):
        s = choices.setdefault(
            c["index"],
            {"content": "", "refusal": None, "reasoning": None, "calls": {}, "function_call": None, "lp": None},
        )
        delta = c["delta"]
        s["content"] += delta.get("content") or ""
        if delta.get("refusal") is not None:
            s["refusal"] = (s["refusal"] or "") + delta["refusal"]
        if reasoning_field is not None and reasoning_field in delta:
            s["reasoning"] = (s["reasoning"] or "") + delta[reasoning_field]
        for tc in delta.get("tool_calls", []):
            call = s["calls"].setdefault(tc["index"], {"id": None, "name": None, "arguments": ""})
            call["id"] = tc.get("id", call["id"])
            call["name"] = tc["function"].get("name", call["name"])
            call["arguments"] += tc["function"]["arguments"]
        if "function_call" in delta:
            fc = s["function_call"] or {"name": None, "arguments": ""}
            fc["name"] = delta["function_call"].get("name", fc["name"])
            fc["arguments"] += delta["function_call"]["arguments"]
            s["function_call"] = fc
        if c["logprobs"] is not None:
            lp = c["logprobs"]
            if s["lp"] is None:
                s["lp"] = {k: ([] if isinstance(v, list) else v) for k, v in lp.items()}
            for k, v in lp.items():
                if isinstance(v, list):
                    s["lp"][k] += v
        s["finish"] = {k: v for k, v in c.items() if k in ("finish_reason", "stop_reason")}
    return {"choices": choices, "usage": streamed_usage(frames)}


def _body_view(body: dict[str, Any], reasoning_field: str | None) -> dict[str, Any]:
    """The same view of a non-streamed body."""
    choices = {}
    for c in body["choices"]:
        m = c["message"]
        calls = {
            i: {"id": t["id"], "name": t["function"]["name"], "arguments": t["function"]["arguments"]}
            for i, t in enumerate(m.get("tool_calls", []))
        }
        choices[c["index"]] = {
            "content": m["content"] or "",
            "refusal": m["refusal"],
            "reasoning": m.get(reasoning_field) if reasoning_field else None,
            "calls": calls,
            "function_call": m.get("function_call"),
            "lp": c["logprobs"],
            "finish": {k: v for k, v in c.items() if k in ("finish_reason", "stop_reason")},
        }
    return {"choices": choices, "usage": body["usage"]}


AGREE_ROWS = [
    pytest.param(*row.values[:3], id=row.id) for row in ENCODE_ROWS if row.id != "vllm-prompt-logprobs-and-stop-token"
]
AGREE_ROWS += [
    pytest.param("vllm", {}, PROMPT_LP[1:], id="vllm-stop-token"),
    pytest.param("together", {"logprobs": 0, "n": 2}, [*LOGPROB_EVENTS[:3], Started(1), *TWO[3:]], id="mixed"),
]


@pytest.mark.parametrize(("profile", "fields", "events"), AGREE_ROWS)
def test_stream_agrees_with_body(profile: str, fields: dict[str, Any], events: list[Event]) -> None:
    call = _call(profile, {**fields, "stream_options": {"include_usage": True}}, include_usage=True)
    frames, result = stream(CODEC, call, events)
    field = call.profile.reasoning_field
    streamed, whole = _client_fold(frames, field), _body_view(CODEC.encode(call, fold(events)), field)
    assert streamed == whole
    assert CODEC.encode(call, result) == CODEC.encode(call, fold(events))  # the stream's own fold is the same
