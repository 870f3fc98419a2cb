"""The Responses API with the official SDK against the session's live server (frozen time,
no queue, unpaced): create, retrieve, delete, input items, streaming, resume, errors, and
every body and event checked against OpenAI's OpenAPI schemas."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest

from tests.support.live import Live
from tests.support.spec import validate

LOGPROBS: list[Any] = ["message.output_text.logprobs"]


def _stream(live: Live, body: dict[str, Any], headers: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Raw SSE events of a streamed create, each checked: ``event:`` names its data's type."""
    with httpx.stream("POST", live.base_url + "/responses", json={**body, "stream": True}, headers=headers) as r:
        assert r.status_code == 200
        lines = list(r.iter_lines())
    events, name = [], None
    for line in lines:
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: "):
            event = json.loads(line[len("data: ") :])
            assert event["type"] == name
            events.append(event)
    return events


def _wait(client: openai.OpenAI, response_id: str) -> Any:
    for _ in range(2000):
        response = client.responses.retrieve(response_id)
        if response.status not in ("queued", "in_progress"):
            return response
    raise AssertionError(f"{response_id} never finished")


def test_create_retrieve_delete(client: openai.OpenAI) -> None:
    created = client.responses.create(
        model="gpt-4o-mini", input="Tell me about Lisbon.", instructions="Be brief.", max_output_tokens=16
    )
    assert created.id.startswith("resp_") and str(created.output[0].id).startswith("msg_")
    assert created.status == "completed" and created.output_text
    assert created.model == "gpt-4o-mini-2024-07-18"  # the snapshot the alias resolves to, as OpenAI answers
    usage = created.usage
    assert usage is not None and usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert client.responses.retrieve(created.id).model_dump() == created.model_dump()
    client.responses.delete(created.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(created.id)


def test_max_output_tokens_is_incomplete(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="m", input="Write a long story about the sea.", max_output_tokens=16, extra_body={"ignore_eos": True}
    )
    assert response.status == "incomplete"
    assert response.incomplete_details is not None and response.incomplete_details.reason == "max_output_tokens"
    assert response.usage is not None and response.usage.output_tokens == 16
    assert response.output[0].status == "incomplete"  # type: ignore[union-attr]


def test_input_items_paginate(client: openai.OpenAI) -> None:
    items = [{"role": "user", "content": f"Message {i}"} for i in range(5)]
    items.append({"type": "function_call_output", "call_id": "call_1", "output": "42"})
    response = client.responses.create(model="m", input=items, max_output_tokens=16)  # type: ignore[arg-type]
    newest_first = list(client.responses.input_items.list(response.id, limit=2))
    assert len(newest_first) == 6 and newest_first[0].type == "function_call_output"
    oldest_first = client.responses.input_items.list(response.id, order="asc", limit=2)
    assert [i.id for i in oldest_first.data] == [i.id for i in reversed(newest_first)][:2]
    assert oldest_first.has_more
    page = client.responses.input_items.list(response.id, order="asc", after=oldest_first.data[-1].id, limit=100)
    assert len(page.data) == 4 and not page.has_more


def test_previous_response_id_continues(client: openai.OpenAI, live: Live) -> None:
    first = client.responses.create(model="m", input="My name is Ada.", max_output_tokens=16)
    second = client.responses.create(
        model="m", input="What is my name?", previous_response_id=first.id, max_output_tokens=16
    )
    alone = client.responses.create(model="m", input="What is my name?", max_output_tokens=16)
    assert second.usage is not None and alone.usage is not None
    assert second.usage.input_tokens > alone.usage.input_tokens + first.usage.output_tokens  # type: ignore[union-attr]
    count = client.responses.input_tokens.count(model="m", input="What is my name?", previous_response_id=first.id)
    assert count.input_tokens == second.usage.input_tokens


def test_logprobs_match_the_text(client: openai.OpenAI) -> None:
    response = client.responses.create(
        model="m",
        input="Hello",
        include=LOGPROBS,
        top_logprobs=3,
        max_output_tokens=16,
    )
    part: Any = response.output[0].content[0]  # type: ignore[union-attr,index]
    assert part.logprobs and all(len(lp.top_logprobs) == 3 for lp in part.logprobs)
    assert b"".join(bytes(lp.bytes) for lp in part.logprobs).decode() == part.text


def test_stream_equals_body_and_sdk_helper(client: openai.OpenAI, live: Live) -> None:
    body = {"model": "m", "input": "Hi there", "max_output_tokens": 16, "seed": 3, "store": False}
    plain = httpx.post(live.base_url + "/responses", json={**body, "include": LOGPROBS, "top_logprobs": 2}).json()
    events = _stream(live, {**body, "include": LOGPROBS, "top_logprobs": 2})
    assert [e["sequence_number"] for e in events] == list(range(len(events)))
    assert [e["type"] for e in events[:4]] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
    ]
    assert events[-1]["type"] == "response.completed"
    assert events[-1]["response"] == plain
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    assert "".join(d["delta"] for d in deltas) == plain["output"][0]["content"][0]["text"]
    assert [lp for d in deltas for lp in d["logprobs"]] == plain["output"][0]["content"][0]["logprobs"]
    with client.responses.stream(
        model="m", input="Hi there", max_output_tokens=16, store=False, extra_body={"seed": 3}
    ) as stream:
        final = stream.get_final_response()
    assert final.output_text == plain["output"][0]["content"][0]["text"]


def test_background_poll(client: openai.OpenAI) -> None:
    created = client.responses.create(model="m", input="Background hello", background=True, max_output_tokens=16)
    assert created.status == "queued" and created.background
    done = _wait(client, created.id)
    assert done.status == "incomplete" and done.output_text


def test_background_stream_resume(client: openai.OpenAI) -> None:
    first: list[Any] = []
    with client.responses.create(
        model="m", input="Resume me", background=True, stream=True, max_output_tokens=24
    ) as stream:
        for event in stream:
            first.append(event)
            if event.sequence_number == 10:
                break
    assert [e.type for e in first[:3]] == ["response.created", "response.queued", "response.in_progress"]
    response_id = first[0].response.id
    rest = list(client.responses.retrieve(response_id, stream=True, starting_after=10))
    whole = list(client.responses.retrieve(response_id, stream=True))
    assert [e.model_dump() for e in first + rest] == [e.model_dump() for e in whole]
    assert rest[0].sequence_number == 11 and rest[-1].type == "response.completed"


def test_every_body_and_event_validates(client: openai.OpenAI, live: Live) -> None:
    url = live.base_url + "/responses"
    for body in (
        {"model": "m", "input": "Spec", "max_output_tokens": 16, "include": LOGPROBS, "top_logprobs": 2},
        {"model": "m", "input": "Spec", "background": True, "metadata": {"k": "v"}, "user": "u1"},
    ):
        created = httpx.post(url, json=body).json()
        validate("Response", created)
        final = _wait(client, created["id"])
        validate("Response", httpx.get(f"{url}/{final.id}").json())
        validate("ResponseItemList", httpx.get(f"{url}/{final.id}/input_items").json())
        validate("Response", httpx.post(f"{url}/{final.id}/cancel").json() if body.get("background") else created)
    for event in _stream(live, {"model": "m", "input": "Spec", "max_output_tokens": 16, "include": LOGPROBS}):
        validate("ResponseStreamEvent", event)
    with httpx.stream("POST", url, json={"model": "m", "input": "Spec bg", "background": True, "stream": True}) as r:
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith("data: ")]
    for event in events:
        validate("ResponseStreamEvent", event)
    validate("TokenCountsResource", httpx.post(url + "/input_tokens", json={"model": "m", "input": "Hi"}).json())


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "param"),
    [
        pytest.param("GET", "/responses/resp_nope", None, 404, "response_id", id="unknown-id"),
        pytest.param("DELETE", "/responses/resp_nope", None, 404, "response_id", id="delete-unknown"),
        pytest.param("POST", "/responses/resp_nope/cancel", None, 404, "response_id", id="cancel-unknown"),
        pytest.param("GET", "/responses/resp_nope/input_items", None, 404, "response_id", id="items-unknown"),
        pytest.param("POST", "/responses", {"model": "m", "input": "x", "max_output_tokens": 8}, 400,
                     "max_output_tokens", id="max-output-tokens-below-16"),
        pytest.param("POST", "/responses", {"model": "m", "input": "x", "previous_response_id": "resp_nope"}, 404,
                     "previous_response_id", id="unknown-previous"),
        pytest.param("POST", "/responses", {"model": "m", "input": "x", "background": True, "store": False}, 400,
                     "background", id="background-unstored"),
        pytest.param("POST", "/responses", {"model": "m", "input": "x", "include": ["nope"]}, 400, "include",
                     id="bad-include"),
        pytest.param("POST", "/responses", {"model": "m"}, 400, "input", id="no-input"),
        pytest.param("POST", "/responses", {"model": "m", "input": [{"role": "robot", "content": "x"}]}, 400,
                     "input[0].role", id="bad-role"),
    ],
)  # fmt: skip
def test_bad_input(live: Live, method: str, path: str, body: Any, status: int, param: str) -> None:
    response = httpx.request(method, live.base_url + path, json=body)
    assert response.status_code == status, response.text
    validate("ErrorResponse", response.json())
    assert response.json()["error"]["param"] == param


def test_bad_lifecycle_requests(client: openai.OpenAI, live: Live) -> None:
    url = live.base_url + "/responses"
    foreground = client.responses.create(model="m", input="fg", max_output_tokens=16)
    polled = _wait(client, client.responses.create(model="m", input="bg", background=True, max_output_tokens=16).id)
    streamed: list[Any] = list(
        client.responses.create(model="m", input="bgs", background=True, stream=True, max_output_tokens=16)
    )
    last = streamed[-1].sequence_number
    for path, param in [
        (f"{foreground.id}/cancel", "response_id"),
        (f"{polled.id}?stream=true", "stream"),
        (f"{foreground.id}?stream=true", "stream"),
        (f"{streamed[0].response.id}?stream=true&starting_after={last + 1}", "starting_after"),
    ]:
        answer = httpx.request("POST" if path.endswith("cancel") else "GET", f"{url}/{path}")
        assert answer.status_code == 400, path
        assert answer.json()["error"]["param"] == param
    assert client.responses.cancel(polled.id).model_dump() == polled.model_dump()  # finished: unchanged


def test_same_request_same_bytes(live: Live) -> None:
    url = live.base_url + "/responses"
    body = {"model": "m", "input": "Same bytes", "max_output_tokens": 16, "include": LOGPROBS, "top_logprobs": 1}
    first = httpx.post(url, json=body)
    httpx.delete(f"{url}/{first.json()['id']}")  # its id is free again
    again = httpx.post(url, json=body)
    assert again.content == first.content
    taken = httpx.post(url, json=body).json()  # the id is held: the next one is taken
    assert taken["id"] != first.json()["id"]
    assert taken["output"][0]["content"] == first.json()["output"][0]["content"]
    unstored = {**body, "store": False}
    assert httpx.post(url, json=unstored).content == httpx.post(url, json=unstored).content


@pytest.mark.asyncio
async def test_two_hundred_background_responses(async_client: openai.AsyncOpenAI) -> None:
    created = await asyncio.gather(
        *(
            async_client.responses.create(
                model="m", input=f"Count {i}", background=True, max_output_tokens=16, extra_body={"stop": [" "]}
            )
            for i in range(200)  # a stop at the first space keeps the model's share of this test small
        )
    )
    cancelled = await asyncio.gather(*(async_client.responses.cancel(r.id) for r in created[::4]))

    async def settle(response_id: str) -> Any:
        while True:
            response = await async_client.responses.retrieve(response_id)
            if response.status not in ("queued", "in_progress"):
                return response
            await asyncio.sleep(0.05)  # a poll interval, as a client would keep (not a timing assertion)

    final = await asyncio.gather(*(settle(r.id) for r in created))
    for i, response in enumerate(final):
        if i % 4 == 0:  # the cancel won, or the run had finished first: either way, one state
            assert response.status == cancelled[i // 4].status
            assert response.status in ("cancelled", "completed", "incomplete")
        else:
            assert response.usage is not None
            assert response.status == ("incomplete" if response.usage.output_tokens == 16 else "completed")


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        pytest.param(
            "stream.no_completed", lambda types, numbers: types[-1] == "response.output_item.done", id="no-completed"
        ),
        pytest.param("stream.skip_sequence=3", lambda types, numbers: numbers[:4] == [0, 1, 2, 4], id="skip-sequence"),
        pytest.param("stream.cut_after=5", lambda types, numbers: numbers == [0, 1, 2, 3, 4], id="cut-after"),
    ],
)
def test_stream_faults(live: Live, fault: str, check: Any) -> None:
    body = {"model": "m", "input": "Hi", "max_output_tokens": 64, "temperature": 0, "store": False}
    events = _stream(live, body, {"x-mockserver-fault": fault})
    assert check([e["type"] for e in events], [e["sequence_number"] for e in events])


def test_no_completed_breaks_the_sdk_helper(client: openai.OpenAI) -> None:
    headers = {"x-mockserver-fault": "stream.no_completed"}
    with (
        client.responses.stream(
            model="m", input="Hi", max_output_tokens=64, temperature=0, extra_headers=headers
        ) as stream,
        pytest.raises(RuntimeError, match=r"response\.completed"),
    ):
        stream.get_final_response()
