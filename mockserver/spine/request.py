"""What is asked: a :class:`GenerationRequest`, decoded from any endpoint's body.

Every generation endpoint (chat, completions, Responses) turns its wire body into one of these
frozen dataclasses (pydantic lives only at the wire); backends answer it with events
(:mod:`mockserver.spine.events`), folded by :class:`~mockserver.spine.result.Result`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from mockserver.spine.events import FinishReason

__all__ = [
    "Answer",
    "ChatMessage",
    "Endpoint",
    "ForcedCall",
    "GenerationRequest",
    "JsonFormat",
    "Mirostat",
    "Origin",
    "Prompt",
    "Sampling",
    "Source",
    "Surface",
    "Tool",
]

Endpoint = Literal["completions", "chat"]  # how the model reads the prompt (Responses read as chat)
Surface = Literal["chat", "completions", "responses"]  # which endpoint family was asked


@dataclass(frozen=True, slots=True)
class Source:
    """Where a request came from, for the backends that answer by the request as it was sent:
    scripted rules match its surface and session, a cassette matches its method, path and exact
    body, and recording forwards its headers to the upstream."""

    surface: Surface = "chat"
    session: str | None = None  # x-mockserver-session: a test worker's own rules, counts and replay places
    method: str = "POST"
    target: str = ""  # the path (as /v1/…, any profile prefix removed) and query
    body: bytes = b""  # byte for byte as sent
    headers: tuple[tuple[bytes, bytes], ...] = ()  # as ASGI gives them (recording forwards them)
    cassette: str | None = None  # x-mockserver-cassette: replay only this cassette's recordings
    record_mode: str | None = None  # x-mockserver-record-mode: this request's own record mode
    stream: bool = False  # the body's ``stream``: a recording is served in the shape asked for
    include_usage: bool = False  # the body's ``stream_options.include_usage`` (a body unfolded into a stream)


@dataclass(frozen=True, slots=True)
class Origin:
    """What the handler gives every request besides what its body asks: its seed (given, or
    derived from the canonical body), the canonical body, where it came from, and the content
    faults that break decided answers."""

    seed: int = 0
    canonical: bytes = b""
    source: Source = Source()
    content_faults: frozenset[str] = frozenset()
    paced: bool = False  # its answer is paced by a latency timeline


@dataclass(frozen=True, slots=True)
class ChatMessage:
    role: str
    content: str
    image_tokens: int = 0  # what the message's images cost, counted as prompt tokens (the model sees none)
    # The tool calls an assistant message made, as the client sent them back (name, arguments, id):
    # the tool policy reads them to know what was already asked (see mockserver.answers.transcript).
    calls: tuple[ForcedCall, ...] = ()
    call_id: str | None = None  # a tool result's ``tool_call_id``: which call it answers


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
    ``None`` max_tokens fills the context. :mod:`mockserver.backends.reference.sampling` says how each applies."""

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
    canonical: bytes = b""  # the canonical body (see mockserver.spine.seeding), for ids and matching
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
    # sampled); empty: every choice is sampled. The director (mockserver.answers.director) sets it.
    answers: tuple[Answer | None, ...] = ()
    # The content faults that act on decided answers before they are played (the director
    # applies them): ``content.off_schema`` and ``content.bad_arguments``.
    content_faults: frozenset[str] = frozenset()
    # Which wire asked (errors name its fields) and the x-mockserver-session it came in: scripted
    # rules are matched by both. The rest of where it came from (its bytes, its headers) is the
    # chain's (:class:`~mockserver.spine.backend.Ask`), never a backend's that generates.
    surface: Surface = "chat"
    session: str | None = None
    # Paced by a latency timeline: an answer not streamed still comes token by token, so it
    # waits what its stream would have (a backend may otherwise make it in one piece).
    paced: bool = False
