"""Who may do what: bearer keys on the provider paths (``--api-keys``), and the admin rule.

The **admin rule** (:func:`admin_problem`) guards the admin API under ``/__mockserver/`` and
every per-request header that changes the server's state or makes it call the upstream
(``x-mockserver-record-mode``, ``x-mockserver-cassette``; see :class:`RecordingGuard`): the
client must be on loopback (unless ``--admin-remote``), and must send the ``--admin-token``,
when one is set, as ``Authorization: Bearer <token>`` or ``x-mockserver-admin-token: <token>``
(the latter for provider paths, whose ``Authorization`` carries the API key; like every
``x-mockserver-*`` header it is never forwarded upstream).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterable

from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from mockserver.context import Admin
from mockserver.errors import APIError, AuthenticationError, Forbidden
from mockserver.http import headers as h

__all__ = ["LOOPBACK", "BearerAuth", "RecordingGuard", "admin_problem", "same_token"]

LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost", "testclient"})


def same_token(given: bytes, expected: str) -> bool:
    """Constant-time ``given == expected``, on bytes: ``hmac.compare_digest`` raises on a
    ``str`` that is not ASCII, and a header may hold any byte. The header's bytes are compared
    with the token's UTF-8 (how a client sends a non-ASCII token, if it does)."""
    return bool(expected) and hmac.compare_digest(given, expected.encode("utf-8"))


def _bearer(value: bytes) -> bytes:
    scheme, _, token = value.partition(b" ")
    return token.strip() if scheme.lower() == b"bearer" else b""


def admin_problem(
    access: Admin, client: str | None, headers: Iterable[tuple[bytes, bytes]], what: str, param: str | None = None
) -> APIError | None:
    """Why this client may not use the admin rule's privileges (None: it may). ``what`` names
    the privilege in the message, ``param`` the header that asked for it."""
    if not access.remote and (client or "") not in LOOPBACK:
        return Forbidden(
            f"{what} is for loopback clients only (start the server with --admin-remote).",
            param=param,
            code="loopback_only",
        )
    if access.token:
        offered = [
            _bearer(value) if key == b"authorization" else value.strip()
            for key, value in headers
            if key in (b"authorization", h.ADMIN_TOKEN)
        ]
        if not any(same_token(token, access.token) for token in offered):
            return AuthenticationError(
                f"{what} needs the admin token: 'Authorization: Bearer <admin token>' or "
                f"'{h.name(h.ADMIN_TOKEN)}: <admin token>'.",
                param=param,
                code="invalid_admin_token",
            )
    return None


class RecordingGuard:
    """The admin rule for ``x-mockserver-record-mode`` and ``x-mockserver-cassette`` on the
    provider paths: 403 (or 401 without the admin token) naming the header, before anything
    reads the cassettes or calls the upstream. What modes a request may ask, and which names,
    the cassette backends check (:func:`mockserver.backends.replay.vetted`)."""

    def __init__(self, app: ASGIApp, admin: Admin, answer: Callable[[APIError, Scope], Response]) -> None:
        self.app = app
        self.admin = admin
        self.answer = answer  # the error as the request's profile words it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/v1/"):
            asked = next((key for key, _ in scope["headers"] if key in (h.RECORD_MODE, h.CASSETTE)), None)
            if asked is not None:
                client = scope.get("client")
                problem = admin_problem(
                    self.admin,
                    client[0] if client else None,
                    scope["headers"],
                    f"The header {h.name(asked)}",
                    h.name(asked),
                )
                if problem is not None:
                    await self.answer(problem, scope)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


class BearerAuth:
    """401 unless the bearer token is one of ``keys`` (an empty set accepts anything)."""

    def __init__(self, app: ASGIApp, keys: frozenset[str], answer: Callable[[APIError, Scope], Response]) -> None:
        self.app = app
        self.keys = keys
        self.answer = answer  # the error as the request's profile words it

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.keys and scope["type"] == "http" and scope["path"].startswith("/v1/"):
            problem = self._problem(dict(scope["headers"]).get(b"authorization", b"").decode("latin-1"))
            if problem is not None:
                await self.answer(problem, scope)(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _problem(self, header: str) -> AuthenticationError | None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return AuthenticationError(
                "You didn't provide an API key. You need to provide your API key in an Authorization "
                "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
                code="missing_api_key",
            )
        token = token.strip()
        if token not in self.keys:
            shown = token[:3] + "*" * 4 + token[-4:] if len(token) > 8 else "*" * 4
            return AuthenticationError(f"Incorrect API key provided: {shown}.", code="invalid_api_key")
        return None
