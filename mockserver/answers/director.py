"""The director: decides, before generation, the answers the model must not make up itself.

Three things outrank sampling:

1. a **scripted rule** that matches the request (:mod:`mockserver.answers.script`): its text, tool
   calls or refusal — the ``script`` backend asks for it with :func:`scripted`;
2. a **tool call**, when the tool policy (:mod:`mockserver.answers.tool_policy`) says the model
   calls one, else
3. **structured output**, when ``response_format`` asks for JSON — the model's own decisions,
   which the reference backend takes with :func:`decide` before it generates.

Whatever is decided becomes an :class:`~mockserver.spine.request.Answer` per choice, which the
backend scores token by token instead of sampling (see :mod:`mockserver.backends.recital`),
so logprobs, usage and streaming stay the model's own. Missing tool arguments are generated
from the tool's JSON Schema, valid against it, with Faker seeded by (request seed, choice,
call): the same request gets the same arguments on every run.
"""

from __future__ import annotations

from dataclasses import replace

from mockserver.answers.tool_policy import chosen_tools
from mockserver.errors import InvalidRequest
from mockserver.spine.request import Answer, ForcedCall, GenerationRequest, Tool
from mockserver.spine.seeding import digest

__all__ = ["call_id", "decide", "scripted", "scripted_answers"]


_JSON_FAULTS = frozenset({"content.off_schema", "content.bad_arguments"})


def _seed(request: GenerationRequest, *parts: object) -> int:
    return int.from_bytes(digest(b"answer", request.seed, *parts)[:8], "big") >> 1


def call_id(request: GenerationRequest, choice: int, call: int) -> str:
    """A tool call's id (``call_`` and 24 hex digits), stable for the request and seed."""
    return "call_" + digest(b"call", request.seed, request.canonical, choice, call).hex()[:24]


def _arguments(request: GenerationRequest, tool: Tool | None, choice: int, call: int) -> str:
    from mockserver.fakejson.generate import fake_json

    if tool is None:  # a scripted call to a tool the request does not offer: no schema to follow
        return "{}"
    try:
        return fake_json(tool.parameters or {"type": "object"}, _seed(request, "call", choice, call))
    except ValueError as exc:
        raise InvalidRequest(f"Cannot produce arguments for function '{tool.name}': {exc}", param="tools") from None


def _structured(request: GenerationRequest, choice: int) -> Answer:
    from mockserver.fakejson.generate import fake_json

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


def _faulty(request: GenerationRequest, answer: Answer, faults: frozenset[str]) -> Answer:
    """The ``content.off_schema`` / ``content.bad_arguments`` faults applied to an answer."""
    from mockserver.fakejson.generate import off_schema

    offered = {tool.name: tool for tool in request.tools}
    text, calls = answer.text, list(answer.tool_calls)
    if "content.off_schema" in faults:
        if request.response_format is not None and text:
            text = off_schema(request.response_format.schema, text)
        for k, call in enumerate(calls):
            tool = offered.get(call.name)
            if tool is not None and call.arguments is not None:
                calls[k] = replace(call, arguments=off_schema(tool.parameters or {"type": "object"}, call.arguments))
    if "content.bad_arguments" in faults:
        # Cut before the closing brace: the JSON never ends, as a model's sometimes does not.
        calls = [replace(call, arguments=(call.arguments or "{}")[:-1]) for call in calls]
    return replace(answer, text=text, tool_calls=tuple(calls))


def scripted(request: GenerationRequest, answer: Answer) -> GenerationRequest:
    """``request`` answered by a scripted rule (see :func:`scripted_answers`)."""
    return replace(request, answers=scripted_answers(request, answer), best_of=None)


def scripted_answers(request: GenerationRequest, answer: Answer) -> tuple[Answer | None, ...]:
    """Every choice's answer when a scripted rule gives ``answer``: its tool calls' missing
    arguments and ids filled in, broken as the request's JSON-breaking content faults say."""
    count = len(request.prompts) * request.n
    return _broken(request, [_filled(request, answer, index) for index in range(count)])


def decide(request: GenerationRequest) -> GenerationRequest:
    """The model's own decisions: a tool call when the tool policy says so, else structured
    JSON when ``response_format`` asks for it. ``request`` comes back unchanged when its
    answers are decided already, or when every choice is to be sampled."""
    if request.answers:
        return request
    answers: list[Answer | None] = []
    for p, prompt in enumerate(request.prompts):
        tools = chosen_tools(request, prompt)
        for j in range(request.n):
            index = p * request.n + j
            if tools:
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
    return _decided(request, answers)


def _decided(request: GenerationRequest, answers: list[Answer | None]) -> GenerationRequest:
    """``answers`` set, broken first by the request's JSON-breaking content faults."""
    return replace(request, answers=_broken(request, answers), best_of=None)


def _broken(request: GenerationRequest, answers: list[Answer | None]) -> tuple[Answer | None, ...]:
    faults = request.content_faults
    if faults & _JSON_FAULTS:
        return tuple(None if a is None else _faulty(request, a, faults) for a in answers)
    return tuple(answers)
