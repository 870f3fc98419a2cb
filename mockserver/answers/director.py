"""The director: decides, before generation, the answers the model must not make up itself.

Three things outrank sampling:

1. a **scripted rule** that matches the request (:mod:`mockserver.answers.scripted`): its text, tool
   calls or refusal — the ``script`` backend asks for it with :func:`scripted`;
2. a **tool call**, when the tool policy (:mod:`mockserver.answers.tool_policy`) says the model
   calls one, else
3. the model's other own decisions, which the reference backend takes with :func:`decide`
   before it generates, first that applies:

   * a **field-marker prompt** (DSPy's ``[[ ## field ## ]]``): those fields, in that format
     (:mod:`mockserver.answers.fields`);
   * a **ReAct text prompt** (``Action:`` / ``Action Input:``, tools listed in the prompt): one
     Action, or after an observation the final answer under the prompt's label
     (:mod:`mockserver.answers.react`);
   * ``response_format`` with a schema: **structured output**;
   * a JSON Schema **written in the prompt** when JSON is asked for (:mod:`mockserver.answers.prompt_schema`),
     fenced when a code block is;
   * ``response_format: json_object``: a generic object;
   * after tool results, when the policy answers in text: a sentence **quoting the results**;
   * a system prompt that asks for a **stop word** when the task is done (AutoGen's
     ``TERMINATE``, :mod:`mockserver.answers.stop_word`): the text answer that completes the task
     — the quote after results, or at once a short one when no tool is called — ends with it.

Whatever is decided becomes an :class:`~mockserver.spine.request.Answer` per choice, which the
backend scores token by token instead of sampling (see :mod:`mockserver.backends.recital`),
so logprobs, usage and streaming stay the model's own. Missing tool arguments are generated
from the tool's JSON Schema, valid against it, with Faker seeded by (request seed, choice,
call): the same request gets the same arguments on every run. Those arguments (and structured
JSON) first take the values the user's question names (:mod:`mockserver.answers.question`) and
the valid values the prompt lists (:mod:`mockserver.answers.choices`); after tool results, JSON
answers and loop-ending calls take the values the conversation named
(:mod:`mockserver.answers.recall`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from mockserver.answers.choices import chosen
from mockserver.answers.question import filled
from mockserver.answers.react import ReactPrompt
from mockserver.answers.recall import quote, recalled
from mockserver.answers.stop_word import ended, stop_word
from mockserver.answers.tool_policy import Plan, plan, ranked
from mockserver.answers.transcript import Transcript, canonical_arguments, read
from mockserver.errors import InvalidRequest
from mockserver.spine.request import Answer, ChatMessage, ForcedCall, GenerationRequest, Prompt, Tool
from mockserver.spine.seeding import digest

__all__ = ["call_id", "decide", "scripted", "scripted_answers"]


_JSON_FAULTS = frozenset({"content.off_schema", "content.bad_arguments"})
_REDRAWS = 4  # draws of a call's arguments tried before one that repeats an answered call is kept


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


def _structured(
    request: GenerationRequest,
    schema: Mapping[str, Any] | None,
    choice: int,
    transcript: Transcript,
    *,
    prompted: bool = False,
) -> Answer:
    """JSON valid against ``schema`` (None: any object); after tool results, or for a schema the
    prompt gave, with the values the conversation named (see :mod:`mockserver.answers.recall`)."""
    from mockserver.fakejson.generate import fake_json, fake_value

    try:
        if schema is None:
            return Answer(text=fake_json(schema, _seed(request, "json", choice)))
        value = filled(schema, fake_value(schema, _seed(request, "json", choice)), transcript.question)
        if prompted or transcript.results:
            value = recalled(schema, value, transcript)
        return Answer(text=json.dumps(value, ensure_ascii=False, separators=(",", ":")))
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
    """The model's own decisions: a tool call when the tool policy says so, else field-marker
    answers, structured JSON (``response_format``, or a schema the prompt gives), or text
    quoting the last tool results. ``request`` comes back unchanged when its answers are
    decided already, or when every choice is to be sampled."""
    if request.answers:
        return request
    answers: list[Answer | None] = []
    for p, prompt in enumerate(request.prompts):
        policy = plan(request, prompt)
        answers += [_answer(request, prompt, policy, p * request.n + j) for j in range(request.n)]
    if all(a is None for a in answers):
        return request
    return _decided(request, answers)


def _answer(request: GenerationRequest, prompt: Prompt, policy: Plan, index: int) -> Answer | None:
    """One choice's decided answer, in the order the module docstring gives (None: sampled)."""
    from mockserver.answers.fields import answer_fields, field_prompt, render
    from mockserver.answers.prompt_schema import prompt_schema
    from mockserver.answers.react import react_prompt
    from mockserver.fakejson.generate import is_valid

    transcript = policy.transcript
    messages = prompt.messages or ()
    system = "\n".join(m.content for m in messages if m.role in ("system", "developer"))
    if policy.tools:
        return Answer(
            tool_calls=tuple(
                ForcedCall(
                    tool.name,
                    _policy_arguments(request, tool, policy, index, k, system),
                    call_id(request, index, k),
                )
                for k, tool in enumerate(policy.tools)
            )
        )
    fmt = request.response_format
    fields = field_prompt(messages)
    if fields is not None:
        fields = replace(fields, json=fields.json or fmt is not None)
        values = answer_fields(fields, messages, _seed(request, "fields", index))
        if fmt is None or fmt.schema is None or is_valid(fmt.schema, values):
            return Answer(text=render(fields, values))
    react = react_prompt(messages) if fmt is None else None
    if react is not None:
        return Answer(text=_react(request, react, messages, index, system))
    if fmt is not None and fmt.schema is not None:
        return _structured(request, fmt.schema, index, transcript)
    found = prompt_schema(messages, json_object=fmt is not None)
    if found is not None:
        try:
            text = _structured(request, found.schema, index, transcript, prompted=True).text
        except InvalidRequest:  # a schema we cannot follow is the prompt's text, not a bad request
            text = None
        if text is not None:
            return Answer(text=f"```json\n{text}\n```" if found.fenced else text)
    if fmt is not None:
        return _structured(request, None, index, transcript)
    word = stop_word(messages)
    if policy.quote:
        text = quote(transcript.last_results or transcript.results)
        return Answer(text=text if word is None else ended(text, word))
    if word is not None and not transcript.calls:  # nothing to wait for: the task is done at once
        return Answer(text=ended(_done(transcript), word))
    return None


def _done(transcript: Transcript) -> str:
    """The short answer of a task that needs no tool (the reference model's words mean nothing)."""
    return "The task is complete." if transcript.question else "Done."


def _react(
    request: GenerationRequest, react: ReactPrompt, messages: tuple[ChatMessage, ...], index: int, system: str
) -> str:
    """A ReAct prompt's answer: the final answer after an observation, else one Action."""
    from mockserver.answers.question import first_named
    from mockserver.answers.react import call_text, final_text, observations, question

    observed = observations(messages)
    if observed:
        return final_text(react, quote(observed[-1:]))
    transcript = read(messages)
    transcript = replace(transcript, question=question(messages, transcript.question))
    tool = (ranked(react.tools, transcript.question) or list(react.tools))[0]
    if not tool.parameters:  # a tool that takes one string (LangChain's classic ReAct)
        return call_text(tool, first_named(transcript.question) or transcript.question)
    arguments = _policy_arguments(request, tool, Plan(transcript=transcript), index, 0, system)
    return call_text(tool, arguments)


def _policy_arguments(
    request: GenerationRequest, tool: Tool, policy: Plan, choice: int, call: int, system: str = ""
) -> str:
    """A policy call's arguments: from the tool's schema, with the valid values the prompt lists
    and the values the question names (the loop-ending call's with the conversation's values),
    drawn again — without the question's values — while they would repeat a call already answered."""
    from mockserver.fakejson.generate import fake_value

    schema = tool.parameters or {"type": "object"}
    text = "{}"
    for attempt in range(_REDRAWS):
        parts: tuple[object, ...] = ("call", choice, call) if attempt == 0 else ("call", choice, call, attempt)
        try:
            value = fake_value(schema, _seed(request, *parts))
        except ValueError as exc:
            raise InvalidRequest(f"Cannot produce arguments for function '{tool.name}': {exc}", param="tools") from None
        value = chosen(schema, value, (tool.description, system), _seed(request, "choose", *parts))
        if attempt == 0:
            value = filled(schema, value, policy.transcript.question)
        if policy.final:
            value = recalled(schema, value, policy.transcript)
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        if (tool.name, canonical_arguments(text)) not in policy.transcript.answered:
            break
    return text


def _decided(request: GenerationRequest, answers: list[Answer | None]) -> GenerationRequest:
    """``answers`` set, broken first by the request's JSON-breaking content faults."""
    return replace(request, answers=_broken(request, answers), best_of=None)


def _broken(request: GenerationRequest, answers: list[Answer | None]) -> tuple[Answer | None, ...]:
    faults = request.content_faults
    if faults & _JSON_FAULTS:
        return tuple(None if a is None else _faulty(request, a, faults) for a in answers)
    return tuple(answers)
