"""Agent loops end: short loops driven with the official SDK, as agent frameworks drive them.

A framework asking for a structured answer offers its output tool beside the data tools and
sets ``tool_choice: "required"``; without one, it runs until the model answers in text. Either
way the loop must end within a few calls, with output valid against the caller's schema.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import jsonschema
import openai

REPORT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "temperature": {"type": "number"},
        "summary": {"type": "string"},
    },
    "required": ["city", "temperature", "summary"],
    "additionalProperties": False,
}
WEATHER_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
    "additionalProperties": False,
}
GET_WEATHER: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city",
        "parameters": WEATHER_PARAMS,
    },
}
FINAL_RESULT: dict[str, Any] = {  # pydantic-ai's output tool
    "type": "function",
    "function": {
        "name": "final_result",
        "description": "The final response which ends this conversation",
        "parameters": REPORT,
    },
}
WEATHER_CLASS: dict[str, Any] = {  # LangChain's ToolStrategy(Weather): a class sharing a word with the question
    "type": "function",
    "function": {"name": "Weather", "description": "A weather report", "parameters": REPORT},
}
ASK = "What's the weather in Paris?"
RESULT = '{"city": "Paris", "temperature": 21.5, "sky": "sunny"}'


def _chat_loop(
    client: openai.OpenAI, tools: list[Any], tool_choice: Literal["auto", "required"], limit: int = 5
) -> tuple[list[Any], list[list[str]]]:
    """Run an agent loop: answer every data call with RESULT until the model ends the loop
    (a loop-ending call, or text). Returns the messages and the names called per turn."""
    messages: list[Any] = [{"role": "user", "content": ASK}]
    turns: list[list[str]] = []
    for _ in range(limit):
        reply = client.chat.completions.create(
            model="gpt-4o", messages=messages, tools=tools, tool_choice=tool_choice, max_tokens=400
        )
        message = reply.choices[0].message
        calls = [c for c in message.tool_calls or [] if c.type == "function"]
        turns.append([c.function.name for c in calls])
        messages.append(message.model_dump(exclude_none=True))
        if not calls or turns[-1][-1] in ("final_result", "Weather"):
            return messages, turns
        messages += [{"role": "tool", "tool_call_id": c.id, "content": RESULT} for c in calls]
    raise AssertionError(f"the loop did not end within {limit} calls: {turns}")


def test_required_ends_with_the_output_tool_after_the_tool_result(client: openai.OpenAI) -> None:
    messages, turns = _chat_loop(client, [GET_WEATHER, FINAL_RESULT], "required")
    assert turns == [["get_weather"], ["final_result"]]
    arguments = json.loads(messages[-1]["tool_calls"][0]["function"]["arguments"])
    jsonschema.validate(arguments, REPORT)
    # The values the tool result named are the answer's.
    assert (arguments["city"], arguments["temperature"]) == ("Paris", 21.5)


def test_a_data_tool_and_the_output_tool_are_never_called_together(client: openai.OpenAI) -> None:
    messages, turns = _chat_loop(client, [GET_WEATHER, WEATHER_CLASS], "required")
    assert turns == [["get_weather"], ["Weather"]]
    jsonschema.validate(json.loads(messages[-1]["tool_calls"][0]["function"]["arguments"]), REPORT)


def test_auto_after_the_result_answers_in_text_quoting_it(client: openai.OpenAI) -> None:
    messages, turns = _chat_loop(client, [GET_WEATHER], "auto")
    assert turns == [["get_weather"], []]
    assert RESULT in messages[-1]["content"]
    offered: list[Any] = [GET_WEATHER]
    final = client.chat.completions.create(model="gpt-4o", messages=messages[:-1], tools=offered)
    assert final.choices[0].finish_reason == "stop"
    # Streamed, the same text.
    stream = client.chat.completions.create(model="gpt-4o", messages=messages[:-1], tools=offered, stream=True)
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == final.choices[0].message.content
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


def _responses_tools(*tools: dict[str, Any]) -> list[Any]:
    return [{"type": "function", **tool["function"]} for tool in tools]


def test_responses_required_ends_with_the_output_tool(client: openai.OpenAI) -> None:
    tools = _responses_tools(GET_WEATHER, FINAL_RESULT)
    items: list[Any] = [{"role": "user", "content": ASK}]
    first = client.responses.create(model="gpt-4o", input=items, tools=tools, tool_choice="required")
    calls = [item for item in first.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["get_weather"]
    items += [c.model_dump(exclude_none=True) for c in calls]
    items += [{"type": "function_call_output", "call_id": c.call_id, "output": RESULT} for c in calls]
    second = client.responses.create(model="gpt-4o", input=items, tools=tools, tool_choice="required")
    final = [item for item in second.output if item.type == "function_call"]
    assert [c.name for c in final] == ["final_result"]
    arguments = json.loads(final[0].arguments)
    jsonschema.validate(arguments, REPORT)
    assert arguments["city"] == "Paris"


def test_responses_auto_after_the_result_answers_in_text(client: openai.OpenAI) -> None:
    tools = _responses_tools(GET_WEATHER)
    items: list[Any] = [
        {"role": "user", "content": ASK},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": RESULT},
    ]
    reply = client.responses.create(model="gpt-4o", input=items, tools=tools)
    assert reply.status == "completed"
    assert f"get_weather returned {RESULT}" in reply.output_text
    assert not [item for item in reply.output if item.type == "function_call"]
