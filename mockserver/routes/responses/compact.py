"""``POST /v1/responses/compact``: a conversation compacted, deterministically, into the
``response.compaction`` object the spec describes.

The conversation is the stored one ``previous_response_id`` continues (its turns and its
answer), then the request's own ``input``. As OpenAI documents, the output is every user
message, then one ``compaction`` item standing for the rest. Its ``encrypted_content`` is
opaque to clients; here it is the base64 of a small JSON record of the turns it replaces
(role and text), so the same conversation always compacts to the same bytes, and the item can
be sent back as input (``/v1/responses`` accepts ``compaction`` items). Nothing is generated:
``usage`` counts the conversation read (``input_tokens``) and the turns the compaction item
replaces, as ``role: text`` lines (``output_tokens``), with the shipped tokenizer. Nothing is stored.
"""

from __future__ import annotations

import base64
import json

from pydantic import Field, field_validator
from starlette.requests import Request
from starlette.responses import Response

from mockserver.context import ServerContext
from mockserver.gpt.tokenizer import NotUnicode, Tokenizer
from mockserver.http.body import json_body
from mockserver.routes import params
from mockserver.routes.responses import codec
from mockserver.schemas.common import WireModel, validated
from mockserver.schemas.responses import FunctionCall, FunctionCallOutput, InputItem, MessageItem
from mockserver.spine import seeding
from mockserver.wire.json import Json, dumps

__all__ = ["CompactRequest", "compact"]

OBJECT = "response.compaction"
FORMAT = "mockserver-compaction/1"  # names the record inside encrypted_content


class CompactRequest(WireModel):
    """The fields of ``CompactResponseMethodPublicBody`` that change the answer (the others,
    caching and service tier, are accepted and ignored)."""

    model: str
    input: str | list[InputItem] | None = None
    instructions: str | None = None
    previous_response_id: str | None = None
    prompt_cache_key: str | None = Field(None, max_length=64)

    @field_validator("input")
    @classmethod
    def _not_empty(cls, value: str | list[InputItem] | None) -> str | list[InputItem] | None:
        if isinstance(value, list) and not value:
            raise ValueError("input must contain at least one item")
        return value


def _text_parts(item: MessageItem) -> list[Json]:
    if isinstance(item.content, str):
        return [{"type": "input_text", "text": item.content}]
    parts: list[Json] = []
    for part in item.content:
        if part.type in ("input_text", "output_text"):
            parts.append({"type": "input_text", "text": part.text or ""})
        elif part.type == "input_image":
            parts.append({"type": "input_image", "image_url": part.image_url, "detail": part.detail or "auto"})
    return parts


def _split(body: CompactRequest, history: tuple[tuple[str, str], ...]) -> tuple[list[list[Json]], list[list[str]]]:
    """The user messages kept (their content parts), and every turn (role, text) read."""
    kept: list[list[Json]] = []
    turns: list[list[str]] = [[role, text] for role, text in history]
    for role, text in history:
        if role == "user":
            kept.append([{"type": "input_text", "text": text}])
    items: list[InputItem] = (
        []
        if body.input is None
        else [MessageItem(role="user", content=body.input)]
        if isinstance(body.input, str)
        else body.input
    )
    for item in items:
        if isinstance(item, MessageItem):
            turns.append([item.role, item.text()])
            if item.role == "user":
                kept.append(_text_parts(item))
        elif isinstance(item, FunctionCallOutput):
            turns.append(["tool", item.text()])
        elif isinstance(item, FunctionCall):
            turns.append(["assistant", f"{item.name}({item.arguments})"])
        else:  # other items (reasoning, earlier compactions…) are kept whole in the record
            turns.append([item.type, json.dumps(item.fields(), sort_keys=True, separators=(",", ":"))])
    return kept, turns


async def compact(request: Request) -> Response:
    ctx: ServerContext = request.app.state.ctx
    profile = ctx.profile_of(request.scope)
    _, data = await json_body(request)
    data = params.prepare(data, profile, "chat", strict=False)  # extra_body (and an Azure deployment)
    body = validated(CompactRequest, data)
    ctx.options.models.context_window(body.model, profile)  # a 404 for an unlisted id, if rejected
    history: tuple[tuple[str, str], ...] = ()
    if body.previous_response_id is not None:
        record = await ctx.responses.get(body.previous_response_id, param="previous_response_id")
        history = (*record.messages, ("assistant", codec.assistant_text(record.response)))
    kept, turns = _split(body, history)
    tokenizer = Tokenizer.shipped()
    read = ([("system", body.instructions)] if body.instructions else []) + [(r, t) for r, t in turns]
    record_text = json.dumps({"format": FORMAT, "turns": turns}, ensure_ascii=False, separators=(",", ":"))
    try:
        input_tokens = len(tokenizer.render_chat(read, generation_prompt=False)) if read else 0
        # What the compaction item stands for: the turns that are not kept as user messages.
        output_tokens = len(tokenizer.encode("\n".join(f"{r}: {t}" for r, t in turns if r != "user")))
    except NotUnicode as exc:
        raise params.invalid("input", str(exc)) from None
    canonical = b"compact\0" + seeding.canonical(data)
    answer_id = seeding.make_id("resp_", canonical, 0)
    output: list[Json] = [
        {
            "id": seeding.make_id("msg_", canonical, i),
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": content,
        }
        for i, content in enumerate(kept)
    ]
    output.append(
        {
            "id": seeding.make_id("cmp_", canonical, 0),
            "type": "compaction",
            "encrypted_content": base64.b64encode(record_text.encode("utf-8", "surrogatepass")).decode(),
        }
    )
    answer = {
        "id": answer_id,
        "object": OBJECT,
        "created_at": int(ctx.clock.now()),
        "output": output,
        "usage": {
            "input_tokens": input_tokens,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": output_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": input_tokens + output_tokens,
        },
    }
    return Response(dumps(answer), media_type="application/json")
