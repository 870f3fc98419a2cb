"""When the reference model calls a tool, and which: a small, documented, deterministic policy.

The tiny model cannot decide to call a function, so this policy decides for it — the same
way every time, so a test can rely on it:

* ``tool_choice: "none"`` (or no tools): never.
* a named tool (``{"type": "function", "function": {"name": …}}``): always that one.
* ``"required"``: always; the tools the user's words point at (below), else the first tool.
* ``"auto"`` (the default): only when the **last message is the user's** — after a ``tool``
  result the model answers in text — and at least one tool **shares a word** with that
  message. Words are lower-cased runs of letters and digits, at least three long, minus a few
  stop words; a tool's words come from its name (split at ``_``, ``-`` and camelCase) and its
  description. "What's the weather in Paris?" calls ``get_weather``; "Hello!" gets text.

The tool sharing the most words comes first (ties keep the order offered). With
``parallel_tool_calls`` every tool that shares a word is called, in that order; without it,
only the first. Scripted rules (:mod:`mockserver.answers.script`) override all of this.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mockserver.spine.request import ChatMessage, GenerationRequest, Prompt, Tool

__all__ = ["chosen_tools", "words"]

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


def _last_message(prompt: Prompt) -> ChatMessage | None:
    return prompt.messages[-1] if prompt.messages else None


def _ranked(tools: Sequence[Tool], text: str) -> list[Tool]:
    """Tools sharing at least one word with ``text``, most shared first (stable)."""
    said = words(text)
    scored = [(len(said & _tool_words(tool)), i, tool) for i, tool in enumerate(tools)]
    return [tool for shared, _, tool in sorted(scored, key=lambda s: (-s[0], s[1])) if shared]


def chosen_tools(request: GenerationRequest, prompt: Prompt) -> list[Tool]:
    """The tools this prompt's answer calls, in order (empty: answer in text)."""
    tools = request.tools
    if not tools or request.tool_choice == "none":
        return []
    if request.tool_name is not None:
        return [t for t in tools if t.name == request.tool_name][:1]
    last = _last_message(prompt)
    if prompt.messages is None:  # completions: the prompt is the user's words
        text = prompt.text or ""
    elif last is not None and last.role == "user":
        text = last.content
    else:
        text = ""
        if request.tool_choice == "auto":  # after a tool result (or an assistant turn): text
            return []
    ranked = _ranked(tools, text)
    if not ranked and request.tool_choice == "required":
        ranked = [tools[0]]
    limit = 1 if not request.parallel_tool_calls else request.max_tool_calls
    return ranked[:limit] if limit is not None else ranked
