"""The fault injector: the edge's step in front of every provider path (``/v1/…``).

For each request it, in order: journals the request (before any delay), decides its faults
(the ``x-mockserver-fault`` header, ``--faults``, matching rules; probabilities drawn from a
generator seeded by the request's canonical body, so key order and ``stream`` change nothing),
charges the rate limiter, then either answers with an HTTP or transport fault itself, or runs
the app with the plan in the scope (:mod:`mockserver.faults.plan`): the generation handler
applies content, latency and stream faults to the answer's events and frames, whichever
backend answers. Every answer echoes the faults *applied* in ``x-mockserver-faults``.

Transport faults need the connection itself, which ASGI does not expose; :mod:`mockserver.http.link`
finds it behind uvicorn's ``send``. Under another server they degrade to closing the response early.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import Receive, Scope, Send

from mockserver.context import ServerContext
from mockserver.edge.exchange import Exchange
from mockserver.errors import APIError, ErrorStyle, InvalidRequest, RequestTooLarge
from mockserver.faults import catalogue
from mockserver.faults.catalogue import Fault, FaultError
from mockserver.faults.http import StatusError, http_error, retry_headers
from mockserver.faults.journal import BODY_KEPT, UNREAD, Entry
from mockserver.faults.plan import note
from mockserver.faults.ratelimit import estimate_tokens
from mockserver.faults.rules import RequestInfo
from mockserver.http.body import buffered, send_bytes
from mockserver.http.link import find_transport, reset
from mockserver.spine.seeding import canonical
from mockserver.state.base import StateUnavailable
from mockserver.wire import headers as h
from mockserver.wire.json import parse_lenient
from mockserver.wire.scope import APPLIED_KEY, BATCH_KEY, BODY_KEY, PLAN_KEY, SYNCED_KEY, TALLY_KEY

__all__ = ["Injection"]

log = logging.getLogger("mockserver")

# The credential headers each wire sends its key in: OpenAI's (and Anthropic's 2.x SDK's) bearer,
# Anthropic's x-api-key, Google's x-goog-api-key (or ``?key=``): a rate limit is per key and model.
_KEYS = (b"authorization", b"x-api-key", b"x-goog-api-key")
_WANTED = frozenset({h.FAULT, h.SESSION, h.RETRY_COUNT, *_KEYS})


Inner = Callable[[Scope, Receive, Exchange], Awaitable[None]]


class Injection:
    """The injector for the requests of ``ctx``'s server. The edge calls it for every provider
    request, with ``app``: what answers when no fault does (the auth check and the routes)."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx

    async def __call__(self, scope: Scope, receive: Receive, send: Exchange, app: Inner) -> None:
        chaos = self.ctx.chaos
        started = time.perf_counter()
        read = scope.get(BODY_KEY)  # read and parsed at the edge, when it is JSON
        if read is not None:
            raw, body = read
        elif scope["method"] in ("GET", "HEAD"):  # no body: nothing to buffer, journal or decide on
            raw, body = b"", None
        else:
            try:
                raw, receive = await buffered(receive, self.ctx.limits.body_bytes)
            except RequestTooLarge as exc:
                await _answer(send, exc, self._style(scope))
                return
            body = parse_lenient(raw)
        wanted: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:  # one pass; a dict of every header costs more
            if key in _WANTED:
                wanted[key] = value
        fields = body if isinstance(body, dict) else {}
        session = wanted.get(h.SESSION, b"").decode("latin-1") or None
        retry_attempt = _int(wanted.get(h.RETRY_COUNT))
        stream = fields.get("stream") is True
        entry_id = 0
        if self.ctx.state.shared and self.ctx.refresh is not None:
            # One round trip: the rule books' and the clock's news, and this entry's id.
            try:
                entry_id = scope[SYNCED_KEY] = await self.ctx.refresh.begin(True)
            except StateUnavailable as exc:
                await _answer(send, exc, self._style(scope))
                return
        entry = self.open(
            scope["method"], scope["path"], raw, body, session, retry_attempt, entry_id, scope.get(BATCH_KEY)
        )
        applied = send.applied
        scope[BODY_KEY] = (raw, body)
        scope[TALLY_KEY] = entry
        scope[APPLIED_KEY] = applied
        send.entry = entry
        # On a shared state the entry is pushed before the answer's last byte leaves, so a
        # client that has its answer finds the request in the journal of any process.
        if chaos.journal.shared:
            send.last = self._last_byte(entry, started, applied)
        try:
            try:
                spec = wanted.get(h.FAULT)
                asked = catalogue.parse(spec.decode("latin-1")) if spec else ()
            except FaultError as exc:
                await _answer(send, InvalidRequest(str(exc), param=h.name(h.FAULT)), self._style(scope))
                return
            model = _model_of(fields, scope["path"])
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
                # The canonical body: the same request decides the same, whatever its key order.
                same = canonical(fields) if isinstance(body, dict) else raw
                rng = catalogue.request_rng(self.ctx.seed, info.method, info.path, same, session, retry_attempt)
                try:
                    plan = await chaos.rules.decide(info, asked, rng)
                except StateUnavailable as exc:
                    await _answer(send, exc, self._style(scope))
                    return
            if chaos.limiter.active and not await self._charge(wanted, model, body, send, scope):
                return
            scope[PLAN_KEY] = plan
            if plan:
                await self._apply(plan, scope, receive, send, model, app)
            else:
                await app(scope, receive, send)
        finally:
            if not send.pushed:
                entry.faults = [f.render() for f in applied]
                await self.close(entry, started, stream)

    def open(
        self,
        method: str,
        path: str,
        raw: bytes,
        body: Any,
        session: str | None,
        retry_attempt: int,
        entry_id: int = 0,
        batch: dict[str, Any] | None = None,
    ) -> Entry:
        """The request's journal entry, as it arrives (``batch``: a batch's line, sent in process
        by mockserver.batches)."""
        return self.ctx.chaos.journal.open(
            time=time.time(),
            method=method,
            path=path,
            session=session,
            retry_attempt=retry_attempt,
            body=body if len(raw) > BODY_KEPT else UNREAD,  # a small one is read when the entry is
            raw=raw,
            entry_id=entry_id,
            batch=batch,
        )

    async def close(self, entry: Entry, started: float, stream: bool) -> None:
        """The request is over (its faults noted): its entry's duration and ending, kept."""
        self._close(entry, started, stream)
        journal = self.ctx.chaos.journal
        if journal.shared:
            await self._push(entry)
        else:
            journal.settle(entry)  # its kept answer counts in the memory budget

    def _style(self, scope: Scope) -> ErrorStyle:
        return self.ctx.profile_of(scope).error_style

    async def _charge(
        self, wanted: dict[bytes, bytes], model: str | None, body: Any, send: Exchange, scope: Scope
    ) -> bool:
        """Take from the rate limiter; False (after answering 429) when a bucket is empty."""
        key = _key_of(wanted, scope)
        try:
            decision = await self.ctx.chaos.limiter.take(key, model or "", estimate_tokens(body))
        except StateUnavailable as exc:
            await _answer(send, exc, self._style(scope))
            return False
        send.extra += [(k.encode(), v.encode()) for k, v in decision.headers.items()]
        if decision.allowed:
            return True
        wait = max(decision.retry_after, 0.001)
        error = StatusError(
            429,
            decision.exhausted,
            f"Rate limit reached for {model or 'the model'} on {decision.exhausted} per min. "
            f"Please try again in {wait:.3g}s.",
            "rate_limit_exceeded",
            headers=retry_headers(round(wait, 3)),
        )
        await _answer(send, error, self._style(scope))
        return False

    async def _apply(
        self, plan: tuple[Fault, ...], scope: Scope, receive: Receive, send: Exchange, model: str | None, app: Inner
    ) -> None:
        by_kind: dict[str, Fault] = {}
        for fault in plan:  # of two faults of one kind, the first listed wins
            if fault.name != "http.should_retry":
                by_kind.setdefault(fault.kind, fault)
        if "http" in by_kind:
            retry = next((f for f in plan if f.name == "http.should_retry"), None)
            note(scope, [by_kind["http"], *([retry] if retry is not None else [])])
            answer = http_error(by_kind["http"], model)
            extra = {"x-should-retry": "true" if retry["value"] else "false"} if retry is not None else {}
            if isinstance(answer, APIError):
                answer.headers = {**answer.headers, **extra}
                await _answer(send, answer, self._style(scope))
            else:
                status, html, media = answer
                await send_bytes(send, status, html, media, extra)
            return
        if "transport" in by_kind:
            note(scope, [by_kind["transport"]])
            await self._transport_fault(by_kind["transport"], find_transport(send.inner), receive, send)
            return
        await app(scope, receive, send)

    async def _transport_fault(self, fault: Fault, transport: Any, receive: Receive, send: Exchange) -> None:
        entry = send.entry
        assert entry is not None
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

    def _last_byte(self, entry: Entry, started: float, applied: list[Fault]) -> Callable[[], Awaitable[None]]:
        async def push() -> None:  # the entry as it will end: done, its faults and duration known
            entry.faults = [f.render() for f in applied]
            entry.duration = time.perf_counter() - started
            await self._push(entry)

        return push

    async def _push(self, entry: Entry) -> None:
        """The finished entry to the shared journal: shielded, so a cancelled request still
        leaves its entry; an engine that is down loses this one entry (logged), not the answer."""
        try:
            await asyncio.shield(self.ctx.chaos.journal.close(entry))
        except StateUnavailable as exc:
            log.warning("journal entry %d not kept: %s", entry.id, exc.message)
        except Exception:  # whatever a failing engine's client raises: the answer still goes out whole
            log.exception("journal entry %d not kept", entry.id)

    def _close(self, entry: Entry, started: float, stream: bool) -> None:
        entry.duration = time.perf_counter() - started
        if entry.ended == "pending":  # the body never finished: the client left, or the app failed
            entry.ended = "client_disconnect" if stream and entry.status == 200 else "error"


def _int(value: bytes | None) -> int:
    try:
        return int(value or b"0")
    except ValueError:
        return 0


async def _answer(send: Send, error: APIError, style: Any) -> None:
    body = json.dumps(error.body(style), separators=(",", ":"), allow_nan=False).encode()
    await send_bytes(send, error.status, body, "application/json", error.headers)


def _model_of(fields: dict[str, Any], path: str) -> str | None:
    """The model a request asks for: its body's ``model``, else the one its path names (Gemini's
    ``…/models/{model}:{method}``), so rate limits and rules by model hold on every wire."""
    model = fields.get("model")
    if isinstance(model, str):
        return model
    at = path.find("/models/")
    if at < 0:
        return None
    name, colon, _ = path[at + len("/models/") :].rpartition(":")
    return name if colon and name else None


def _key_of(wanted: dict[bytes, bytes], scope: Scope) -> str:
    """The API key a request is charged to: a bearer token, else Anthropic's or Google's key
    header, else Google's ``?key=``; "anonymous" without one."""
    bearer = wanted.get(b"authorization")
    if bearer is not None:
        return bearer.decode("latin-1").partition(" ")[2] or "anonymous"
    for name in _KEYS[1:]:
        value = wanted.get(name)
        if value:
            return value.decode("latin-1")
    for pair in scope.get("query_string", b"").split(b"&"):
        name, _, value = pair.partition(b"=")
        if name == b"key" and value:
            return unquote_to_bytes(value).decode("latin-1")
    return "anonymous"
