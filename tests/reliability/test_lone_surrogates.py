"""Regression (found by the fuzzer): JSON may escape half a surrogate pair (``"\\ud800"``).
Text the model reads was already a 400; a field the answer echoes (``model``, ``metadata``)
made the UTF-8 encoding of the answer fail — a 500, or an in-band server error mid-stream —
and so did an image prompt (its bytes key the picture) and the SQLite store's writes."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.reliability.harness import error_envelope, frames, thread_server
from tests.support.live import Live

HALF = "\ud800"
MSG = [{"role": "user", "content": "hi"}]
ECHOED = [
    pytest.param("/v1/completions", {"model": "m" + HALF, "prompt": "ab", "max_tokens": 2}, "model", id="completions"),
    pytest.param(
        "/v1/chat/completions", {"model": "m" + HALF, "messages": MSG, "max_tokens": 2}, "model", id="chat-model"
    ),
    pytest.param(
        "/v1/responses", {"model": "m", "input": "hi", "metadata": {"k": HALF}}, "metadata", id="responses-metadata"
    ),
    pytest.param("/v1/responses", {"model": "m" + HALF, "input": "hi"}, "model", id="responses-model"),
    pytest.param("/v1/embeddings", {"model": "m" + HALF, "input": "hi"}, "model", id="embeddings-model"),
]


@pytest.fixture(scope="module", params=["memory", "sqlite"])
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    store = "memory" if request.param == "memory" else f"sqlite:{tmp_path_factory.mktemp('store') / 's.sqlite'}"
    with thread_server(create_app(Settings(store=store, frozen_time=1_700_000_000.0))) as running:
        yield running.live


def _post(live: Live, path: str, body: dict[str, object]) -> httpx.Response:
    # json.dumps escapes the lone surrogate; httpx's json= could not encode it at all.
    raw = json.dumps(body).encode()
    return httpx.post(live.url + path, content=raw, headers={"content-type": "application/json"}, timeout=60)


@pytest.mark.parametrize(("path", "body", "field"), ECHOED)
def test_an_echoed_lone_surrogate_comes_back_escaped(
    server: Live, path: str, body: dict[str, object], field: str
) -> None:
    answer = _post(server, path, body)
    assert answer.status_code == 200, answer.text
    assert answer.json()[field] == body[field]  # the bytes are \u-escaped JSON, not invalid UTF-8
    if path == "/v1/responses":  # stored, and read back
        kept = httpx.get(server.url + path + "/" + answer.json()["id"], timeout=30)
        assert kept.status_code == 200 and kept.json()[field] == body[field]
    streamed = _post(server, path, {**body, "stream": True}) if path != "/v1/embeddings" else None
    if streamed is not None:
        assert streamed.status_code == 200
        events = [json.loads(f.data) for f in frames(streamed.content) if f.data != "[DONE]"]
        assert not any("error" in e or e.get("type") == "error" for e in events), events[-1]


def test_a_stored_chat_completion_echoing_one_is_kept(server: Live) -> None:
    answer = _post(server, "/v1/chat/completions", {"model": "m" + HALF, "messages": MSG, "store": True})
    assert answer.status_code == 200
    kept = httpx.get(server.base_url + "/chat/completions/" + answer.json()["id"], timeout=30)
    assert kept.status_code == 200 and kept.json()["model"] == "m" + HALF


@pytest.mark.parametrize("model", ["dall-e-2", "dall-e-3", "gpt-image-1"])
def test_an_image_prompt_with_one_is_a_400(server: Live, model: str) -> None:
    answer = _post(server, "/v1/images/generations", {"model": model, "prompt": "a cat " + HALF})
    assert answer.status_code == 400, answer.text
    assert error_envelope(answer.json())["param"] == "prompt"


def test_the_journal_shows_one(server: Live) -> None:
    _post(server, "/v1/chat/completions", {"model": "m" + HALF, "messages": MSG, "max_tokens": 1})
    journal = httpx.get(server.url + "/__mockserver/journal", timeout=30)
    assert journal.status_code == 200
    assert any(e["body"] and e["body"].get("model") == "m" + HALF for e in journal.json()["entries"])
