"""The Responses narrator: engine events → Responses stream events and Response objects.

It folds every event into a :class:`~mockserver.spine.result.Result` (the one fold) and builds
both the stream events and the Response object from it, so a streamed response, its stored
snapshot and its non-streamed twin cannot disagree. The request side (input → a chat
generation) is :mod:`mockserver.routes.responses.codec`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mockserver.clock import Clock
from mockserver.lifecycle.runs import Status
from mockserver.routes import logprobs
from mockserver.routes.responses.codec import conversation_id, item_id
from mockserver.schemas.responses import LOGPROBS_INCLUDE, ResponsesRequest
from mockserver.spine.events import Event, Finished, Reasoning, Refusal, TextDelta, ToolCallDelta
from mockserver.spine.result import Result
from mockserver.wire.json import Json

__all__ = ["ResponseNarrator", "Turn"]


def _echoed_tool(tool: Json) -> Json:
    """A tool as the Response echoes it: function tools with every field the spec requires."""
    if tool.get("type") != "function":
        return tool
    defaults = {"description": None, "parameters": None, "strict": None}
    return {**defaults, **tool}


@dataclass(frozen=True, slots=True)
class Turn:
    """One response as the narrator encodes it."""

    id: str
    created_at: int
    body: ResponsesRequest
    stored: bool
    model: str | None = None  # the answer's ``model`` (its profile's snapshot of the alias); None: as asked

    @property
    def message_id(self) -> str:
        return item_id("msg_", self.id, -1)

    @property
    def logprobs(self) -> bool:
        return LOGPROBS_INCLUDE in (self.body.include or [])


class ResponseNarrator:
    """Engine events → Responses stream events and Response objects (see module doc).

    Output items open as their first event arrives and close when the next kind begins or
    the choice finishes: a ``reasoning`` item (reasoning models), a ``message`` (text and/or
    a refusal, one content part each), then one ``function_call`` per tool call. A choice
    with neither text nor calls still answers with an (empty) message, unless it was cut short
    while thinking: then it said nothing at all.
    """

    def __init__(self, turn: Turn, clock: Clock) -> None:
        self.turn = turn
        self.clock = clock
        self.result = Result()
        self._items: list[str] = []  # output order: "reasoning", "message", "call:<k>"
        self._parts: list[str] = []  # the message's content parts: "output_text", "refusal"
        self._closed: set[str] = set()

    def outcome(self) -> Status:
        choice = self.result.choices.get(0)
        reason = choice.finish_reason if choice is not None else None
        return "incomplete" if reason in ("length", "content_filter") else "completed"

    def _logprobs(self, tokens: Any) -> list[Json]:
        return logprobs.content(tokens)["content"] if self.turn.logprobs else []

    # ---- items, built from the fold -------------------------------------------------------

    def _id(self, key: str) -> str:
        if key == "message":
            return self.turn.message_id
        if key == "reasoning":
            return item_id("rs_", self.turn.id, -2)
        return item_id("fc_", self.turn.id, 1_000 + int(key[5:]))

    def _part(self, kind: str) -> Json:
        choice = self.result.choice(0)
        if kind == "refusal":
            return {"type": "refusal", "refusal": choice.refusal or ""}
        return {
            "type": "output_text",
            "text": choice.text,
            "annotations": [],
            "logprobs": self._logprobs(choice.tokens),
        }

    def _status(self, key: str) -> str:
        """An item still open is in progress; a message closed by the item after it completed;
        the message that ends the answer shares the answer's outcome (cut short: incomplete)."""
        if key not in self._closed:
            return "in_progress"
        return self.outcome() if key == "message" and self._items[-1] == "message" else "completed"

    def _item(self, key: str, empty: bool = False) -> Json:
        choice = self.result.choice(0)
        head: Json = {"id": self._id(key)}
        if key == "reasoning":
            summary = (
                [] if empty or not self._summarised else [{"type": "summary_text", "text": choice.reasoning or ""}]
            )
            return {**head, "type": "reasoning", "summary": summary, "status": self._status(key)}
        if key == "message":
            content = [] if empty else [self._part(kind) for kind in self._parts]
            return {**head, "type": "message", "status": self._status(key), "role": "assistant", "content": content}
        call = choice.tool_calls[int(key[5:])]
        return {
            **head,
            "type": "function_call",
            "status": self._status(key),
            "call_id": call.id,
            "name": call.name,
            "arguments": "" if empty else call.arguments,
        }

    @property
    def _summarised(self) -> bool:
        return bool((self.turn.body.reasoning or {}).get("summary"))

    def _where(self, key: str) -> Json:
        return {"item_id": self._id(key), "output_index": self._items.index(key)}

    # ---- events ---------------------------------------------------------------------------

    def _open(self, key: str) -> list[Json]:
        """Events that open item ``key`` (closing the item before it)."""
        if key in self._items:
            return []
        events = self._close_all()
        self._items.append(key)
        events.append(
            {"type": "response.output_item.added", "output_index": len(self._items) - 1, "item": self._item(key, True)}
        )
        if key == "reasoning" and self._summarised:
            part = {"type": "summary_text", "text": ""}
            events.append(
                {"type": "response.reasoning_summary_part.added", **self._where(key), "summary_index": 0, "part": part}
            )
        return events

    def _open_part(self, kind: str) -> list[Json]:
        events = self._open("message")
        if kind not in self._parts:
            events += self._close_part()
            self._parts.append(kind)
            empty = (
                {"type": "refusal", "refusal": ""}
                if kind == "refusal"
                else {**self._part(kind), "text": "", "logprobs": []}
            )
            events.append(
                {
                    "type": "response.content_part.added",
                    **self._where("message"),
                    "content_index": len(self._parts) - 1,
                    "part": empty,
                }
            )
        return events

    def _close_part(self) -> list[Json]:
        if not self._parts or f"part:{len(self._parts)}" in self._closed:
            return []
        self._closed.add(f"part:{len(self._parts)}")
        kind, where = self._parts[-1], {**self._where("message"), "content_index": len(self._parts) - 1}
        part = self._part(kind)
        if kind == "refusal":
            done: Json = {"type": "response.refusal.done", **where, "refusal": part["refusal"]}
        else:
            done = {"type": "response.output_text.done", **where, "text": part["text"], "logprobs": part["logprobs"]}
        return [done, {"type": "response.content_part.done", **where, "part": part}]

    def _close_all(self) -> list[Json]:
        """Close the open item, if any (its last part first)."""
        if not self._items or self._items[-1] in self._closed:
            return []
        key = self._items[-1]
        events: list[Json] = []
        if key == "message":
            events += self._close_part()
        elif key == "reasoning" and self._summarised:
            text, where = self.result.choice(0).reasoning or "", {**self._where(key), "summary_index": 0}
            events.append({"type": "response.reasoning_summary_text.done", **where, "text": text})
            part = {"type": "summary_text", "text": text}
            events.append({"type": "response.reasoning_summary_part.done", **where, "part": part})
        elif key.startswith("call:"):
            call = self.result.choice(0).tool_calls[int(key[5:])]
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    **self._where(key),
                    "name": call.name,
                    "arguments": call.arguments,
                }
            )
        self._closed.add(key)
        events.append(
            {"type": "response.output_item.done", "output_index": self._items.index(key), "item": self._item(key)}
        )
        return events

    def narrate(self, event: Event) -> list[Json]:
        self.result.apply(event)
        if isinstance(event, Reasoning):
            events = self._open("reasoning")
            if self._summarised and event.text:
                events.append(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        **self._where("reasoning"),
                        "summary_index": 0,
                        "delta": event.text,
                    }
                )
            return events
        if isinstance(event, TextDelta):
            events = self._open_part("output_text")
            delta = {"delta": event.text, "logprobs": self._logprobs(event.tokens)}
            return [
                *events,
                {
                    "type": "response.output_text.delta",
                    **self._where("message"),
                    "content_index": self._parts.index("output_text"),
                    **delta,
                },
            ]
        if isinstance(event, Refusal):
            events = self._open_part("refusal")
            where = {**self._where("message"), "content_index": self._parts.index("refusal")}
            return [*events, {"type": "response.refusal.delta", **where, "delta": event.text}]
        if isinstance(event, ToolCallDelta):
            key = f"call:{event.call_index}"
            events = self._open(key)
            if event.arguments:
                events.append(
                    {"type": "response.function_call_arguments.delta", **self._where(key), "delta": event.arguments}
                )
            return events
        if isinstance(event, Finished):
            choice = self.result.choice(0)
            # Cut short while thinking, it said nothing: no message (OpenAI's incomplete answer).
            thought_only = event.reason == "length" and self._items == ["reasoning"]
            events = (
                []
                if self._items and (choice.text or choice.refusal is not None or choice.tool_calls or thought_only)
                else self._open_part("output_text")
            )
            return events + self._close_all()
        return []  # usage arrives in the closing snapshot

    def snapshot(self, status: Status, error: Json | None = None) -> Json:
        body, finished = self.turn.body, status in ("completed", "incomplete")
        reason = self.result.choices[0].finish_reason if 0 in self.result.choices else None
        incomplete = None
        if status == "incomplete":
            incomplete = {"reason": "content_filter" if reason == "content_filter" else "max_output_tokens"}
        reasoning = body.reasoning or {}
        response: Json = {
            "id": self.turn.id,
            "object": "response",
            "created_at": self.turn.created_at,
            "status": status,
            "background": bool(body.background),
            "completed_at": int(self.clock.now()) if status == "completed" else None,
            "error": error,
            "incomplete_details": incomplete,
            "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens,
            "max_tool_calls": body.max_tool_calls,
            "model": self.turn.model or body.model,
            "output": [self._item(key) for key in self._items],
            "parallel_tool_calls": True if body.parallel_tool_calls is None else body.parallel_tool_calls,
            "previous_response_id": body.previous_response_id,
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "service_tier": "default",
            "store": self.turn.stored,
            "temperature": 1.0 if body.temperature is None else body.temperature,
            "text": body.text or {"format": {"type": "text"}},
            "tool_choice": body.tool_choice or "auto",
            "tools": [_echoed_tool(tool) for tool in body.tools or ()],
            "top_logprobs": body.top_logprobs or 0,
            "top_p": 1.0 if body.top_p is None else body.top_p,
            "truncation": body.truncation or "disabled",
            "usage": self._usage() if finished else None,
            "metadata": body.metadata or {},
        }
        if body.user is not None:
            response["user"] = body.user
        if body.conversation is not None:
            response["conversation"] = {"id": conversation_id(body)}
        return response

    def _usage(self) -> Json:
        usage = self.result.usage
        given, made = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)
        return {
            "input_tokens": given,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": made,
            "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens if usage is not None else 0},
            "total_tokens": given + made,
        }
