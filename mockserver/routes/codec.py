"""What a codec is: pure functions from the wire to a :class:`GenerationRequest` and from the
folded :class:`Result` (or one event) back to the wire, testable with no server.

An endpoint family (chat, completions, Responses) is a codec and nothing else; the one handler
(:mod:`mockserver.routes.handler`) does the rest. Codecs read the body, the profile answering
and :class:`Options` — a few values fixed for the app, never the settings as a whole.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from mockserver.context import Options
from mockserver.gpt import vocabularies
from mockserver.profiles import Endpoint, Profile
from mockserver.routes import params
from mockserver.schemas.common import GenerationFields
from mockserver.spine.events import Event, Usage
from mockserver.spine.request import GenerationRequest, Origin, Sampling, Surface
from mockserver.spine.result import Result
from mockserver.wire.json import Json, dumps

__all__ = ["Call", "Chunk", "ChunkFrame", "Codec", "read_sampling", "usage_body"]


@dataclass(slots=True, eq=False)
class Call:
    """One request as the codec sees it while encoding: what was asked, and as whom. (Not
    frozen: one is made per request, and a frozen dataclass sets each field the slow way;
    nothing changes a call once made.)"""

    gen: GenerationRequest
    body: Any  # the validated wire body (codec-specific details)
    profile: Profile
    id: str
    created: int
    include_usage: bool = False
    service_tier: str | None = None  # reported in the body (None: no such field)
    # Each chunk object's envelope as bytes, made once per stream (see Chunk).
    heads: dict[str, bytes] = field(default_factory=dict, compare=False, repr=False)
    # Chat streams: how each choice's role delta went out ("pending" until its first content
    # event, then "text" or "null": see mockserver.routes.chat).
    opened: dict[int, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def usage_on_last_chunk(self) -> bool:
        """Streams carry usage on their last chunk unasked (Fireworks, Together)."""
        return self.profile.usage_in_stream == "always" and not self.include_usage

    def envelope(self, obj: str) -> Json:
        """The fields every body and chunk of this call starts with."""
        model = self.profile.answered_model(self.gen.model)
        head: Json = {"id": self.id, "object": obj, "created": self.created, "model": model}
        if self.profile.system_fingerprint is not None:
            head["system_fingerprint"] = self.profile.system_fingerprint
        head.update(self.profile.extras)
        if self.service_tier is not None:
            head["service_tier"] = self.service_tier
        return head

    def chunk(self, obj: str, choices: list[Json]) -> Chunk:
        """A stream chunk; with ``include_usage`` every chunk says ``"usage": null``."""
        return Chunk(self, obj, choices)

    def head(self, obj: str) -> bytes:
        """The envelope of chunk object ``obj`` as JSON bytes, open before ``"choices"``."""
        head = self.heads.get(obj)
        if head is None:
            head = self.heads[obj] = dumps(self.envelope(obj))[:-1] + b',"choices":'
        return head

    def usage(self, result: Result) -> Json:
        return usage_body(result.usage, self.profile.usage_details)

    def usage_chunks(self, obj: str, result: Result) -> list[Json]:
        """The closing usage chunk (``choices: []``), if the client asked for one."""
        if not self.include_usage:
            return []
        return [{**self.envelope(obj), "choices": [], "usage": self.usage(result)}]

    def finish(self, reason: str | None, matched: str | int | None) -> Json:
        """``finish_reason`` in the profile's words, and vLLM's ``stop_reason`` if it has one
        (a shared object while the choice goes on: callers unpack it, never change it)."""
        if reason is None and matched is None:  # every chunk but a choice's last
            return _GOING_ON_VLLM if self.profile.stop_reason else _GOING_ON
        if reason == "stop" and matched is None:
            reason = self.profile.eos_finish_reason
        fields: Json = {"finish_reason": reason}
        if self.profile.stop_reason:
            fields["stop_reason"] = matched
        return fields


_GOING_ON: Json = {"finish_reason": None}
_GOING_ON_VLLM: Json = {"finish_reason": None, "stop_reason": None}


class Chunk:
    """A chat or completions stream chunk: ``{<envelope>, "choices": […], "usage": null}``.

    A stream sends a chunk per token, all with the same envelope, so its bytes are made once
    per stream (:meth:`Call.head`) and each chunk encodes only its choices. :meth:`to_json`
    is the chunk as an object, for whoever edits it (a stream fault, a usage chunk joined)."""

    __slots__ = ("call", "choices", "obj")

    def __init__(self, call: Call, obj: str, choices: list[Json]) -> None:
        self.call = call
        self.obj = obj
        self.choices = choices

    def to_json(self) -> Json:
        chunk = {**self.call.envelope(self.obj), "choices": self.choices}
        if self.call.include_usage:
            chunk["usage"] = None
        return chunk

    def json_bytes(self) -> bytes:
        tail = b',"usage":null}' if self.call.include_usage else b"}"
        return self.call.head(self.obj) + dumps(self.choices) + tail


ChunkFrame = Json | Chunk


class Codec(Protocol):
    """One endpoint family's wire."""

    @property
    def schema(self) -> type[GenerationFields]: ...

    @property
    def surface(self) -> Surface: ...

    @property
    def endpoint(self) -> Endpoint:
        """Which of the profile's documented field lists the body is read against."""
        ...

    @property
    def id_prefix(self) -> str: ...

    def to_generation(self, body: Any, profile: Profile, options: Options, origin: Origin) -> GenerationRequest:
        """The request the body asks for; ``origin`` is what the handler adds (seed, source…)."""
        ...

    def encode(self, call: Call, result: Result) -> Json:
        """The non-streamed body."""
        ...

    def encode_event(self, call: Call, event: Event, result: Result) -> list[ChunkFrame]:
        """The stream frames one event makes (``result`` has folded it already)."""
        ...

    def encode_end(self, call: Call, result: Result) -> list[Json]:
        """The frames that close a stream (a usage chunk)."""
        ...


def usage_body(usage: Usage | None, details: str = "openai") -> Json:
    """Token counts; ``details`` is the profile's style of the ``*_tokens_details`` objects."""
    u = usage or Usage(0, 0)
    body: Json = {
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
        "total_tokens": u.total_tokens,
    }
    if details == "null":
        body.update(prompt_tokens_details=None, completion_tokens_details=None)
    elif details == "openai":
        body["prompt_tokens_details"] = {"cached_tokens": 0, "audio_tokens": 0}
        body["completion_tokens_details"] = {
            "reasoning_tokens": u.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        }
    return body


def read_sampling(
    body: GenerationFields,
    profile: Profile,
    options: Options,
    *,
    max_tokens: int | None,
    logprobs: int | None,
    echo: bool = False,
) -> Sampling:
    """:func:`~mockserver.routes.params.sampling` with ``logit_bias`` keys and ``stop_token_ids``
    read as the prompt's token ids are (:mod:`mockserver.gpt.vocabularies`): any id of the
    model's real vocabulary, folded into the reference one, so that biasing or stopping on an id
    the client also sent in a prompt acts on the very token the model read. Biases that fold onto
    one token add up, within OpenAI's [-100, 100]."""
    reference = options.vocab_size
    accepted = None if reference is None else vocabularies.vocabulary(body.model, reference)
    read = params.sampling(body, profile, accepted, max_tokens=max_tokens, logprobs=logprobs, echo=echo)
    if reference is None or accepted == reference or not (read.logit_bias or read.stop_token_ids):
        return read  # nothing to fold (the usual request)
    eot = vocabularies.end_of_text(body.model)
    bias: dict[int, float] = {}
    for token, value in read.logit_bias:
        folded = vocabularies.fold(token, reference, eot)
        bias[folded] = max(-params.LOGIT_BIAS_RANGE, min(params.LOGIT_BIAS_RANGE, bias.get(folded, 0.0) + value))
    stops = tuple(dict.fromkeys(vocabularies.fold(t, reference, eot) for t in read.stop_token_ids))
    return replace(read, logit_bias=tuple(sorted(bias.items())), stop_token_ids=stops)
