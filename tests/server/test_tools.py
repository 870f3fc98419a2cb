"""Tool calls and structured outputs, end to end with the official SDK.

What is checked: the arguments are valid against the caller's schema; the policy calls the
tool the user's words point at and answers in text otherwise; streams reassemble to the
non-streamed answer; the SDK's ``parse()`` helpers accept what we send; usage and logprobs
are the model's own (teacher forcing); every bad input is a 400 naming the parameter.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai
import pytest
from pydantic import BaseModel

from tests.support.images import png_data_url
from tests.support.live import Live
from tests.support.spec import validate
from tests.support.tools import TOOLS, WEATHER

ASK = [{"role": "user", "content": "What's the weather in Paris?"}]


def _post(live: Live, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(live.base_url + path, json=body, timeout=60)


def _schema(tool: dict[str, Any]) -> dict[str, Any]:
    return tool["function"]["parameters"]  # type: ignore[no-any-return]


def test_auto_calls_the_tool_the_user_names_with_valid_arguments(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="gpt-4o", messages=ASK, tools=TOOLS, seed=3)  # type: ignore[arg-type]
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls or []
    assert [c.function.name for c in calls] == ["get_weather"]  # type: ignore[union-attr]
    arguments = json.loads(calls[0].function.arguments)  # type: ignore[union-attr]
    jsonschema.validate(arguments, _schema(WEATHER))
    assert calls[0].id.startswith("call_")
    validate("CreateChatCompletionResponse", reply.model_dump(exclude_unset=True))
    # The arguments are tokens the model scored: they are counted.
    assert reply.usage is not None and reply.usage.completion_tokens > len(calls[0].function.arguments) // 8


def test_a_greeting_or_a_tool_result_gets_text(client: openai.OpenAI) -> None:
    hello = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "Hello!"}],
        tools=TOOLS,
        max_tokens=8,  # type: ignore[arg-type]
    )
    assert hello.choices[0].message.tool_calls is None
    assert hello.choices[0].finish_reason == "length"
    first = client.chat.completions.create(model="gpt-4o", messages=ASK, tools=TOOLS)  # type: ignore[arg-type]
    call = (first.choices[0].message.tool_calls or [])[0]
    history: list[Any] = [
        *ASK,
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"temperature": 21}'},
    ]
    after = client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS, max_tokens=8)  # type: ignore[arg-type]
    assert after.choices[0].message.tool_calls is None
    assert after.choices[0].message.content


def test_tool_choice_none_required_named_and_parallel(client: openai.OpenAI) -> None:
    def calls(**kw: Any) -> list[str]:
        reply = client.chat.completions.create(model="gpt-4o", max_tokens=64, tools=TOOLS, **kw)
        return [c.function.name for c in reply.choices[0].message.tool_calls or []]  # type: ignore[union-attr]

    assert calls(messages=ASK, tool_choice="none") == []
    hello = [{"role": "user", "content": "Hello!"}]
    assert calls(messages=hello, tool_choice="required") == ["get_weather"]  # nothing named: the first tool
    named = {"type": "function", "function": {"name": "send_email"}}
    assert calls(messages=ASK, tool_choice=named) == ["send_email"]
    both = [{"role": "user", "content": "Email Bob the weather in Paris"}]
    assert calls(messages=both) == ["get_weather", "send_email"]
    assert calls(messages=both, parallel_tool_calls=False) == ["get_weather"]


def test_streamed_tool_calls_reassemble_to_the_non_streamed_ones(client: openai.OpenAI) -> None:
    kwargs: dict[str, Any] = {"model": "gpt-4o", "messages": ASK, "tools": TOOLS, "seed": 11}
    whole = client.chat.completions.create(**kwargs).choices[0].message.tool_calls or []
    assembled: dict[int, dict[str, str]] = {}
    firsts = []
    fragments = 0
    finish = None
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        validate("CreateChatCompletionStreamResponse", chunk.model_dump(exclude_unset=True))
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for delta in choice.delta.tool_calls or []:
                entry = assembled.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
                if delta.id is not None:  # the opening delta of a call
                    firsts.append(delta)
                    entry["id"] = delta.id
                fn = delta.function
                assert fn is not None
                entry["name"] += fn.name or ""
                entry["arguments"] += fn.arguments or ""
                fragments += bool(fn.arguments)
    assert finish == "tool_calls"
    assert all(d.type == "function" and d.function and d.function.name for d in firsts)
    assert [(e["id"], e["name"], e["arguments"]) for e in assembled.values()] == [
        (c.id, c.function.name, c.function.arguments)  # type: ignore[union-attr]
        for c in whole
    ]
    assert fragments > 3 * len(whole)  # the arguments arrive as fragments, token by token


def test_legacy_functions_answer_with_function_call(client: openai.OpenAI, live: Live) -> None:
    body = {"model": "gpt-4o", "messages": ASK, "functions": [WEATHER["function"]]}
    reply = _post(live, "/chat/completions", body).json()
    choice = reply["choices"][0]
    assert choice["finish_reason"] == "function_call"
    assert choice["message"]["function_call"]["name"] == "get_weather"
    jsonschema.validate(json.loads(choice["message"]["function_call"]["arguments"]), _schema(WEATHER))
    validate("CreateChatCompletionResponse", reply)
    forced = _post(live, "/chat/completions", {**body, "function_call": "none"}).json()
    assert "function_call" not in forced["choices"][0]["message"]


class Person(BaseModel):
    name: str
    age: int
    email: str
    tags: list[str]


def test_parse_helpers_accept_structured_outputs_and_strict_tools(client: openai.OpenAI) -> None:
    parsed = client.chat.completions.parse(
        model="gpt-4o", messages=[{"role": "user", "content": "Invent a person"}], response_format=Person
    )
    person = parsed.choices[0].message.parsed
    assert isinstance(person, Person)
    assert "@" in person.email

    class GetWeather(BaseModel):
        city: str
        days: int

    tool = openai.pydantic_function_tool(GetWeather)
    with_tool = client.chat.completions.parse(
        model="gpt-4o", messages=[{"role": "user", "content": "weather in Oslo"}], tools=[tool]
    )
    call = (with_tool.choices[0].message.tool_calls or [])[0]
    assert isinstance(call.function.parsed_arguments, GetWeather)


def test_json_object_modes(live: Live) -> None:
    chat = _post(
        live,
        "/chat/completions",
        {
            "model": "gpt-4o",
            "messages": [{"role": "user", "content": "hi"}],
            "response_format": {"type": "json_object"},
        },
    ).json()
    assert isinstance(json.loads(chat["choices"][0]["message"]["content"]), dict)
    schema = {
        "type": "object",
        "properties": {"score": {"type": "number", "minimum": 0, "maximum": 1}},
        "required": ["score"],
    }
    fireworks = httpx.post(
        live.url + "/fireworks/v1/completions",
        json={
            "model": "m",
            "prompt": "Rate it:",
            "max_tokens": 200,
            "response_format": {"type": "json_object", "schema": schema},
        },
        timeout=60,
    ).json()
    jsonschema.validate(json.loads(fireworks["choices"][0]["text"]), schema)


def test_structured_text_is_scored_by_the_model(client: openai.OpenAI) -> None:
    """Teacher forcing: the logprobs of forced JSON are real scores of exactly those tokens."""
    reply = client.chat.completions.create(
        model="gpt-4o",
        messages=[{"role": "user", "content": "hi"}],
        response_format={"type": "json_object"},
        logprobs=True,
        top_logprobs=2,
    )
    choice = reply.choices[0]
    content = choice.logprobs.content if choice.logprobs else None
    assert content
    assert "".join(t.token for t in content) == choice.message.content
    assert all(t.logprob <= 0 and len(t.top_logprobs) == 2 for t in content)
    assert all(t.top_logprobs[0].logprob >= t.logprob for t in content)
    assert reply.usage is not None and reply.usage.completion_tokens == len(content)


def test_max_tokens_cuts_a_tool_call(client: openai.OpenAI) -> None:
    reply = client.chat.completions.create(model="gpt-4o", messages=ASK, tools=TOOLS, max_tokens=5)  # type: ignore[arg-type]
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage is not None and reply.usage.completion_tokens == 5


@pytest.mark.parametrize(
    ("change", "param"),
    [
        ({"tools": [{"type": "function", "function": {"description": "no name"}}]}, "tools[0].function.name"),
        ({"tools": [{"type": "function", "function": {"name": "bad name!"}}]}, "tools[0].function.name"),
        (
            {"tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "strng"}}}]},
            "tools[0].function.parameters",
        ),
        ({"tools": TOOLS, "tool_choice": {"type": "function", "function": {"name": "absent"}}}, "tool_choice"),
        ({"tool_choice": "required"}, "tool_choice"),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": {"type": "integer", "minimum": 5, "maximum": 1}},
                }
            },
            "response_format.json_schema.schema",
        ),
        (
            {
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "x",
                        "strict": True,
                        "schema": {"type": "object", "properties": {"a": {"type": "string"}}},
                    },
                }
            },
            "response_format.json_schema.schema",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}],
                    }
                ]
            },
            "messages[0].content[0].image_url",
        ),
    ],
)
def test_bad_tool_and_format_input_is_a_400_naming_the_parameter(
    live: Live, change: dict[str, Any], param: str
) -> None:
    response = _post(live, "/chat/completions", {"model": "gpt-4o", "messages": ASK, **change})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["param"] == param, error
    assert _post(live, "/chat/completions", {"model": "gpt-4o", "messages": ASK, "max_tokens": 1}).status_code == 200


def test_images_cost_prompt_tokens_by_the_tiling_rule(client: openai.OpenAI, live: Live) -> None:
    def prompt_tokens(parts: list[Any]) -> int:
        reply = client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": parts}], max_tokens=1
        )
        assert reply.usage is not None
        return reply.usage.prompt_tokens

    text = {"type": "text", "text": "Describe this."}
    base = prompt_tokens([text])
    image = png_data_url(1024, 1024)
    assert prompt_tokens([text, {"type": "image_url", "image_url": {"url": image, "detail": "low"}}]) == base + 85
    assert prompt_tokens([text, {"type": "image_url", "image_url": {"url": image, "detail": "high"}}]) == base + 765
    remote = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png", "detail": "low"}}
    assert prompt_tokens([text, remote]) == base + 85  # accepted, never fetched
    fireworks = {"model": "m", "prompt": "Describe <image>", "max_tokens": 1}
    plain = httpx.post(live.url + "/fireworks/v1/completions", json=fireworks, timeout=60).json()
    seen = httpx.post(live.url + "/fireworks/v1/completions", json={**fireworks, "images": [image]}, timeout=60).json()
    assert seen["usage"]["prompt_tokens"] == plain["usage"]["prompt_tokens"] + 765


def test_json_breaking_content_faults(live: Live) -> None:
    def ask(fault: str, **body: Any) -> dict[str, Any]:
        reply = httpx.post(
            live.base_url + "/chat/completions",
            json={"model": "gpt-4o", "messages": ASK, **body},
            headers={"x-mockserver-fault": fault},
            timeout=60,
        )
        assert reply.status_code == 200 and reply.headers["x-mockserver-faults"] == fault
        return reply.json()["choices"][0]["message"]  # type: ignore[no-any-return]

    cut = ask("content.bad_arguments", tools=TOOLS)["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(cut)
    off = ask("content.off_schema", tools=TOOLS)["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(off), _schema(WEATHER))
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer"}},
        "required": ["n"],
        "additionalProperties": False,
    }
    structured = {"type": "json_schema", "json_schema": {"name": "n", "schema": schema, "strict": True}}
    text = ask("content.off_schema", response_format=structured)["content"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(text), schema)
    assert not isinstance(
        json.loads(ask("content.off_schema", response_format={"type": "json_object"})["content"]), dict
    )
