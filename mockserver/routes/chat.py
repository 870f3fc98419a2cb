"""``POST /v1/chat/completions``: the chat codec.

Streams open each choice with a role delta (``{"role": "assistant", "content": ""}``), send
content deltas, and close each choice with an empty delta carrying its ``finish_reason``.
Logprobs are ``{"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}`` with
exactly ``top_logprobs`` alternatives per token.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.generation import (
    ChatMessage,
    Event,
    Finished,
    GenerationRequest,
    Prompt,
    Result,
    Sampling,
    Started,
    TextDelta,
    Token,
)
from mockserver.routes.generate import Call, handle, usage_body
from mockserver.schemas.chat import ChatRequest
from mockserver.schemas.common import stop_tuple

OBJECT = "chat.completion"
CHUNK_OBJECT = "chat.completion.chunk"


def _content_logprobs(tokens: list[Token] | tuple[Token, ...]) -> dict[str, Any]:
    return {
        "content": [
            {
                "token": t.token,
                "logprob": t.logprob,
                "bytes": list(t.bytes),
                "top_logprobs": [{"token": c.token, "logprob": c.logprob, "bytes": list(c.bytes)} for c in t.top],
            }
            for t in tokens
        ],
        "refusal": None,
    }


class ChatCodec:
    schema = ChatRequest
    id_prefix = "chatcmpl-"

    def to_generation(self, body: ChatRequest, ctx: ServerContext, canonical: bytes, seed: int) -> GenerationRequest:
        if body.top_logprobs is not None and not body.logprobs:
            raise InvalidRequest(
                "Invalid value for 'top_logprobs': 'logprobs' must be set to true when 'top_logprobs' is used.",
                param="top_logprobs",
            )
        limit = ctx.profile.max_top_logprobs
        if body.top_logprobs is not None and body.top_logprobs > limit:
            raise InvalidRequest(
                f"Invalid value for 'top_logprobs': must be less than or equal to {limit}.", param="top_logprobs"
            )
        messages = tuple(ChatMessage(m.role, m.text()) for m in body.messages)
        sampling = Sampling(
            temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
            top_k=max(0, body.top_k or 0),
            max_tokens=body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens,
            stop=stop_tuple(body.stop),
            logprobs=(body.top_logprobs or 0) if body.logprobs else None,
        )
        return GenerationRequest(
            endpoint="chat",
            model=body.model,
            prompts=(Prompt(messages=messages),),
            n=body.n or 1,
            sampling=sampling,
            seed=seed,
            context_window=ctx.context_window(body.model),
            canonical=canonical,
            stream=bool(body.stream),
        )

    def encode(self, call: Call, result: Result) -> dict[str, Any]:
        wants_logprobs = call.gen.sampling.logprobs is not None
        choices: list[dict[str, Any]] = [
            {
                "index": c.index,
                "message": {"role": "assistant", "content": c.text, "refusal": None, "annotations": []},
                "logprobs": _content_logprobs(c.tokens) if wants_logprobs else None,
                "finish_reason": c.finish_reason,
            }
            for c in result.ordered()
        ]
        return {**call.envelope(OBJECT), "choices": choices, "usage": usage_body(result.usage)}

    def _chunk(
        self, call: Call, index: int, delta: dict[str, Any], logprobs: Any = None, finish: str | None = None
    ) -> dict[str, Any]:
        choice = {"index": index, "delta": delta, "logprobs": logprobs, "finish_reason": finish}
        return call.chunk(CHUNK_OBJECT, [choice])

    def encode_event(self, call: Call, event: Event, result: Result) -> list[dict[str, Any]]:
        if isinstance(event, Started):
            return [self._chunk(call, event.index, {"role": "assistant", "content": "", "refusal": None})]
        if isinstance(event, TextDelta):
            logprobs = _content_logprobs(event.tokens) if call.gen.sampling.logprobs is not None else None
            return [self._chunk(call, event.index, {"content": event.text}, logprobs)]
        if isinstance(event, Finished):
            return [self._chunk(call, event.index, {}, None, event.reason)]
        return []

    def encode_end(self, call: Call, result: Result) -> list[dict[str, Any]]:
        return call.usage_chunks(CHUNK_OBJECT, result)


CODEC = ChatCodec()


async def create(request: Request) -> Response:
    return await handle(request, CODEC)
