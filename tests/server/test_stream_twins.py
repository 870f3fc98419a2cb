"""A streamed chat answer, folded by the official SDK's own stream helper
(``client.chat.completions.stream``), is its non-streamed twin field by field: tool calls
(``content`` stays ``None``), text, refusals, and several choices."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletion, ChatCompletionMessage, ParsedChatCompletion

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
NOW = {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}
ASK: list[Any] = [{"role": "user", "content": "What is the weather in Paris?"}]

CASES = [
    pytest.param({"tools": [WEATHER], "tool_choice": "required"}, {}, id="tool-call"),
    pytest.param({"tools": [WEATHER, NOW], "tool_choice": "required", "n": 2}, {}, id="tool-calls-n2"),
    pytest.param({"max_tokens": 12}, {}, id="text"),
    pytest.param({"max_tokens": 12, "n": 3}, {}, id="text-n3"),
    pytest.param({"max_tokens": 12}, {"x-mockserver-fault": "content.refusal"}, id="refusal"),
]


def _message(message: ChatCompletionMessage) -> dict[str, Any]:
    """The message as a client reads it. ``annotations`` is left out: OpenAI's streams never
    carry it (the non-streamed ``[]`` has no delta), so the SDK's fold leaves it ``None``."""
    calls = [
        (c.id, c.type, c.function.name, c.function.arguments)  # type: ignore[union-attr]
        for c in message.tool_calls or ()
    ]
    return {
        "role": message.role,
        "content": message.content,
        "refusal": message.refusal,
        "tool_calls": calls or None,
        "function_call": message.function_call,
    }


def _view(done: ChatCompletion | ParsedChatCompletion[Any]) -> list[dict[str, Any]]:
    return [
        {"index": c.index, "finish_reason": c.finish_reason, "logprobs": c.logprobs, **_message(c.message)}
        for c in sorted(done.choices, key=lambda c: c.index)
    ]


def _fold(client: openai.OpenAI, asked: dict[str, Any], headers: dict[str, str]) -> ParsedChatCompletion[Any]:
    """The stream as the SDK's stream helper folds it (its own state object: the helper's
    ``get_final_completion`` would raise on ``finish_reason: "length"``, which text cases end with)."""
    state: ChatCompletionStreamState[Any] = ChatCompletionStreamState(input_tools=asked.get("tools", openai.omit))
    chunks = client.chat.completions.create(
        **asked, stream=True, stream_options={"include_usage": True}, extra_headers=headers
    )
    for chunk in chunks:
        state.handle_chunk(chunk)
    return state.current_completion_snapshot


@pytest.mark.parametrize(("fields", "headers"), CASES)
def test_the_sdks_stream_fold_is_the_non_streamed_answer(
    client: openai.OpenAI, fields: dict[str, Any], headers: dict[str, str]
) -> None:
    asked: dict[str, Any] = {"model": "gpt-4o-mini", "messages": ASK, "seed": 7, **fields}
    plain = client.chat.completions.create(**asked, extra_headers=headers)
    folded = _fold(client, asked, headers)
    assert _view(folded) == _view(plain)
    assert (folded.id, folded.model, folded.usage) == (plain.id, plain.model, plain.usage)
    if "tools" in fields:  # the case the issue is about: a tool call's content is null, streamed or not
        assert all(c.message.tool_calls and c.message.content is None for c in plain.choices)
    if headers:
        assert all(c.message.refusal and c.message.content is None for c in plain.choices)


def test_the_sdks_stream_helper_ends_with_content_none_for_a_tool_call(client: openai.OpenAI) -> None:
    asked: dict[str, Any] = {"model": "gpt-4o-mini", "messages": ASK, "tools": [WEATHER], "tool_choice": "required"}
    with client.chat.completions.stream(**asked) as stream:
        final = stream.get_final_completion()
    assert final.choices[0].message.content is None and final.choices[0].message.tool_calls
    assert _view(final) == _view(client.chat.completions.create(**asked))


def test_a_tool_call_stream_opens_with_content_null(client: openai.OpenAI) -> None:
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o-mini", messages=ASK, tools=[WEATHER], tool_choice="required", seed=7, stream=True
        )  # type: ignore[call-overload]
    )
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content is None and first.tool_calls  # one chunk, as OpenAI's
    assert "content" in first.model_fields_set  # sent as null, not left out
    text = list(client.chat.completions.create(model="gpt-4o-mini", messages=ASK, seed=7, max_tokens=4, stream=True))
    assert text[0].choices[0].delta.content == "" and text[0].choices[0].delta.role == "assistant"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_chat_completions_reruns_are_identical(client: openai.OpenAI, stream: bool) -> None:
    asked: dict[str, Any] = {"model": "gpt-4o-mini", "messages": ASK, "tools": [WEATHER], "tool_choice": "required"}
    if stream:
        runs = []
        for _ in range(2):
            with client.chat.completions.stream(**asked) as s:
                runs.append(_view(s.get_final_completion()))
        assert runs[0] == runs[1]
    else:
        first, second = (client.chat.completions.create(**asked) for _ in range(2))
        assert (first.id, _view(first)) == (second.id, _view(second))
