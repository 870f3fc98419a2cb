"""The fault catalogue and its grammar: what can go wrong, by name, and how a request asks.

A fault spec is ``name[=value][,key=value…][@p=probability]``; several are joined by ``;``::

    x-mockserver-fault: http.429,retry_after=2
    x-mockserver-fault: stream.cut_after=3; latency.ttft=250
    x-mockserver-fault: http.500@p=0.25

Each name belongs to a *phase*, which says where :mod:`mockserver.edge.injection` (HTTP, transport
and stream faults, at the ASGI level, so every backend and endpoint gets them) or
:mod:`mockserver.engine` (content faults and latency, on the event stream) applies it. A
probability is drawn from the request's own seeded generator (:func:`request_rng`), so
identical requests get identical decisions, run after run and process after process.

A fault is echoed (``x-mockserver-faults``, the journal, the rule list) in the spelling it was
written in: ``http.429,retry_after=0.5`` stays so, and is never shortened to ``http.429=0.5``,
which reads like a probability. ``parse(f.render()) == f`` for every fault, and
``f.render()`` of a parsed spec keeps its parameter names.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Literal

from mockserver.spine.seeding import digest

__all__ = ["CATALOGUE", "MAX_SPEC_CHARS", "MAX_TERMS", "Fault", "FaultError", "FaultKind", "parse", "request_rng"]

FaultKind = Literal["http", "transport", "stream", "content", "latency", "mcp"]


@dataclass(frozen=True, slots=True)
class Definition:
    kind: FaultKind
    doc: str
    primary: str | None = None  # the parameter ``name=value`` sets
    defaults: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))


def _d(**values: float) -> Mapping[str, float]:
    return MappingProxyType(values)


# The names a request may ask for. The fault table in docs/faults.md is checked against this by a test.
CATALOGUE: Mapping[str, Definition] = MappingProxyType(
    {
        "http.400": Definition("http", "400 `context_length_exceeded`, OpenAI's body"),
        "http.401": Definition("http", "401 `invalid_api_key`"),
        "http.403": Definition("http", "403 `unsupported_country_region_territory`"),
        "http.404": Definition("http", "404 `model_not_found`"),
        "http.408": Definition("http", "408 request timeout"),
        "http.409": Definition("http", "409 conflict"),
        "http.429": Definition(
            "http",
            "429 `rate_limit_exceeded` with `retry-after`, `retry-after-ms` and `x-ratelimit-*`",
            "retry_after",
            _d(retry_after=1.0),
        ),
        "http.quota": Definition("http", "429 `insufficient_quota` (not worth retrying)"),
        "http.500": Definition("http", "500 server error"),
        "http.502": Definition("http", "502 with an HTML body, as a proxy sends it"),
        "http.503": Definition("http", "503 overloaded", "retry_after", _d(retry_after=0.0)),
        "http.504": Definition("http", "504 gateway timeout"),
        "http.529": Definition(
            "http", "529 `overloaded_error` (Anthropic's overload)", "retry_after", _d(retry_after=0.0)
        ),
        "http.should_retry": Definition(
            "http", "with an HTTP fault: `x-should-retry: true` (1) or `false` (0)", "value", _d(value=1.0)
        ),
        "transport.reset": Definition("transport", "TCP reset before any byte of the response"),
        "transport.empty": Definition("transport", "connection closed with no response at all"),
        "transport.garbage": Definition("transport", "bytes that are not HTTP, then close"),
        "transport.truncated": Definition("transport", "`content-length` larger than the body sent, then close"),
        "transport.hang": Definition("transport", "accept the request and never answer"),
        "stream.cut_after": Definition("stream", "end the stream cleanly after N events, no `[DONE]`", "n", _d(n=1)),
        "stream.reset_after": Definition("stream", "TCP reset after N events", "n", _d(n=1)),
        "stream.stall_after": Definition(
            "stream",
            "after N events send nothing for `for` seconds (0: forever), a `: keep-alive` comment "
            "every `keepalive` seconds if set, then go on",
            "n",
            _d(n=1, keepalive=0.0, **{"for": 0.0}),
        ),
        "stream.malformed_at": Definition("stream", "event N is cut mid-JSON", "n", _d(n=1)),
        "stream.split_utf8": Definition("stream", "every multi-byte character is split across two writes"),
        "stream.bytewise": Definition("stream", "every byte in its own write"),
        "stream.no_done": Definition("stream", "the `[DONE]` terminator is not sent"),
        "stream.double_done": Definition("stream", "the `[DONE]` terminator is sent twice"),
        "stream.error_at": Definition(
            "stream", "event N is replaced by an in-band error event; the stream ends", "n", _d(n=1)
        ),
        "stream.no_finish_reason": Definition("stream", "no chunk carries a `finish_reason`"),
        "stream.no_usage": Definition("stream", "the usage chunk is dropped despite `include_usage`"),
        "stream.no_completed": Definition(
            "stream", "a Responses stream's closing `response.completed` event is not sent"
        ),
        "stream.skip_sequence": Definition(
            "stream",
            "a Responses stream skips `sequence_number` N (later events are numbered one higher)",
            "n",
            _d(n=1),
        ),
        "content.length": Definition("content", "every choice finishes with `length`"),
        "content.filter": Definition("content", "every choice finishes with `content_filter`"),
        "content.refusal": Definition("content", "every choice refuses: chat's `refusal` instead of `content`"),
        "content.bad_arguments": Definition("content", "tool-call arguments are not valid JSON (cut before their end)"),
        "content.off_schema": Definition(
            "content", "structured output and tool arguments are JSON that breaks the requested schema"
        ),
        "content.unknown_tool": Definition(
            "content",
            "the answer calls a tool the request did not offer (its first call renamed, or one call for its text)",
        ),
        "content.duplicate_call_ids": Definition(
            "content", "every tool call of a choice carries the first call's id (a lone call comes twice)"
        ),
        "content.empty": Definition("content", "nothing is said: no text, call or thought, finishing `stop`"),
        "content.length_in_call": Definition(
            "content", "the length limit cuts the last tool call's arguments at half; finishes `length`"
        ),
        "content.reasoning_only": Definition(
            "content", "the model only thinks: its text becomes reasoning, no answer, finishing `length`"
        ),
        "latency.ttft": Definition("latency", "first token after this many milliseconds", "ms", _d(ms=0.0)),
        "latency.itl": Definition("latency", "this many milliseconds between tokens", "ms", _d(ms=0.0)),
        "latency.queue": Definition("latency", "this many milliseconds before anything happens", "ms", _d(ms=0.0)),
        # MCP's (mockserver.mcp_fakes.faults): a JSON-RPC message to /mcp, never a provider path.
        "mcp.error": Definition("mcp", "a `tools/call` answers an `isError` result"),
        "mcp.protocol_error": Definition(
            "mcp", "the message is answered with a JSON-RPC error of this code", "code", _d(code=32603.0)
        ),
        "mcp.latency": Definition("mcp", "the message is answered after this many milliseconds", "ms", _d(ms=0.0)),
        "mcp.drop_session": Definition("mcp", "the MCP session ends: this and later messages get 404, re-initialize"),
    }
)


# The largest value each parameter takes. A spec is checked once, where it is parsed, so no
# later step (a ``retry-after`` header, a sleep, an event count) meets ``inf``, ``nan`` or a
# value too big to turn into an int or a timeout.
LIMITS: Mapping[str, float] = MappingProxyType(
    {
        "retry_after": 86_400.0,  # seconds: a day
        "n": 1_000_000.0,  # events
        "for": 3_600.0,  # seconds a stall lasts (0: for ever)
        "keepalive": 3_600.0,  # seconds between keep-alive comments
        "ms": 600_000.0,  # milliseconds of latency: ten minutes
        "value": 1.0,  # http.should_retry: 0 or 1
        "code": 32768.0,  # mcp.protocol_error: a JSON-RPC error code, negated (-32603 is code=32603)
    }
)


class FaultError(ValueError):
    """A spec that does not parse; the message says where and lists the known names."""


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    params: Mapping[str, float]
    probability: float = 1.0
    # How the spec was written, for :meth:`render`: the primary parameter as ``name=value``,
    # and the parameters written ``key=value``, in order. Not part of equality: two spellings
    # of one fault are the same fault.
    shorthand: bool = field(default=False, compare=False)
    named: tuple[str, ...] = field(default=(), compare=False)

    @property
    def kind(self) -> FaultKind:
        return CATALOGUE[self.name].kind

    def __getitem__(self, key: str) -> float:
        return self.params[key]

    def render(self) -> str:
        """Back to the grammar, as it was written (for ``x-mockserver-faults``, the journal and
        the rule list): the primary parameter given as ``name=value`` stays so, one given by
        its name keeps its name; a parameter nobody wrote is shown by name when it is not its
        default (a fault made in code)."""
        entry = CATALOGUE[self.name]
        primary = entry.primary if self.shorthand else None
        parts = [self.name if primary is None else f"{self.name}={_number(self.params[primary])}"]
        parts.extend(f"{k}={_number(self.params[k])}" for k in self.named)
        written = {primary, *self.named}
        parts.extend(
            f"{k}={_number(v)}"
            for k, v in sorted(self.params.items())
            if k not in written and entry.defaults.get(k) != v
        )
        text = ",".join(parts)
        return text if self.probability >= 1.0 else f"{text}@p={_number(self.probability)}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(value)


# A spec's bounds. Every applied fault is marked on the request and echoed in
# ``x-mockserver-faults``: 10,000 terms cost ~9 s a request and a ~200 KB header that httpx and
# curl refuse to read. The catalogue has a few dozen names; a real spec has a handful of terms.
MAX_TERMS = 32
MAX_SPEC_CHARS = 2048


def parse(spec: str) -> tuple[Fault, ...]:
    """``"http.500@p=0.5; stream.cut_after=3"`` → faults; :class:`FaultError` on any mistake,
    and for a spec past :data:`MAX_SPEC_CHARS` characters or :data:`MAX_TERMS` terms (naming
    the limit), checked before any term is read."""
    if len(spec) > MAX_SPEC_CHARS:
        raise FaultError(f"a fault spec is at most {MAX_SPEC_CHARS} characters (limit MAX_SPEC_CHARS), not {len(spec)}")
    terms = [text for text in (raw.strip() for raw in spec.split(";")) if text]
    if len(terms) > MAX_TERMS:
        raise FaultError(f"a fault spec has at most {MAX_TERMS} faults (limit MAX_TERMS), not {len(terms)}")
    return tuple(_parse_one(text) for text in terms)


def _parse_one(text: str) -> Fault:
    body, _, chance = text.partition("@")
    probability = 1.0
    if chance:
        key, _, value = chance.partition("=")
        probability = _float(text, value) if key.strip() == "p" else -1.0
        if not 0.0 <= probability <= 1.0:
            raise FaultError(f"{text!r}: the suffix must be @p=<probability in [0, 1]>")
    head, *rest = (part.strip() for part in body.split(","))
    name, eq, value = head.partition("=")
    entry = CATALOGUE.get(name.strip())
    if entry is None:
        raise FaultError(f"unknown fault {name.strip()!r}; known: {', '.join(CATALOGUE)}")
    params = dict(entry.defaults)
    shorthand = bool(eq)
    named: list[str] = []
    if eq:
        if entry.primary is None:
            raise FaultError(f"{text!r}: {name} takes no value")
        params[entry.primary] = _float(text, value)
    for part in rest:
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in entry.defaults:
            known = ", ".join(entry.defaults) or "none"
            raise FaultError(f"{text!r}: unknown parameter {key!r} (known: {known})")
        params[key] = _float(text, value)
        if key == entry.primary:
            shorthand = False  # given twice: the later spelling (and value) wins
        if key not in named:
            named.append(key)
    for key, number in params.items():
        top = LIMITS.get(key, math.inf)
        if not 0.0 <= number <= top:
            raise FaultError(f"{text!r}: {key} must be between 0 and {_number(top)}, not {_number(number)}")
    return Fault(name.strip(), MappingProxyType(params), probability, shorthand, tuple(named))


def _float(text: str, value: str) -> float:
    """A finite number: ``inf``, ``nan`` and what overflows a float (``1e400``) are refused here,
    so every comparison and conversion after parsing is safe."""
    try:
        number = float(value)
    except ValueError:
        raise FaultError(f"{text!r}: {value.strip()!r} is not a number") from None
    if not math.isfinite(number):
        raise FaultError(f"{text!r}: {value.strip()!r} is not a finite number")
    return number


def request_rng(global_seed: int, *parts: object) -> random.Random:
    """The request's own generator for fault decisions: the global seed and what identifies
    the request (method, path, canonical body, session, retry attempt)."""
    return random.Random(int.from_bytes(digest(b"faults", global_seed, *parts)[:8], "big"))
