"""The Responses codec: pure functions from the wire to a chat :class:`GenerationRequest`,
and the input as ``input_items`` lists it; :mod:`mockserver.routes.responses.narrator`
turns engine events back into the wire.

Function tools, ``tool_choice``, ``text.format`` and ``reasoning.effort`` become the same
spine fields chat's do, so the director and the backend treat both endpoints alike.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from mockserver.answers import reasoning
from mockserver.context import Conversation, Options
from mockserver.errors import InvalidRequest
from mockserver.media import vision
from mockserver.profiles import Endpoint, Profile
from mockserver.routes.codec import read_sampling
from mockserver.schemas.common import invalid_request
from mockserver.schemas.responses import (
    LOGPROBS_INCLUDE,
    FunctionCall,
    FunctionCallOutput,
    InputItem,
    InputTokensRequest,
    MessageItem,
    ResponsesRequest,
)
from mockserver.schemas.tools import FunctionDef, NamedFunction, ResponseFormat, json_format, spine_tools, tool_choice
from mockserver.spine.request import ChatMessage, GenerationRequest, JsonFormat, Origin, Prompt, Surface, Tool
from mockserver.spine.seeding import continued_seed, digest
from mockserver.wire.json import Json

_W = TypeVar("_W", bound=BaseModel)

__all__ = [
    "CODEC",
    "ResponsesCodec",
    "assistant_text",
    "conversation",
    "conversation_id",
    "generation",
    "image_costs",
    "input_items",
    "item_id",
    "listed_item",
    "messages",
    "text_format",
    "tools",
    "turns",
]


def item_id(prefix: str, response_id: str, index: int) -> str:
    """The id of the ``index``-th item of a response (its input, or its output message)."""
    return prefix + digest(b"item", prefix, response_id, index).hex()[:24]


def conversation(body: ResponsesRequest | InputTokensRequest) -> Conversation:
    """The request's own input as (role, text) turns, instructions left out."""
    if isinstance(body.input, str):
        return (("user", body.input),)
    return turns(body.input)


def conversation_id(body: ResponsesRequest | InputTokensRequest) -> str | None:
    """The id of the ``conversation`` the request belongs to (given as the id, or ``{"id": …}``)."""
    ref = body.conversation
    if ref is None or isinstance(ref, str):
        return ref
    found = ref.get("id")
    if not isinstance(found, str):
        raise InvalidRequest("Invalid value for 'conversation.id': expected a string.", param="conversation.id")
    return found


def turns(items: Sequence[InputItem]) -> Conversation:
    """What the model reads of ``items``: (role, text) turns."""
    return tuple(turn for item in items if (turn := _turn(item)) is not None)


def _turn(item: InputItem) -> tuple[str, str] | None:
    """What the model reads of an input item: a (role, text) turn, or nothing."""
    if isinstance(item, MessageItem):
        return item.role, item.text()
    if isinstance(item, FunctionCallOutput):
        return "tool", item.text()
    if isinstance(item, FunctionCall):  # the assistant's earlier call, as the text it would have said
        return "assistant", f"{item.name}({item.arguments})"
    fields = item.fields()
    if item.type.endswith("_output"):  # another tool's result
        output = fields.get("output")
        return "tool", output if isinstance(output, str) else json.dumps(output, sort_keys=True)
    if item.type == "custom_tool_call":
        return "assistant", f"{fields.get('name', '')}({fields.get('input', '')})"
    return None  # reasoning, searches, references…: nothing an answer here reads


def image_costs(body: ResponsesRequest | InputTokensRequest) -> tuple[int, ...]:
    """What each turn of :func:`conversation` pays for its ``input_image`` parts."""
    if isinstance(body.input, str):
        return (0,)
    costs = []
    for i, item in enumerate(body.input):
        if _turn(item) is None:  # no turn: nothing to pay for (the costs go turn by turn)
            continue
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
        prefix, entry = listed_item(item)
        items.append({"id": item.id or item_id(prefix, response_id, index), **entry})
    return tuple(items)


def listed_item(item: InputItem) -> tuple[str, Json]:
    """An input item as a list of items shows it, but for its id: (its id's prefix, the item)."""
    if isinstance(item, MessageItem):
        parts = item.content if isinstance(item.content, list) else None
        kind = "output_text" if item.role == "assistant" else "input_text"
        content = [_part(p) for p in parts] if parts is not None else [_part(_Text(kind, item.text()))]
        return "msg_", {"type": "message", "role": item.role, "content": content, "status": "completed"}
    if isinstance(item, FunctionCallOutput):
        entry: Json = {"type": "function_call_output", "call_id": item.call_id, "output": item.text()}
        return "fco_", {**entry, "status": "completed"}
    if isinstance(item, FunctionCall):
        entry = {"type": "function_call", "call_id": item.call_id, "name": item.name}
        return "fc_", {**entry, "arguments": item.arguments, "status": "completed"}
    return "item_", item.fields()  # listed as sent


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


def text_format(body: ResponsesRequest) -> JsonFormat | None:
    """``text.format``: ``{"type": "json_schema", "name", "schema", "strict"}`` or ``json_object``."""
    raw = (body.text or {}).get("format")
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise InvalidRequest("Invalid value for 'text.format': expected an object.", param="text.format")
    if raw.get("type") != "json_schema":
        return json_format(_validated(ResponseFormat, raw, "text.format"), "text.format")
    # Responses write json_schema's fields flat where chat nests them: read as chat's, errors
    # name the fields where this request has them.
    spec = {k: v for k, v in raw.items() if k != "type"}
    try:
        return json_format(
            _validated(ResponseFormat, {"type": "json_schema", "json_schema": spec}, "text.format"), "text.format"
        )
    except InvalidRequest as exc:
        nested = "text.format.json_schema"
        exc.message = exc.message.replace(nested, "text.format")
        exc.param = exc.param.replace(nested, "text.format") if exc.param else exc.param
        raise


def messages(instructions: str | None, turns: Conversation, images: tuple[int, ...] = ()) -> tuple[ChatMessage, ...]:
    """The chat the model reads; ``images`` are the image tokens of the *last* turns (the
    request's own input: earlier turns of a stored conversation keep only their text)."""
    head = (ChatMessage("system", instructions),) if instructions else ()
    costs = (0,) * (len(turns) - len(images)) + images
    return head + tuple(ChatMessage(role, text, cost) for (role, text), cost in zip(turns, costs, strict=True))


class ResponsesCodec:
    """The request side of ``POST /v1/responses`` (its answers are narrated by
    :class:`~mockserver.routes.responses.narrator.ResponseNarrator`)."""

    schema = ResponsesRequest
    surface: Surface = "responses"
    endpoint: Endpoint = "chat"  # read against the fields profiles document for chat
    id_prefix = "resp_"

    def to_generation(
        self, body: ResponsesRequest, profile: Profile, options: Options, origin: Origin
    ) -> GenerationRequest:
        """A chat generation of the conversation so far (``options.history``) and the input."""
        turns = messages(body.instructions, options.history + conversation(body), image_costs(body))
        if options.history and body.seed is None:
            # previous_response_id is not hashed (its value depends on the store: see
            # mockserver.spine.seeding); the conversation it stands for is.
            origin = replace(origin, seed=continued_seed(origin.seed, options.history))
        return generation(turns, body, profile, options, origin)


_NO_ORIGIN = Origin()  # input_tokens counts with no seed, source or faults


def generation(
    turns: tuple[ChatMessage, ...],
    body: ResponsesRequest | InputTokensRequest,
    profile: Profile,
    options: Options,
    origin: Origin = _NO_ORIGIN,
) -> GenerationRequest:
    """A chat generation of ``turns`` with the body's sampling fields."""
    include = getattr(body, "include", None) or []
    wants = LOGPROBS_INCLUDE in include
    max_tokens = getattr(body, "max_output_tokens", None)
    sampling = read_sampling(
        body,  # type: ignore[arg-type]
        profile,
        options,
        max_tokens=max_tokens if max_tokens is not None else profile.default_max_tokens["chat"],
        logprobs=(getattr(body, "top_logprobs", None) or 0) if wants else None,
    )
    fields: dict[str, Any] = {}
    if isinstance(body, ResponsesRequest):
        offered = tools(body)
        mode, name = _choice(body, offered)
        fields = {
            "tools": offered,
            "tool_choice": mode,
            "tool_name": name,
            "parallel_tool_calls": body.parallel_tool_calls is not False,
            "max_tool_calls": body.max_tool_calls,
            "response_format": text_format(body),
            "think": reasoning.think_budget(
                body.model, (body.reasoning or {}).get("effort"), options.reasoning_models, "reasoning.effort"
            ),
        }
    return GenerationRequest(
        endpoint="chat",
        model=body.model,
        prompts=(Prompt(messages=turns),),
        n=1,
        sampling=sampling,
        seed=origin.seed,
        context_window=options.models.context_window(body.model, profile),
        canonical=origin.canonical,
        stream=bool(getattr(body, "stream", False)),
        surface=origin.source.surface,
        session=origin.source.session,
        content_faults=origin.content_faults,
        paced=origin.paced,
        **fields,
    )


CODEC = ResponsesCodec()
