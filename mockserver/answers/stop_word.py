"""Stop words: the word or phrase a system prompt asks the answer to end with when the task is done.

Multi-agent chats end on a word the model says: AutoGen AgentChat's ``AssistantAgent`` tells the
model "Reply with TERMINATE when the task has been completed." and a team ends on
``TextMentionTermination("TERMINATE")``; AG2's assistant says 'Reply "TERMINATE" in the end when
everything is done.' A model that never says it keeps the chat going until its message cap.

:func:`stop_word` finds that word in the system and developer messages: a verb of saying
(``reply``, ``respond``, ``say``, ``answer``, ``write``, ``end``, ``finish``, ``output``,
``conclude``…), then the word — quoted (any case) or written in capitals — and then, within the
same sentence, when to say it (``when``, ``once``, ``after``, ``in the end``, ``if``…): when the
task is done (``done``, ``completed``, ``finished``, ``solved``…); or the other way round, "When
you are done, say DONE.". Only the first one found counts. The director ends the answer that
completes the task with it (:func:`ended`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from mockserver.spine.request import ChatMessage

__all__ = ["ended", "stop_word"]

_SAYING = r"(?i:reply|respond|answer|say|write|end|finish|output|conclude|terminate|include|print|type|add)"
# The word itself: quoted (any case, short), or one or two words in capitals (TERMINATE, TASK_DONE).
_WORD = (
    r"(?:\"(?P<dq>[^\"\n]{1,40})\"|'(?P<sq>[^'\n]{1,40})'|`(?P<bq>[^`\n]{1,40})`"
    r"|(?P<caps>[A-Z][A-Z0-9_]{2,}(?:[ -][A-Z][A-Z0-9_]{2,})?)\b)"
)
_WHEN = r"(?i:when|once|after|if|in\s+the\s+end|at\s+the\s+end|to\s+end|to\s+finish|to\s+signal|as\s+soon\s+as)"
# Case is ignored in the verbs and the "when", never in the word: "Reply with the answer when…"
# names no word.
# ... and the moment is the task's end: "Respond in JSON when asked" names no stop word.
_DONE = r"(?i:done|complet\w*|finish\w*|solved|satisf\w*|over|ended|resolved|everything)"
_ASKED = (
    re.compile(rf"\b{_SAYING}\b[^.\n]{{0,60}}?{_WORD}[^.\n]{{0,40}}?\b{_WHEN}\b[^.\n]{{0,40}}?\b{_DONE}\b"),
    re.compile(rf"\b{_WHEN}\b[^.\n]{{0,40}}?\b{_DONE}\b[^.\n]{{0,30}}?\b{_SAYING}\b[^.\n]{{0,20}}?{_WORD}"),
)


def stop_word(messages: Sequence[ChatMessage]) -> str | None:
    """The word the system or developer prompt asks to end the task with, or ``None``."""
    for message in messages:
        if message.role not in ("system", "developer"):
            continue
        for found in (m for pattern in _ASKED for m in pattern.finditer(message.content)):
            word = found.group("dq") or found.group("sq") or found.group("bq") or found.group("caps")
            if word and word.strip():
                return word.strip()
    return None


def ended(text: str, word: str) -> str:
    """``text`` ending with ``word`` (once: a text that already ends with it is kept)."""
    body = text.rstrip()
    if body.endswith(word):
        return body
    return f"{body}\n\n{word}" if body else word
