"""Journal entries as the console shows them: a list row, one request opened, a timeline.

Entries are read generically (method, path, body, the answer's bytes and headers), so a kind
of request this module has never heard of (an MCP call, a batch, a realtime session) still
lists, filters and opens: its wire is named after its path, its answer shown as it went out.

Everything that leaves here is redacted as a cassette is (:mod:`mockserver.cassettes.redact`):
the request body, the answer's bytes and its headers. Escaping is the page's job (it writes
text nodes only), so the JSON here holds the text as the client sent it.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from typing import Any

from mockserver.cassettes.redact import redact_bytes, redact_headers, redact_text
from mockserver.console.fold import fold, frames
from mockserver.faults.journal import ANSWER_KEPT, Entry
from mockserver.wire import headers as h

__all__ = ["Rows", "detail", "matches", "row", "turn"]

_PREVIEW = 120  # characters of the prompt a row shows


def wire(path: str) -> str:
    """The endpoint family a path belongs to, by its shape (``chat``, ``responses``, ``gemini``…)."""
    tail = path.rstrip("/")
    if ":generateContent" in tail or ":streamGenerateContent" in tail or ("/models/" in tail and ":" in tail):
        return "gemini"
    for known in ("chat/completions", "completions", "responses", "messages", "embeddings", "images", "mcp"):
        if f"/{known}" in tail:
            return known.replace("chat/completions", "chat")
    parts = [p for p in tail.split("/") if p and p not in ("v1", "v1beta", "openai")]
    return parts[0] if parts else "other"


def _header(entry: Entry, name: bytes) -> str | None:
    for key, value in entry.answer_headers or ():
        key_bytes = key if isinstance(key, bytes) else str(key).encode("latin-1")
        if key_bytes.lower() == name:
            return value.decode("latin-1") if isinstance(value, bytes) else str(value)
    return None


def _model(entry: Entry) -> str | None:
    body = entry.body
    if isinstance(body, dict) and isinstance(body.get("model"), str):
        return str(body["model"])
    if "/models/" in entry.path:  # Gemini names the model in the path
        return entry.path.split("/models/", 1)[1].split(":", 1)[0] or None
    return None


def _preview(body: Any) -> str:
    """The last thing the client said: the newest message's text, else the prompt or input."""
    if not isinstance(body, dict):
        return ""
    if isinstance(body.get("method"), str) and body.get("jsonrpc"):  # an MCP message: its method and tool
        params: dict[str, Any] = body["params"] if isinstance(body.get("params"), dict) else {}
        return redact_text(f"{body['method']} {params.get('name') or ''}".strip())[:_PREVIEW]
    said: Any = body.get("messages") or body.get("input") or body.get("contents") or body.get("prompt")
    if isinstance(said, list) and said:
        said = said[-1]
    if isinstance(said, dict):
        said = said.get("content") if "content" in said else said.get("parts", said.get("text"))
    if isinstance(said, list):
        said = " ".join(str(p.get("text", "")) if isinstance(p, dict) else str(p) for p in said)
    text = said if isinstance(said, str) else json.dumps(said, ensure_ascii=False) if said is not None else ""
    return redact_text(text[: _PREVIEW * 2])[:_PREVIEW]


def row(entry: Entry) -> dict[str, Any]:
    """The list's line for one entry (what the filters look at, too)."""
    body = entry.body
    return {
        "id": entry.id,
        "time": entry.time,
        "method": entry.method,
        "path": entry.path,
        "wire": wire(entry.path),
        # What made the entry ("model", "mcp", …): a field other rooms add to, read without knowing them.
        "kind": entry.kind,
        "session": entry.session,
        "model": _model(entry),
        "stream": isinstance(body, dict) and body.get("stream") is True,
        "status": entry.status,
        "source": _header(entry, h.SOURCE),
        "faults": list(entry.faults),
        "ended": entry.ended,
        "events": entry.events,
        "duration": entry.duration,
        "seed": entry.seed,
        "origin": entry.origin,
        "preview": _preview(body),
    }


FILTERS = ("session", "wire", "kind", "model", "status", "source", "fault")


def matches(line: dict[str, Any], want: dict[str, str]) -> bool:
    """Does a row pass the filters (each an exact value; ``fault`` a substring of one applied,
    ``status`` also a class such as ``4xx``)?"""
    for name, value in want.items():
        if not value:
            continue
        if name == "fault":
            if not any(value in f for f in line["faults"]):
                return False
        elif name == "status":
            status = str(line["status"]) if line["status"] is not None else "none"
            if value != status and not (len(value) == 3 and value.endswith("xx") and status[:1] == value[:1]):
                return False
        elif str(line.get(name) or "") != value:
            return False
    return True


class Rows:
    """Rows of finished entries, kept by id (a finished entry never changes): a page over
    10,000 entries reads each body once, not once per look. Bounded, oldest out first."""

    def __init__(self, size: int = 20_000) -> None:
        self.size = size
        self._rows: OrderedDict[int, dict[str, Any]] = OrderedDict()

    def of(self, entry: Entry) -> dict[str, Any]:
        found = self._rows.get(entry.id)
        if found is not None and found["time"] == entry.time:
            return found
        line = row(entry)
        if entry.ended != "pending":
            self._rows[entry.id] = line
            if len(self._rows) > self.size:
                self._rows.popitem(last=False)
        return line

    def clear(self) -> None:
        self._rows.clear()


def _documents(answer: str, stream: bool) -> tuple[list[Any], list[tuple[int, str | None, str]]]:
    if stream:
        events = frames(answer)
        docs: list[Any] = []
        for _, _, data in events:
            try:
                docs.append(json.loads(data))
            except ValueError:
                docs.append(None)
        return docs, events
    try:
        whole = json.loads(answer)
    except ValueError:
        return [], []
    return (whole if isinstance(whole, list) else [whole]), []  # a list: Gemini's stream as a JSON array


def timeline(entry: Entry, events: list[tuple[int, str | None, str]], docs: list[Any]) -> dict[str, Any]:
    """Each kept event at the time its bytes went out (the body message that carried them)."""
    marks = entry.marks
    points: list[dict[str, Any]] = []
    at = 0
    for (end, name, _), doc in zip(events, docs, strict=True):
        while at < len(marks) - 1 and marks[at][1] < end:
            at += 1
        seconds = marks[at][0] if marks else 0.0
        label = name or (doc.get("type") or doc.get("object") if isinstance(doc, dict) else None) or "data"
        points.append({"t": round(seconds, 6), "label": str(label)})
    kept_all = len(points) >= entry.events
    return {
        "events": points,
        "total": entry.events,
        "complete": kept_all,
        "ended": entry.ended,
        "duration": entry.duration,
    }


def detail(entry: Entry) -> dict[str, Any]:
    """One request opened: the entry, its answer read and folded, its stream's timeline."""
    data = entry.to_json()
    line = row(entry)
    answer = data.pop("answer") or ""
    answer = redact_bytes(answer.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")
    media = _header(entry, b"content-type") or ""
    stream = media.startswith("text/event-stream")
    docs, events = _documents(answer, stream)
    body = _redacted(data.pop("body"))
    headers = [list(pair) for pair in redact_headers((k, v) for k, v in data.pop("answer_headers") or [])]
    return {
        **data,
        **line,
        "body": body,
        "answer": answer,
        "answer_truncated": len(answer.encode()) >= ANSWER_KEPT,
        "answer_headers": headers,
        "folded": fold(docs).to_json(),
        "timeline": timeline(entry, events, docs) if stream else None,
    }


def _redacted(value: Any) -> Any:
    """``value`` with every credential gone, as a cassette's body would be (a JSON value back,
    else the redacted text: a pattern may cut through JSON's own syntax)."""
    if value is None:
        return None
    text = redact_bytes(json.dumps(value, ensure_ascii=False).encode()).decode("utf-8", "replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


def turn(entry: Entry) -> dict[str, Any]:
    """One call of a session's trajectory: what came in since the model last spoke, and what it said."""
    body = entry.body if isinstance(entry.body, dict) else {}
    said: Any = body.get("messages") or body.get("input") or body.get("contents") or body.get("prompt") or []
    items = said if isinstance(said, list) else [said]
    news: list[Any] = []
    for item in reversed(items):  # back to the model's last turn
        role = item.get("role") if isinstance(item, dict) else None
        if role in ("assistant", "model") and news:
            break
        news.append(item)
        if role in ("assistant", "model"):
            break
    news.reverse()
    opened = detail(entry)
    shown = _redacted(news[-8:])
    return {
        "id": entry.id,
        "path": entry.path,
        "wire": opened["wire"],
        "status": entry.status,
        "input": shown,
        "folded": opened["folded"],
        "answer": opened["answer"] if not any(opened["folded"][k] for k in ("text", "tool_calls", "error")) else "",
    }
