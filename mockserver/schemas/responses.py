"""``POST /v1/responses`` (and ``/v1/responses/input_tokens``) request bodies.

``input`` is a string or a list of items. The items understood are messages (content a
string, or parts: ``input_text`` / ``output_text`` carry text; an ``input_image`` costs its
tokens but is not seen, an ``input_file`` is accepted and ignored), a function's
output (``function_call_output``, read as a ``tool`` message) and an earlier function call
(``function_call``, read as the assistant's turn). Function tools, ``text.format`` and
``reasoning`` are read by the codec (:mod:`mockserver.routes.responses.codec`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Discriminator, Field, Tag, field_validator

from mockserver.schemas.common import GenerationFields, WireModel

__all__ = ["FunctionCall", "FunctionCallOutput", "InputTokensRequest", "MessageItem", "ResponsesRequest"]

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


def _kind(value: Any) -> str:
    """A message may leave out ``type``; the other items name theirs."""
    kind = value.get("type", "message") if isinstance(value, dict) else getattr(value, "type", "message")
    return str(kind)


_TAG_OF = {"message": "MessageItem", "function_call_output": "FunctionCallOutput", "function_call": "FunctionCall"}


def _tag(value: Any) -> str:
    # Tags are class names: error paths skip them (``input[0].role``, not ``input[0].message.role``).
    return _TAG_OF.get(_kind(value), _kind(value))


InputItem = Annotated[
    Annotated[MessageItem, Tag("MessageItem")]
    | Annotated[FunctionCallOutput, Tag("FunctionCallOutput")]
    | Annotated[FunctionCall, Tag("FunctionCall")],
    Discriminator(_tag),
]


class _InputFields(WireModel):
    model: str
    input: str | list[InputItem]
    instructions: str | None = None
    previous_response_id: str | None = None

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
