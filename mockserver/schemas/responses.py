"""``POST /v1/responses`` (and ``/v1/responses/input_tokens``) request bodies.

``input`` is a string or a list of items. The items understood are messages (content a
string, or parts: ``input_text`` / ``output_text`` carry text; an ``input_image`` costs its
tokens but is not seen, an ``input_file`` is accepted and ignored), a function's
output (``function_call_output``, read as a ``tool`` message) and an earlier function call
(``function_call``, read as the assistant's turn); every other item type the spec allows is
accepted (:class:`OtherItem`, see :data:`OTHER_ITEM_TYPES`). Function tools, ``text.format`` and
``reasoning`` are read by the codec (:mod:`mockserver.routes.responses.codec`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Discriminator, Field, Tag, field_validator

from mockserver.errors import clip
from mockserver.schemas.common import GenerationFields, WireModel

__all__ = [
    "OTHER_ITEM_TYPES",
    "FunctionCall",
    "FunctionCallOutput",
    "InputTokensRequest",
    "MessageItem",
    "OtherItem",
    "ResponsesRequest",
]

LOGPROBS_INCLUDE = "message.output_text.logprobs"
MIN_OUTPUT_TOKENS = 16  # the spec's minimum for max_output_tokens


class ContentPart(WireModel):
    type: Literal["input_text", "output_text", "input_image", "input_file", "refusal"]
    text: str | None = None
    refusal: str | None = None
    image_url: str | None = None  # input_image: a data URL (measured) or a URL (never fetched)
    detail: str | None = None


class MessageItem(WireModel):
    type: Literal["message"] = "message"
    id: str | None = None
    role: Literal["user", "system", "developer", "assistant"]
    content: str | list[ContentPart]

    def text(self) -> str:
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text or "" for part in self.content if part.type in ("input_text", "output_text"))


class FunctionCallOutput(WireModel):
    type: Literal["function_call_output"]
    id: str | None = None
    call_id: str = Field(min_length=1, max_length=64)
    output: str | list[ContentPart]

    def text(self) -> str:
        if isinstance(self.output, str):
            return self.output
        return "".join(part.text or "" for part in self.output)


class FunctionCall(WireModel):
    type: Literal["function_call"]
    id: str | None = None
    call_id: str
    name: str
    arguments: str


# The other input item types OpenAI's spec allows (``InputItem``'s variants, and references to
# stored items). Accepted and listed as sent; what the model reads of them: the output of a tool
# (any ``*_output`` item) as a tool's turn, a custom tool's call as the assistant's, nothing of
# the rest (reasoning, web searches, MCP listings…), which an answer here does not depend on.
OTHER_ITEM_TYPES = frozenset(
    {
        "additional_tools",
        "apply_patch_call",
        "apply_patch_call_output",
        "code_interpreter_call",
        "compaction",
        "compaction_trigger",
        "computer_call",
        "computer_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "file_search_call",
        "image_generation_call",
        "item_reference",
        "local_shell_call",
        "local_shell_call_output",
        "mcp_approval_request",
        "mcp_approval_response",
        "mcp_call",
        "mcp_list_tools",
        "program",
        "program_output",
        "reasoning",
        "shell_call",
        "shell_call_output",
        "tool_search_call",
        "tool_search_output",
        "web_search_call",
    }
)


class OtherItem(WireModel):
    """An input item of another type the spec allows; its fields are kept as sent."""

    model_config = ConfigDict(strict=True, extra="allow", frozen=True)

    type: str
    id: str | None = None

    @field_validator("type")
    @classmethod
    def _known(cls, value: str) -> str:
        if value not in OTHER_ITEM_TYPES:
            known = ", ".join(sorted({"message", "function_call", "function_call_output", *OTHER_ITEM_TYPES}))
            raise ValueError(f"'{clip(value, 40)}' is not an input item type; expected one of {known}")
        return value

    def fields(self) -> dict[str, Any]:
        """The item as sent (its extra fields included)."""
        return {"type": self.type, **(self.model_extra or {})}


def _kind(value: Any) -> str:
    """A message may leave out ``type``; the other items name theirs."""
    kind = value.get("type", "message") if isinstance(value, dict) else getattr(value, "type", "message")
    return str(kind)


_TAG_OF = {"message": "MessageItem", "function_call_output": "FunctionCallOutput", "function_call": "FunctionCall"}


def _tag(value: Any) -> str:
    # Tags are class names: error paths skip them (``input[0].role``, not ``input[0].message.role``).
    return _TAG_OF.get(_kind(value), "OtherItem")


InputItem = Annotated[
    Annotated[MessageItem, Tag("MessageItem")]
    | Annotated[FunctionCallOutput, Tag("FunctionCallOutput")]
    | Annotated[FunctionCall, Tag("FunctionCall")]
    | Annotated[OtherItem, Tag("OtherItem")],
    Discriminator(_tag),
]


class _InputFields(WireModel):
    model: str
    input: str | list[InputItem]
    instructions: str | None = None
    previous_response_id: str | None = None
    conversation: str | dict[str, Any] | None = None  # an id, or {"id": …} (the codec reads it)

    @field_validator("input")
    @classmethod
    def _not_empty(cls, value: str | list[Any]) -> str | list[Any]:
        if isinstance(value, list) and not value:
            raise ValueError("input must contain at least one item")
        return value


class ResponsesRequest(GenerationFields, _InputFields):
    """The fields of ``CreateResponse`` the server reads; the sampling extensions of
    :class:`GenerationFields` come along (``top_k``, ``seed``, …) as on chat."""

    max_output_tokens: int | None = Field(None, ge=MIN_OUTPUT_TOKENS)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    include: list[str] | None = None
    text: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    max_tool_calls: int | None = Field(None, ge=1)
    reasoning: dict[str, Any] | None = None
    store: bool | None = None
    background: bool | None = None
    metadata: dict[str, str] | None = None
    truncation: Literal["auto", "disabled"] | None = None

    @field_validator("metadata")
    @classmethod
    def _sixteen_pairs(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and len(value) > 16:
            raise ValueError("at most 16 key-value pairs are allowed")
        return value


class InputTokensRequest(_InputFields):
    """``POST /v1/responses/input_tokens``: the fields that decide what the model reads."""

    model: str = "gpt-4o-mini"
    tools: list[dict[str, Any]] | None = None
