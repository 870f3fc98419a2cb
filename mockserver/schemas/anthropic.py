"""``POST /v1/messages`` (Anthropic's Messages API) request bodies.

Field names and shapes follow the official ``anthropic`` SDK's ``MessageCreateParams``: a
required ``max_tokens``, ``system`` as a string or text blocks, ``messages`` of ``user`` and
``assistant`` turns whose content is a string or typed blocks (``text``, ``image``,
``tool_use``, ``tool_result``, ``thinking``, ``redacted_thinking``, ``document``),
``stop_sequences``, ``tools`` (client tools with an ``input_schema``; server tools are
accepted and never called), ``tool_choice`` (``auto`` / ``any`` / ``tool`` / ``none``),
``thinking`` (``enabled`` with ``budget_tokens``, ``adaptive``, ``disabled``) and
``output_config.format`` (a JSON schema the answer follows).

Blocks are kept loose where Anthropic adds new kinds often (``cache_control``, citations):
unknown fields are ignored as on every wire model; a block ``type`` nobody knows is a 400.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Self

from pydantic import Discriminator, Field, Tag, ValidationError, field_validator

from mockserver.errors import ECHO, InvalidRequest, clip
from mockserver.schemas.common import GenerationFields, WireModel

__all__ = [
    "OPENAPI_RESPONSES",
    "AnthropicRequest",
    "Block",
    "CountTokensRequest",
    "ImageBlock",
    "MessageIn",
    "TextBlock",
    "ThinkingConfig",
    "ToolChoiceIn",
    "ToolIn",
    "ToolResultBlock",
    "ToolUseBlock",
    "anthropic_invalid",
]


class TextBlock(WireModel):
    type: Literal["text"]
    text: str


class ImageSource(WireModel):
    type: Literal["base64", "url", "file"]
    media_type: str | None = None
    data: str | None = None
    url: str | None = None
    file_id: str | None = None


class ImageBlock(WireModel):
    type: Literal["image"]
    source: ImageSource


class DocumentBlock(WireModel):
    """A PDF or text document: its text (a ``text`` source) is read, anything else only counted."""

    type: Literal["document"]
    source: dict[str, Any]


class ToolUseBlock(WireModel):
    type: Literal["tool_use"]
    id: str
    name: str
    input: dict[str, Any]


class ToolResultBlock(WireModel):
    type: Literal["tool_result"]
    tool_use_id: str
    content: str | list[dict[str, Any]] | None = None  # text or text / image blocks
    is_error: bool | None = None

    def text(self) -> str:
        if self.content is None or isinstance(self.content, str):
            return self.content or ""
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")


class ThinkingBlock(WireModel):
    type: Literal["thinking"]
    thinking: str
    signature: str


class RedactedThinkingBlock(WireModel):
    type: Literal["redacted_thinking"]
    data: str


def _block_tag(value: Any) -> str | None:
    """A block's tag is its ``type`` (so an unknown one is named in the 400 with the known ones)."""
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return kind if isinstance(kind, str) else None


Block = Annotated[
    Annotated[TextBlock, Tag("text")]
    | Annotated[ImageBlock, Tag("image")]
    | Annotated[DocumentBlock, Tag("document")]
    | Annotated[ToolUseBlock, Tag("tool_use")]
    | Annotated[ToolResultBlock, Tag("tool_result")]
    | Annotated[ThinkingBlock, Tag("thinking")]
    | Annotated[RedactedThinkingBlock, Tag("redacted_thinking")],
    Discriminator(_block_tag),
]


class MessageIn(WireModel):
    role: Literal["user", "assistant"]
    content: str | list[Block]


class ToolIn(WireModel):
    """A client tool (``custom``, or no ``type``), or a server tool (any other ``type``,
    e.g. ``web_search_20250305``): accepted, never called, since nothing here runs it."""

    name: str = Field(pattern=r"^[a-zA-Z0-9_-]{1,128}$")
    type: str | None = None
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class ToolChoiceIn(WireModel):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool | None = None


class ThinkingConfig(WireModel):
    type: Literal["enabled", "adaptive", "disabled"]
    budget_tokens: int | None = None
    display: str | None = None


class OutputFormat(WireModel):
    type: Literal["json_schema"]
    schema_: dict[str, Any] = Field(alias="schema")


class OutputConfig(WireModel):
    format: OutputFormat | None = None
    effort: str | None = None


# Names pydantic puts into an error's location for union members and tagged blocks: not body paths.
_UNION_TAGS = frozenset({"str", "int", "float", "bool", "none", "function-after", "json-or-python"})


def _where(loc: tuple[int | str, ...]) -> str:
    """A location as Anthropic writes it: dotted, list indices included (``messages.0.role``)."""
    parts = [
        str(p) for p in loc if isinstance(p, int) or (p.isidentifier() and p not in _UNION_TAGS and not p[:1].isupper())
    ]
    return ".".join(clip(p, 40) for p in parts)


def anthropic_invalid(exc: ValidationError) -> InvalidRequest:
    """The deepest validation error as Anthropic words its own (it validates with pydantic
    too): ``max_tokens: Field required``, ``messages.0.role: Input should be 'user' or 'assistant'``."""
    errors = exc.errors(include_url=False)
    error = max(errors, key=lambda e: len(e["loc"]))
    where = _where(tuple(error["loc"]))
    message = str(error["msg"]).removeprefix("Value error, ").replace("using _block_tag()", "using 'type'")
    return InvalidRequest(
        f"{where}: {clip(message, 2 * ECHO)}" if where else clip(message, 2 * ECHO), param=where or None
    )


class _Conversation(GenerationFields):
    """What a create and a token count share; a body that is not one is Anthropic's 400."""

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> Self:
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise anthropic_invalid(exc) from None

    messages: list[MessageIn]
    system: str | list[TextBlock] | None = None
    tools: list[ToolIn] | None = None
    tool_choice: ToolChoiceIn | None = None
    thinking: ThinkingConfig | None = None
    output_config: OutputConfig | None = None

    @field_validator("messages")
    @classmethod
    def _not_empty(cls, value: list[MessageIn]) -> list[MessageIn]:
        if not value:
            raise ValueError("at least one message is required")
        return value


class AnthropicRequest(_Conversation):
    max_tokens: int = Field(ge=1)
    stop_sequences: list[str] | None = None
    # Anthropic's ranges (tighter than OpenAI's): the 2.x SDK sends none of them, raw clients may.
    temperature: float | None = Field(None, ge=0, le=1)
    top_k: int | None = Field(None, ge=0)
    metadata: dict[str, Any] | None = None


class CountTokensRequest(_Conversation):
    """``POST /v1/messages/count_tokens``: a create's body without ``max_tokens``."""


# How the OpenAPI document describes the Messages endpoints' answers (mockserver.routes.openapi):
# a JSON body or Anthropic's named events, and errors in Anthropic's envelope (not OpenAI's).
_ERROR: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "properties": {"type": {"type": "string"}, "message": {"type": "string"}},
            "required": ["type", "message"],
        },
    },
    "required": ["type", "error"],
}
_EVENT: dict[str, Any] = {
    "type": "object",
    "properties": {"event": {"type": "string"}, "data": {"type": "string", "contentMediaType": "application/json"}},
    "required": ["data"],
    "description": "One server-sent event named by its type (message_start, content_block_delta, …).",
}
OPENAPI_RESPONSES: dict[str, Any] = {
    "200": {
        "description": "OK",
        "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {"schema": _EVENT}},
    },
    **{
        str(status): {"description": "Error", "content": {"application/json": {"schema": _ERROR}}}
        for status in (400, 401, 404, 429, 500, 529)
    },
}
