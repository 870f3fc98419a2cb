"""The misbehaviour faults (``content.unknown_tool``, ``content.duplicate_call_ids``,
``content.empty``, ``content.length_in_call``, ``content.reasoning_only``) on every wire, each
read through that wire's official SDK and boiled down to one view (text, calls, how it ended,
whether it thought), so one table says what each fault does everywhere. Scripted answers
(torch-free) give the answers they break."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx
import openai
import pytest
from google import genai
from google.genai import types

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.faults.misbehaviour import THOUGHT, UNOFFERED
from tests.support.live import FROZEN, Live, serve_in_thread
from tests.support.spec import validate

CITY = '{"city":"Paris"}'
WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
RULES = [
    {"match": "weather", "tool_calls": [{"name": "get_weather", "arguments": CITY}]},
    {"match": "Hello", "text": "Hello there, my friend."},
]


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        for rule in RULES:
            httpx.post(live.url + "/__mockserver/answers", json=rule).raise_for_status()
        yield live


@dataclass(frozen=True)
class View:
    """What a client sees of an answer, in words every wire shares."""

    text: str
    calls: tuple[tuple[str | None, str, str], ...]  # (id, name, arguments as text)
    end: str  # stop | length | tool_calls
    thought: bool


def _args(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


@functools.cache
def _openai(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="k", max_retries=0)


def _chat(live: Live, prompt: str, fault: str, stream: bool) -> View:
    client = _openai(live.base_url)
    kw: Any = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": prompt}], "seed": 3}
    kw.update(tools=[{"type": "function", "function": WEATHER}], extra_headers={"x-mockserver-fault": fault})
    if not stream:
        done = client.chat.completions.create(**kw)
        validate("CreateChatCompletionResponse", done.model_dump(mode="json", exclude_unset=True))
        message, reasoning = done.choices[0].message, done.usage.completion_tokens_details
        calls = tuple((c.id, c.function.name, c.function.arguments) for c in message.tool_calls or ())
        thought = bool(reasoning and reasoning.reasoning_tokens)
        return View(message.content or "", calls, done.choices[0].finish_reason, thought)
    text, end, thought = "", "", False
    found: dict[int, tuple[str | None, str, str]] = {}
    for chunk in client.chat.completions.create(**kw, stream=True, stream_options={"include_usage": True}):
        if chunk.usage is not None:
            thought = bool((chunk.usage.completion_tokens_details or _NONE).reasoning_tokens)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            end = choice.finish_reason or end
            for tc in choice.delta.tool_calls or ():
                id_, name, args = found.get(tc.index, (None, "", ""))
                function = tc.function
                found[tc.index] = (
                    tc.id or id_,
                    (function and function.name) or name,
                    args + ((function and function.arguments) or ""),
                )
    return View(text, tuple(found[k] for k in sorted(found)), end, thought)


class _None:
    reasoning_tokens = 0


_NONE = _None()


def _responses(live: Live, prompt: str, fault: str, stream: bool) -> View:
    client = _openai(live.base_url)
    kw: Any = {"model": "gpt-4o-mini", "input": prompt, "tools": [{"type": "function", **WEATHER}]}
    kw.update(extra_headers={"x-mockserver-fault": fault}, extra_body={"seed": 3})
    if stream:  # the raw events (the SDK's ``responses.stream()`` helper refuses some misbehaviours)
        done = None
        for event in client.responses.create(**kw, stream=True):
            done = getattr(event, "response", done)
        assert done is not None
    else:
        done = client.responses.create(**kw)
    body = done.model_dump(mode="json", exclude_unset=True)
    validate("Response", body)
    calls = tuple((i.call_id, i.name, i.arguments) for i in done.output if i.type == "function_call")
    kinds = {i.type for i in done.output}
    end = "length" if done.status == "incomplete" else "tool_calls" if calls else "stop"
    return View(done.output_text, calls, end, "reasoning" in kinds)


_ANTHROPIC_ENDS = {"end_turn": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


@functools.cache
def _claude(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url + "/anthropic", api_key="k", max_retries=0)


def _anthropic(live: Live, prompt: str, fault: str, stream: bool) -> View:
    client = _claude(live.url)
    tool = {"name": WEATHER["name"], "description": WEATHER["description"], "input_schema": WEATHER["parameters"]}
    kw: Any = {"model": "claude-sonnet-5", "max_tokens": 64, "messages": [{"role": "user", "content": prompt}]}
    kw.update(tools=[tool], extra_headers={"x-mockserver-fault": fault, "x-mockserver-seed": "3"})
    if stream:
        with client.messages.stream(**kw) as events:
            done = events.get_final_message()
    else:
        done = client.messages.create(**kw)
    text = "".join(b.text for b in done.content if b.type == "text")
    calls = tuple((b.id, b.name, _args(b.input)) for b in done.content if b.type == "tool_use")
    thought = any(b.type == "thinking" for b in done.content)
    return View(text, calls, _ANTHROPIC_ENDS[str(done.stop_reason)], thought)


@functools.cache
def _google(url: str, fault: str) -> genai.Client:
    options = types.HttpOptions(base_url=url + "/gemini", headers={"x-mockserver-fault": fault})
    return genai.Client(api_key="k", http_options=options)


def _gemini(live: Live, prompt: str, fault: str, stream: bool) -> View:
    client = _google(live.url, fault)
    declaration = types.FunctionDeclaration(
        name=WEATHER["name"], description=WEATHER["description"], parameters_json_schema=WEATHER["parameters"]
    )
    config = types.GenerateContentConfig(
        seed=3,
        tools=[types.Tool(function_declarations=[declaration])],
        thinking_config=types.ThinkingConfig(include_thoughts=True),
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
    )
    chunks = (
        list(client.models.generate_content_stream(model="gemini-2.5-flash", contents=prompt, config=config))
        if stream
        else [client.models.generate_content(model="gemini-2.5-flash", contents=prompt, config=config)]
    )
    text, calls, thought, reason = "", [], False, ""
    for chunk in chunks:
        candidate = (chunk.candidates or [])[0]
        reason = candidate.finish_reason.value if candidate.finish_reason else reason
        for part in (candidate.content.parts if candidate.content else None) or ():
            if part.thought:
                thought = True
            elif part.function_call is not None:
                calls.append((None, part.function_call.name or "", _args(part.function_call.args)))
            else:
                text += part.text or ""
    end = {"STOP": "tool_calls" if calls else "stop", "MAX_TOKENS": "length"}[reason]
    return View(text, tuple(calls), end, thought)


WIRES: dict[str, Callable[[Live, str, str, bool], View]] = {
    "chat": _chat,
    "responses": _responses,
    "anthropic": _anthropic,
    "gemini": _gemini,
}
CASES = [(wire, stream) for wire in WIRES for stream in (False, True)]
IDS = [f"{wire}-{'stream' if stream else 'body'}" for wire, stream in CASES]


@pytest.mark.parametrize("wire", WIRES)
def test_answers_without_faults(server: Live, wire: str) -> None:
    said = WIRES[wire](server, "Hello?", "", False)
    assert (said.text, said.calls, said.end, said.thought) == ("Hello there, my friend.", (), "stop", False)
    called = WIRES[wire](server, "The weather?", "", True)
    assert [(name, args) for _, name, args in called.calls] == [("get_weather", CITY)]


@pytest.mark.parametrize(("wire", "stream"), CASES, ids=IDS)
def test_unknown_tool(server: Live, wire: str, stream: bool) -> None:
    instead = WIRES[wire](server, "Hello?", "content.unknown_tool", stream)
    assert instead.text == "" and instead.end == "tool_calls" and len(instead.calls) == 1
    _, name, args = instead.calls[0]
    assert name in UNOFFERED and name != "get_weather" and args == "{}"
    renamed = WIRES[wire](server, "The weather?", "content.unknown_tool", stream)
    assert [(n, a) for _, n, a in renamed.calls] == [(renamed.calls[0][1], CITY)]
    assert renamed.calls[0][1] in UNOFFERED


@pytest.mark.parametrize(("wire", "stream"), CASES, ids=IDS)
def test_duplicate_call_ids(server: Live, wire: str, stream: bool) -> None:
    seen = WIRES[wire](server, "The weather?", "content.duplicate_call_ids", stream)
    assert len(seen.calls) == 2 and seen.calls[0] == seen.calls[1] and seen.end == "tool_calls"
    assert seen.calls[0][1:] == ("get_weather", CITY)
    if wire != "gemini":  # Gemini's calls carry no id: the same call twice is its shape
        assert seen.calls[0][0]


@pytest.mark.parametrize(("wire", "stream"), CASES, ids=IDS)
def test_empty(server: Live, wire: str, stream: bool) -> None:
    seen = WIRES[wire](server, "The weather?", "content.empty", stream)
    assert (seen.text, seen.calls, seen.end, seen.thought) == ("", (), "stop", False)


LENGTH_CASES = [case for case in CASES if case[0] != "gemini"]


@pytest.mark.parametrize(("wire", "stream"), LENGTH_CASES, ids=[i for i in IDS if not i.startswith("gemini")])
def test_length_in_call(server: Live, wire: str, stream: bool) -> None:
    seen = WIRES[wire](server, "The weather?", "content.length_in_call", stream)
    cut = CITY[: len(CITY) // 2]
    if wire == "anthropic" and stream:
        cut = "{}"  # the SDK reads a streamed tool_use's partial JSON leniently: what parses of the cut
    assert seen.end == "length" and [(n, a) for _, n, a in seen.calls] == [("get_weather", cut)]
    if cut != "{}":
        with pytest.raises(ValueError):
            json.loads(cut)


@pytest.mark.parametrize("stream", [False, True], ids=["body", "stream"])
def test_length_in_call_on_gemini(server: Live, stream: bool) -> None:
    """Gemini's ``args`` is an object: the cut text goes as it is (google-genai refuses to read it,
    as it does ``content.bad_arguments``), with ``MAX_TOKENS``."""
    ask = {
        "contents": [{"role": "user", "parts": [{"text": "The weather?"}]}],
        "tools": [{"functionDeclarations": [WEATHER]}],
    }
    verb = "streamGenerateContent?alt=sse" if stream else "generateContent"
    answer = httpx.post(
        f"{server.url}/v1beta/models/gemini-2.5-flash:{verb}",
        json=ask,
        headers={"x-mockserver-fault": "content.length_in_call"},
    )
    bodies = [json.loads(line[6:]) for line in answer.text.splitlines() if line.startswith("data: ")] or [answer.json()]
    parts = [p for b in bodies for p in b["candidates"][0]["content"]["parts"]]
    assert [p["functionCall"] for p in parts if "functionCall" in p] == [
        {"name": "get_weather", "args": CITY[: len(CITY) // 2]}
    ]
    assert bodies[-1]["candidates"][0]["finishReason"] == "MAX_TOKENS"


def test_the_sdks_stream_helper_refuses_duplicate_call_ids(server: Live) -> None:
    """What a client meets: openai's ``responses.stream()`` accumulator gives up on two calls of one id."""
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    fault = {"x-mockserver-fault": "content.duplicate_call_ids"}
    with (
        pytest.raises(RuntimeError, match="conflicting output identities"),
        client.responses.stream(model="m", input="The weather?", extra_headers=fault) as events,
    ):
        events.get_final_response()


@pytest.mark.parametrize(("wire", "stream"), CASES, ids=IDS)
def test_reasoning_only(server: Live, wire: str, stream: bool) -> None:
    seen = WIRES[wire](server, "Hello?", "content.reasoning_only", stream)
    assert (seen.text, seen.calls, seen.end, seen.thought) == ("", (), "length", True)


def test_reasoning_only_is_an_incomplete_response_of_one_reasoning_item(server: Live) -> None:
    client = openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0)
    done = client.responses.create(
        model="o4-mini",
        input="The weather?",
        reasoning={"summary": "auto"},
        extra_headers={"x-mockserver-fault": "content.reasoning_only"},
    )
    assert done.status == "incomplete" and done.incomplete_details is not None
    assert done.incomplete_details.reason == "max_output_tokens"
    assert [item.type for item in done.output] == ["reasoning"] and done.output_text == ""
    assert done.usage is not None and done.usage.output_tokens_details.reasoning_tokens == done.usage.output_tokens
    summary = done.output[0].summary  # type: ignore[union-attr]
    assert [s.text for s in summary] == [THOUGHT]  # a call thinks a sentence of its own


def test_faults_combine_and_the_same_request_gives_the_same_bytes(server: Live) -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "The weather?"}], "seed": 9}
    headers = {"x-mockserver-fault": "content.unknown_tool; content.duplicate_call_ids"}
    first = httpx.post(server.base_url + "/chat/completions", json=body, headers=headers)
    again = httpx.post(server.base_url + "/chat/completions", json=body, headers=headers)
    assert first.content == again.content  # seeded: the same tool name and ids
    assert first.headers["x-mockserver-faults"] == "content.unknown_tool; content.duplicate_call_ids"
    calls = first.json()["choices"][0]["message"]["tool_calls"]
    assert len(calls) == 2 and calls[0] == calls[1] and calls[0]["function"]["name"] in UNOFFERED


def test_a_sessions_rule_misbehaves_for_that_session_only(server: Live) -> None:
    rule = {"faults": "content.empty"}
    httpx.post(server.url + "/__mockserver/faults", json=rule, params={"session": "s1"}).raise_for_status()
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "Hello?"}]}
        own = httpx.post(server.base_url + "/chat/completions", json=body, headers={"x-mockserver-session": "s1"})
        other = httpx.post(server.base_url + "/chat/completions", json=body, headers={"x-mockserver-session": "s2"})
        assert own.json()["choices"][0]["message"]["content"] == ""
        assert other.json()["choices"][0]["message"]["content"] == "Hello there, my friend."
    finally:
        httpx.post(server.url + "/__mockserver/reset", params={"session": "s1"}).raise_for_status()
