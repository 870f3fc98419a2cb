"""Anthropic's and Gemini's answers are remembered too, plain and streamed: the same bytes
(Anthropic's request-id beside x-request-id), the backend asked once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from mockserver.spine.backend import Ask
from mockserver.spine.events import Event
from tests.support.live import FROZEN, Live, serve_in_thread

ANTHROPIC: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": "Where is my order?"}],
}
GEMINI: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": "Where is my order?"}]}]}
WIRES = [
    ("/v1/messages", ANTHROPIC, {"x-api-key": "sk-ant-test", "anthropic-version": "2023-06-01"}),
    ("/v1beta/models/gemini-2.5-flash:generateContent", GEMINI, {"x-goog-api-key": "test"}),
]


@pytest.fixture
def live() -> Iterator[Live]:
    with serve_in_thread(create_app(Settings(backend="script", frozen_time=FROZEN))) as live:
        assert live.app is not None
        live.app.state.ctx.script.add(text="It ships on Monday.")
        yield live


@pytest.mark.parametrize(("path", "body", "headers"), WIRES, ids=["anthropic", "gemini"])
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
def test_each_wire_is_remembered(
    live: Live, monkeypatch: pytest.MonkeyPatch, path: str, body: dict[str, Any], headers: dict[str, str], stream: bool
) -> None:
    assert live.app is not None
    backend = live.app.state.ctx.chain.get("script")
    answer = backend.answer
    asks: list[Ask] = []

    def counted(ask: Ask) -> AsyncIterator[Event]:
        asks.append(ask)
        result: AsyncIterator[Event] = answer(ask)
        return result

    monkeypatch.setattr(backend, "answer", counted)
    if stream:
        path = path.replace(":generateContent", ":streamGenerateContent?alt=sse")
        body = body if "contents" in body else {**body, "stream": True}
    with httpx.Client(base_url=live.url, headers=headers) as client:
        answers = [client.post(path, json=body) for _ in range(3)]
    assert [r.status_code for r in answers] == [200, 200, 200], answers[0].text
    if stream:
        assert answers[0].headers["content-type"].startswith("text/event-stream") and answers[0].text.count("data:") > 3
    else:
        assert "It ships on Monday" in answers[0].text
    kept = [([(k, v) for k, v in r.headers.items() if k != "date"], r.content) for r in answers]
    assert kept[1] == kept[0] and kept[2] == kept[0]
    if path == "/v1/messages":
        assert answers[0].headers["request-id"] == answers[0].headers["x-request-id"]
    assert len(asks) == 1
