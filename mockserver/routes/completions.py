"""``POST /v1/completions``: the legacy text completion codec.

P prompts × ``n`` give P·n choices, prompt-major (choice ``p * n + j``). ``echo`` returns the
prompt before the completion and, with ``logprobs``, scores it too: the first prompt token has
no logprob (``null``), as on OpenAI. ``max_tokens: 0`` with ``echo`` is the loglikelihood
pattern of evaluation harnesses: the prompt scored, nothing generated.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from mockserver.context import ServerContext
from mockserver.errors import InvalidRequest
from mockserver.generation import (
    Event,
    Finished,
    GenerationRequest,
    Prompt,
    Result,
    Sampling,
    TextDelta,
    Token,
)
from mockserver.routes.generate import Call, handle, usage_body
from mockserver.schemas.common import stop_tuple
from mockserver.schemas.completions import CompletionRequest

OBJECT = "text_completion"


def _prompts(prompt: str | list[str] | list[int] | list[list[int]]) -> tuple[Prompt, ...]:
    if isinstance(prompt, str):
        return (Prompt(text=prompt),)
    if all(isinstance(p, str) for p in prompt):
        return tuple(Prompt(text=p) for p in prompt)  # type: ignore[arg-type]
    if all(isinstance(p, int) for p in prompt):
        return (Prompt(token_ids=tuple(prompt)),)  # type: ignore[arg-type]
    return tuple(Prompt(token_ids=tuple(p)) for p in prompt)  # type: ignore[arg-type]


def _logprobs(tokens: list[Token] | tuple[Token, ...], start: int) -> dict[str, Any]:
    """OpenAI's ``{tokens, token_logprobs, top_logprobs, text_offset}``; offsets from ``start``.

    The top map holds the requested alternatives plus the sampled token (hence up to
    ``logprobs + 1`` entries, as OpenAI documents); an unscored token has ``null`` there.
    """
    offsets: list[int] = []
    position = start
    tops: list[dict[str, float] | None] = []
    for t in tokens:
        offsets.append(position)
        position += len(t.text)
        if t.logprob is None:
            tops.append(None)
        else:
            top = {c.token: c.logprob for c in t.top}
            top.setdefault(t.token, t.logprob)
            tops.append(top)
    return {
        "tokens": [t.token for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": tops,
        "text_offset": offsets,
    }


class CompletionsCodec:
    schema = CompletionRequest
    id_prefix = "cmpl-"

    def to_generation(
        self, body: CompletionRequest, ctx: ServerContext, canonical: bytes, seed: int
    ) -> GenerationRequest:
        limit = ctx.profile.max_completion_logprobs
        if body.logprobs is not None and body.logprobs > limit:
            raise InvalidRequest(
                f"Invalid value for 'logprobs': must be less than or equal to {limit}.", param="logprobs"
            )
        sampling = Sampling(
            temperature=1.0 if body.temperature is None else body.temperature,
            top_p=1.0 if body.top_p is None else body.top_p,
            top_k=max(0, body.top_k or 0),
            max_tokens=ctx.profile.completion_max_tokens if body.max_tokens is None else body.max_tokens,
            stop=stop_tuple(body.stop),
            logprobs=body.logprobs,
            echo=bool(body.echo),
        )
        return GenerationRequest(
            endpoint="completions",
            model=body.model,
            prompts=_prompts(body.prompt),
            n=body.n or 1,
            sampling=sampling,
            seed=seed,
            context_window=ctx.context_window(body.model),
            canonical=canonical,
            stream=bool(body.stream),
        )

    def encode(self, call: Call, result: Result) -> dict[str, Any]:
        wants_logprobs = call.gen.sampling.logprobs is not None
        choices = [
            {
                "text": c.text,
                "index": c.index,
                "logprobs": _logprobs(c.tokens, 0) if wants_logprobs else None,
                "finish_reason": c.finish_reason,
            }
            for c in result.ordered()
        ]
        return {**call.envelope(OBJECT), "choices": choices, "usage": usage_body(result.usage)}

    def encode_event(self, call: Call, event: Event, result: Result) -> list[dict[str, Any]]:
        if isinstance(event, TextDelta):
            logprobs = None
            if call.gen.sampling.logprobs is not None:
                logprobs = _logprobs(event.tokens, result.choices[event.index].length - len(event.text))
            choice = {"text": event.text, "index": event.index, "logprobs": logprobs, "finish_reason": None}
            return [call.chunk(OBJECT, [choice])]
        if isinstance(event, Finished):
            choice = {"text": "", "index": event.index, "logprobs": None, "finish_reason": event.reason}
            return [call.chunk(OBJECT, [choice])]
        return []

    def encode_end(self, call: Call, result: Result) -> list[dict[str, Any]]:
        return call.usage_chunks(OBJECT, result)


CODEC = CompletionsCodec()


async def create(request: Request) -> Response:
    return await handle(request, CODEC)
