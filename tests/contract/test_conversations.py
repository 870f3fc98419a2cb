"""Conversations through the official ``openai`` SDK (``client.conversations.*``,
``client.conversations.items.*``, ``responses.create(conversation=…)``), every body validated
against the spec's schemas: the object's life, its items paged both ways, responses that append
their items and answer from the conversation so far, and the same sequence giving the same
bytes on a fresh server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread
from tests.support.spec import validate

MODEL = "gpt-4o-mini"


@pytest.fixture(scope="module")
def server() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live:
        yield live


@pytest.fixture
def client(server: Live) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.base_url, api_key="k", max_retries=0) as c:
        yield c


def _wire(obj: Any) -> Any:
    return obj.model_dump(mode="json", exclude_unset=True)


def _ask(client: openai.OpenAI, text: str, **kw: Any) -> Any:
    return client.responses.create(model=MODEL, input=text, max_output_tokens=16, **kw)


def test_a_conversations_life(client: openai.OpenAI) -> None:
    conv = client.conversations.create(metadata={"topic": "demo"})
    validate("ConversationResource", _wire(conv))
    assert conv.id.startswith("conv_") and conv.metadata == {"topic": "demo"} and conv.created_at == int(FROZEN)
    assert client.conversations.retrieve(conv.id) == conv
    updated = client.conversations.update(conv.id, metadata={"topic": "project-x"})
    assert updated.metadata == {"topic": "project-x"} and client.conversations.retrieve(conv.id) == updated
    deleted = client.conversations.delete(conv.id)
    validate("DeletedConversationResource", _wire(deleted))
    assert (deleted.id, deleted.deleted, deleted.object) == (conv.id, True, "conversation.deleted")
    with pytest.raises(openai.NotFoundError) as missing:
        client.conversations.retrieve(conv.id)
    body = missing.value.response.json()
    validate("ErrorResponse", body)
    assert body["error"]["param"] == "conversation_id" and conv.id in body["error"]["message"]


def test_items_are_created_paged_retrieved_and_deleted(client: openai.OpenAI) -> None:
    conv = client.conversations.create(items=[{"type": "message", "role": "user", "content": "Hello!"}])
    added = client.conversations.items.create(
        conv.id,
        items=[
            {"type": "message", "role": "assistant", "content": "Hi, how can I help?"},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather?"}]},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Paris"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny."},
        ],
    )
    validate("ConversationItemList", _wire(added))
    assert [i.type for i in added.data] == ["message", "message", "function_call", "function_call_output"]
    oldest = client.conversations.items.list(conv.id, order="asc", limit=2)
    validate("ConversationItemList", _wire(oldest))
    page = _wire(oldest)
    assert oldest.has_more and [i.id for i in oldest.data] == [page["first_id"], page["last_id"]]
    rest = client.conversations.items.list(conv.id, order="asc", after=page["last_id"])
    every = [*oldest.data, *rest.data]
    ids = [str(i.id) for i in every]
    assert ids[1:] == [i.id for i in added.data] and not rest.has_more
    assert _wire(every[0])["content"][0]["text"] == "Hello!"
    newest_first = [i.id for i in client.conversations.items.list(conv.id, limit=1)]  # the SDK pages on
    assert newest_first == ids[::-1]
    one = client.conversations.items.retrieve(ids[2], conversation_id=conv.id)
    validate("ConversationItem", _wire(one))
    assert one == every[2]
    after = client.conversations.items.delete(ids[2], conversation_id=conv.id)
    assert after.id == conv.id
    assert ids[2] not in [i.id for i in client.conversations.items.list(conv.id)]
    with pytest.raises(openai.NotFoundError) as gone:
        client.conversations.items.retrieve(ids[2], conversation_id=conv.id)
    assert gone.value.response.json()["error"]["param"] == "item_id"


def test_responses_append_to_the_conversation_and_answer_from_it(client: openai.OpenAI) -> None:
    conv = client.conversations.create()
    first = _ask(client, "My name is Ada.", conversation=conv.id)
    second = _ask(client, "What is my name?", conversation={"id": conv.id})
    validate("Response", _wire(second))
    assert second.conversation is not None and second.conversation.id == conv.id
    items = client.conversations.items.list(conv.id, order="asc").data
    texts = [part.text for item in items for part in item.content]  # type: ignore[union-attr]
    assert texts == ["My name is Ada.", first.output_text, "What is my name?", second.output_text]
    assert [items[1].id, items[3].id] == [first.output[0].id, second.output[0].id]
    # The history in view: the same turns continued by previous_response_id answer the same.
    alone = _ask(client, "My name is Ada.")
    continued = _ask(client, "What is my name?", previous_response_id=alone.id)
    assert (first.output_text, second.output_text) == (alone.output_text, continued.output_text)
    assert second.usage is not None and continued.usage is not None and first.usage is not None
    assert second.usage.input_tokens == continued.usage.input_tokens > first.usage.input_tokens


def test_streamed_and_background_responses_append_when_they_end(client: openai.OpenAI, server: Live) -> None:
    conv = client.conversations.create()
    done = None
    for event in client.responses.create(model=MODEL, input="Hi.", conversation=conv.id, stream=True):
        if event.type in ("response.completed", "response.incomplete"):
            done = event.response
            items = client.conversations.items.list(conv.id, order="asc").data
            assert [i.id for i in items][-1] == done.output[0].id  # there before the closing event
    assert done is not None
    queued = _ask(client, "And now?", conversation=conv.id, background=True)
    final = queued
    for _ in range(200):
        final = client.responses.retrieve(queued.id)
        if final.status not in ("queued", "in_progress"):
            break
        httpx.post(server.url + "/__mockserver/clock", json={"advance": 1})
    assert final.status in ("completed", "incomplete")
    assert [i.id for i in client.conversations.items.list(conv.id, limit=1).data] == [final.output[0].id]


def test_previous_response_id_and_conversation_together_are_refused(client: openai.OpenAI) -> None:
    conv = client.conversations.create()
    earlier = _ask(client, "Hi.")
    with pytest.raises(openai.BadRequestError) as refused:
        _ask(client, "Again.", conversation=conv.id, previous_response_id=earlier.id)
    body = refused.value.response.json()
    validate("ErrorResponse", body)
    assert body["error"]["param"] == "conversation" and "previous_response_id" in body["error"]["message"]
    assert client.conversations.items.list(conv.id).data == []  # nothing appended


@pytest.mark.parametrize(
    "call",
    [
        lambda c: _ask(c, "Hi.", conversation="conv_missing"),
        lambda c: c.conversations.update("conv_missing", metadata={}),
        lambda c: c.conversations.delete("conv_missing"),
        lambda c: c.conversations.items.list("conv_missing"),
        lambda c: c.conversations.items.create("conv_missing", items=[{"role": "user", "content": "x"}]),
        lambda c: c.conversations.items.retrieve("msg_1", conversation_id="conv_missing"),
        lambda c: c.conversations.items.delete("msg_1", conversation_id="conv_missing"),
    ],
    ids=["responses", "update", "delete", "items.list", "items.create", "items.retrieve", "items.delete"],
)
def test_unknown_ids_are_404s_in_openais_envelope(client: openai.OpenAI, call: Any) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        call(client)
    body = missing.value.response.json()
    validate("ErrorResponse", body)
    assert "conv_missing" in body["error"]["message"] and body["error"]["type"] == "invalid_request_error"


def _sequence(url: str) -> list[str]:
    """A conversation's whole story, as the wire carried it."""
    with openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as client:
        conv = client.conversations.create(items=[{"role": "user", "content": "Remember: blue."}])
        answers = [_ask(client, text, conversation=conv.id) for text in ("What colour?", "Say it again.")]
        items = client.conversations.items.list(conv.id, order="asc")
        return [json.dumps(_wire(x), sort_keys=True) for x in (conv, *answers, items)]


def test_the_same_sequence_gives_the_same_bytes_on_a_fresh_server_and_after_a_reset() -> None:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as fresh:
        first = _sequence(fresh.url)
        httpx.post(fresh.url + "/__mockserver/reset").raise_for_status()
        assert _sequence(fresh.url) == first
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as other:
        assert _sequence(other.url) == first
