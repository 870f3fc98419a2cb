"""The Responses codec and narrator as pure functions: a body becomes a chat GenerationRequest
(and the input items it lists), and engine events become the Responses stream events and the
Response object — with no server, no HTTP and no model."""

from __future__ import annotations

from typing import Any

import pytest

from mockserver.clock import VirtualClock
from mockserver.context import Options
from mockserver.errors import APIError, InvalidRequest, NotFound
from mockserver.profiles import Models, profile_named
from mockserver.routes.responses.codec import (
    CODEC,
    conversation,
    image_costs,
    input_items,
    item_id,
    messages,
    text_format,
    tools,
)
from mockserver.routes.responses.narrator import ResponseNarrator, Turn
from mockserver.schemas.responses import ResponsesRequest
from mockserver.spine.events import (
    Candidate,
    Event,
    Finished,
    Reasoning,
    Refusal,
    Started,
    TextDelta,
    Token,
    ToolCallDelta,
    Usage,
)
from mockserver.spine.request import (
    ChatMessage,
    GenerationRequest,
    JsonFormat,
    Origin,
    Prompt,
    Sampling,
    Source,
    Tool,
)
from mockserver.spine.seeding import continued_seed
from tests.support.codecs import copied_origin, generation, png_url, refusal

MODEL = "gpt-4o-mini"
RID = "resp_test"
CREATED = 1_699_999_990
NOW = 1_700_000_000.0
PNG = png_url(1, 1)  # auto detail: 255 tokens; low: 85


def _body(fields: dict[str, Any]) -> ResponsesRequest:
    return ResponsesRequest.model_validate({"model": MODEL, "input": "hi", **fields})


RESPONSES_SAMPLING = Sampling(max_tokens=None)  # read as chat: max_output_tokens unset fills the context
HI = (ChatMessage("user", "hi"),)


def _gen(
    *,
    model: str = MODEL,
    turns: tuple[ChatMessage, ...] = HI,
    sampling: Sampling = RESPONSES_SAMPLING,
    **fields: Any,
) -> GenerationRequest:
    return generation("chat", model, (Prompt(messages=turns),), sampling, **fields)


SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
STRICT = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": False}
LOOKUP = {"type": "function", "name": "lookup", "description": "Find it", "parameters": SCHEMA}
ITEMS = [
    {"role": "user", "content": [{"type": "input_text", "text": "look "}, {"type": "input_image", "image_url": PNG}]},
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"city":"Oslo"}'},
    {"type": "function_call_output", "call_id": "c1", "output": "cold"},
    {"role": "assistant", "content": "It is cold."},
    {"role": "developer", "content": [{"type": "input_text", "text": "Be "}, {"type": "input_text", "text": "brief."}]},
]
ITEM_TURNS = (
    ("user", "look "),
    ("assistant", 'lookup({"city":"Oslo"})'),
    ("tool", "cold"),
    ("assistant", "It is cold."),
    ("developer", "Be brief."),
)

# ---- the request side: conversation, messages, image_costs, input_items -------------------


@pytest.mark.parametrize(
    ("fields", "turns", "costs"),
    [
        pytest.param({}, (("user", "hi"),), (0,), id="string-input"),
        pytest.param({"instructions": "Be kind."}, (("user", "hi"),), (0,), id="instructions-left-out"),
        pytest.param({"input": ITEMS}, ITEM_TURNS, (255, 0, 0, 0, 0), id="items"),
        pytest.param(
            {
                "input": [
                    {
                        "type": "message",
                        "role": "user",
                        "content": [
                            {"type": "input_image", "image_url": PNG, "detail": "low"},
                            {"type": "input_file"},
                            {"type": "input_image", "image_url": PNG},
                            {"type": "input_text", "text": "two"},
                        ],
                    },
                    {"role": "system", "content": "s"},
                ]
            },
            (("user", "two"), ("system", "s")),
            (85 + 255, 0),
            id="images-priced-files-ignored",
        ),
    ],
)
def test_conversation_and_image_costs(
    fields: dict[str, Any], turns: tuple[tuple[str, str], ...], costs: tuple[int, ...]
) -> None:
    body = _body(fields)
    assert conversation(body) == turns
    assert image_costs(body) == costs


@pytest.mark.parametrize(
    ("instructions", "turns", "images", "expected"),
    [
        pytest.param(None, (("user", "a"),), (), (ChatMessage("user", "a"),), id="bare"),
        pytest.param(
            "Sys",
            (("user", "a"),),
            (7,),
            (ChatMessage("system", "Sys"), ChatMessage("user", "a", 7)),
            id="instructions",
        ),
        pytest.param("", (("user", "a"),), (0,), (ChatMessage("user", "a"),), id="empty-instructions-dropped"),
        pytest.param(
            "Sys",
            (("user", "old"), ("assistant", "reply"), ("user", "new"), ("user", "img")),
            (3, 9),
            (
                ChatMessage("system", "Sys"),
                ChatMessage("user", "old"),
                ChatMessage("assistant", "reply"),
                ChatMessage("user", "new", 3),
                ChatMessage("user", "img", 9),
            ),
            id="history-keeps-text-images-go-last",
        ),
    ],
)
def test_messages(
    instructions: str | None,
    turns: tuple[tuple[str, str], ...],
    images: tuple[int, ...],
    expected: tuple[ChatMessage, ...],
) -> None:
    assert messages(instructions, turns, images) == expected


def test_messages_refuses_more_image_costs_than_turns() -> None:
    with pytest.raises(ValueError):
        messages(None, (("user", "a"),), (1, 2))


def test_item_ids_are_stable_and_distinct() -> None:
    first = item_id("msg_", RID, 0)
    assert first == item_id("msg_", RID, 0)
    assert first.startswith("msg_") and len(first) == 4 + 24
    int(first[4:], 16)  # hex
    others = {item_id("msg_", RID, 1), item_id("msg_", "resp_other", 0), item_id("fc_", RID, 0)[3:]}
    assert first not in others and first[4:] not in others and len(others) == 3


def test_input_items_of_a_string() -> None:
    assert input_items(_body({}), RID) == (
        {
            "id": item_id("msg_", RID, 0),
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
            "status": "completed",
        },
    )


def test_input_items_of_a_list() -> None:
    given = [
        {"id": "msg_given", "role": "user", "content": "plain"},
        {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "ok"}]},
        {"role": "assistant", "content": "said"},
        {
            "role": "assistant",
            "content": [{"type": "output_text", "text": "t"}, {"type": "refusal", "refusal": "no"}],
        },
        {"role": "user", "content": [{"type": "input_image", "image_url": PNG}, {"type": "input_text"}]},
    ]
    expected = (
        {
            "id": "msg_given",
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "plain"}],
            "status": "completed",
        },
        {
            "id": item_id("fc_", RID, 1),
            "type": "function_call",
            "call_id": "c1",
            "name": "lookup",
            "arguments": "{}",
            "status": "completed",
        },
        {
            "id": item_id("fco_", RID, 2),
            "type": "function_call_output",
            "call_id": "c1",
            "output": "ok",
            "status": "completed",
        },
        {
            "id": item_id("msg_", RID, 3),
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "said", "annotations": [], "logprobs": []}],
            "status": "completed",
        },
        {
            "id": item_id("msg_", RID, 4),
            "type": "message",
            "role": "assistant",
            "content": [
                {"type": "output_text", "text": "t", "annotations": [], "logprobs": []},
                {"type": "refusal", "refusal": "no"},
            ],
            "status": "completed",
        },
        {
            "id": item_id("msg_", RID, 5),
            "type": "message",
            "role": "user",
            "content": [{"type": "input_image"}, {"type": "input_text", "text": ""}],
            "status": "completed",
        },
    )
    body = _body({"input": given})
    assert input_items(body, RID) == expected
    assert input_items(body, RID) == input_items(_body({"input": given}), RID)  # the same ids every time


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(None, None, id="absent"),
        pytest.param({}, None, id="no-format"),
        pytest.param({"format": {"type": "text"}}, None, id="text"),
        pytest.param({"format": {"type": "json_object"}}, JsonFormat(), id="json-object"),
        pytest.param(
            {"format": {"type": "json_schema", "name": "ans", "schema": STRICT, "strict": True}},
            JsonFormat(STRICT, "ans", True),
            id="json-schema-strict",
        ),
        pytest.param(
            {"format": {"type": "json_schema", "name": "loose", "schema": SCHEMA}},
            JsonFormat(SCHEMA, "loose", False),
            id="json-schema",
        ),
    ],
)
def test_text_format(text: dict[str, Any] | None, expected: JsonFormat | None) -> None:
    assert text_format(_body({"text": text})) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(None, (), id="none"),
        pytest.param([{"type": "web_search"}], (), id="hosted-only"),
        pytest.param(
            [{"type": "web_search"}, LOOKUP, {"type": "function", "name": "now", "strict": True}],
            (Tool("lookup", "Find it", SCHEMA), Tool("now", strict=True)),
            id="functions-kept-in-order",
        ),
    ],
)
def test_tools(raw: list[dict[str, Any]] | None, expected: tuple[Tool, ...]) -> None:
    assert tools(_body({"tools": raw})) == expected


# ---- to_generation ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "profile", "options", "expected"),
    [
        pytest.param({}, "openai", Options(), _gen(), id="bare"),
        pytest.param(
            {},
            "fireworks",
            Options(),
            _gen(sampling=Sampling(max_tokens=2000, keep_stop=True, truncate=True)),
            id="fireworks-defaults",
        ),
        pytest.param(
            {"instructions": "Be kind."},
            "openai",
            Options(),
            _gen(turns=(ChatMessage("system", "Be kind."), *HI)),
            id="instructions",
        ),
        pytest.param(
            {
                "instructions": "Sys",
                "input": [{"role": "user", "content": [{"type": "input_image", "image_url": PNG}]}],
            },
            "openai",
            Options(history=(("user", "before"), ("assistant", "reply"))),
            _gen(
                turns=(
                    ChatMessage("system", "Sys"),
                    ChatMessage("user", "before"),
                    ChatMessage("assistant", "reply"),
                    ChatMessage("user", "", 255),
                ),
                # A continuation without a seed of its own mixes the conversation it continues
                # into its seed (echoed ids are out of the canonical body: docs/responses.md).
                seed=continued_seed(0, (("user", "before"), ("assistant", "reply"))),
            ),
            id="history-then-input",
        ),
        pytest.param(
            {"input": ITEMS},
            "openai",
            Options(),
            _gen(
                turns=(
                    ChatMessage("user", "look ", 255),
                    *(ChatMessage(role, text) for role, text in ITEM_TURNS[1:]),
                )
            ),
            id="items",
        ),
        pytest.param({"max_output_tokens": 32}, "openai", Options(), _gen(sampling=Sampling(max_tokens=32)), id="max"),
        pytest.param(
            {"include": ["message.output_text.logprobs"], "top_logprobs": 3},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, logprobs=3)),
            id="logprobs-top-3",
        ),
        pytest.param(
            {"include": ["message.output_text.logprobs"]},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, logprobs=0)),
            id="logprobs-included",
        ),
        pytest.param({"top_logprobs": 3}, "openai", Options(), _gen(), id="top-logprobs-not-included"),
        pytest.param(
            {"temperature": 0.2, "top_p": 0.8, "top_k": 3, "stop": "X"},
            "openai",
            Options(),
            _gen(sampling=Sampling(max_tokens=None, temperature=0.2, top_p=0.8, top_k=3, stop=("X",))),
            id="sampling",
        ),
        pytest.param(
            {
                "tools": [LOOKUP, {"type": "file_search"}],
                "tool_choice": {"type": "function", "name": "lookup"},
                "parallel_tool_calls": False,
                "max_tool_calls": 2,
            },
            "openai",
            Options(),
            _gen(
                tools=(Tool("lookup", "Find it", SCHEMA),),
                tool_choice="required",
                tool_name="lookup",
                parallel_tool_calls=False,
                max_tool_calls=2,
            ),
            id="function-tools-named",
        ),
        pytest.param(
            {"tools": [LOOKUP], "tool_choice": "none"},
            "openai",
            Options(),
            _gen(tools=(Tool("lookup", "Find it", SCHEMA),), tool_choice="none"),
            id="tool-choice-none",
        ),
        pytest.param(
            {"tools": [LOOKUP], "tool_choice": {"type": "web_search"}},
            "openai",
            Options(),
            _gen(tools=(Tool("lookup", "Find it", SCHEMA),)),
            id="hosted-tool-choice-is-auto",
        ),
        pytest.param(
            {"tools": [{"type": "web_search"}], "tool_choice": "required"},
            "openai",
            Options(),
            _gen(),
            id="no-function-tools-no-objection",
        ),
        pytest.param(
            {"text": {"format": {"type": "json_schema", "name": "ans", "schema": STRICT, "strict": True}}},
            "openai",
            Options(),
            _gen(response_format=JsonFormat(STRICT, "ans", True)),
            id="text-format-json-schema",
        ),
        pytest.param(
            {"text": {"format": {"type": "json_object"}}},
            "openai",
            Options(),
            _gen(response_format=JsonFormat()),
            id="text-format-json-object",
        ),
        pytest.param(
            {"model": "o3-mini", "reasoning": {"effort": "low"}},
            "openai",
            Options(),
            _gen(model="o3-mini", think=16),
            id="o3-mini-low",
        ),
        pytest.param(
            {"model": "o3-mini", "reasoning": {"summary": "auto"}},
            "openai",
            Options(),
            _gen(model="o3-mini", think=32),
            id="o3-mini-medium",
        ),
        pytest.param({"stream": True}, "openai", Options(), _gen(stream=True), id="stream"),
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
    source = Source(surface="responses", session="w3", target="/v1/responses")
    origin = Origin(seed=11, canonical=b"r", source=source, content_faults=frozenset({"content.bad_arguments"}))
    assert copied_origin(CODEC, _body({}), origin) == (
        11,
        b"r",
        Source(surface=source.surface, session=source.session),  # what a backend reads of it
        frozenset({"content.bad_arguments"}),
    )


ERROR_ROWS = [
    pytest.param({"text": {"format": "json"}}, InvalidRequest, "text.format", id="format-not-object"),
    pytest.param({"text": {"format": {"type": "xml"}}}, InvalidRequest, "text.format.type", id="format-type"),
    pytest.param(
        {"text": {"format": {"type": "json_object", "schema": {"type": "nope"}}}},
        InvalidRequest,
        "text.format.schema",
        id="json-object-schema",
    ),
    pytest.param(
        {"tools": [{"type": "function", "name": "f", "parameters": {"type": "nope"}}]},
        InvalidRequest,
        "tools[0].parameters",
        id="tool-parameters",
    ),
    pytest.param(
        {
            "tools": [
                {"type": "web_search"},
                {"type": "function", "name": "f", "parameters": {"type": "integer", "minimum": 3, "maximum": 1}},
            ]
        },
        InvalidRequest,
        "tools[1].parameters",
        id="tool-parameters-after-hosted",
    ),
    pytest.param({"tools": [{"type": "function", "name": "a b"}]}, InvalidRequest, "tools[0].name", id="tool-name"),
    pytest.param({"tools": [{"type": "function"}]}, InvalidRequest, "tools[0].name", id="tool-name-missing"),
    pytest.param({"tools": [LOOKUP, LOOKUP]}, InvalidRequest, "tools[1].name", id="duplicate-tool"),
    pytest.param({"tools": [LOOKUP], "tool_choice": "sometimes"}, InvalidRequest, "tool_choice", id="choice-mode"),
    pytest.param(
        {"tools": [LOOKUP], "tool_choice": {"type": "function", "name": "nope"}},
        InvalidRequest,
        "tool_choice",
        id="choice-unknown",
    ),
    pytest.param(
        {"tools": [LOOKUP], "tool_choice": {"type": "function"}},
        InvalidRequest,
        "tool_choice.name",
        id="choice-nameless",
    ),
    pytest.param(
        {"tool_choice": {"type": "function", "name": "lookup"}}, InvalidRequest, "tool_choice", id="choice-no-tools"
    ),
    pytest.param({"reasoning": {"effort": "low"}}, InvalidRequest, "reasoning.effort", id="effort-not-reasoner"),
    pytest.param(
        {"model": "o3-mini", "reasoning": {"effort": "max"}}, InvalidRequest, "reasoning.effort", id="effort-unknown"
    ),
    pytest.param(
        {
            "input": [
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "a"},
                        {"type": "input_image", "image_url": PNG, "detail": "x"},
                    ],
                }
            ]
        },
        InvalidRequest,
        "input[0].content[1].detail",
        id="image-detail",
    ),
    pytest.param(
        {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]}]},
        InvalidRequest,
        "input[0].content[0].image_url",
        id="image-not-an-image",
    ),
    pytest.param({"min_tokens": 40, "max_output_tokens": 16}, InvalidRequest, "min_tokens", id="min-over-max"),
    pytest.param({"top_k": 101}, InvalidRequest, "top_k", id="profile-limit-read-as-chat"),
]


@pytest.mark.parametrize(("fields", "error", "param"), ERROR_ROWS)
def test_to_generation_refuses(fields: dict[str, Any], error: type[APIError], param: str) -> None:
    assert refusal(CODEC, _body(fields), "fireworks", Options(), error).param == param


@pytest.mark.parametrize(
    ("options", "error", "param"),
    [
        pytest.param(Options(vocab_size=10), InvalidRequest, "logit_bias", id="bias-vocab"),
        pytest.param(Options(models=Models(reject_unknown=True)), NotFound, "model", id="unknown-model"),
    ],
)
def test_to_generation_refuses_by_options(options: Options, error: type[APIError], param: str) -> None:
    body = _body({"model": "zzz", "logit_bias": {"10": 1}})
    with pytest.raises(error) as raised:
        CODEC.to_generation(body, profile_named("openai"), options, Origin())
    assert raised.value.param == param


@pytest.mark.parametrize(
    ("fmt", "param"),
    [
        pytest.param({"type": "json_schema", "schema": SCHEMA}, "text.format.name", id="name-missing"),
        pytest.param({"type": "json_schema", "name": "a b", "schema": SCHEMA}, "text.format.name", id="name-bad"),
        pytest.param(
            {"type": "json_schema", "name": "x", "strict": True, "schema": SCHEMA},
            "text.format.schema",
            id="not-strict",
        ),
    ],
)
def test_text_format_errors_name_the_wire_path(fmt: dict[str, Any], param: str) -> None:
    with pytest.raises(InvalidRequest) as raised:
        text_format(_body({"text": {"format": fmt}}))
    assert raised.value.param == param


# ---- the narrator -------------------------------------------------------------------------

MSG = item_id("msg_", RID, -1)
RS = item_id("rs_", RID, -2)
FC0, FC1 = item_id("fc_", RID, 1_000), item_id("fc_", RID, 1_001)


def _narrate(fields: dict[str, Any], events: list[Event]) -> tuple[ResponseNarrator, list[dict[str, Any]]]:
    narrator = ResponseNarrator(Turn(RID, CREATED, _body(fields), True), VirtualClock(NOW))
    out: list[dict[str, Any]] = []
    for event in events:
        out += narrator.narrate(event)
    return narrator, out


def _text_part(text: str, logprobs: list[Any] | None = None) -> dict[str, Any]:
    return {"type": "output_text", "text": text, "annotations": [], "logprobs": logprobs or []}


def _msg(status: str, *content: dict[str, Any]) -> dict[str, Any]:
    return {"id": MSG, "type": "message", "status": status, "role": "assistant", "content": list(content)}


def _fc(fid: str, call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {
        "id": fid,
        "type": "function_call",
        "status": "completed",
        "call_id": call_id,
        "name": name,
        "arguments": arguments,
    }


def _usage(given: int, made: int, reasoning: int = 0) -> dict[str, Any]:
    return {
        "input_tokens": given,
        "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": made,
        "output_tokens_details": {"reasoning_tokens": reasoning},
        "total_tokens": given + made,
    }


ADDED, DONE = "response.output_item.added", "response.output_item.done"
PART_ADDED, PART_DONE = "response.content_part.added", "response.content_part.done"
TEXT_DELTA, TEXT_DONE = "response.output_text.delta", "response.output_text.done"
ARGS_DELTA, ARGS_DONE = "response.function_call_arguments.delta", "response.function_call_arguments.done"
SUMMARY = "response.reasoning_summary_"
TEXT_ITEM = [ADDED, PART_ADDED]
CLOSE_TEXT = [TEXT_DONE, PART_DONE, DONE]
REFUSAL_DELTA_DONE = ["response.refusal.delta", "response.refusal.done"]
SUMMARY_OPEN = [SUMMARY + "part.added", SUMMARY + "text.delta"]
SUMMARY_CLOSE = [SUMMARY + "text.done", SUMMARY + "part.done"]

NARRATOR_ROWS = [
    pytest.param(
        {},
        [Started(0), TextDelta(0, "Hel"), TextDelta(0, "lo"), Finished(0, "stop"), Usage(3, 2)],
        [*TEXT_ITEM, TEXT_DELTA, TEXT_DELTA, *CLOSE_TEXT],
        "completed",
        [_msg("completed", _text_part("Hello"))],
        _usage(3, 2),
        id="text",
    ),
    pytest.param(
        {},
        [Started(0), Refusal(0, "I can't"), Refusal(0, "."), Finished(0, "stop"), Usage(2, 3)],
        [*TEXT_ITEM, "response.refusal.delta", "response.refusal.delta", "response.refusal.done", PART_DONE, DONE],
        "completed",
        [_msg("completed", {"type": "refusal", "refusal": "I can't."})],
        _usage(2, 3),
        id="refusal",
    ),
    pytest.param(
        {},
        [Started(0), TextDelta(0, "Well."), Refusal(0, "No."), Finished(0, "stop")],
        [*TEXT_ITEM, TEXT_DELTA, TEXT_DONE, PART_DONE, PART_ADDED, *REFUSAL_DELTA_DONE, PART_DONE, DONE],
        "completed",
        [_msg("completed", _text_part("Well."), {"type": "refusal", "refusal": "No."})],
        _usage(0, 0),
        id="text-then-refusal-two-parts",
    ),
    pytest.param(
        {"tools": [LOOKUP]},
        [
            Started(0),
            ToolCallDelta(0, 0, "call_1", "lookup"),
            ToolCallDelta(0, 0, arguments='{"city":'),
            ToolCallDelta(0, 0, arguments='"Oslo"}'),
            ToolCallDelta(0, 1, "call_2", "lookup", "{}"),
            Finished(0, "tool_calls"),
            Usage(5, 9),
        ],
        [ADDED, ARGS_DELTA, ARGS_DELTA, ARGS_DONE, DONE, ADDED, ARGS_DELTA, ARGS_DONE, DONE],
        "completed",
        [_fc(FC0, "call_1", "lookup", '{"city":"Oslo"}'), _fc(FC1, "call_2", "lookup", "{}")],
        _usage(5, 9),
        id="tool-calls",
    ),
    pytest.param(
        {"tools": [LOOKUP]},
        [TextDelta(0, "Let me look."), ToolCallDelta(0, 0, "call_1", "lookup", "{}"), Finished(0, "tool_calls")],
        [*TEXT_ITEM, TEXT_DELTA, *CLOSE_TEXT, ADDED, ARGS_DELTA, ARGS_DONE, DONE],
        "completed",
        [_msg("completed", _text_part("Let me look.")), _fc(FC0, "call_1", "lookup", "{}")],
        _usage(0, 0),
        id="text-then-call",
    ),
    pytest.param(
        {"model": "o3-mini", "reasoning": {"effort": "low", "summary": "auto"}},
        [Reasoning(0, "Think"), Reasoning(0, " more"), TextDelta(0, "4"), Finished(0, "stop"), Usage(2, 6, 4)],
        [ADDED, *SUMMARY_OPEN, SUMMARY + "text.delta", *SUMMARY_CLOSE, DONE, *TEXT_ITEM, TEXT_DELTA, *CLOSE_TEXT],
        "completed",
        [
            {
                "id": RS,
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Think more"}],
                "status": "completed",
            },
            _msg("completed", _text_part("4")),
        ],
        _usage(2, 6, 4),
        id="reasoning-summarised",
    ),
    pytest.param(
        {"model": "o3-mini"},
        [Reasoning(0, "Think"), Reasoning(0, " more"), TextDelta(0, "4"), Finished(0, "stop"), Usage(2, 6, 4)],
        [ADDED, DONE, *TEXT_ITEM, TEXT_DELTA, *CLOSE_TEXT],
        "completed",
        [{"id": RS, "type": "reasoning", "summary": [], "status": "completed"}, _msg("completed", _text_part("4"))],
        _usage(2, 6, 4),
        id="reasoning-unsummarised",
    ),
    pytest.param(
        {"max_output_tokens": 16},
        [Started(0), TextDelta(0, "cut"), Finished(0, "length"), Usage(4, 16)],
        [*TEXT_ITEM, TEXT_DELTA, *CLOSE_TEXT],
        "incomplete",
        [_msg("incomplete", _text_part("cut"))],
        _usage(4, 16),
        id="length-incomplete",
    ),
    pytest.param(
        {"model": "o3-mini"},
        [Reasoning(0, "all budget"), Finished(0, "length"), Usage(4, 16, 16)],
        [ADDED, DONE],  # thought its whole budget: no message at all, as OpenAI answers
        "incomplete",
        [{"id": RS, "type": "reasoning", "summary": [], "status": "completed"}],
        _usage(4, 16, 16),
        id="thought-out-of-budget-reasoning-only",
    ),
    pytest.param(
        {},
        [Started(0), Finished(0, "stop"), Usage(1, 0)],
        [*TEXT_ITEM, *CLOSE_TEXT],
        "completed",
        [_msg("completed", _text_part(""))],
        _usage(1, 0),
        id="nothing-said-empty-message",
    ),
    pytest.param(
        {"include": ["message.output_text.logprobs"], "top_logprobs": 1},
        [
            TextDelta(0, "Hi", (Token("Hi", b"Hi", "Hi", -0.5, (Candidate("Hi", b"Hi", -0.5),)),)),
            Finished(0, "stop"),
        ],
        [*TEXT_ITEM, TEXT_DELTA, *CLOSE_TEXT],
        "completed",
        [
            _msg(
                "completed",
                _text_part(
                    "Hi",
                    [
                        {
                            "token": "Hi",
                            "logprob": -0.5,
                            "bytes": [72, 105],
                            "top_logprobs": [{"token": "Hi", "logprob": -0.5, "bytes": [72, 105]}],
                        }
                    ],
                ),
            )
        ],
        _usage(0, 0),
        id="logprobs",
    ),
]


@pytest.mark.parametrize(("fields", "events", "types", "status", "output", "usage"), NARRATOR_ROWS)
def test_narrator(
    fields: dict[str, Any],
    events: list[Event],
    types: list[str],
    status: str,
    output: list[dict[str, Any]],
    usage: dict[str, Any],
) -> None:
    narrator, out = _narrate(fields, events)
    assert [e["type"] for e in out] == types
    assert narrator.outcome() == status
    snapshot = narrator.snapshot(narrator.outcome())
    assert snapshot["status"] == status
    assert snapshot["output"] == output
    assert snapshot["usage"] == usage
    assert snapshot["incomplete_details"] == ({"reason": "max_output_tokens"} if status == "incomplete" else None)
    assert snapshot["completed_at"] == (int(NOW) if status == "completed" else None)


def _agreement(events: list[dict[str, Any]], output: list[dict[str, Any]]) -> None:
    """The stream says what the snapshot says: its done items are the output, and each
    text or arguments done event is the join of its deltas."""
    assert [e["item"] for e in events if e["type"] == DONE] == output
    assert [e["output_index"] for e in events if e["type"] == ADDED] == list(range(len(output)))
    joined: dict[tuple[str, int], str] = {}
    for e in events:
        where = (e.get("item_id", ""), e.get("content_index", -1))
        if e["type"].endswith(".delta"):
            joined[where] = joined.get(where, "") + e["delta"]
        elif e["type"] in (TEXT_DONE, ARGS_DONE, "response.refusal.done", SUMMARY + "text.done"):
            key = {TEXT_DONE: "text", ARGS_DONE: "arguments", "response.refusal.done": "refusal"}.get(e["type"], "text")
            assert e[key] == joined.get(where, ""), e


@pytest.mark.parametrize(("fields", "events"), [pytest.param(*row.values[:2], id=row.id) for row in NARRATOR_ROWS])
def test_narrated_stream_agrees_with_snapshot(fields: dict[str, Any], events: list[Event]) -> None:
    narrator, out = _narrate(fields, events)
    _agreement(out, narrator.snapshot(narrator.outcome())["output"])


def test_message_closed_early_keeps_its_status_when_the_response_is_cut() -> None:
    events: list[Event] = [TextDelta(0, "ab"), ToolCallDelta(0, 0, "c1", "lookup", "{"), Finished(0, "length")]
    narrator, out = _narrate({"tools": [LOOKUP]}, events)
    _agreement(out, narrator.snapshot(narrator.outcome())["output"])


def test_text_events_in_full() -> None:
    _, out = _narrate({}, [Started(0), TextDelta(0, "Hel"), TextDelta(0, "lo"), Finished(0, "stop")])
    where = {"item_id": MSG, "output_index": 0, "content_index": 0}
    assert out == [
        {"type": ADDED, "output_index": 0, "item": _msg("in_progress")},
        {"type": PART_ADDED, **where, "part": _text_part("")},
        {"type": TEXT_DELTA, **where, "delta": "Hel", "logprobs": []},
        {"type": TEXT_DELTA, **where, "delta": "lo", "logprobs": []},
        {"type": TEXT_DONE, **where, "text": "Hello", "logprobs": []},
        {"type": PART_DONE, **where, "part": _text_part("Hello")},
        {"type": DONE, "output_index": 0, "item": _msg("completed", _text_part("Hello"))},
    ]


def test_snapshot_in_full() -> None:
    fields = {
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "now"}, {"type": "web_search"}],
        "temperature": 0.5,
        "metadata": {"k": "v"},
        "user": "u1",
        "text": {"format": {"type": "json_object"}},
    }
    narrator, _ = _narrate(fields, [Started(0), TextDelta(0, "{}"), Finished(0, "stop"), Usage(7, 1)])
    narrator.clock.advance(5)  # type: ignore[attr-defined]
    assert narrator.snapshot("completed") == {
        "id": RID,
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "background": False,
        "completed_at": int(NOW) + 5,
        "error": None,
        "incomplete_details": None,
        "instructions": "Be brief.",
        "max_output_tokens": None,
        "max_tool_calls": None,
        "model": MODEL,
        "output": [_msg("completed", _text_part("{}"))],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "service_tier": "default",
        "store": True,
        "temperature": 0.5,
        "text": {"format": {"type": "json_object"}},
        "tool_choice": "auto",
        "tools": [
            {"type": "function", "name": "now", "description": None, "parameters": None, "strict": None},
            {"type": "web_search"},
        ],
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": _usage(7, 1),
        "metadata": {"k": "v"},
        "user": "u1",
    }


def test_snapshot_while_in_progress() -> None:
    narrator, _ = _narrate({}, [Started(0), TextDelta(0, "Hel")])
    snapshot = narrator.snapshot("in_progress")
    assert (snapshot["status"], snapshot["usage"], snapshot["completed_at"]) == ("in_progress", None, None)
    assert snapshot["output"] == [_msg("in_progress", _text_part("Hel"))]
