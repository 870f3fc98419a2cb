"""What comes back: the events a backend streams for a :class:`~mockserver.spine.request.GenerationRequest`.

Each event is a frozen dataclass tagged with its choice index (``Usage`` is the request's,
sent once at the end). :class:`~mockserver.spine.result.Result` folds them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "CHOICE_EVENTS",
    "Answered",
    "Candidate",
    "ChoiceEvent",
    "Event",
    "FinishReason",
    "Finished",
    "PromptLogprobs",
    "PromptPosition",
    "Reasoning",
    "Recorded",
    "RecordedEnd",
    "RecordedFrame",
    "RecordedHead",
    "Refusal",
    "Scored",
    "Started",
    "TextDelta",
    "Token",
    "ToolCallDelta",
    "Usage",
]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One entry of a top-logprobs list."""

    token: str  # the token's name (text, or ``bytes:\\xNN`` for a partial character)
    bytes: bytes
    logprob: float


@dataclass(frozen=True, slots=True)
class Token:
    """A token that reached the output, with its contribution to the text and its scores.

    ``text`` is what this token adds to the visible text: possibly empty (the first half of a
    multi-byte character) or more than its own bytes (the completed character).
    """

    token: str
    bytes: bytes
    text: str
    logprob: float | None  # None only for the first prompt token when the prompt is scored
    top: tuple[Candidate, ...] = ()


@dataclass(frozen=True, slots=True)
class Scored:
    """A token with its logprob and its rank in the distribution (1 = most likely)."""

    id: int
    token: str
    logprob: float
    rank: int


@dataclass(frozen=True, slots=True)
class PromptPosition:
    """One prompt token as ``prompt_logprobs`` reports it: itself and the top alternatives."""

    token: Scored
    top: tuple[Scored, ...] = ()


@dataclass(frozen=True, slots=True)
class PromptLogprobs:
    """The scored prompt of one choice (``None`` for the first token: nothing precedes it)."""

    index: int
    positions: tuple[PromptPosition | None, ...]


@dataclass(frozen=True, slots=True)
class Started:
    """A choice begins (chat streams send the assistant role here)."""

    index: int
    prompt_tokens: int = 0  # of this choice's prompt, when the backend knows (latency uses it)


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text for one choice; ``tokens`` carry logprobs when they were asked for."""

    index: int
    text: str
    tokens: tuple[Token, ...] = ()
    echo: bool = False  # the prompt, returned by completions' ``echo``


@dataclass(frozen=True, slots=True)
class Reasoning:
    """Text a reasoning model thinks before it answers (chat's ``reasoning_content``, the
    Responses reasoning item). Its tokens count as completion tokens *and* reasoning tokens."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class Refusal:
    """The assistant declines: text for chat's ``refusal`` field instead of ``content``."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A fragment of a tool call (the tools issue emits these)."""

    index: int
    call_index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class Finished:
    index: int
    reason: FinishReason
    # What stopped it, as vLLM's ``stop_reason`` says: the stop string or stop token id that
    # matched; ``None`` for end-of-sequence or the length limit.
    matched: str | int | None = None


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for the whole request, sent once after every choice has finished."""

    prompt_tokens: int
    completion_tokens: int
    reasoning_tokens: int = 0  # of completion_tokens, how many were thought before answering

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True)
class Answered:
    """Which backend of the chain answers: the first event of every answer (its name goes out
    in ``x-mockserver-source``)."""

    by: str


# ---- recorded answers: a provider's own bytes, passed through untouched -------------------


@dataclass(frozen=True, slots=True)
class RecordedHead:
    """A recorded (or proxied) answer begins: the provider's status and headers as it sent
    them (hop-by-hop headers left out). ``stream``: its body is an event stream."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    stream: bool


@dataclass(frozen=True, slots=True)
class RecordedFrame:
    """Bytes of a recorded body, sent as they are: one SSE event (blank line included) of a
    stream, or a piece of a plain body."""

    data: bytes


@dataclass(frozen=True, slots=True)
class RecordedEnd:
    """How a recorded body ended: its last byte (``done``/``eof``), or a connection reset that
    its replay reproduces (``reset``)."""

    how: Literal["done", "eof", "reset"]


ChoiceEvent = Started | PromptLogprobs | Reasoning | TextDelta | Refusal | ToolCallDelta | Finished  # one choice's
Recorded = RecordedHead | RecordedFrame | RecordedEnd
Event = ChoiceEvent | Usage | Answered | Recorded
CHOICE_EVENTS = (Started, PromptLogprobs, Reasoning, TextDelta, Refusal, ToolCallDelta, Finished)
