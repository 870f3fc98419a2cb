"""``POST /v1/completions``: the legacy text completion codec.

P prompts × ``n`` give P·n choices, prompt-major (choice ``p * n + j``). ``echo`` returns the
prompt before the completion and, with ``logprobs``, scores it too: the first prompt token has
no logprob (``null``), as on OpenAI. ``max_tokens: 0`` with ``echo`` is the loglikelihood
pattern of evaluation harnesses: the prompt scored, nothing generated. ``suffix`` (insert
mode) is read by the model as context before the prompt (see the reference backend).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mockserver.context import Options
from mockserver.media import vision
from mockserver.profiles import Endpoint, Profile
from mockserver.routes import logprobs, params
from mockserver.routes.codec import Call, ChunkFrame, read_sampling
from mockserver.schemas.completions import CompletionRequest
from mockserver.schemas.tools import json_format
from mockserver.spine.events import Event, Finished, Refusal, TextDelta
from mockserver.spine.request import GenerationRequest, Origin, Prompt, Surface
from mockserver.spine.result import Result


def _prompts(prompt: str | list[str] | list[int] | list[list[int]], suffix: str | None) -> tuple[Prompt, ...]:
    if isinstance(prompt, str):
        return (Prompt(text=prompt, suffix=suffix),)
    if all(isinstance(p, str) for p in prompt):
        return tuple(Prompt(text=p, suffix=suffix) for p in prompt)  # type: ignore[arg-type]
    if all(isinstance(p, int) for p in prompt):
        return (Prompt(token_ids=tuple(prompt), suffix=suffix),)  # type: ignore[arg-type]
    return tuple(Prompt(token_ids=tuple(p), suffix=suffix) for p in prompt)  # type: ignore[arg-type]


def _count(prompt: str | list[str] | list[int] | list[list[int]]) -> int:
    """How many prompts: a string or one list of token ids is one."""
    return len(prompt) if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int) else 1


class CompletionsCodec:
    schema = CompletionRequest
    surface: Surface = "completions"
    endpoint: Endpoint = "completions"
    id_prefix = "cmpl-"

    def to_generation(
        self, body: CompletionRequest, profile: Profile, options: Options, origin: Origin
    ) -> GenerationRequest:
        if body.suffix is not None and body.echo:
            raise params.invalid("suffix", "'echo' and 'suffix' cannot be used together.")
        max_tokens = profile.default_max_tokens["completions"] if body.max_tokens is None else body.max_tokens
        n = body.n or 1
        params.choices(_count(body.prompt), n, body.best_of, options.limits)  # before any prompt is built
        prompts = _prompts(body.prompt, body.suffix)
        if body.images:  # one image list for the request: it goes with the (first) prompt
            prompts = (replace(prompts[0], image_tokens=vision.images_tokens(body.images, "images")), *prompts[1:])
        return GenerationRequest(
            endpoint="completions",
            model=body.model,
            prompts=prompts,
            n=n,
            sampling=read_sampling(
                body, profile, options, max_tokens=max_tokens, logprobs=body.logprobs, echo=bool(body.echo)
            ),
            seed=origin.seed,
            best_of=params.best_of(body, n),
            context_window=options.models.context_window(body.model, profile),
            stream=bool(body.stream),
            canonical=origin.canonical,
            surface=origin.source.surface,
            session=origin.source.session,
            content_faults=origin.content_faults,
            paced=origin.paced,
            response_format=json_format(body.response_format),
        )

    def encode(self, call: Call, result: Result) -> dict[str, Any]:
        wants_logprobs = call.gen.sampling.logprobs is not None
        choices = []
        for c in result.ordered():
            choice = {
                "text": c.text + (c.refusal or ""),
                "index": c.index,
                "logprobs": logprobs.legacy(c.tokens, 0) if wants_logprobs else None,
                **call.finish(c.finish_reason, c.matched),
            }
            if c.prompt_logprobs is not None:
                choice["prompt_logprobs"] = logprobs.prompt(c.prompt_logprobs)
            choices.append(choice)
        return {**call.envelope(self.object(call)), "choices": choices, "usage": call.usage(result)}

    def object(self, call: Call) -> str:
        return call.profile.completion_object

    def encode_event(self, call: Call, event: Event, result: Result) -> list[ChunkFrame]:
        if isinstance(event, TextDelta):
            lp = None
            if call.gen.sampling.logprobs is not None:
                lp = logprobs.legacy(event.tokens, result.choices[event.index].length - len(event.text))
            choice = {"text": event.text, "index": event.index, "logprobs": lp, **call.finish(None, None)}
            return [call.chunk(self.object(call), [choice])]
        if isinstance(event, Refusal):  # completions have no refusal field: it is the text
            choice = {"text": event.text, "index": event.index, "logprobs": None, **call.finish(None, None)}
            return [call.chunk(self.object(call), [choice])]
        if isinstance(event, Finished):
            finish = call.finish(event.reason, event.matched)
            choice = {"text": "", "index": event.index, "logprobs": None, **finish}
            return [call.chunk(self.object(call), [choice])]
        return []

    def encode_end(self, call: Call, result: Result) -> list[dict[str, Any]]:
        return call.usage_chunks(self.object(call), result)


CODEC = CompletionsCodec()
