"""The Responses codec: pure functions from the wire to a chat :class:`GenerationRequest`,
and a :class:`ResponseNarrator` from engine events back to the wire.

The narrator folds every event into a :class:`~mockserver.generation.Result` (the one fold)
and builds both the stream events and the Response object from it, so a streamed response,
its stored snapshot and its non-streamed twin cannot disagree. One choice, one output
message with one ``output_text`` part; tool calls and refusals belong to other issues.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mockserver import params
from mockserver.clock import Clock
from mockserver.context import ServerContext
from mockserver.generation import ChatMessage, Event, Finished, GenerationRequest, Prompt, Result, Started, TextDelta
from mockserver.lifecycle import Status
from mockserver.profiles import Profile
from mockserver.routes import logprobs
from mockserver.schemas.responses import (
    LOGPROBS_INCLUDE,
    FunctionCall,
    FunctionCallOutput,
    InputTokensRequest,
    MessageItem,
    ResponsesRequest,
)
from mockserver.seeding import digest

__all__ = ["ResponseNarrator", "Turn", "assistant_text", "conversation", "generation", "input_items", "item_id"]

Json = dict[str, Any]
Conversation = tuple[tuple[str, str], ...]


def item_id(prefix: str, response_id: str, index: int) -> str:
    """The id of the ``index``-th item of a response (its input, or its output message)."""
    return prefix + digest(b"item", prefix, response_id, index).hex()[:24]


def conversation(body: ResponsesRequest | InputTokensRequest) -> Conversation:
    """The request's own input as (role, text) turns, instructions left out."""
    if isinstance(body.input, str):
        return (("user", body.input),)
    turns: list[tuple[str, str]] = []
    for item in body.input:
        if isinstance(item, MessageItem):
            turns.append((item.role, item.text()))
        elif isinstance(item, FunctionCallOutput):
            turns.append(("tool", item.text()))
        else:  # the assistant's earlier call, as the text it would have said
            turns.append(("assistant", f"{item.name}({item.arguments})"))
    return tuple(turns)


def assistant_text(response: Json) -> str:
    """What a stored response said: its output messages' text (for ``previous_response_id``)."""
    return "".join(
        part.get("text", "")
        for item in response.get("output", [])
        if item.get("type") == "message"
        for part in item.get("content", [])
        if part.get("type") == "output_text"
    )


def _part(part: Any) -> Json:
    if part.type in ("input_text", "output_text"):
        text: Json = {"type": part.type, "text": part.text or ""}
        return text if part.type == "input_text" else {**text, "annotations": [], "logprobs": []}
    if part.type == "refusal":
        return {"type": "refusal", "refusal": part.refusal or ""}
    return {"type": part.type}  # an image or file: accepted, not read


def input_items(body: ResponsesRequest, response_id: str) -> tuple[Json, ...]:
    """The input as ``input_items`` lists it: each item with an id and a status."""
    if isinstance(body.input, str):
        content = [{"type": "input_text", "text": body.input}]
        only = {"type": "message", "role": "user", "content": content, "status": "completed"}
        return ({"id": item_id("msg_", response_id, 0), **only},)
    items: list[Json] = []
    for index, item in enumerate(body.input):
        if isinstance(item, MessageItem):
            parts = item.content if isinstance(item.content, list) else None
            kind = "output_text" if item.role == "assistant" else "input_text"
            content = [_part(p) for p in parts] if parts is not None else [_part(_Text(kind, item.text()))]
            entry: Json = {"type": "message", "role": item.role, "content": content, "status": "completed"}
            prefix = "msg_"
        elif isinstance(item, FunctionCallOutput):
            entry = {"type": "function_call_output", "call_id": item.call_id, "output": item.text()}
            entry["status"] = "completed"
            prefix = "fco_"
        else:
            assert isinstance(item, FunctionCall)
            entry = {"type": "function_call", "call_id": item.call_id, "name": item.name}
            entry.update(arguments=item.arguments, status="completed")
            prefix = "fc_"
        items.append({"id": item.id or item_id(prefix, response_id, index), **entry})
    return tuple(items)


@dataclass(frozen=True, slots=True)
class _Text:
    type: str
    text: str


def generation(
    messages: tuple[ChatMessage, ...], body: Any, ctx: ServerContext, profile: Profile, canonical: bytes, seed: int
) -> GenerationRequest:
    """A chat generation of ``messages`` with the body's sampling fields."""
    include = getattr(body, "include", None) or []
    wants = LOGPROBS_INCLUDE in include
    max_tokens = getattr(body, "max_output_tokens", None)
    sampling = params.sampling(
        body,
        profile,
        ctx.vocab_size,
        max_tokens=max_tokens if max_tokens is not None else profile.default_max_tokens["chat"],
        logprobs=(body.top_logprobs or 0) if wants else None,
    )
    return GenerationRequest(
        endpoint="chat",
        model=body.model,
        prompts=(Prompt(messages=messages),),
        n=1,
        sampling=sampling,
        seed=seed,
        context_window=ctx.context_window(body.model, profile),
        canonical=canonical,
        stream=bool(getattr(body, "stream", False)),
    )


@dataclass(frozen=True, slots=True)
class Turn:
    """One response as the narrator encodes it."""

    id: str
    created_at: int
    body: ResponsesRequest
    stored: bool

    @property
    def message_id(self) -> str:
        return item_id("msg_", self.id, -1)

    @property
    def logprobs(self) -> bool:
        return LOGPROBS_INCLUDE in (self.body.include or [])


class ResponseNarrator:
    """Engine events → Responses stream events and Response objects (see module doc)."""

    def __init__(self, turn: Turn, clock: Clock) -> None:
        self.turn = turn
        self.clock = clock
        self.result = Result()

    def outcome(self) -> Status:
        choice = self.result.choices.get(0)
        reason = choice.finish_reason if choice is not None else None
        return "incomplete" if reason in ("length", "content_filter") else "completed"

    def _logprobs(self, tokens: Any) -> list[Json]:
        return logprobs.content(tokens)["content"] if self.turn.logprobs else []

    def _part(self) -> Json:
        choice = self.result.choice(0)
        return {
            "type": "output_text",
            "text": choice.text,
            "annotations": [],
            "logprobs": self._logprobs(choice.tokens),
        }

    def _item(self) -> Json:
        choice = self.result.choice(0)
        status = "in_progress" if choice.finish_reason is None else self.outcome()
        content = [self._part()]
        return {
            "id": self.turn.message_id,
            "type": "message",
            "status": status,
            "role": "assistant",
            "content": content,
        }

    def _where(self) -> Json:
        return {"item_id": self.turn.message_id, "output_index": 0, "content_index": 0}

    def narrate(self, event: Event) -> list[Json]:
        self.result.apply(event)
        if isinstance(event, Started):
            item = {**self._item(), "content": []}
            empty = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            return [
                {"type": "response.output_item.added", "output_index": 0, "item": item},
                {"type": "response.content_part.added", **self._where(), "part": empty},
            ]
        if isinstance(event, TextDelta):
            delta = {"delta": event.text, "logprobs": self._logprobs(event.tokens)}
            return [{"type": "response.output_text.delta", **self._where(), **delta}]
        if isinstance(event, Finished):
            part = self._part()
            done = {"text": part["text"], "logprobs": part["logprobs"]}
            return [
                {"type": "response.output_text.done", **self._where(), **done},
                {"type": "response.content_part.done", **self._where(), "part": part},
                {"type": "response.output_item.done", "output_index": 0, "item": self._item()},
            ]
        return []  # usage arrives in the closing snapshot; tool calls are another issue's

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
            "model": body.model,
            "output": [self._item()] if 0 in self.result.choices else [],
            "parallel_tool_calls": True if body.parallel_tool_calls is None else body.parallel_tool_calls,
            "previous_response_id": body.previous_response_id,
            "reasoning": {"effort": reasoning.get("effort"), "summary": reasoning.get("summary")},
            "service_tier": "default",
            "store": self.turn.stored,
            "temperature": 1.0 if body.temperature is None else body.temperature,
            "text": body.text or {"format": {"type": "text"}},
            "tool_choice": body.tool_choice or "auto",
            "tools": body.tools or [],
            "top_logprobs": body.top_logprobs or 0,
            "top_p": 1.0 if body.top_p is None else body.top_p,
            "truncation": body.truncation or "disabled",
            "usage": self._usage() if finished else None,
            "metadata": body.metadata or {},
        }
        if body.user is not None:
            response["user"] = body.user
        return response

    def _usage(self) -> Json:
        usage = self.result.usage
        given, made = (usage.prompt_tokens, usage.completion_tokens) if usage is not None else (0, 0)
        return {
            "input_tokens": given,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": made,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": given + made,
        }
