"""The generation spine: what is asked (``GenerationRequest``), what comes back (``Event``),
and the one fold that turns events into a finished answer (``Result.apply``).

Every generation endpoint decodes its body into a :class:`GenerationRequest`, every backend
answers it with an async stream of :data:`Event` values, and every output — a non-streamed
body, the usage chunk of a stream — is built from :class:`Result`, folded event by event.
Stream and non-stream therefore cannot disagree.

Inside the server these are frozen dataclasses; pydantic lives only at the wire.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

__all__ = [
    "Answer",
    "Backend",
    "Candidate",
    "ChatMessage",
    "ChoiceEvent",
    "ChoiceResult",
    "Event",
    "FinishReason",
    "Finished",
    "ForcedCall",
    "GenerationRequest",
    "JsonFormat",
    "Mirostat",
    "Prompt",
    "PromptLogprobs",
    "PromptPosition",
    "Reasoning",
    "Refusal",
    "Result",
    "Sampling",
    "Scored",
    "Started",
    "TextDelta",
    "Token",
    "Tool",
    "ToolCallDelta",
    "Usage",
]

Endpoint = Literal["completions", "chat"]
FinishReason = Literal["stop", "length", "tool_calls", "content_filter"]


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str
    content: str
    image_tokens: int = 0  # what the message's images cost, counted as prompt tokens (the model sees none)


@dataclass(frozen=True, slots=True)
class Prompt:
    """One prompt: text, pre-tokenized ids, or a conversation (exactly one is set)."""

    text: str | None = None
    token_ids: tuple[int, ...] | None = None
    messages: tuple[ChatMessage, ...] | None = None
    suffix: str | None = None  # completions' insert mode: text that follows the completion
    image_tokens: int = 0  # completions' Fireworks ``images``: counted as prompt tokens, never seen


@dataclass(frozen=True, slots=True)
class Tool:
    """A function the caller offers: chat ``tools`` / legacy ``functions``, Responses ``tools``."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=dict)  # a JSON Schema (checked at the wire)
    strict: bool = False


@dataclass(frozen=True, slots=True)
class JsonFormat:
    """Structured output: a JSON object, valid against ``schema`` when there is one."""

    schema: Mapping[str, Any] | None = None  # None: any JSON object (``json_object``)
    name: str = "response"
    strict: bool = False


@dataclass(frozen=True, slots=True)
class ForcedCall:
    """A tool call an :class:`Answer` makes. ``None`` arguments / id are filled in by the
    director (arguments from the tool's schema, the id from the request's seed)."""

    name: str
    arguments: str | None = None  # JSON text
    id: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """A reply decided before generation (a scripted rule, a tool call, structured JSON).

    The backend does not sample it: it *scores* it, feeding its tokens through the model
    (teacher forcing), so logprobs, usage and streaming stay the model's own. Text is cut
    by ``max_tokens`` and stop strings like sampled text; tool-call arguments are not.
    """

    text: str = ""
    tool_calls: tuple[ForcedCall, ...] = ()
    refusal: str | None = None
    finish_reason: FinishReason | None = None  # None: "tool_calls" with calls, else "stop"


@dataclass(frozen=True, slots=True)
class Mirostat:
    """Mirostat v2: ``target`` is the surprise τ in bits per token (log2 of the target
    perplexity), ``lr`` the learning rate η."""

    target: float
    lr: float = 0.1


@dataclass(frozen=True, slots=True)
class Sampling:
    """How to pick tokens and when to stop. Defaults are OpenAI's (every processor off);
    ``None`` max_tokens fills the context. :mod:`mockserver.sampling` says how each applies."""

    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = off
    min_p: float = 0.0  # 0 = off
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0  # 1 = off
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias), sorted by id
    mirostat: Mirostat | None = None  # replaces top-k, top-p and min-p when set
    max_tokens: int | None = 16
    min_tokens: int = 0  # end-of-sequence and stop tokens are not sampled before this many
    ignore_eos: bool = False  # ... nor ever, with this
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()  # more token ids that end a choice (finish "stop")
    keep_stop: bool = False  # the matched stop string stays at the end of the text
    truncate: bool = False  # prompt + max_tokens over the window: lower max_tokens (else 400)
    keep_prompt_tokens: int | None = None  # vLLM's truncate_prompt_tokens: only the last k count
    logprobs: int | None = None  # how many alternatives per token; None = no logprobs
    prompt_logprobs: int | None = None  # score every prompt token, with this many alternatives
    echo: bool = False  # completions: return (and score) the prompt too

    @property
    def processed(self) -> bool:
        """Does any processor beyond temperature / top-k / top-p apply?"""
        return bool(
            self.min_p
            or self.presence_penalty
            or self.frequency_penalty
            or self.repetition_penalty != 1.0
            or self.logit_bias
            or self.mirostat
            or self.min_tokens
            or self.ignore_eos
        )


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
    best_of: int | None = None  # generate this many per prompt, return the n most likely
    # What the answer may or must be (the director reads these and decides ``answers``).
    tools: tuple[Tool, ...] = ()
    tool_choice: Literal["none", "auto", "required"] = "auto"
    tool_name: str | None = None  # a named ``tool_choice``: call exactly this one
    parallel_tool_calls: bool = True
    max_tool_calls: int | None = None  # Responses: at most this many calls in one answer
    # A reasoning model thinks up to this many tokens before answering (0: it does not think).
    # Thinking spends the same max_tokens budget as the answer, as OpenAI's reasoning models do.
    think: int = 0
    response_format: JsonFormat | None = None
    # Decided answers, one per choice (prompt-major, as choice indices; None: that choice is
    # sampled); empty: every choice is sampled. The director (mockserver.director) sets it.
    answers: tuple[Answer | None, ...] = ()


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


ChoiceEvent = Started | PromptLogprobs | Reasoning | TextDelta | Refusal | ToolCallDelta | Finished  # one choice's
Event = ChoiceEvent | Usage


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
        else:
            self.usage = event

    def ordered(self) -> list[ChoiceResult]:
        return [self.choices[i] for i in sorted(self.choices)]
