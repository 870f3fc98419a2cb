"""The fault injector: ASGI middleware in front of every provider path (``/v1/…``).

For each request it, in order: journals the request (before any delay), decides its faults
(the ``x-mockserver-fault`` header, ``--faults``, matching rules; probabilities drawn from
the request's seeded generator), charges the rate limiter, then either answers with an HTTP
or transport fault itself, or runs the app with stream faults wrapped around ``send`` and
the content/latency faults handed to the engine through the scope. Every answer echoes the
faults applied in ``x-mockserver-faults``.

Transport faults need the connection itself, which ASGI does not expose: uvicorn's ``send``
is a bound method of its protocol cycle, and :func:`find_transport` finds the transport behind
it (through Starlette's wrapper closures). Under another server they degrade to closing the
response early.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mockserver.context import ServerContext
from mockserver.errors import APIError, ContextLengthExceeded, ErrorStyle, InvalidRequest
from mockserver.faults import catalogue
from mockserver.faults.catalogue import Fault, FaultError
from mockserver.faults.journal import Entry
from mockserver.faults.ratelimit import estimate_tokens
from mockserver.faults.rules import RequestInfo
from mockserver.faults.stream import StreamEnded, StreamFaults, reset

__all__ = ["BODY_KEY", "PLAN_KEY", "FaultInjector", "buffered", "find_transport", "parse_body", "send_raw"]

PLAN_KEY = "mockserver.faults.catalogue"  # the faults decided for this request
BODY_KEY = "mockserver.body"  # the parsed JSON body, so the handler does not parse it twice
FAULT_HEADER = b"x-mockserver-fault"
SESSION_HEADER = b"x-mockserver-session"
RETRY_HEADER = b"x-stainless-retry-count"
_WANTED = frozenset({FAULT_HEADER, SESSION_HEADER, RETRY_HEADER, b"authorization"})


class _Status(APIError):
    """An HTTP fault with a status of its own."""

    def __init__(self, status: int, kind: str, message: str, code: str | None = None, **kw: Any) -> None:
        super().__init__(message, code=code, **kw)
        self.status = status
        self.type = kind


# OpenAI's words for each status: (status, type, code, message); {model} and {wait} are filled in.
_HTTP: dict[str, tuple[int, str, str | None, str]] = {
    "http.401": (
        401,
        "invalid_request_error",
        "invalid_api_key",
        "Incorrect API key provided: sk-****. You can find your API key at https://platform.openai.com/account/api-keys.",
    ),
    "http.403": (
        403,
        "request_forbidden",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    "http.404": (
        404,
        "invalid_request_error",
        "model_not_found",
        "The model `{model}` does not exist or you do not have access to it.",
    ),
    "http.408": (408, "timeout", None, "Request timed out."),
    "http.409": (409, "conflict", None, "The request conflicts with the current state of the server."),
    "http.429": (
        429,
        "requests",
        "rate_limit_exceeded",
        "Rate limit reached for {model} on requests per min (RPM): Limit 3, Used 3, Requested 1. "
        "Please try again in {wait}s.",
    ),
    "http.quota": (
        429,
        "insufficient_quota",
        "insufficient_quota",
        "You exceeded your current quota, please check your plan and billing details.",
    ),
    "http.500": (500, "server_error", None, "The server had an error while processing your request. Sorry about that!"),
    "http.503": (503, "server_error", None, "The engine is currently overloaded, please try again later."),
    "http.504": (504, "server_error", None, "Gateway timeout."),
}
_BAD_GATEWAY = (
    b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n"
    b"<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>cloudflare</center>\r\n</body>\r\n</html>\r\n"
)


def http_error(fault: Fault, model: str | None) -> APIError | tuple[int, bytes, str]:
    """The error an ``http.*`` fault answers with: OpenAI's exact words, or raw HTML for a 502."""
    if fault.name == "http.400":
        return ContextLengthExceeded(8192, 8200, 16, "messages")
    if fault.name == "http.502":
        return 502, _BAD_GATEWAY, "text/html"
    status, kind, code, text = _HTTP[fault.name]
    wait = fault.params.get("retry_after", 0.0)
    headers = _retry_headers(wait) if status in (429, 503) and (wait or status == 429) else {}
    if fault.name == "http.429":
        headers |= {
            "x-ratelimit-limit-requests": "3",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": f"{wait:g}s",
        }
    return _Status(status, kind, text.format(model=model or "the model", wait=f"{wait:g}"), code, headers=headers)


def _retry_headers(seconds: float) -> dict[str, str]:
    return {"retry-after": f"{seconds:g}", "retry-after-ms": str(int(seconds * 1000))}


def find_transport(send: Any, depth: int = 4) -> Any:
    """The asyncio transport behind uvicorn's ``send`` (None if it cannot be found)."""
    owner = getattr(send, "__self__", None)
    found = getattr(owner, "transport", None)
    if found is not None or depth == 0:
        return found
    for cell in getattr(send, "__closure__", None) or ():
        try:
            inner = cell.cell_contents
        except ValueError:
            continue
        if callable(inner):
            found = find_transport(inner, depth - 1)
            if found is not None:
                return found
    return None


class FaultInjector:
    def __init__(self, app: ASGIApp, ctx: ServerContext) -> None:
        self.app = app
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v1/"):
            await self.app(scope, receive, send)
            return
        chaos = self.ctx.chaos
        started = time.perf_counter()
        # GET and HEAD carry no body: nothing to buffer, journal or decide on.
        raw, receive = (b"", receive) if scope["method"] in ("GET", "HEAD") else await buffered(receive)
        wanted: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:  # one pass; a dict of every header costs more
            if key in _WANTED:
                wanted[key] = value
        body = parse_body(raw)
        fields = body if isinstance(body, dict) else {}
        session = wanted.get(SESSION_HEADER, b"").decode("latin-1") or None
        retry_attempt = _int(wanted.get(RETRY_HEADER))
        stream = fields.get("stream") is True
        entry = chaos.journal.open(
            time=time.time(),
            method=scope["method"],
            path=scope["path"],
            session=session,
            retry_attempt=retry_attempt,
            body=body,
        )
        scope[BODY_KEY] = (raw, body)
        recorder = _Recorder(send, entry, stream)
        try:
            try:
                asked = catalogue.parse(wanted.get(FAULT_HEADER, b"").decode("latin-1"))
            except FaultError as exc:
                await _answer(recorder, InvalidRequest(str(exc), param="x-mockserver-fault"), self._style(scope))
                return
            model = fields.get("model") if isinstance(fields.get("model"), str) else None
            plan: tuple[Fault, ...] = ()
            if asked or chaos.rules.active:
                info = RequestInfo(
                    method=scope["method"],
                    path=scope["path"],
                    model=model,
                    stream=stream,
                    tools=bool(fields.get("tools") or fields.get("functions")),
                    session=session,
                    retry_attempt=retry_attempt,
                )
                rng = catalogue.request_rng(self.ctx.settings.seed, info.method, info.path, raw, session, retry_attempt)
                plan = chaos.rules.decide(info, asked, rng)
                entry.faults = [f.render() for f in plan]
                if plan:
                    recorder.extra.append((b"x-mockserver-faults", "; ".join(entry.faults).encode()))
            if chaos.limiter.active and not await self._charge(wanted, model, body, recorder, scope):
                return
            if plan:
                await self._apply(plan, scope, receive, recorder, model)
            else:
                await self.app(scope, receive, recorder)
        except StreamEnded as ended:
            entry.ended = ended.how  # type: ignore[assignment]
        finally:
            self._close(entry, started, stream)

    def _style(self, scope: Scope) -> ErrorStyle:
        return self.ctx.profile_of(scope).error_style

    async def _charge(
        self, wanted: dict[bytes, bytes], model: str | None, body: Any, send: _Recorder, scope: Scope
    ) -> bool:
        """Take from the rate limiter; False (after answering 429) when a bucket is empty."""
        key = wanted.get(b"authorization", b"").decode("latin-1").partition(" ")[2] or "anonymous"
        decision = self.ctx.chaos.limiter.take(key, model or "", estimate_tokens(body))
        send.extra += [(k.encode(), v.encode()) for k, v in decision.headers.items()]
        if decision.allowed:
            return True
        wait = max(decision.retry_after, 0.001)
        error = _Status(
            429,
            decision.exhausted,
            f"Rate limit reached for {model or 'the model'} on {decision.exhausted} per min. "
            f"Please try again in {wait:.3g}s.",
            "rate_limit_exceeded",
            headers=_retry_headers(round(wait, 3)),
        )
        await _answer(send, error, self._style(scope))
        return False

    async def _apply(
        self, plan: tuple[Fault, ...], scope: Scope, receive: Receive, send: _Recorder, model: str | None
    ) -> None:
        by_kind: dict[str, Fault] = {}
        for fault in plan:  # of two faults of one kind, the first listed wins
            if fault.name != "http.should_retry":
                by_kind.setdefault(fault.kind, fault)
        if "http" in by_kind:
            answer = http_error(by_kind["http"], model)
            retry = next((f for f in plan if f.name == "http.should_retry"), None)
            extra = {"x-should-retry": "true" if retry["value"] else "false"} if retry is not None else {}
            if isinstance(answer, APIError):
                answer.headers = {**answer.headers, **extra}
                await _answer(send, answer, self._style(scope))
            else:
                status, html, media = answer
                await send_raw(send, status, html, media, extra)
            return
        scope[PLAN_KEY] = plan
        stream = tuple(f for f in plan if f.kind == "stream")
        if "transport" not in by_kind and not stream:
            await self.app(scope, receive, send)
            return
        transport = find_transport(send.inner)
        if "transport" in by_kind:
            await self._transport_fault(by_kind["transport"], transport, receive, send)
            return
        closed = (lambda: transport.is_closing()) if transport is not None else (lambda: False)
        breaker = StreamFaults(send, stream, transport, closed)
        try:
            await self.app(scope, receive, breaker)
        finally:
            if breaker.stalling and send.entry.ended == "pending":
                send.entry.ended = "stall"  # the client gave up during a stall

    async def _transport_fault(self, fault: Fault, transport: Any, receive: Receive, send: _Recorder) -> None:
        entry = send.entry
        if fault.name == "transport.hang":
            entry.ended = "hang"
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        if fault.name == "transport.truncated":
            await send(
                {
                    "type": "http.response.start",
                    "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"4096")],
                }
            )
            await send({"type": "http.response.body", "body": b'{"id": "chatcmpl-', "more_body": True})
        elif transport is not None and fault.name == "transport.garbage":
            transport.write(b"\x00\x13NOT HTTP AT ALL\r\n\r\n\xff\xfe")
        entry.ended = "reset" if fault.name == "transport.reset" else "eof"
        if fault.name == "transport.reset":
            reset(transport)
        elif transport is not None:
            transport.close()
        await asyncio.sleep(0.01)  # the server notices the connection is gone before we return

    def _close(self, entry: Entry, started: float, stream: bool) -> None:
        entry.duration = time.perf_counter() - started
        if entry.ended == "pending":  # the body never finished: the client left, or the app failed
            entry.ended = "client_disconnect" if stream and entry.status == 200 else "error"


async def buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that replays it, then passes through."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    replayed = False

    async def replay() -> Message:
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}
        return await receive()

    return raw, replay


def parse_body(raw: bytes) -> Any:
    """The JSON body, or None when there is none or it does not parse (the handler says why)."""
    try:
        return json.loads(raw) if raw else None
    except (ValueError, UnicodeDecodeError):
        return None


def _int(value: bytes | None) -> int:
    try:
        return int(value or b"0")
    except ValueError:
        return 0


class _Recorder:
    """``send`` that journals what goes out and adds the injector's headers."""

    def __init__(self, send: Send, entry: Entry, streaming: bool) -> None:
        self.inner = send
        self.entry = entry
        self.streaming = streaming
        self.extra: list[tuple[bytes, bytes]] = []

    _tail = b""  # the end of the last body message: an event marker may straddle two writes

    def _count(self, body: bytes) -> bool:
        """Count the events in ``body``; True when the stream's terminator has just arrived."""
        window = self._tail + body
        self.entry.events += window.count(b"data: ") - window.count(b"data: [DONE]")
        self.entry.events -= self._tail.count(b"data: ") - self._tail.count(b"data: [DONE]")
        self._tail = window[-16:]
        return window.endswith(b"data: [DONE]\n\n")

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.entry.status = message["status"]
            headers = message.get("headers", [])
            if self.extra:
                headers = [*headers, *self.extra]
            for key, value in headers:
                if key == b"x-mockserver-seed":
                    self.entry.seed = int(value)
                elif key == b"retry-after":
                    self.entry.retry_after = float(value)
            if self.extra:
                message = {**message, "headers": headers}
        elif message["type"] == "http.response.body":
            body = message.get("body", b"")
            self.entry.bytes += len(body)
            if body and self._count(body):
                self.entry.ended = "done"
            elif not message.get("more_body", False) and self.entry.ended == "pending":
                self.entry.ended = "eof" if self.streaming else "done"
        try:
            await self.inner(message)
        except OSError:
            self.entry.ended = "client_disconnect"
            raise


async def _answer(send: _Recorder, error: APIError, style: Any) -> None:
    body = json.dumps(error.body(style), separators=(",", ":")).encode()
    await send_raw(send, error.status, body, "application/json", error.headers)


async def send_raw(send: Send, status: int, body: bytes, media: str, headers: dict[str, str]) -> None:
    head = [(b"content-type", media.encode()), (b"content-length", str(len(body)).encode())]
    head += [(k.encode(), v.encode()) for k, v in headers.items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": body, "more_body": False})
