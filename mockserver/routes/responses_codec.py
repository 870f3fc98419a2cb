"""The Responses codec: pure functions from the wire to a chat :class:`GenerationRequest`,
and a :class:`ResponseNarrator` from engine events back to the wire.

The narrator folds every event into a :class:`~mockserver.generation.Result` (the one fold)
and builds both the stream events and the Response object from it, so a streamed response,
its stored snapshot and its non-streamed twin cannot disagree. One choice, one output
message with one ``output_text`` part; tool calls and refusals belong to other issues.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from mockserver import params, reasoning, vision
from mockserver.clock import Clock
from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.generation import (
    ChatMessage,
    Event,
    Finished,
    GenerationRequest,
    JsonFormat,
    Prompt,
    Reasoning,
    Refusal,
    Result,
    TextDelta,
    Tool,
    ToolCallDelta,
)
from mockserver.lifecycle import Status
from mockserver.profiles import Profile
from mockserver.routes import logprobs
from mockserver.schemas.common import invalid_request
from mockserver.schemas.responses import (
    LOGPROBS_INCLUDE,
    FunctionCall,
    FunctionCallOutput,
    InputTokensRequest,
    MessageItem,
    ResponsesRequest,
)
from mockserver.schemas.tools import FunctionDef, NamedFunction, ResponseFormat, json_format, spine_tools, tool_choice
from mockserver.seeding import digest

_W = TypeVar("_W", bound=BaseModel)

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


def image_costs(body: ResponsesRequest | InputTokensRequest) -> tuple[int, ...]:
    """What each turn of :func:`conversation` pays for its ``input_image`` parts."""
    if isinstance(body.input, str):
        return (0,)
    costs = []
    for i, item in enumerate(body.input):
        parts = item.content if isinstance(item, MessageItem) and isinstance(item.content, list) else []
        costs.append(
            sum(
                vision.url_tokens(
                    p.image_url,
                    p.detail,
                    f"input[{i}].content[{j}].image_url",
                    detail_param=f"input[{i}].content[{j}].detail",
                )
                for j, p in enumerate(parts)
                if p.type == "input_image" and p.image_url is not None
            )
        )
    return tuple(costs)


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


def _validated(model: type[_W], data: Any, param: str) -> _W:
    """``data`` as ``model``, a 400 naming ``param`` (and the field inside it) if it is not."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        error = invalid_request(exc)
        inner = f"{param}.{error.param}" if error.param else param
        raise InvalidRequest(f"Invalid value for '{inner}': {exc.errors()[0]['msg']}.", param=inner) from None


def tools(body: ResponsesRequest) -> tuple[Tool, ...]:
    """The function tools offered (hosted tools such as ``web_search`` are accepted and never
    called: there is nothing behind them here)."""
    named = [
        (_validated(FunctionDef, {k: v for k, v in raw.items() if k != "type"}, f"tools[{i}]"), f"tools[{i}]")
        for i, raw in enumerate(body.tools or ())
        if raw.get("type") == "function"
    ]
    return spine_tools(named)


def _choice(
    body: ResponsesRequest, offered: tuple[Tool, ...]
) -> tuple[Literal["none", "auto", "required"], str | None]:
    raw = body.tool_choice
    if isinstance(raw, dict):
        if raw.get("type") != "function":  # a hosted tool, or allowed_tools: the policy decides
            return "auto", None
        return tool_choice(_validated(NamedFunction, {"name": raw.get("name")}, "tool_choice"), offered)
    if raw is None or not offered:  # nothing to call (unlike chat, Responses does not object)
        return "auto", None
    modes: dict[str, Literal["none", "auto", "required"]] = {"none": "none", "auto": "auto", "required": "required"}
    if raw not in modes:
        raise InvalidRequest(
            f"Invalid value for 'tool_choice': '{raw}' is not one of none, auto, required.", param="tool_choice"
        )
    return tool_choice(modes[raw], offered)


def _echoed_tool(tool: Json) -> Json:
    """A tool as the Response echoes it: function tools with every field the spec requires."""
    if tool.get("type") != "function":
        return tool
    defaults = {"description": None, "parameters": None, "strict": None}
    return {**defaults, **tool}


def text_format(body: ResponsesRequest) -> JsonFormat | None:
    """``text.format``: ``{"type": "json_schema", "name", "schema", "strict"}`` or ``json_object``."""
    raw = (body.text or {}).get("format")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidRequest("Invalid value for 'text.format': expected an object.", param="text.format")
    if raw.get("type") == "json_schema":
        spec = {k: v for k, v in raw.items() if k != "type"}
        return json_format(
            _validated(ResponseFormat, {"type": "json_schema", "json_schema": spec}, "text.format"), "text.format"
        )
    return json_format(_validated(ResponseFormat, raw, "text.format"), "text.format")


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
    gen = GenerationRequest(
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
    if not isinstance(body, ResponsesRequest):
        return gen
    offered = tools(body)
    mode, name = _choice(body, offered)
    return replace(
        gen,
        tools=offered,
        tool_choice=mode,
        tool_name=name,
        parallel_tool_calls=body.parallel_tool_calls is not False,
        max_tool_calls=body.max_tool_calls,
        response_format=text_format(body),
        think=reasoning.think_budget(
            body.model, (body.reasoning or {}).get("effort"), ctx.settings.reasoning_models, "reasoning.effort"
        ),
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
    """Engine events → Responses stream events and Response objects (see module doc).

    Output items open as their first event arrives and close when the next kind begins or
    the choice finishes: a ``reasoning`` item (reasoning models), a ``message`` (text and/or
    a refusal, one content part each), then one ``function_call`` per tool call. A choice
    with neither text nor calls still answers with an (empty) message.
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
        if key not in self._closed:
            return "in_progress"
        return self.outcome() if key == "message" else "completed"

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
            events = (
                []
                if self._items and (choice.text or choice.refusal is not None or choice.tool_calls)
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
            "model": body.model,
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
