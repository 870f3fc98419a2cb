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


# ---- issue 34, item 5: no 500 for any input -------------------------------------------------
# Where a lone surrogate cannot be carried through (a tool schema's names, ``required`` and
# ``enum``, which answers are made of; an item's ``type``; anything the admin API keeps in the
# state), it is a 400 naming the field, on every wire; the server answers on afterwards.


def _tool(properties: dict[str, object], **extra: object) -> dict[str, object]:
    return {"type": "object", "properties": properties, **extra}


_PROPERTY = _tool({"a" + HALF: {"type": "string"}})
_REQUIRED = _tool({"a": {"type": "string"}}, required=["a" + HALF])
_ENUM = _tool({"a": {"type": "string", "enum": ["x" + HALF]}})
_SCHEMA_ENUM = _tool({"a": {"enum": ["q" + HALF]}}, required=["a"])
_CHAT_TOOLS = "tools[0].function.parameters"
REFUSED = [
    *(
        pytest.param(
            "/v1/chat/completions",
            {
                "model": "m",
                "messages": MSG,
                "tools": [{"type": "function", "function": {"name": "f", "parameters": p}}],
            },
            f"{_CHAT_TOOLS}.{where}",
            id=f"chat-tool-{name}",
        )
        for name, p, where in (
            ("property", _PROPERTY, "properties.a\\ud800"),
            ("required", _REQUIRED, "required[0]"),
            ("enum", _ENUM, "properties.a.enum[0]"),
        )
    ),
    pytest.param(
        "/v1/chat/completions",
        {
            "model": "m",
            "messages": MSG,
            "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": _SCHEMA_ENUM}},
        },
        "response_format.json_schema.schema.properties.a.enum[0]",
        id="chat-json-schema-enum",
    ),
    *(
        pytest.param(
            "/v1/responses",
            {"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f", "parameters": p}]},
            f"tools[0].parameters.{where}",
            id=f"responses-tool-{name}",
        )
        for name, p, where in (
            ("property", _PROPERTY, "properties.a\\ud800"),
            ("required", _REQUIRED, "required[0]"),
            ("enum", _ENUM, "properties.a.enum[0]"),
        )
    ),
    pytest.param(
        "/v1/responses",
        {"model": "m", "input": [{"type": "message" + HALF, "role": "user", "content": "hi"}]},
        "input[0].type",
        id="responses-item-type",
    ),
    pytest.param(
        "/v1/responses",
        {"model": "m", "input": "hi", "text": {"format": {"type": "json_schema", "name": "x", "schema": _SCHEMA_ENUM}}},
        "text.format.schema.properties.a.enum[0]",
        id="responses-format-enum",
    ),
    pytest.param("/__mockserver/answers", {"text": "a" + HALF}, "text", id="admin-answer-text"),
    pytest.param("/__mockserver/answers", {"match": "a" + HALF, "text": "x"}, "match", id="admin-answer-match"),
    pytest.param("/__mockserver/answers", {"text": "x", "session": HALF}, "session", id="admin-answer-session"),
    pytest.param(
        "/__mockserver/answers",
        {"tool_calls": [{"name": "f", "arguments": {"a" + HALF: 1}}]},
        "tool_calls[0].arguments.a\\ud800",
        id="admin-answer-arguments",
    ),
    pytest.param("/__mockserver/answers", [{"text": "fine"}, {"text": HALF}], "[1].text", id="admin-answer-list"),
    pytest.param("/__mockserver/rules", {"faults": "http.500", "path": "/v1/" + HALF}, "path", id="admin-rule-path"),
    pytest.param("/__mockserver/faults", {"faults": "http.500" + HALF}, "faults", id="admin-faults"),
]


@pytest.mark.parametrize(("path", "body", "param"), REFUSED)
def test_where_one_cannot_be_carried_it_is_a_400_naming_the_field(
    server: Live, path: str, body: object, param: str
) -> None:
    for stream in (False, True) if path.startswith("/v1/") else (False,):
        sent = {**body, "stream": True} if stream and isinstance(body, dict) else body
        answer = _post(server, path, sent)  # type: ignore[arg-type]
        assert answer.status_code == 400, answer.text[:500]
        assert error_envelope(answer.json())["param"] == param
    if path.startswith("/__mockserver/"):  # all or none: nothing of the body was kept
        kept = httpx.get(server.url + path, timeout=30).json()
        assert not kept.get("rules"), kept
    assert _post(server, "/v1/chat/completions", {"model": "m", "messages": MSG, "max_tokens": 2}).status_code == 200


@pytest.mark.parametrize(
    ("path", "body"),
    [
        pytest.param(
            "/v1/messages",
            {
                "model": "m",
                "max_tokens": 5,
                "messages": MSG,
                "tools": [{"name": "f", "input_schema": _PROPERTY}],
                "tool_choice": {"type": "any"},
            },
            id="anthropic-tool",
        ),
        pytest.param(
            "/v1beta/models/m:generateContent",
            {
                "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
                "tools": [{"functionDeclarations": [{"name": "f", "parameters": _PROPERTY}]}],
            },
            id="gemini-tool",
        ),
    ],
)
def test_other_wires_answer_a_400_in_their_own_envelope(server: Live, path: str, body: dict[str, object]) -> None:
    answer = _post(server, path, body)
    assert answer.status_code == 400, answer.text[:500]
    payload = answer.json()
    assert isinstance(payload.get("error"), dict) and "Unicode" in payload["error"]["message"], payload
