"""What an agent's conversation says so far: the calls it made, the results it got, and since when.

The tool policy (:mod:`mockserver.answers.tool_policy`) needs to know which calls were already
made and answered, whatever the client's conventions:

* **chat**: an assistant message's ``tool_calls`` (or legacy ``function_call``), carried as
  :attr:`ChatMessage.calls`, and ``tool`` / ``function`` messages answering them (by
  ``tool_call_id``, else in order);
* **Responses**: each ``function_call`` item reaches the model as an assistant turn
  ``name(arguments)`` and each ``function_call_output`` as a ``tool`` turn
  (:func:`mockserver.routes.responses.codec._turn`), answered in order;
* **calls written as text** (smolagents): an assistant message with ``Calling tools:`` and a
  Python list of ``{'id', 'type', 'function': {'name', 'arguments'}}``, answered by a *user*
  message starting ``Observation:`` (or ``Call id: …`` then ``Observation:``);
* **ReAct text** (LlamaIndex's ReActAgent, CrewAI without native function calling): an
  assistant message's ``Action: name`` / ``Action Input: {…}``, answered by a user message
  starting ``Observation:`` (LlamaIndex) or by the ``Observation:`` the framework appends to that
  same assistant message (CrewAI).

An **episode** starts at the user's last own message (an observation is not one): the
calls and results after it are the current agent loop's.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from mockserver.spine.request import ChatMessage, ForcedCall

__all__ = ["PastResult", "Transcript", "canonical_arguments", "react_step", "read"]

_OBSERVATION = re.compile(r"^\s*(?:Call id:\s*\S+\s*)?Observation:\s*", re.IGNORECASE)
_CALLING = re.compile(r"Calling tools:\s*")
_RESPONSES_CALL = re.compile(r"^([A-Za-z_][\w.\-]*)\((.*)\)$", re.DOTALL)
# "Action: get_weather\nAction Input: {...}" and, in the same message, what the tool said (CrewAI).
_REACT_CALL = re.compile(
    r"^\s*Action\s*:\s*(?P<name>[^\n]+?)\s*\n\s*Action\s*Input\s*:\s*(?P<args>.*?)\s*"
    r"(?:\n\s*Observation\s*:\s*(?P<observed>.*))?\Z",
    re.DOTALL | re.MULTILINE,
)


def canonical_arguments(arguments: str) -> str:
    """Arguments as compared: JSON with sorted keys, else the text stripped."""
    try:
        return json.dumps(json.loads(arguments), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return arguments.strip()


@dataclass(frozen=True, slots=True)
class PastResult:
    """A tool's result as the model reads it, and the call it answers (when known)."""

    text: str
    call: ForcedCall | None = None


@dataclass(frozen=True, slots=True)
class Transcript:
    """The conversation read for the policy (see the module docstring)."""

    question: str = ""  # the user's last own words
    calls: tuple[ForcedCall, ...] = ()  # calls of the episode, in order
    results: tuple[PastResult, ...] = ()  # results of the episode, in order
    last_results: tuple[PastResult, ...] = ()  # the results since the last assistant turn
    answered: frozenset[tuple[str, str]] = frozenset()  # (name, canonical arguments), whole conversation
    after_results: bool = False  # the last message is a tool result

    @property
    def called(self) -> frozenset[str]:
        """The names of the tools called in this episode."""
        return frozenset(call.name for call in self.calls)


def react_step(text: str) -> tuple[ForcedCall, str | None] | None:
    """A ReAct step written by the assistant: its call, and the observation appended to it
    (None when the framework sends the observation as a message of its own)."""
    at = text.rfind("Action")
    while at != -1:
        found = _REACT_CALL.match(text, at)
        if found is not None:
            arguments = found.group("args").strip()
            call = ForcedCall(found.group("name").strip().strip("`*'\""), arguments)
            observed = found.group("observed")
            return call, observed.strip() if observed is not None else None
        at = text.rfind("Action", 0, at)
    return None


def _text_calls(text: str) -> tuple[ForcedCall, ...]:
    """Calls written as text: smolagents' ``Calling tools: [...]``, a ReAct ``Action:`` or a
    Responses ``name(args)`` turn."""
    step = react_step(text) if "Action" in text else None
    if step is not None:
        return (step[0],)
    found = _CALLING.search(text)
    if found is not None:
        rest = text[found.end() :].strip()
        # The list may be followed by more text: try each closing bracket from the last one.
        for end in [m.end() for m in re.finditer(r"\]", rest)][::-1]:
            try:
                listed = ast.literal_eval(rest[:end])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                continue
            return tuple(_listed(listed))
        return ()
    single = _RESPONSES_CALL.match(text.strip())
    if single is not None:
        try:
            json.loads(single.group(2))
        except ValueError:
            return ()
        return (ForcedCall(single.group(1), single.group(2)),)
    return ()


def _listed(listed: object) -> list[ForcedCall]:
    calls = []
    for item in listed if isinstance(listed, list) else []:
        function = item.get("function") if isinstance(item, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            continue
        arguments = function.get("arguments", {})
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False, default=str)
        ident = item.get("id")
        calls.append(ForcedCall(function["name"], text, ident if isinstance(ident, str) else None))
    return calls


def _observation(message: ChatMessage) -> str | None:
    """A user message that is a tool's result written as text, as its result text."""
    if message.role != "user":
        return None
    found = _OBSERVATION.match(message.content)
    return message.content[found.end() :] if found is not None else None


def read(messages: Sequence[ChatMessage]) -> Transcript:
    """The transcript of ``messages`` (see the module docstring)."""
    question = ""
    calls: list[ForcedCall] = []
    results: list[PastResult] = []
    last: list[PastResult] = []
    answered: set[tuple[str, str]] = set()
    waiting: list[ForcedCall] = []  # calls made and not yet answered, oldest first
    after = False
    for message in messages:
        observed = _observation(message)
        if message.role in ("tool", "function") or observed is not None:
            call = next((c for c in waiting if message.call_id and c.id == message.call_id), None)
            if call is None and waiting:
                call = waiting[0]
            if call is not None:
                waiting.remove(call)
                answered.add((call.name, canonical_arguments(call.arguments or "")))
            result = PastResult(message.content if observed is None else observed, call)
            results.append(result)
            last.append(result)
            after = True
            continue
        after = False
        if message.role == "user":
            question, calls, results, last, waiting = message.content, [], [], [], []
        elif message.role == "assistant":
            made = message.calls or _text_calls(message.content)
            calls.extend(made)
            waiting.extend(made)
            last = []
            step = react_step(message.content) if not message.calls and "Observation" in message.content else None
            if step is not None and step[1] is not None:  # CrewAI: the observation rides on the call's message
                call = step[0]
                waiting.remove(made[0])
                answered.add((call.name, canonical_arguments(call.arguments or "")))
                result = PastResult(step[1], made[0])
                results.append(result)
                last.append(result)
                after = True
    return Transcript(question, tuple(calls), tuple(results), tuple(last), frozenset(answered), after)
