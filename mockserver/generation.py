"""The generation spine: what is asked (``GenerationRequest``), what comes back (``Event``),
and the one fold that turns events into a finished answer (``Result.apply``).

Every generation endpoint decodes its body into a :class:`GenerationRequest`, every backend
answers it with an async stream of :data:`Event` values, and every output — a non-streamed
body, the usage chunk of a stream — is built from :class:`Result`, folded event by event.
Stream and non-stream therefore cannot disagree.

Inside the server these are frozen dataclasses; pydantic lives only at the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Literal, Protocol

__all__ = [
    "Backend",
    "Candidate",
    "ChatMessage",
    "ChoiceResult",
    "Event",
    "FinishReason",
    "Finished",
    "GenerationRequest",
    "Prompt",
    "Result",
    "Sampling",
    "Started",
    "TextDelta",
    "Token",
    "ToolCallDelta",
    "Usage",
]

Endpoint = Literal["completions", "chat"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str
    content: str


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: text, pre-tokenized ids, or a conversation (exactly one is set)."""

    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    messages: tuple[ChatMessage, ...] | None = None


@dataclass(frozen=True, slots=True)
class Sampling:
    """How to pick tokens. Defaults are OpenAI's; ``None`` max_tokens fills the context."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    max_tokens: int | None = 16
    stop: tuple[str, ...] = ()
    logprobs: int | None = None  # how many alternatives per token; None = no logprobs
    echo: bool = False  # completions: return (and score) the prompt too


@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """Everything a backend needs, decoded from any endpoint's body."""

    endpoint: Endpoint
    model: str
    prompts: tuple[Prompt, ...]
    n: int
    sampling: Sampling
    seed: int  # the request's seed (given or derived); choice i uses (seed, i)
    context_window: int
    canonical: bytes = b""  # the canonical body (see mockserver.seeding), for ids and matching
    stream: bool = False  # how the answer is delivered; never changes what is generated


# ---- events -------------------------------------------------------------------------------


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
class Started:
    """A choice begins (chat streams send the assistant role here)."""

    index: int


@dataclass(frozen=True, slots=True)
class TextDelta:
    """Text for one choice; ``tokens`` carry logprobs when they were asked for."""

    index: int
    text: str
    tokens: tuple[Token, ...] = ()
    echo: bool = False  # the prompt, returned by completions' ``echo``


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


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts for the whole request, sent once after every choice has finished."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


Event = Started | TextDelta | ToolCallDelta | Finished | Usage


class Backend(Protocol):
    """The only backend contract: a request in, an async stream of events out.

    Errors about the request (bad token ids, context overflow) must be raised before the
    first event, so the engine can still answer them with an HTTP status.
    """

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]: ...


# ---- the fold -----------------------------------------------------------------------------


@dataclass(slots=True)
class ToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(slots=True)
class ChoiceResult:
    index: int
    parts: list[str] = field(default_factory=list)
    tokens: list[Token] = field(default_factory=list)
    tool_calls: list[ToolCall] = field(default_factory=list)
    finish_reason: FinishReason | None = None
    length: int = 0  # characters of text so far (text_offset needs it per delta)

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(slots=True)
class Result:
    """The answer so far; :meth:`apply` is the only place events are folded."""

    choices: dict[int, ChoiceResult] = field(default_factory=dict)
    usage: Usage | None = None

    def choice(self, index: int) -> ChoiceResult:
        found = self.choices.get(index)
        if found is None:
            found = self.choices[index] = ChoiceResult(index)
        return found

    def apply(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            choice = self.choice(event.index)
            choice.parts.append(event.text)
            choice.tokens.extend(event.tokens)
            choice.length += len(event.text)
        elif isinstance(event, Started):
            self.choice(event.index)
        elif isinstance(event, ToolCallDelta):
            calls = self.choice(event.index).tool_calls
            while len(calls) <= event.call_index:
                calls.append(ToolCall())
            call = calls[event.call_index]
            call.id = event.id or call.id
            call.name = event.name or call.name
            call.arguments += event.arguments
        elif isinstance(event, Finished):
            self.choice(event.index).finish_reason = event.reason
        else:
            self.usage = event

    def ordered(self) -> list[ChoiceResult]:
        return [self.choices[i] for i in sorted(self.choices)]
