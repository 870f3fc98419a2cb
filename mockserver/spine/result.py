"""The one fold: :meth:`Result.apply` turns events into a finished answer.

Every output — a non-streamed body, the usage chunk of a stream, a stored Response — is
built from a :class:`Result` folded event by event, so stream and non-stream cannot disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mockserver.spine.events import (
    Answered,
    Event,
    Finished,
    FinishReason,
    PromptLogprobs,
    PromptPosition,
    Reasoning,
    RecordedEnd,
    RecordedFrame,
    RecordedHead,
    Refusal,
    Started,
    TextDelta,
    Token,
    ToolCallDelta,
    Usage,
)

__all__ = ["ChoiceResult", "Result", "ToolCall"]


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
    prompt_logprobs: tuple[PromptPosition | None, ...] | None = None
    refusal: str | None = None
    reasoning: str | None = None
    finish_reason: FinishReason | None = None
    matched: str | int | None = None
    length: int = 0  # characters of text so far (text_offset needs it per delta)

    @property
    def text(self) -> str:
        return "".join(self.parts)


@dataclass(slots=True)
class Result:
    """The answer so far; :meth:`apply` is the only place events are folded."""

    choices: dict[int, ChoiceResult] = field(default_factory=dict)
    usage: Usage | None = None
    answered_by: str | None = None  # the backend of the chain that answered
    # A recorded answer: the provider's head, its body's pieces and how the body ended.
    head: RecordedHead | None = None
    recorded: list[bytes] = field(default_factory=list)
    ended: str | None = None

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
            choice = self.choice(event.index)
            choice.finish_reason = event.reason
            choice.matched = event.matched
        elif isinstance(event, PromptLogprobs):
            self.choice(event.index).prompt_logprobs = event.positions
        elif isinstance(event, Refusal):
            choice = self.choice(event.index)
            choice.refusal = (choice.refusal or "") + event.text
        elif isinstance(event, Reasoning):
            choice = self.choice(event.index)
            choice.reasoning = (choice.reasoning or "") + event.text
        elif isinstance(event, Usage):
            self.usage = event
        elif isinstance(event, RecordedFrame):
            self.recorded.append(event.data)
        elif isinstance(event, Answered):
            self.answered_by = event.by
        elif isinstance(event, RecordedHead):
            self.head = event
        elif isinstance(event, RecordedEnd):
            self.ended = event.how

    def ordered(self) -> list[ChoiceResult]:
        return [self.choices[i] for i in sorted(self.choices)]
