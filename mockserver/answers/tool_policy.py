"""When the reference model calls a tool, and which: a small, documented, deterministic policy.

The tiny model cannot decide to call a function, so this policy decides for it — the same
way every time, so a test (and an agent framework's loop) can rely on it. The conversation is
read by :mod:`mockserver.answers.transcript` (chat calls, Responses items, and calls and
results written as text — smolagents' ``Calling tools:`` / ``Observation:`` — all count).

**Words.** Lower-cased runs of letters and digits, at least three long, minus a few stop words;
a tool's words come from its name (split at ``_``, ``-`` and camelCase) and its description.
A tool *points at* a text when they share a word; the most shared comes first (ties keep the
order offered). A tool **ends the loop** when its name says so: ``final_result``,
``final_answer``, ``submit_…``, ``respond…``, ``answer``, ``result``, ``output``, or a class's
name (``Report``: LangChain's ``ToolStrategy``, instructor).

**Before any tool result** (the last message is the user's question):

* ``tool_choice: "none"`` (or no tools): never.
* a named tool: always that one.
* ``"auto"``: the tools the question points at, else text. ``"required"``: those, else the
  first tool that does not end the loop.
* a data tool and a loop-ending tool are never called together: the data tools go first,
  the loop-ending tool alone only when the question points at nothing else.
* one delegation per turn: of the tools that hand work to another agent (``transfer_to_…``,
  ``handoff``, CrewAI's delegation tools), only the first pointed at is called.

**After tool results** (the last message is a ``tool`` result or an observation):

* a **handed-off agent** (the last result is a handoff: a ``transfer_to_…`` or ``handoff`` call,
  or ``{"assistant": "<agent>"}``) calls the tool of its own that the question points at and this
  episode has not called, once, whatever the ``tool_choice``;
* ``"auto"``: a loop-ending tool the framework waits for, not yet called in this episode — its
  name says so (``final_answer``, ``submit_…``, ``exit``…) or the system prompt names it
  (Haystack's ``exit_conditions``) — with the conversation's values; else
* ``"auto"`` (and ``"none"``): text quoting the last results
  (:func:`mockserver.answers.recall.quote`), ``finish_reason: "stop"`` — unless
  ``response_format`` asks for JSON;
* ``"required"``: one call that ends the loop: a loop-ending tool not yet called in this
  episode, else a tool not yet called that the question points at, else the last one not yet
  called (frameworks offer their output tool last); when every tool was called, a loop-ending
  tool again, else the one the question points at, else the first. Its arguments take the
  values the conversation named (:func:`mockserver.answers.recall.recalled`).
* a named tool: that one, with the conversation's values.

No call repeats one already answered with the same name and arguments: the director draws
the arguments again. With ``parallel_tool_calls`` every data tool that points at the question is
called; without it, only the first. Scripted rules (:mod:`mockserver.answers.scripted`) override
all of this.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from mockserver.answers.transcript import PastResult, Transcript, read
from mockserver.spine.request import GenerationRequest, Prompt, Tool

__all__ = ["Plan", "chosen_tools", "delegates", "ends_loop", "plan", "ranked", "words"]

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_STOP_WORDS = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "what",
        "when",
        "where",
        "which",
        "who",
        "how",
        "you",
        "your",
        "are",
        "was",
        "were",
        "this",
        "that",
        "from",
        "into",
        "can",
        "could",
        "would",
        "should",
        "will",
        "have",
        "has",
        "had",
        "not",
        "but",
        "all",
        "any",
        "get",
        "set",
        "use",
        "using",
        "please",
        "about",
    ]
)


def words(text: str) -> frozenset[str]:
    """The words policy matching counts (see the module docstring)."""
    spaced = _CAMEL.sub(" ", text)
    return frozenset(w for w in _WORD.findall(spaced.lower()) if len(w) >= 3 and w not in _STOP_WORDS)


def _tool_words(tool: Tool) -> frozenset[str]:
    return words(tool.name.replace("_", " ").replace("-", " ")) | words(tool.description)


def ranked(tools: Sequence[Tool], text: str) -> list[Tool]:
    """Tools sharing at least one word with ``text``, most shared first (stable)."""
    said = words(text)
    scored = [(len(said & _tool_words(tool)), i, tool) for i, tool in enumerate(tools)]
    return [tool for shared, _, tool in sorted(scored, key=lambda s: (-s[0], s[1])) if shared]


_ENDING_WORDS = frozenset({"final", "finish", "submit", "respond"})
_ENDING_NAMES = frozenset({"answer", "result", "output", "response", "done"})


def ends_loop(tool: Tool) -> bool:
    """Does calling ``tool`` look like the framework's way to end the loop? ``final_result``
    (pydantic-ai), ``final_answer`` (smolagents), a class's name such as ``Report`` (LangChain's
    ``ToolStrategy``, instructor), ``submit_…``, ``respond_…``."""
    name = tool.name
    if name[:1].isupper():
        return True
    return name.lower() in _ENDING_NAMES or bool(words(name.replace("_", " ").replace("-", " ")) & _ENDING_WORDS)


_DELEGATING = frozenset({"delegate", "delegation", "coworker", "handoff", "transfer"})


def delegates(tool: Tool) -> bool:
    """Does ``tool`` hand the work to another agent? (``transfer_to_…``, ``handoff``, CrewAI's
    ``Delegate work to coworker`` and ``Ask question to coworker``.)"""
    return bool(words(tool.name.replace("_", " ").replace("-", " ")) & _DELEGATING) or tool.name.lower() == "handoff"


def _one_delegation(tools: list[Tool]) -> list[Tool]:
    """``tools`` with only the first that delegates: one agent is handed the work per turn."""
    first = next((tool for tool in tools if delegates(tool)), None)
    return [tool for tool in tools if not delegates(tool) or tool is first]


def _handoff(result: PastResult) -> bool:
    """A result that hands the conversation to another agent: the OpenAI Agents SDK's (and
    AutoGen Swarm's) ``transfer_to_…`` tools, which answer ``{"assistant": "<agent name>"}``,
    and LlamaIndex's ``handoff``."""
    if result.call is not None and (result.call.name.startswith("transfer_to_") or result.call.name == "handoff"):
        return True
    try:
        value = json.loads(result.text)
    except ValueError:
        return False
    return isinstance(value, dict) and list(value) == ["assistant"]


@dataclass(frozen=True, slots=True)
class Plan:
    """What the policy decided for one prompt: calls, or text quoting the last results, or
    neither (the answer is whatever comes next: structured JSON, or the model's own text)."""

    tools: tuple[Tool, ...] = ()
    final: bool = False  # the call ends the loop: its arguments take values from the conversation
    quote: bool = False  # answer in text that quotes the last tool results
    transcript: Transcript = field(default_factory=Transcript)


def _limit(request: GenerationRequest) -> int | None:
    return 1 if not request.parallel_tool_calls else request.max_tool_calls


def _opening(request: GenerationRequest, text: str, transcript: Transcript) -> Plan:
    """Calls for the user's question: the data tools it points at — never with a loop-ending
    tool, which comes alone (it would be answered before the data exists)."""
    pointed = ranked(request.tools, text)
    data = _one_delegation([tool for tool in pointed if not ends_loop(tool)])
    if data:
        return Plan(tools=tuple(data[: _limit(request)]), transcript=transcript)
    if pointed:
        return Plan(tools=(pointed[0],), final=True, transcript=transcript)
    if request.tool_choice != "required":
        return Plan(transcript=transcript)
    first = next((tool for tool in request.tools if not ends_loop(tool)), request.tools[0])
    return Plan(tools=(first,), final=ends_loop(first), transcript=transcript)


_EXIT_WORDS = frozenset({"final", "finish", "finished", "submit", "exit", "done", "complete", "completed"})


def _waited_for(tool: Tool, system: str) -> bool:
    """Is ``tool`` a loop-ending tool the framework waits for even under ``auto``? Its name says
    so (``final_answer``, ``submit_report``, ``exit``…), or it ends loops and the system prompt
    names it (Haystack's ``exit_conditions`` are tool names its prompt tells the model to call)."""
    named = words(tool.name.replace("_", " ").replace("-", " "))
    if named & _EXIT_WORDS or tool.name.lower() in ("exit", "done", "finish"):
        return True
    return ends_loop(tool) and re.search(rf"(?<![\w-]){re.escape(tool.name)}(?![\w-])", system) is not None


def _answering(request: GenerationRequest, transcript: Transcript, system: str) -> Plan:
    """After tool results: a handed-off agent's fitting tool once, else (``auto``) the loop-ending
    tool the framework waits for, else text, else (``required``) one call that can end the
    loop — a tool this episode has not called."""
    tools = request.tools
    uncalled = [tool for tool in tools if tool.name not in transcript.called]
    if any(_handoff(result) for result in transcript.last_results):
        agents = [t for t in uncalled if not ends_loop(t) and not delegates(t)]
        fitting = ranked(agents, transcript.question)
        if fitting:
            return Plan(tools=tuple(fitting[: _limit(request)]), transcript=transcript)
    if request.tool_choice == "auto":
        waited = [tool for tool in uncalled if _waited_for(tool, system)]
        if waited:
            return Plan(tools=(waited[0],), final=True, transcript=transcript)
    if request.tool_choice != "required":
        return Plan(quote=True, transcript=transcript)
    pick = (
        [tool for tool in uncalled if ends_loop(tool)][:1]
        or ranked(uncalled, transcript.question)[:1]
        or uncalled[-1:]  # frameworks offer their output tool last
        or [tool for tool in tools if ends_loop(tool)][:1]
        or ranked(tools, transcript.question)[:1]
        or [tools[0]]
    )
    return Plan(tools=(pick[0],), final=True, transcript=transcript)


def plan(request: GenerationRequest, prompt: Prompt) -> Plan:
    """The policy's decision for one prompt (see the module docstring)."""
    tools = request.tools
    transcript = read(prompt.messages) if prompt.messages is not None else Transcript(question=prompt.text or "")
    if not tools or request.tool_choice == "none":
        return Plan(quote=transcript.after_results, transcript=transcript)
    if request.tool_name is not None:
        named = tuple(t for t in tools if t.name == request.tool_name)[:1]
        final = transcript.after_results or any(ends_loop(t) for t in named)
        return Plan(tools=named, final=final, transcript=transcript)
    if transcript.after_results:
        system = "\n".join(m.content for m in prompt.messages or () if m.role in ("system", "developer"))
        return _answering(request, transcript, system)
    if prompt.messages is None:  # completions: the prompt is the user's words
        return _opening(request, prompt.text or "", transcript)
    last = prompt.messages[-1] if prompt.messages else None
    if last is None or last.role != "user":  # after an assistant turn: text, unless a call is required
        return _opening(request, "", transcript)
    return _opening(request, last.content, transcript)


def chosen_tools(request: GenerationRequest, prompt: Prompt) -> list[Tool]:
    """The tools this prompt's answer calls, in order (empty: answer otherwise)."""
    return list(plan(request, prompt).tools)
