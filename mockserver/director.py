"""The director: decides, before generation, the answers the model must not make up itself.

Three things outrank sampling, in this order:

1. a **scripted rule** that matches the request (:mod:`mockserver.script`): its text, tool
   calls or refusal;
2. a **tool call**, when the tool policy (:mod:`mockserver.tools`) says the model calls one;
3. **structured output**, when ``response_format`` asks for JSON.

Whatever is decided becomes an :class:`~mockserver.generation.Answer` per choice, which the
backend scores token by token instead of sampling (see :mod:`mockserver.backends.recital`),
so logprobs, usage and streaming stay the model's own. Missing tool arguments are generated
from the tool's JSON Schema, valid against it, with Faker seeded by (request seed, choice,
call): the same request gets the same arguments on every run.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Protocol

from mockserver.errors import InvalidRequest
from mockserver.generation import Answer, ForcedCall, GenerationRequest, Tool
from mockserver.seeding import digest
from mockserver.tools import chosen_tools

__all__ = ["Scripted", "call_id", "direct"]


class Scripted(Protocol):
    """What the director needs from the scripted-answer rules."""

    def answer(self, request: GenerationRequest, surface: str, session: str | None) -> Answer | None: ...


def _seed(request: GenerationRequest, *parts: object) -> int:
    return int.from_bytes(digest(b"answer", request.seed, *parts)[:8], "big") >> 1


def call_id(request: GenerationRequest, choice: int, call: int) -> str:
    """A tool call's id (``call_`` and 24 hex digits), stable for the request and seed."""
    return "call_" + digest(b"call", request.seed, request.canonical, choice, call).hex()[:24]


def _arguments(request: GenerationRequest, tool: Tool | None, choice: int, call: int) -> str:
    from mockserver.fake_json import fake_json

    if tool is None:  # a scripted call to a tool the request does not offer: no schema to follow
        return "{}"
    try:
        return fake_json(tool.parameters or {"type": "object"}, _seed(request, "call", choice, call))
    except ValueError as exc:
        raise InvalidRequest(f"Cannot produce arguments for function '{tool.name}': {exc}", param="tools") from None


def _structured(request: GenerationRequest, choice: int) -> Answer:
    from mockserver.fake_json import fake_json

    assert request.response_format is not None
    try:
        return Answer(text=fake_json(request.response_format.schema, _seed(request, "json", choice)))
    except ValueError as exc:
        raise InvalidRequest(f"Cannot produce JSON for the response format: {exc}", param="response_format") from None


def _filled(request: GenerationRequest, answer: Answer, choice: int) -> Answer:
    """A scripted answer with every tool call's arguments and id present."""
    if not answer.tool_calls:
        return answer
    offered = {tool.name: tool for tool in request.tools}
    calls = tuple(
        ForcedCall(
            call.name,
            call.arguments if call.arguments is not None else _arguments(request, offered.get(call.name), choice, k),
            call.id or call_id(request, choice, k),
        )
        for k, call in enumerate(answer.tool_calls)
    )
    return replace(answer, tool_calls=calls)


def direct(
    request: GenerationRequest, script: Scripted | None = None, surface: str = "chat", session: str | None = None
) -> GenerationRequest:
    """``request`` with ``answers`` decided (unchanged when every choice is sampled)."""
    scripted = script.answer(request, surface, session) if script is not None else None
    answers: list[Answer | None] = []
    for p, prompt in enumerate(request.prompts):
        tools = chosen_tools(request, prompt) if scripted is None else []
        for j in range(request.n):
            index = p * request.n + j
            if scripted is not None:
                answers.append(_filled(request, scripted, index))
            elif tools:
                calls = tuple(
                    ForcedCall(tool.name, _arguments(request, tool, index, k), call_id(request, index, k))
                    for k, tool in enumerate(tools)
                )
                answers.append(Answer(tool_calls=calls))
            elif request.response_format is not None:
                answers.append(_structured(request, index))
            else:
                answers.append(None)
    if all(a is None for a in answers):
        return request
    return replace(request, answers=tuple(answers), best_of=None)
