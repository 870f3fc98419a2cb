"""``POST /v1/chat/completions``: the chat codec.

Streams open each choice with a role delta, send content deltas, and close each choice with
an empty delta carrying its ``finish_reason``. The role delta waits for the choice's first
content event, as it must say what the non-streamed message says, and only that event tells:
text (or nothing) opens with ``{"role": "assistant", "content": "", "refusal": null}`` in a
chunk of its own; a tool call, a refusal or reasoning opens with ``"content": null`` in the
same chunk as that first delta (as OpenAI streams tool calls), so that a client folding the
deltas (the SDK's stream helper) ends with the ``content`` the non-streamed twin has.
Logprobs are ``{"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}`` with
exactly ``top_logprobs`` alternatives per token — or, where the profile says so and
``logprobs`` was an integer, the legacy completions format.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mockserver.answers import reasoning
from mockserver.context import Options
from mockserver.errors import InvalidRequest
from mockserver.media import vision
from mockserver.profiles import Endpoint, Profile
from mockserver.routes import logprobs, params
from mockserver.routes.codec import Call, Chunk, ChunkFrame, read_sampling
from mockserver.schemas.chat import ChatMessageIn, ChatRequest
from mockserver.schemas.tools import chat_tools, json_format, tool_choice
from mockserver.spine.events import Event, Finished, Reasoning, Refusal, Started, TextDelta, Token, ToolCallDelta
from mockserver.spine.request import ChatMessage, ForcedCall, GenerationRequest, Origin, Prompt, Surface
from mockserver.spine.result import ChoiceResult, Result


def _alternatives(body: ChatRequest, profile: Profile, strict: bool) -> int | None:
    """How many alternatives per token (None: no logprobs): ``logprobs: true`` with
    ``top_logprobs``, or an integer ``logprobs`` k."""
    if isinstance(body.logprobs, bool) or body.logprobs is None:
        if body.top_logprobs is not None and not body.logprobs:
            raise InvalidRequest(
                "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.",
                param="top_logprobs",
            )
        return (body.top_logprobs or 0) if body.logprobs else None
    if strict and profile.chat_int_logprobs == "no":
        raise params.invalid("logprobs", f"{body.logprobs} is not of type 'boolean'.")
    if body.logprobs < 0:
        raise params.invalid("logprobs", "must be a boolean or a non-negative integer.")
    return body.logprobs


def _message(i: int, message: ChatMessageIn) -> ChatMessage:
    """The spine's message: its text, and what its images cost (read from the images)."""
    images = sum(
        vision.url_tokens(image.url, image.detail, f"messages[{i}].content[{j}].image_url")
        for j, image in message.images()
    )
    # The calls an assistant made, kept apart from its text so the tool policy knows what was asked.
    sent = message.tool_calls or ([{"function": message.function_call}] if message.function_call else [])
    calls = tuple(
        ForcedCall(
            str(f.get("name", "")), a if isinstance(a := f.get("arguments", ""), str) else json.dumps(a), c.get("id")
        )
        for c in sent
        if isinstance(f := c.get("function"), dict)
    )
    return ChatMessage(message.role, message.text(), images, calls=calls, call_id=message.tool_call_id)


def _uses_functions(body: ChatRequest) -> bool:
    """Did the request use the legacy ``functions`` (answered with ``function_call``)?"""
    return bool(body.functions) and not body.tools


def _legacy(call: Call) -> bool:
    body: ChatRequest = call.body
    integer = isinstance(body.logprobs, int) and not isinstance(body.logprobs, bool)
    return integer and call.profile.chat_int_logprobs == "legacy"


_PENDING, _TEXT, _NULL = "pending", "text", "null"  # a stream choice's role delta: see the module


def _says_content(c: ChoiceResult) -> bool:
    """Does the non-streamed message have a string ``content`` (see ``ChatCodec._message``)?"""
    return not ((c.refusal is not None or bool(c.tool_calls)) and not c.text)


class ChatCodec:
    schema = ChatRequest
    surface: Surface = "chat"
    endpoint: Endpoint = "chat"
    id_prefix = "chatcmpl-"

    def to_generation(self, body: ChatRequest, profile: Profile, options: Options, origin: Origin) -> GenerationRequest:
        n = body.n or 1
        params.choices(1, n, body.best_of, options.limits)
        messages = tuple(_message(i, m) for i, m in enumerate(body.messages))
        tools = chat_tools(body.tools, body.functions)
        legacy = _uses_functions(body)
        mode, name = (
            tool_choice(body.function_call, tools, "function_call") if legacy else tool_choice(body.tool_choice, tools)
        )
        if body.max_completion_tokens is not None:
            max_tokens: int | None = body.max_completion_tokens
        elif body.max_tokens is not None:
            max_tokens = body.max_tokens
        else:
            max_tokens = profile.default_max_tokens["chat"]
        sampling = read_sampling(
            body,
            profile,
            options,
            max_tokens=max_tokens,
            logprobs=_alternatives(body, profile, options.strict),
        )
        return GenerationRequest(
            endpoint="chat",
            model=body.model,
            prompts=(Prompt(messages=messages),),
            n=n,
            sampling=sampling,
            seed=origin.seed,
            best_of=params.best_of(body, n),
            context_window=options.models.context_window(body.model, profile),
            stream=bool(body.stream),
            canonical=origin.canonical,
            surface=origin.source.surface,
            session=origin.source.session,
            content_faults=origin.content_faults,
            paced=origin.paced,
            tools=tools,
            tool_choice=mode,
            tool_name=name,
            # The legacy functions API calls one function at a time.
            parallel_tool_calls=not legacy and body.parallel_tool_calls is not False,
            response_format=json_format(body.response_format),
            think=reasoning.think_budget(
                body.model, body.reasoning_effort, options.reasoning_models, "reasoning_effort"
            ),
        )

    def _logprobs(self, call: Call, tokens: Sequence[Token], start: int) -> dict[str, Any] | None:
        if call.gen.sampling.logprobs is None:
            return None
        return logprobs.legacy(tokens, start) if _legacy(call) else logprobs.content(tokens)

    def _message(self, call: Call, c: ChoiceResult) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": c.text if _says_content(c) else None,
            "refusal": c.refusal,
            "annotations": [],
        }
        field = call.profile.reasoning_field
        if field is not None and c.reasoning is not None:
            message[field] = c.reasoning
        if c.tool_calls and _uses_functions(call.body):
            first = c.tool_calls[0]
            message["function_call"] = {"name": first.name, "arguments": first.arguments}
        elif c.tool_calls:
            message["tool_calls"] = [
                {"id": t.id, "type": "function", "function": {"name": t.name, "arguments": t.arguments}}
                for t in c.tool_calls
            ]
        return message

    def _finish(self, call: Call, reason: str | None, matched: str | int | None) -> dict[str, Any]:
        if reason == "tool_calls" and _uses_functions(call.body):
            reason = "function_call"
        return call.finish(reason, matched)

    def encode(self, call: Call, result: Result) -> dict[str, Any]:
        choices: list[dict[str, Any]] = [
            {
                "index": c.index,
                "message": self._message(call, c),
                "logprobs": self._logprobs(call, c.tokens, 0),
                **self._finish(call, c.finish_reason, c.matched),
            }
            for c in result.ordered()
        ]
        body = {**call.envelope(call.profile.chat_object), "choices": choices, "usage": call.usage(result)}
        first = result.choices.get(0)
        if first is not None and first.prompt_logprobs is not None:  # vLLM: one prompt, top level
            body["prompt_logprobs"] = logprobs.prompt(first.prompt_logprobs)
        return body

    def _chunk(self, call: Call, index: int, delta: dict[str, Any], lp: Any = None, **finish: Any) -> Chunk:
        choice = {"index": index, "delta": delta, "logprobs": lp, **(finish or call.finish(None, None))}
        return call.chunk(call.profile.chunk_object, [choice])

    def encode_event(self, call: Call, event: Event, result: Result) -> list[ChunkFrame]:
        delta: dict[str, Any]
        if isinstance(event, Started):
            call.opened[event.index] = _PENDING  # its role delta goes with its first content
            return []
        if isinstance(event, TextDelta):
            start = result.choices[event.index].length - len(event.text)
            lp = self._logprobs(call, event.tokens, start)
            return [*self._text_opening(call, event.index), self._chunk(call, event.index, {"content": event.text}, lp)]
        if isinstance(event, Refusal):
            return [self._chunk(call, event.index, self._null_opening(call, event.index, {"refusal": event.text}))]
        if isinstance(event, ToolCallDelta):
            delta = self._null_opening(call, event.index, self._call_delta(call, event))
            return [self._chunk(call, event.index, delta)]
        if isinstance(event, Reasoning):
            field = call.profile.reasoning_field
            if field is None:  # not on the wire: the role waits for what is
                return []
            return [self._chunk(call, event.index, self._null_opening(call, event.index, {field: event.text}))]
        if isinstance(event, Finished):
            finish = self._finish(call, event.reason, event.matched)
            delta = {}
            if call.opened.get(event.index) == _NULL and _says_content(result.choices[event.index]):
                delta = {"content": ""}  # thought, then said nothing: the message's content is ""
            opening = self._text_opening(call, event.index)
            return [*opening, self._chunk(call, event.index, delta, None, **finish)]
        return []

    def _text_opening(self, call: Call, index: int) -> list[ChunkFrame]:
        """The role chunk of a pending choice whose first content is text (or its end)."""
        state = call.opened.get(index)
        if state == _NULL:  # opened by reasoning with ``content: null``: now it is a string
            call.opened[index] = _TEXT
        if state != _PENDING:
            return []
        call.opened[index] = _TEXT
        return [self._chunk(call, index, {"role": "assistant", "content": "", "refusal": None})]

    def _null_opening(self, call: Call, index: int, delta: dict[str, Any]) -> dict[str, Any]:
        """``delta``, opened with the role and ``content: null`` if it is its choice's first."""
        if call.opened.get(index) != _PENDING:
            return delta
        call.opened[index] = _NULL
        return {"role": "assistant", "content": None, **delta, **({} if "refusal" in delta else {"refusal": None})}

    def _call_delta(self, call: Call, event: ToolCallDelta) -> dict[str, Any]:
        """A call opens with its id, type and name; its arguments follow as fragments."""
        function: dict[str, Any] = {"arguments": event.arguments}
        if event.name is not None:
            function = {"name": event.name, **function}
        if _uses_functions(call.body):
            return {"function_call": function}
        delta: dict[str, Any] = {"index": event.call_index}
        if event.id is not None:
            delta.update(id=event.id, type="function")
        return {"tool_calls": [{**delta, "function": function}]}

    def encode_end(self, call: Call, result: Result) -> list[dict[str, Any]]:
        return call.usage_chunks(call.profile.chunk_object, result)


CODEC = ChatCodec()
