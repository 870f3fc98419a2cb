"""What a Response can say besides text: function calls, structured JSON, refusals, and a
reasoning model's reasoning item — each as a body, a stream the SDK helper accepts, and
spec-valid events. Reasoning on chat completions is here too (same models, same budget)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import jsonschema
import openai
from pydantic import BaseModel

from tests.support.images import png_data_url
from tests.support.live import Live
from tests.support.spec import validate

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
WEATHER = {"type": "function", "name": "get_weather", "description": "Weather for a city", "parameters": CITY}


def _events(live: Live, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    with httpx.stream(
        "POST", live.base_url + "/responses", json={**body, "stream": True}, headers=headers, timeout=60
    ) as r:
        assert r.status_code == 200
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    for event in events:
        validate("ResponseStreamEvent", event)
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    return events


def test_function_calls_as_items_deltas_and_in_the_sdk_helper(client: openai.OpenAI, live: Live) -> None:
    body = {"model": "gpt-4o", "input": "What is the weather in Rome?", "tools": [WEATHER]}
    response = client.responses.create(**body)  # type: ignore[arg-type]
    validate("Response", response.model_dump(exclude_unset=True))
    calls = [item for item in response.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather" and calls[0].call_id.startswith("call_")
    jsonschema.validate(json.loads(calls[0].arguments), CITY)
    events = _events(live, body)
    kinds = [e["type"] for e in events]
    assert kinds.count("response.function_call_arguments.delta") > 2
    done = next(e for e in events if e["type"] == "response.function_call_arguments.done")
    assert done["arguments"] == calls[0].arguments and done["name"] == "get_weather"

    def without_ids(output: list[dict[str, Any]]) -> list[dict[str, Any]]:  # a second create gets a new id
        return [{k: v for k, v in item.items() if k != "id"} for item in output]

    assert without_ids(events[-1]["response"]["output"]) == without_ids(
        response.model_dump(exclude_unset=True)["output"]
    )
    with client.responses.stream(**body) as stream:  # type: ignore[arg-type]
        final = stream.get_final_response()
    assert final.output[0].type == "function_call"
    # The tool's answer goes back as function_call_output: the model then answers in text.
    follow = client.responses.create(
        model="gpt-4o",
        previous_response_id=response.id,
        input=[{"type": "function_call_output", "call_id": calls[0].call_id, "output": '{"temp": 20}'}],
        tools=[WEATHER],  # type: ignore[list-item]
        max_output_tokens=16,
    )
    assert follow.output[0].type == "message"


class Answer(BaseModel):
    verdict: str
    confidence: float


def test_text_format_json_schema_parses(client: openai.OpenAI) -> None:
    parsed = client.responses.parse(model="gpt-4o", input="Judge it", text_format=Answer)
    assert isinstance(parsed.output_parsed, Answer)


def test_refusal_fault_is_a_refusal_part(live: Live) -> None:
    headers = {"x-mockserver-fault": "content.refusal"}
    events = _events(live, {"model": "gpt-4o", "input": "Hi", "max_output_tokens": 16}, headers)
    kinds = [e["type"] for e in events]
    assert "response.refusal.delta" in kinds and "response.refusal.done" in kinds
    part = events[-1]["response"]["output"][0]["content"][0]
    assert part["type"] == "refusal" and part["refusal"]


def test_reasoning_model_has_a_reasoning_item_and_counts_its_tokens(client: openai.OpenAI, live: Live) -> None:
    body = {"model": "o4-mini", "input": "Why is the sky blue?", "reasoning": {"effort": "low", "summary": "auto"}}
    response = client.responses.create(**body)  # type: ignore[arg-type]
    validate("Response", response.model_dump(exclude_unset=True))
    first = response.output[0]
    assert first.type == "reasoning" and first.summary and first.summary[0].text
    assert response.usage is not None
    thought = response.usage.output_tokens_details.reasoning_tokens
    assert thought == 16  # low effort: at most 16 reasoning tokens, all spent here
    assert response.usage.output_tokens > thought
    kinds = [e["type"] for e in _events(live, body)]
    assert kinds.index("response.reasoning_summary_text.delta") < kinds.index("response.output_text.delta")
    quiet = client.responses.create(model="o4-mini", input="Why?", reasoning={"effort": "low"})
    assert quiet.output[0].type == "reasoning" and quiet.output[0].summary == []
    plain = client.responses.create(model="gpt-4o", input="Why?", max_output_tokens=16)
    assert all(item.type != "reasoning" for item in plain.output)


def test_reasoning_on_chat_goes_where_the_profile_says(client: openai.OpenAI, live: Live) -> None:
    ask = {"messages": [{"role": "user", "content": "Why is the sky blue?"}], "max_tokens": 80}
    openai_style = client.chat.completions.create(model="o3-mini", reasoning_effort="low", **ask)  # type: ignore[arg-type]
    assert openai_style.usage is not None and openai_style.usage.completion_tokens_details is not None
    assert openai_style.usage.completion_tokens_details.reasoning_tokens == 16  # low effort's budget, all spent
    assert "reasoning_content" not in openai_style.choices[0].message.model_dump()  # OpenAI returns only the count
    fireworks = httpx.post(
        live.url + "/fireworks/v1/chat/completions",
        json={"model": "accounts/fireworks/models/deepseek-r1", **ask},
        timeout=60,
    ).json()
    assert fireworks["choices"][0]["message"]["reasoning_content"]
    together = httpx.post(
        live.url + "/together/v1/chat/completions", json={"model": "deepseek-ai/DeepSeek-R1", **ask}, timeout=60
    ).json()
    assert together["choices"][0]["message"]["reasoning"]
    # Thinking spends max_tokens: a tiny budget ends while thinking, with no answer.
    cut = client.chat.completions.create(model="o3-mini", max_completion_tokens=4, messages=ask["messages"])  # type: ignore[arg-type]
    assert cut.choices[0].finish_reason == "length" and cut.choices[0].message.content == ""
    bad = httpx.post(live.base_url + "/chat/completions", json={"model": "gpt-4o", "reasoning_effort": "low", **ask})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "reasoning_effort"


def test_input_images_cost_tokens(client: openai.OpenAI) -> None:
    def counted(content: list[Any]) -> int:
        return client.responses.input_tokens.count(  # type: ignore[attr-defined,no-any-return]
            model="gpt-4o", input=[{"role": "user", "content": content}]
        ).input_tokens

    text = {"type": "input_text", "text": "What is this?"}
    image = {"type": "input_image", "image_url": png_data_url(512, 512), "detail": "low"}
    assert counted([text, image]) == counted([text]) + 85


def test_an_abandoned_foreground_stream_is_cancelled_not_left_running(client: openai.OpenAI, live: Live) -> None:
    import time

    # Forced long: a scripted answer of 300 words at 20 ms a token runs for seconds, so the hang-up
    # is seen long before a natural finish (the model's own answer here was 19 tokens, ~8 ms: it
    # often completed before the server noticed the client had left).
    session = {"x-mockserver-session": "abandoned-foreground-stream"}
    story = " ".join(f"word{i}" for i in range(300))
    httpx.post(live.url + "/__mockserver/answers", json={"text": story}, headers=session).raise_for_status()
    headers = {**session, "x-mockserver-fault": "latency.itl=20"}
    body = {"model": "gpt-4o", "input": "Tell me a long story.", "max_output_tokens": 4000, "stream": True}
    with httpx.stream("POST", live.base_url + "/responses", json=body, headers=headers, timeout=60) as r:
        lines = r.iter_lines()
        first = next(json.loads(line[6:]) for line in lines if line.startswith("data: "))
        response_id = first["response"]["id"]
        for _ in range(20):  # a few deltas, then hang up
            next(lines)
    deadline = time.monotonic() + 10
    while (status := client.responses.retrieve(response_id).status) == "in_progress" and time.monotonic() < deadline:
        time.sleep(0.05)
    httpx.post(live.url + "/__mockserver/reset", headers=session)
    assert status == "cancelled"
