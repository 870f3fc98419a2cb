"""Gemini's ``generateContent`` as a codec: its body → the spine's request; the folded answer →
a ``GenerateContentResponse``. Its stream's chunks are :mod:`mockserver.routes.gemini.stream`'s,
its declarations and schemas :mod:`mockserver.routes.gemini.declarations`'.

Reading: ``contents`` with roles ``user`` and ``model`` (an ``assistant`` of the spine), text and
inline images; ``functionCall`` parts are the calls a model turn made and ``functionResponse``
parts the results that answer them (by ``id`` when sent, else in order), so the tool policy ends
an agent loop as on chat. ``generationConfig`` is the sampling; ``responseMimeType:
application/json`` with ``responseJsonSchema`` (a JSON Schema) or ``responseSchema`` (Google's
OpenAPI subset, types in capitals) asks for structured output.

Writing: a candidate's parts are its thoughts (``thought: true``, when ``includeThoughts``), its
text, then one ``functionCall`` part per call (arguments as an object); ``finishReason`` in
Google's words (a function call ends with ``STOP``, as Gemini's do); ``usageMetadata`` exact,
with what images and thoughts cost in their own fields.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Literal

from mockserver.context import Options
from mockserver.media import vision
from mockserver.profiles import Endpoint, Profile
from mockserver.routes import params
from mockserver.routes.codec import Call
from mockserver.routes.gemini import declarations
from mockserver.routes.gemini.declarations import invalid
from mockserver.schemas.gemini import Content, GenerateRequest, GenerationConfig, Part
from mockserver.spine.events import Token
from mockserver.spine.request import (
    ChatMessage,
    ForcedCall,
    GenerationRequest,
    Origin,
    Prompt,
    Sampling,
    Surface,
)
from mockserver.spine.result import ChoiceResult, Result
from mockserver.wire.json import Json

__all__ = ["FINISH", "GeminiCodec", "candidate", "image_tokens", "messages", "usage_metadata"]

Delivery = Literal["body", "sse", "array"]

# The spine's finish reasons in Google's words.
FINISH = {"stop": "STOP", "length": "MAX_TOKENS", "tool_calls": "STOP", "content_filter": "SAFETY"}
_ROLES = {"user": "user", "model": "assistant"}
THINKING_DYNAMIC = 32  # tokens a dynamic thinking budget (-1) thinks: the reference model is tiny


def _image_tokens(part: Part, param: str) -> int:
    blob = part.inline_data
    if blob is not None and blob.mime_type.startswith("image/"):
        return vision.url_tokens(f"data:{blob.mime_type};base64,{blob.data}", None, param + ".inlineData")
    data = part.file_data
    if data is not None and (data.mime_type or "image/").startswith("image/"):
        return vision.url_tokens(data.file_uri, None, param + ".fileData")  # never fetched: priced
    return 0


def _turn(role: str, content: Content, param: str) -> list[ChatMessage]:
    """One content as the spine's messages: its words and calls, then each function result."""
    texts: list[str] = []
    calls: list[ForcedCall] = []
    results: list[ChatMessage] = []
    images = 0
    for j, part in enumerate(content.parts):
        where = f"{param}.parts[{j}]"
        if part.thought:  # what a model thought is not fed back to it
            continue
        if part.text is not None:
            texts.append(part.text)
        images += _image_tokens(part, where)
        if part.function_call is not None:
            args = json.dumps(part.function_call.args or {}, separators=(",", ":"), ensure_ascii=False)
            calls.append(ForcedCall(part.function_call.name, args, part.function_call.id))
        if part.function_response is not None:
            answer = part.function_response
            text = json.dumps(answer.response or {}, separators=(",", ":"), ensure_ascii=False)
            results.append(ChatMessage("tool", text, call_id=answer.id))
    if calls and role != "assistant":
        raise invalid(f"{param}.parts", "a functionCall part belongs to a content of role 'model'.")
    out = [ChatMessage(role, "".join(texts), images, calls=tuple(calls))] if texts or calls or images else []
    return results + out if role == "user" else out + results


def messages(system: Content | None, contents: Sequence[Content], where: str = "contents") -> tuple[ChatMessage, ...]:
    """The conversation: the system instruction, then every content in order."""
    out: list[ChatMessage] = []
    if system is not None:
        text = "".join(p.text or "" for p in system.parts)
        if text:
            out.append(ChatMessage("system", text))
    for i, content in enumerate(contents):
        param = f"{where}[{i}]"
        role = _ROLES.get(content.role or "user")
        if role is None:
            raise invalid(
                f"{param}.role", f"'{content.role}' is not a valid role. Please use a valid role: user, model."
            )
        if not content.parts:
            raise invalid(f"{param}.parts", "contents must not be empty.")
        out += _turn(role, content, param)
    return tuple(out)


def _logprobs(config: GenerationConfig, profile: Profile) -> int | None:
    if not config.response_logprobs:
        if config.logprobs is not None:
            raise invalid("generationConfig.logprobs", "logprobs is only valid if responseLogprobs is true.")
        return None
    top = config.logprobs or 0
    highest = profile.limits.get("logprobs", 20)
    if top > highest:
        raise invalid("generationConfig.logprobs", f"must be in the range [0, {highest}], got {top}.")
    return top


def _think(config: GenerationConfig) -> int:
    thinking = config.thinking_config
    if thinking is None or thinking.thinking_budget is None:
        return 0
    return THINKING_DYNAMIC if thinking.thinking_budget < 0 else thinking.thinking_budget


class GeminiCodec:
    """``generateContent`` (``delivery="body"``) and ``streamGenerateContent`` as SSE or as a
    JSON array: one codec each, so the handler's memo tells them apart (by ``id_prefix``)."""

    schema = GenerateRequest
    surface: Surface = "chat"  # scripted rules read it as a conversation, as chat's
    endpoint: Endpoint = "chat"

    def __init__(self, delivery: Delivery) -> None:
        self.delivery = delivery
        self.id_prefix = f"gemini-{delivery}:"

    def to_generation(
        self, body: GenerateRequest, profile: Profile, options: Options, origin: Origin
    ) -> GenerationRequest:
        config = body.generation_config or GenerationConfig()
        n = config.candidate_count or 1
        highest = profile.limits.get("candidateCount", 8)
        if n > highest:
            raise invalid("generationConfig.candidateCount", f"must be in the range [1, {highest}], got {n}.")
        params.choices(1, n, None, options.limits)
        tools, mode, name = declarations.tool_choice(body, declarations.tools(body))
        max_tokens = config.max_output_tokens
        sampling = Sampling(
            temperature=1.0 if config.temperature is None else config.temperature,
            top_p=1.0 if config.top_p is None else config.top_p,
            top_k=config.top_k or 0,
            presence_penalty=config.presence_penalty or 0.0,
            frequency_penalty=config.frequency_penalty or 0.0,
            max_tokens=max_tokens if max_tokens is not None else profile.default_max_tokens["chat"],
            stop=tuple(config.stop_sequences or ()),
            logprobs=_logprobs(config, profile),
        )
        return GenerationRequest(
            endpoint="chat",
            model=body.model,
            prompts=(Prompt(messages=messages(body.system_instruction, body.contents)),),
            n=n,
            sampling=sampling,
            seed=origin.seed,
            context_window=options.models.context_window(body.model, profile),
            stream=self.delivery != "body",
            canonical=origin.canonical,
            surface=origin.source.surface,
            session=origin.source.session,
            content_faults=origin.content_faults,
            paced=origin.paced,
            tools=tools,
            tool_choice=mode,  # type: ignore[arg-type]
            tool_name=name,
            response_format=declarations.json_format(config),
            think=_think(config),
        )

    def encode(self, call: Call, result: Result) -> Json:
        """The ``GenerateContentResponse`` of a folded answer."""
        shows = thoughts_shown(call)
        logprobs = call.gen.sampling.logprobs
        return {
            "candidates": [candidate(c, shows, logprobs, done=True) for c in result.ordered()],
            "usageMetadata": usage_metadata(result, image_tokens(call.gen)),
            "modelVersion": call.gen.model,
            "responseId": response_id(call),
        }


def thoughts_shown(call: Call) -> bool:
    config: GenerationConfig | None = call.body.generation_config
    thinking = config.thinking_config if config is not None else None
    return bool(thinking is not None and thinking.include_thoughts)


def response_id(call: Call) -> str:
    """The handler's id for the request (made once, from its seed and body) without the codec's
    prefix: stable per request, and distinct for a request and its stream, as Gemini's are."""
    return call.id.partition(":")[2]


def parts(c: ChoiceResult, shows_thoughts: bool) -> list[Json]:
    out: list[Json] = []
    if shows_thoughts and c.reasoning:
        out.append({"text": c.reasoning, "thought": True})
    text = c.text if c.refusal is None else c.text + c.refusal
    if text or not c.tool_calls:
        out.append({"text": text})
    for t in c.tool_calls:
        out.append({"functionCall": {"name": t.name, "args": arguments(t.arguments)}})
    return out


def arguments(text: str) -> Any:
    """A call's arguments as the object Gemini sends (text that is no JSON object, from a
    ``content.bad_arguments`` fault, goes as it is: Gemini's wire cannot carry it otherwise)."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return text
    return value


def candidate(c: ChoiceResult, shows_thoughts: bool, logprobs: int | None, *, done: bool) -> Json:
    out: Json = {"content": {"parts": parts(c, shows_thoughts), "role": "model"}}
    if done and c.finish_reason is not None:
        out["finishReason"] = "SAFETY" if c.refusal is not None else FINISH[c.finish_reason]
    out["index"] = c.index
    if logprobs is not None:
        out.update(logprobs_fields(c.tokens, logprobs, average=done))
    return out


def logprobs_fields(tokens: Sequence[Token], top: int, *, average: bool) -> Json:
    """``logprobsResult`` (``chosenCandidates``, and ``topCandidates`` when ``logprobs`` > 0),
    with ``avgLogprobs`` on a whole candidate."""
    scores = [t.logprob or 0.0 for t in tokens]
    chosen = [{"token": t.token, "logProbability": p} for t, p in zip(tokens, scores, strict=True)]
    result: Json = {"chosenCandidates": chosen}
    if top:
        result["topCandidates"] = [
            {"candidates": [{"token": a.token, "logProbability": a.logprob} for a in t.top[:top]]} for t in tokens
        ]
    out: Json = {"logprobsResult": result}
    if average:
        out["avgLogprobs"] = sum(scores) / len(scores) if scores else 0.0
    return out


def image_tokens(gen: GenerationRequest) -> int:
    """What the request's images cost (counted in its prompt tokens)."""
    return sum(m.image_tokens for p in gen.prompts for m in p.messages or ())


def usage_metadata(result: Result, images: int = 0) -> Json:
    """``usageMetadata``; ``images``: the prompt tokens its images cost (their own modality)."""
    u = result.usage
    prompt, completion, thoughts = (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens) if u else (0, 0, 0)
    details = [{"modality": "TEXT", "tokenCount": prompt - images}]
    if images:
        details.append({"modality": "IMAGE", "tokenCount": images})
    out: Json = {
        "promptTokenCount": prompt,
        "candidatesTokenCount": completion - thoughts,
        "totalTokenCount": prompt + completion,
        "promptTokensDetails": details,
    }
    if thoughts:
        out["thoughtsTokenCount"] = thoughts
    return out
