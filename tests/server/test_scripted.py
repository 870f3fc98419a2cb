"""Scripted answers through the server: the rule book decides, the model scores (usage,
logprobs and streaming stay real), sessions keep parallel workers apart."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import openai
import pytest

from mockserver.answers.scripted import Script
from mockserver.context import ServerContext
from tests.support.live import Live
from tests.support.tools import TOOLS, WEATHER


@pytest.fixture
def script(live: Live) -> Iterator[Script]:
    assert live.app is not None
    ctx: ServerContext = live.app.state.ctx
    yield ctx.script
    ctx.script.clear()


def test_an_agent_loop_with_a_scripted_tool_call_and_answer(client: openai.OpenAI, script: Script) -> None:
    """docs/tools.md's example, in-process: question → scripted call → tool result → scripted answer."""
    script.add(
        match="weather",
        sequence=[
            {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}]},
            {"text": "It is 21 °C and sunny in Paris."},
        ],
    )
    messages: list[Any] = [{"role": "user", "content": "What's the weather in Paris?"}]
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    call = (first.choices[0].message.tool_calls or [])[0]
    assert call.function.name == "get_weather"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"city": "Paris", "unit": "celsius"}  # type: ignore[union-attr]
    assert first.choices[0].finish_reason == "tool_calls"
    messages += [
        first.choices[0].message.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": call.id, "content": '{"temp_c": 21, "sky": "sunny"}'},
    ]
    final = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    assert final.choices[0].message.content == "It is 21 °C and sunny in Paris."
    assert final.choices[0].finish_reason == "stop"


def test_scripted_text_carries_the_models_own_logprobs(client: openai.OpenAI, script: Script) -> None:
    """Teacher forcing: scripting exactly what the model says greedily gives the same scores."""
    ask: dict[str, Any] = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Tell me about the sea."}],
        "temperature": 0,
        "max_tokens": 12,
        "logprobs": True,
        "top_logprobs": 3,
    }
    free = client.chat.completions.create(**ask).choices[0]
    script.add(match="the sea", text=free.message.content)
    forced = client.chat.completions.create(**ask).choices[0]
    assert forced.message.content == free.message.content
    assert free.logprobs is not None and forced.logprobs is not None
    free_tokens, forced_tokens = free.logprobs.content or [], forced.logprobs.content or []
    assert [t.token for t in forced_tokens] == [t.token for t in free_tokens]
    for a, b in zip(free_tokens, forced_tokens, strict=True):
        assert b.logprob == pytest.approx(a.logprob, abs=1e-4)
        assert [c.token for c in b.top_logprobs] == [c.token for c in a.top_logprobs]


def test_scripted_text_streams_with_exact_usage(client: openai.OpenAI, script: Script) -> None:
    script.add(match="stream", text="One, two, three — done.")
    chunks = list(
        client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "stream please"}],
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "One, two, three — done."
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) > 3
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens > 3


def test_scripted_calls_without_arguments_get_valid_ones(client: openai.OpenAI, script: Script) -> None:
    script.add(tool_calls=[{"name": "get_weather"}])
    reply = client.chat.completions.create(
        model="gpt-4o", messages=[{"role": "user", "content": "anything"}], tools=TOOLS
    )
    call = (reply.choices[0].message.tool_calls or [])[0]
    jsonschema.validate(json.loads(call.function.arguments), WEATHER["function"]["parameters"])  # type: ignore[union-attr,index]


def test_refusals_nth_calls_and_exhausted_sequences(client: openai.OpenAI, script: Script) -> None:
    script.add(match="secret", refusal="I can't share that.")
    refused = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "the secret?"}])
    assert refused.choices[0].message.refusal == "I can't share that."
    assert refused.choices[0].message.content is None
    script.add(match="count", nth=2, text="second")
    script.add(match="count", sequence=["a", "b"], then="error")
    said = [
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "count"}])
        .choices[0]
        .message.content
        for _ in range(3)
    ]
    assert said == ["a", "second", "b"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "count"}])
    assert "no answers left" in str(caught.value)


def test_completions_and_responses_are_scripted_too(client: openai.OpenAI, script: Script) -> None:
    script.add(endpoint="completions", text=" scripted completion")
    script.add(endpoint="responses", text="scripted response")
    completion = client.completions.create(model="gpt-3.5-turbo-instruct", prompt="Say", max_tokens=20)
    assert completion.choices[0].text == " scripted completion"
    response = client.responses.create(model="gpt-4o", input="Say")
    assert response.output_text == "scripted response"


async def test_sessions_keep_concurrent_workers_apart(live: Live, script: Script) -> None:
    """Each worker adds its own rules over the admin API and sees only its own answers."""
    sessions = [f"worker-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    async with httpx.AsyncClient(base_url=live.url, timeout=60) as admin:
        for s in sessions:
            added = await admin.post(
                "/__mockserver/answers", json={"sequence": [f"{s} one", f"{s} two"]}, params={"session": s}
            )
            assert added.status_code == 200, added.text

    async def worker(session: str) -> list[str | None]:
        client = openai.AsyncOpenAI(
            base_url=live.base_url, api_key="k", default_headers={"x-mockserver-session": session}
        )
        said = []
        for _ in range(3):
            reply = await client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
            said.append(reply.choices[0].message.content)
        await client.close()
        return said

    results = await asyncio.gather(*(worker(s) for s in sessions))
    for session, said in zip(sessions, results, strict=True):
        assert said == [f"{session} one", f"{session} two", f"{session} two"]
