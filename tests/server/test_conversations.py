"""Conversations over raw HTTP: bad input is OpenAI's 400 naming the parameter (and the server
serves on), and two servers on one SQLite state are one fleet: a conversation made on one is
read, continued and listed on the other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, serve_in_thread


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    with (
        serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as live,
        httpx.Client(base_url=live.base_url, timeout=30) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def conv(http: httpx.Client) -> str:
    created = http.post("/conversations", json={"items": [{"role": "user", "content": "Hi."}]})
    found: str = created.json()["id"]
    return found


JSON = {"content-type": "application/json"}


def _too_many(n: int) -> list[dict[str, Any]]:
    return [{"role": "user", "content": str(i)} for i in range(n)]


BAD: list[Any] = [
    ("POST", "/conversations", {"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata"),
    ("POST", "/conversations", {"metadata": {"k" * 65: "v"}}, "metadata"),
    ("POST", "/conversations", {"metadata": {"k": "v" * 513}}, "metadata"),
    ("POST", "/conversations", {"items": _too_many(21)}, "items"),
    ("POST", "/conversations", {"items": [{"role": "robot", "content": "x"}]}, "items[0].role"),
    ("POST", "/conversations", {"items": [{"type": "telepathy"}]}, "items[0].type"),
    ("POST", "/conversations/{conv}", {}, "metadata"),
    ("POST", "/conversations/{conv}/items", {"items": []}, "items"),
    ("POST", "/conversations/{conv}/items", {}, "items"),
    ("GET", "/conversations/{conv}/items?limit=0", None, "limit"),
    ("GET", "/conversations/{conv}/items?limit=many", None, "limit"),
    ("GET", "/conversations/{conv}/items?order=sideways", None, "order"),
    ("GET", "/conversations/{conv}/items?after=msg_nowhere", None, "after"),
    ("POST", "/responses", {"model": "m", "input": "x", "conversation": {"name": "c"}}, "conversation.id"),
    ("POST", "/responses", {"model": "m", "input": "x", "conversation": 7}, "conversation"),
]


@pytest.mark.parametrize(("method", "path", "body", "param"), BAD, ids=[f"{b[3]}-{i}" for i, b in enumerate(BAD)])
def test_bad_input_is_a_400_naming_the_parameter(
    http: httpx.Client, conv: str, method: str, path: str, body: Any, param: str
) -> None:
    answer = http.request(method, path.format(conv=conv), json=body)
    assert answer.status_code == 400, answer.text
    error = answer.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error"
    assert http.get(f"/conversations/{conv}").status_code == 200  # and the server serves on


@pytest.mark.parametrize(
    ("path", "body", "param"),
    [
        ("/conversations", '{"metadata": {"k": "\\ud800"}}', "metadata.k"),
        ("/conversations/{conv}/items", '{"items": [{"role": "user", "content": "\\udc00"}]}', "items[0].content"),
        (
            "/responses",
            '{"model": "m", "conversation": "{conv}", "input": [{"type": "reasoning", "summary": '
            '[{"type": "summary_text", "text": "\\ud800"}]}]}',
            "input[0].summary[0].text",
        ),
    ],
    ids=["metadata", "items", "responses"],
)
def test_text_that_is_no_unicode_is_refused_and_nothing_is_written(
    http: httpx.Client, conv: str, path: str, body: str, param: str
) -> None:
    before = http.get(f"/conversations/{conv}/items").json()["data"]
    answer = http.post(path.format(conv=conv), content=body.replace("{conv}", conv), headers=JSON)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == param
    assert http.get(f"/conversations/{conv}/items").json()["data"] == before


def test_a_conversation_without_a_body_and_input_tokens_in_one(http: httpx.Client, conv: str) -> None:
    assert http.post("/conversations").json()["metadata"] == {}
    asked = {"model": "gpt-4o-mini", "input": "And now?"}
    alone = http.post("/responses/input_tokens", json=asked).json()["input_tokens"]
    within = http.post("/responses/input_tokens", json={**asked, "conversation": conv}).json()["input_tokens"]
    assert within > alone  # the conversation's items are read, as a response would read them


def test_two_servers_on_one_sqlite_state_share_conversations(tmp_path: Path) -> None:
    settings = Settings(frozen_time=FROZEN, state=f"sqlite:{tmp_path / 'state.db'}")
    with (
        serve_in_thread(create_app(settings)) as one,
        serve_in_thread(create_app(settings)) as two,
        httpx.Client(timeout=30) as http,
    ):
        made = http.post(one.base_url + "/conversations", json={"metadata": {"on": "one"}}).json()
        assert http.get(f"{two.base_url}/conversations/{made['id']}").json() == made
        ask = {"model": "gpt-4o-mini", "input": "Hello.", "max_output_tokens": 16, "conversation": made["id"]}
        answered = http.post(two.base_url + "/responses", json=ask).json()
        items = http.get(f"{one.base_url}/conversations/{made['id']}/items", params={"order": "asc"}).json()
        assert [i["id"] for i in items["data"]][-1] == answered["output"][0]["id"]
        # A second conversation from the same body, on the other server: the next free id.
        other = http.post(two.base_url + "/conversations", json={"metadata": {"on": "one"}}).json()
        assert other["id"] != made["id"]
