"""What a journaled answer said, for eyes: its text, reasoning, tool calls, usage and logprobs.

The journal keeps the bytes that went back (:attr:`~mockserver.faults.journal.Entry.answer`),
not the :class:`~mockserver.spine.result.Result` they were encoded from: what the client got,
faults' damage included, on every wire and every answering backend (a replayed provider's bytes
were never a Result here). So the console reads them as a client would, one document at a time
(a JSON body is one; a stream is one per event), and gathers the parts it shows. This is a
viewer's reading, never the server's: nothing here feeds an answer.

Every wire of the server is read: OpenAI chat and completions (chunks or whole), Responses
(the final ``response.*`` object, else its deltas), Anthropic Messages (blocks and deltas) and
Gemini (candidates' parts). A document none of them knows (an MCP call, a batch, a new kind)
adds nothing: the console shows its raw bytes instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Folded", "fold", "frames"]

_BLOCKS = re.compile(r"(\r?\n\r?\n)")  # the blank line that ends an SSE event (kept by split)


@dataclass(slots=True)
class Folded:
    """The parts of one answer, per choice index."""

    text: dict[int, str] = field(default_factory=dict)
    reasoning: dict[int, str] = field(default_factory=dict)
    tools: dict[tuple[int, int], dict[str, str]] = field(default_factory=dict)  # (choice, call) → name, id, arguments
    usage: dict[str, Any] | None = None
    logprobs: list[dict[str, Any]] = field(default_factory=list)  # token, logprob, top [[token, logprob]]
    error: dict[str, Any] | None = None

    def add_text(self, index: int, text: Any, *, reasoning: bool = False) -> None:
        if isinstance(text, str) and text:
            into = self.reasoning if reasoning else self.text
            into[index] = into.get(index, "") + text

    def tool(self, index: int, call: int, name: Any = None, id: Any = None, arguments: Any = None) -> None:
        slot = self.tools.setdefault((index, call), {"name": "", "id": "", "arguments": ""})
        if isinstance(name, str) and name:
            slot["name"] = name
        if isinstance(id, str) and id:
            slot["id"] = id
        if isinstance(arguments, str):
            slot["arguments"] += arguments
        elif arguments is not None:
            slot["arguments"] += json.dumps(arguments, ensure_ascii=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "text": [{"index": i, "text": t} for i, t in sorted(self.text.items())],
            "reasoning": [{"index": i, "text": t} for i, t in sorted(self.reasoning.items())],
            "tool_calls": [{"index": i, **slot} for (i, _), slot in sorted(self.tools.items())],
            "usage": self.usage,
            "logprobs": self.logprobs,
            "error": self.error,
        }


def frames(text: str) -> list[tuple[int, str | None, str]]:
    """A stream's events as ``(byte offset of its end, event name, data)``: blocks ended by a blank
    line holding a ``data:`` line, ``[DONE]`` left out (what the journal counts as events)."""
    found: list[tuple[int, str | None, str]] = []
    offset = 0
    for piece in _BLOCKS.split(text):  # blocks, each followed by the blank line that ended it
        offset += len(piece.encode("utf-8", "replace"))
        if _BLOCKS.fullmatch(piece):
            continue
        name: str | None = None
        data: list[str] = []
        for line in piece.splitlines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data and data != ["[DONE]"]:
            found.append((offset, name, "\n".join(data)))  # where its data ends, in bytes
    return found


def fold(documents: list[Any]) -> Folded:
    """The parts of an answer given as its JSON documents (one body, or a stream's events)."""
    out = Folded()
    for doc in documents:
        if isinstance(doc, dict):
            _document(out, doc)
    return out


def _document(out: Folded, doc: dict[str, Any]) -> None:
    if isinstance(doc.get("error"), dict):
        out.error = doc["error"]
        return
    kind = doc.get("type")
    if isinstance(kind, str) and kind.startswith("response.") and isinstance(doc.get("response"), dict):
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            done = Folded()  # the whole response: it replaces what the deltas built
            _response(done, doc["response"])
            out.text, out.reasoning, out.tools, out.logprobs = done.text, done.reasoning, done.tools, done.logprobs
            out.usage, out.error = done.usage or out.usage, done.error or out.error
        return
    if isinstance(kind, str) and kind.startswith("response."):
        _responses_event(out, kind, doc)
    elif doc.get("object") == "response":
        _response(out, doc)
    elif kind in ("message", "message_start", "message_delta", "content_block_start", "content_block_delta", "error"):
        _anthropic(out, kind, doc)
    elif isinstance(doc.get("candidates"), list) or "usageMetadata" in doc:
        _gemini(out, doc)
    elif isinstance(doc.get("choices"), list):
        _choices(out, doc)
    if isinstance(doc.get("usage"), dict) and kind not in ("message_start", "message_delta", "message"):
        out.usage = doc["usage"]


def _choices(out: Folded, doc: dict[str, Any]) -> None:
    """OpenAI chat and completions, chunks and whole answers."""
    for choice in doc["choices"]:
        if not isinstance(choice, dict):
            continue
        index = choice.get("index", 0) if isinstance(choice.get("index"), int) else 0
        part = choice.get("delta") if isinstance(choice.get("delta"), dict) else choice.get("message")
        if isinstance(part, dict):
            out.add_text(index, part.get("content"))
            out.add_text(index, part.get("reasoning_content") or part.get("reasoning"), reasoning=True)
            for n, call in enumerate(part.get("tool_calls") or []):
                if isinstance(call, dict):
                    function: dict[str, Any] = call["function"] if isinstance(call.get("function"), dict) else {}
                    at = call.get("index", n) if isinstance(call.get("index"), int) else n
                    out.tool(index, at, function.get("name"), call.get("id"), function.get("arguments"))
        else:
            out.add_text(index, choice.get("text"))
        _logprobs(out, choice.get("logprobs"))


def _logprobs(out: Folded, logprobs: Any) -> None:
    if not isinstance(logprobs, dict):
        return
    content = logprobs.get("content")
    if isinstance(content, list):  # chat's
        out.logprobs += [_token(t) for t in content if isinstance(t, dict)]
        return
    tokens, values, tops = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    if isinstance(tokens, list) and isinstance(values, list):  # completions'
        for n, token in enumerate(tokens):
            top = tops[n] if isinstance(tops, list) and n < len(tops) and isinstance(tops[n], dict) else {}
            value = values[n] if n < len(values) else None
            out.logprobs.append({"token": token, "logprob": value, "top": [[k, v] for k, v in top.items()]})


def _token(token: dict[str, Any]) -> dict[str, Any]:
    top = token.get("top_logprobs") or []
    pairs = [[t.get("token"), t.get("logprob")] for t in top if isinstance(t, dict)]
    return {"token": token.get("token"), "logprob": token.get("logprob"), "top": pairs}


def _response(out: Folded, response: dict[str, Any]) -> None:
    """A whole Responses object: its output items."""
    for n, item in enumerate(response.get("output") or []):
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or []:
                if isinstance(part, dict):
                    out.add_text(0, part.get("text") or part.get("refusal"))
                    for token in part.get("logprobs") or []:
                        if isinstance(token, dict):
                            out.logprobs.append(_token(token))
        elif kind == "reasoning":
            for part in [*(item.get("summary") or []), *(item.get("content") or [])]:
                if isinstance(part, dict):
                    out.add_text(0, part.get("text"), reasoning=True)
        elif isinstance(kind, str) and kind.endswith("call"):
            out.tool(0, n, item.get("name") or kind, item.get("call_id") or item.get("id"), item.get("arguments"))
    if isinstance(response.get("usage"), dict):
        out.usage = response["usage"]
    if isinstance(response.get("error"), dict):
        out.error = response["error"]


def _responses_event(out: Folded, kind: str, doc: dict[str, Any]) -> None:
    at = doc.get("output_index", 0) if isinstance(doc.get("output_index"), int) else 0
    if kind == "response.output_text.delta":
        out.add_text(0, doc.get("delta"))
    elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
        out.add_text(0, doc.get("delta"), reasoning=True)
    elif kind == "response.output_item.added" and isinstance(doc.get("item"), dict):
        item = doc["item"]
        if str(item.get("type", "")).endswith("call"):
            out.tool(0, at, item.get("name") or item.get("type"), item.get("call_id") or item.get("id"))
    elif kind == "response.function_call_arguments.delta":
        out.tool(0, at, arguments=doc.get("delta"))


def _anthropic(out: Folded, kind: Any, doc: dict[str, Any]) -> None:
    if kind == "error" and isinstance(doc.get("error"), dict):
        out.error = doc["error"]
    elif kind == "message":
        for n, block in enumerate(doc.get("content") or []):
            _block(out, n, block)
        out.usage = doc.get("usage") if isinstance(doc.get("usage"), dict) else out.usage
    elif kind == "message_start" and isinstance(doc.get("message"), dict):
        out.usage = doc["message"].get("usage") or out.usage
    elif kind == "message_delta" and isinstance(doc.get("usage"), dict):
        out.usage = {**(out.usage or {}), **doc["usage"]}
    elif kind == "content_block_start":
        _block(out, doc.get("index", 0), doc.get("content_block"))
    elif kind == "content_block_delta" and isinstance(doc.get("delta"), dict):
        delta, at = doc["delta"], doc.get("index", 0) if isinstance(doc.get("index"), int) else 0
        out.add_text(0, delta.get("text"))
        out.add_text(0, delta.get("thinking"), reasoning=True)
        if isinstance(delta.get("partial_json"), str):
            out.tool(0, at, arguments=delta["partial_json"])


def _block(out: Folded, at: Any, block: Any) -> None:
    if not isinstance(block, dict):
        return
    kind, index = block.get("type"), at if isinstance(at, int) else 0
    if kind == "text":
        out.add_text(0, block.get("text"))
    elif kind == "thinking":
        out.add_text(0, block.get("thinking"), reasoning=True)
    elif kind in ("tool_use", "server_tool_use"):
        given = block.get("input")
        out.tool(0, index, block.get("name"), block.get("id"), given if given not in ({}, None) else None)


def _gemini(out: Folded, doc: dict[str, Any]) -> None:
    for candidate in doc.get("candidates") or []:
        if not isinstance(candidate, dict):
            continue
        index = candidate.get("index", 0) if isinstance(candidate.get("index"), int) else 0
        content: dict[str, Any] = candidate["content"] if isinstance(candidate.get("content"), dict) else {}
        for n, part in enumerate(content.get("parts") or []):
            if not isinstance(part, dict):
                continue
            out.add_text(index, part.get("text"), reasoning=part.get("thought") is True)
            call = part.get("functionCall")
            if isinstance(call, dict):
                out.tool(index, len(out.tools) + n, call.get("name"), call.get("id"), call.get("args"))
    if isinstance(doc.get("usageMetadata"), dict):
        out.usage = doc["usageMetadata"]
