"""Recorded bodies in the other shape: a stream folded into one body, a body unfolded into a
stream. One recording then serves a request whether or not it streams.

Folding follows the rules the codecs stream by, read backwards, on the recorded JSON itself,
so every field the provider sent (its ids, ``system_fingerprint``, ``service_tier``…) stays
as recorded: chat deltas join into one message per choice (content and refusal text
concatenated, tool calls merged by index, logprobs lists concatenated), completion texts and
their logprobs join per choice, the last ``finish_reason`` wins, and the usage chunk becomes
``usage``. A Responses stream folds to the ``response`` of its terminal event.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

__all__ = ["fold", "unfold"]


def _events(frames: Iterable[bytes]) -> list[dict[str, Any]]:
    """The JSON objects of ``data:`` lines (``[DONE]`` and comments skipped)."""
    out: list[dict[str, Any]] = []
    for frame in frames:
        for line in frame.splitlines():
            if line.startswith(b"data:"):
                payload = line[5:].strip()
                if payload and payload != b"[DONE]":
                    try:
                        value = json.loads(payload)
                    except ValueError:
                        continue
                    if isinstance(value, dict):
                        out.append(value)
    return out


def fold(frames: Iterable[bytes]) -> dict[str, Any] | None:
    """One non-stream body from a recorded stream (None when it holds no JSON events)."""
    events = _events(frames)
    if not events:
        return None
    if any(str(e.get("type", "")).startswith("response.") for e in events):
        final = [e["response"] for e in events if isinstance(e.get("response"), dict)]
        return final[-1] if final else None
    first = events[0]
    chat = str(first.get("object", "")).startswith("chat.")
    body = {k: v for k, v in first.items() if k not in ("choices", "usage")}
    body["object"] = "chat.completion" if chat else "text_completion"
    choices: dict[int, dict[str, Any]] = {}
    usage = None
    for event in events:
        if event.get("usage") is not None:
            usage = event["usage"]
        for part in event.get("choices") or []:
            index = int(part.get("index", 0))
            choice = choices.setdefault(index, _empty(index, chat))
            _merge_chat(choice, part) if chat else _merge_text(choice, part)
    body["choices"] = [choices[i] for i in sorted(choices)]
    body["usage"] = usage
    return body


def _empty(index: int, chat: bool) -> dict[str, Any]:
    if chat:
        message = {"role": "assistant", "content": None, "refusal": None}
        return {"index": index, "message": message, "logprobs": None, "finish_reason": None}
    return {"text": "", "index": index, "logprobs": None, "finish_reason": None}


def _merge_chat(choice: dict[str, Any], part: dict[str, Any]) -> None:
    delta = part.get("delta") or {}
    message = choice["message"]
    for key in ("content", "refusal"):
        if delta.get(key) is not None:
            message[key] = (message[key] or "") + delta[key]
    if delta.get("role"):
        message["role"] = delta["role"]
    for call in delta.get("tool_calls") or []:
        calls = message.setdefault("tool_calls", [])
        at = int(call.get("index", len(calls)))
        while len(calls) <= at:
            calls.append({"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
        merged = calls[at]
        merged["id"] = call.get("id") or merged["id"]
        merged["type"] = call.get("type") or merged["type"]
        function = call.get("function") or {}
        merged["function"]["name"] += function.get("name") or ""
        merged["function"]["arguments"] += function.get("arguments") or ""
    logprobs = part.get("logprobs")
    if logprobs:
        have = choice["logprobs"] or {"content": [], "refusal": None}
        have["content"] = (have.get("content") or []) + (logprobs.get("content") or [])
        choice["logprobs"] = have
    if part.get("finish_reason") is not None:
        choice["finish_reason"] = part["finish_reason"]


def _merge_text(choice: dict[str, Any], part: dict[str, Any]) -> None:
    choice["text"] += part.get("text") or ""
    logprobs = part.get("logprobs")
    if logprobs:
        have = choice["logprobs"] or {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
        for key in ("tokens", "token_logprobs", "top_logprobs", "text_offset"):
            have[key] = (have.get(key) or []) + (logprobs.get(key) or [])
        choice["logprobs"] = have
    if part.get("finish_reason") is not None:
        choice["finish_reason"] = part["finish_reason"]


def unfold(body: dict[str, Any], include_usage: bool) -> list[bytes]:
    """A recorded non-stream chat or completions body as SSE frames, ``[DONE]`` last."""
    chat = str(body.get("object", "")).startswith("chat.")
    head = {k: v for k, v in body.items() if k not in ("choices", "usage", "object")}
    kind = "chat.completion.chunk" if chat else "text_completion"
    chunks: list[dict[str, Any]] = []
    for choice in body.get("choices") or []:
        index = choice.get("index", 0)
        if chat:
            message = choice.get("message") or {}
            delta = {"role": message.get("role", "assistant"), "content": message.get("content") or ""}
            if message.get("refusal") is not None:
                delta["refusal"] = message["refusal"]
            if message.get("tool_calls"):
                delta["tool_calls"] = [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]
            parts = [
                {"index": index, "delta": delta, "logprobs": choice.get("logprobs"), "finish_reason": None},
                {"index": index, "delta": {}, "logprobs": None, "finish_reason": choice.get("finish_reason")},
            ]
        else:
            parts = [
                {
                    "text": choice.get("text", ""),
                    "index": index,
                    "logprobs": choice.get("logprobs"),
                    "finish_reason": None,
                },
                {"text": "", "index": index, "logprobs": None, "finish_reason": choice.get("finish_reason")},
            ]
        chunks.extend({**head, "object": kind, "choices": [part]} for part in parts)
    if include_usage and body.get("usage") is not None:
        chunks.append({**head, "object": kind, "choices": [], "usage": body["usage"]})
    dumped = [b"data: " + json.dumps(c, separators=(",", ":"), ensure_ascii=False).encode() + b"\n\n" for c in chunks]
    return [*dumped, b"data: [DONE]\n\n"]
