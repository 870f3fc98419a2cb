"""Anthropic's Messages wire read into the spine.

Reading (:meth:`MessagesCodec.to_generation`): ``system`` becomes a system turn; a user turn's
``tool_result`` blocks become ``tool`` turns answering their ``tool_use_id`` (which must name a
``tool_use`` of the assistant turn before it, as Anthropic checks), its text and images one
user turn (or, beside tool results, part of the last result: no new question); an assistant
turn's ``tool_use`` blocks are its calls (so the tool policy knows what was asked and
answered, as with chat) and its ``thinking`` blocks are not read back.
``tool_choice`` maps onto the spine's modes (``any`` is ``required``; ``tool`` names one),
``stop_sequences`` are the stop strings, ``thinking`` a think budget, ``output_config.format``
structured JSON. A prompt and ``max_tokens`` over the window lower the budget instead of
failing (Anthropic's ``max_tokens`` is a cap, not a promise).

The answer is written by :mod:`mockserver.routes.anthropic.message` (folded) and
:mod:`mockserver.routes.anthropic.stream` (event by event).
"""

from __future__ import annotations

import json
from typing import Any

from mockserver.context import Options
from mockserver.errors import InvalidRequest
from mockserver.media import vision
from mockserver.profiles import Endpoint, Profile
from mockserver.routes.codec import read_sampling
from mockserver.schemas.anthropic import (
    AnthropicRequest,
    CountTokensRequest,
    DocumentBlock,
    ImageBlock,
    MessageIn,
    TextBlock,
    ToolIn,
    ToolResultBlock,
    ToolUseBlock,
)
from mockserver.schemas.common import refuse_unencodable
from mockserver.spine.request import (
    ChatMessage,
    ForcedCall,
    GenerationRequest,
    JsonFormat,
    Origin,
    Prompt,
    Surface,
    Tool,
)

__all__ = ["CODEC", "MessagesCodec", "build", "conversation"]

MIN_THINKING_BUDGET = 1024  # Anthropic's smallest budget_tokens
THINK_SCALE = 32  # budget tokens per token the tiny model thinks (1024 → 32, "medium" elsewhere)
MAX_THINK = 128  # the most it thinks, whatever the budget (the reference model is tiny: keep it quick)
ADAPTIVE_THINK = 32


def _invalid(param: str, message: str) -> InvalidRequest:
    """A 400 whose message starts with the field, as Anthropic words its own."""
    return InvalidRequest(f"{param}: {message}", param=param)


def _image_tokens(block: ImageBlock, param: str) -> int:
    source = block.source
    if source.type == "base64":
        if not source.data or not source.media_type:
            raise _invalid(f"{param}.source", "a base64 image needs 'media_type' and 'data'")
        return vision.url_tokens(f"data:{source.media_type};base64,{source.data}", None, f"{param}.source.data")
    if source.type == "url":
        return vision.url_tokens(source.url or "", None, f"{param}.source.url")
    # A file the Files API holds: never fetched here, priced as any remote image.
    return vision.url_tokens(f"https://files.invalid/{source.file_id or ''}", None, f"{param}.source.file_id")


def _document_text(block: DocumentBlock) -> str:
    """A document's text when its source carries it (``text``); others are read as nothing."""
    source = block.source
    return str(source.get("data", "")) if source.get("type") == "text" else ""


def _call_text(calls: list[ToolUseBlock]) -> str:
    """An assistant's calls as the model reads them (as chat renders its ``tool_calls``)."""
    rendered = [{"id": c.id, "name": c.name, "input": c.input} for c in calls]
    return json.dumps(rendered, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _assistant(i: int, m: MessageIn) -> tuple[ChatMessage, set[str]]:
    if isinstance(m.content, str):
        return ChatMessage("assistant", m.content), set()
    text = "".join(b.text for b in m.content if isinstance(b, TextBlock))
    calls = [b for b in m.content if isinstance(b, ToolUseBlock)]
    if calls:
        text = f"{text}\n{_call_text(calls)}" if text else _call_text(calls)
    for j, b in enumerate(m.content):
        if isinstance(b, ToolResultBlock | ImageBlock):
            raise _invalid(f"messages.{i}.content.{j}.type", f"'{b.type}' blocks are only allowed in user messages")
    forced = tuple(
        ForcedCall(c.name, json.dumps(c.input, ensure_ascii=False, separators=(",", ":")), c.id) for c in calls
    )
    return ChatMessage("assistant", text, calls=forced), {c.id for c in calls}


def _user(i: int, m: MessageIn, offered: set[str]) -> list[ChatMessage]:
    if isinstance(m.content, str):
        return [ChatMessage("user", m.content)]
    turns: list[ChatMessage] = []
    text: list[str] = []
    images = 0
    for j, b in enumerate(m.content):
        where = f"messages.{i}.content.{j}"
        if isinstance(b, ToolResultBlock):
            if b.tool_use_id not in offered:
                raise _invalid(
                    where,
                    f"unexpected `tool_use_id` found in `tool_result` blocks: {b.tool_use_id}. Each `tool_result` "
                    "block must have a corresponding `tool_use` block in the previous message.",
                )
            cost = 0
            if isinstance(b.content, list):
                for k, part in enumerate(b.content):
                    if part.get("type") == "image":
                        cost += _image_tokens(ImageBlock.model_validate(part), f"{where}.content.{k}")
            turns.append(ChatMessage("tool", b.text(), cost, call_id=b.tool_use_id))
        elif isinstance(b, TextBlock):
            text.append(b.text)
        elif isinstance(b, ImageBlock):
            images += _image_tokens(b, where)
        elif isinstance(b, DocumentBlock):
            text.append(_document_text(b))
        elif isinstance(b, ToolUseBlock):
            raise _invalid(f"{where}.type", "'tool_use' blocks are only allowed in assistant messages")
    if turns and (text or images):
        # Text beside tool results (an agent's reminder, a note) goes with the last result: the
        # turn answers the calls, it does not ask a new question (which would start a new loop).
        last = turns[-1]
        said = "\n".join(t for t in (last.content, "".join(text)) if t)
        turns[-1] = ChatMessage("tool", said, last.image_tokens + images, call_id=last.call_id)
    elif not turns:
        turns.append(ChatMessage("user", "".join(text), images))
    return turns


def conversation(body: AnthropicRequest | CountTokensRequest) -> tuple[ChatMessage, ...]:
    """The spine's turns for ``system`` and ``messages`` (see the module docstring)."""
    turns: list[ChatMessage] = []
    if isinstance(body.system, str):
        if body.system:
            turns.append(ChatMessage("system", body.system))
    elif body.system:
        turns.append(ChatMessage("system", "".join(b.text for b in body.system)))
    offered: set[str] = set()  # the tool_use ids of the assistant turn just before
    for i, m in enumerate(body.messages):
        if m.role == "assistant":
            turn, offered = _assistant(i, m)
            turns.append(turn)
        else:
            turns.extend(_user(i, m, offered))
            offered = set()
    return tuple(turns)


def _tools(given: list[ToolIn] | None) -> tuple[Tool, ...]:
    """The client tools, each ``input_schema`` checked; server tools are left out (never called)."""
    from mockserver.fakejson.generate import check_schema

    tools: list[Tool] = []
    seen: set[str] = set()
    for i, t in enumerate(given or ()):
        if t.type not in (None, "custom"):
            continue
        if t.name in seen:
            raise _invalid(f"tools.{i}.name", f"tool names must be unique: '{t.name}' is given twice")
        seen.add(t.name)
        if t.input_schema is None:
            raise _invalid(f"tools.{i}.custom.input_schema", "Field required")
        if t.input_schema.get("type") != "object":
            raise _invalid(f"tools.{i}.custom.input_schema.type", "Input should be 'object'")
        refuse_unencodable(t.input_schema, f"tools.{i}.input_schema")  # a lone surrogate: 400, not 500
        check_schema(t.input_schema, f"tools.{i}.input_schema", strict=False)
        tools.append(Tool(t.name, t.description or "", t.input_schema))
    return tuple(tools)


def _think(body: AnthropicRequest | CountTokensRequest, max_tokens: int | None) -> int:
    thinking = body.thinking
    if thinking is None or thinking.type == "disabled":
        return 0
    if thinking.type == "adaptive":
        return ADAPTIVE_THINK
    budget = thinking.budget_tokens
    if budget is None:
        raise _invalid("thinking.enabled.budget_tokens", "Field required")
    if budget < MIN_THINKING_BUDGET:
        raise _invalid(
            "thinking.enabled.budget_tokens", f"Input should be greater than or equal to {MIN_THINKING_BUDGET}"
        )
    if max_tokens is not None and budget >= max_tokens:
        raise _invalid("max_tokens", "`max_tokens` must be greater than `thinking.budget_tokens`")
    return min(MAX_THINK, budget // THINK_SCALE)


def _json_format(body: AnthropicRequest | CountTokensRequest) -> JsonFormat | None:
    config = body.output_config
    if config is None or config.format is None:
        return None
    from mockserver.fakejson.generate import check_schema

    refuse_unencodable(config.format.schema_, "output_config.format.schema")
    check_schema(config.format.schema_, "output_config.format.schema", strict=True)
    return JsonFormat(config.format.schema_, strict=True)


class MessagesCodec:
    """The wire-to-spine half of the Messages family (a :class:`~mockserver.routes.handler.Reader`)."""

    schema = AnthropicRequest
    surface: Surface = "chat"  # scripted rules for chat apply here too (see docs/anthropic.md)
    endpoint: Endpoint = "chat"
    id_prefix = "msg_"

    def to_generation(
        self, body: AnthropicRequest, profile: Profile, options: Options, origin: Origin
    ) -> GenerationRequest:
        return build(body, profile, options, origin, body.max_tokens)


def build(
    body: AnthropicRequest | CountTokensRequest, profile: Profile, options: Options, origin: Origin, max_tokens: int
) -> GenerationRequest:
    """The spine's request for a create, or for the create a token count stands for (a
    :class:`CountTokensRequest`: no ``max_tokens`` of its own to hold the thinking budget to)."""
    tools = _tools(body.tools)
    choice = body.tool_choice
    mode: Any = "auto"
    name: str | None = None
    if choice is not None:
        if choice.type == "tool":
            if choice.name not in {t.name for t in tools}:
                raise _invalid("tool_choice.tool.name", f"tool '{choice.name}' is not one of the tools offered")
            mode, name = "required", choice.name
        else:
            mode = {"auto": "auto", "any": "required", "none": "none"}[choice.type]
    think = _think(body, None if isinstance(body, CountTokensRequest) else max_tokens)
    if think and choice is not None and choice.type in ("any", "tool"):
        raise _invalid("tool_choice", "Thinking may not be enabled when tool_choice forces tool use.")
    sampling = read_sampling(body, profile, options, max_tokens=max_tokens, logprobs=None)
    stops = getattr(body, "stop_sequences", None)
    if stops is not None:
        from dataclasses import replace

        sampling = replace(sampling, stop=tuple(stops))
    return GenerationRequest(
        endpoint="chat",
        model=body.model,
        prompts=(Prompt(messages=conversation(body)),),
        n=1,
        sampling=sampling,
        seed=origin.seed,
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
        parallel_tool_calls=not (choice is not None and choice.disable_parallel_tool_use),
        response_format=_json_format(body),
        think=think,
    )


CODEC = MessagesCodec()
