"""Who may do what: bearer keys on the provider paths (``--api-keys``), and the admin rule.

The **admin rule** (:func:`admin_problem`) guards the admin API under ``/__mockserver/`` and
every per-request header that changes the server's state or makes it call the upstream
(``x-mockserver-record-mode``, ``x-mockserver-cassette``; see :func:`recording_problem`): the
client must be on loopback (unless ``--admin-remote``), and must send the ``--admin-token``,
when one is set, as ``Authorization: Bearer <token>`` or ``x-mockserver-admin-token: <token>``
(the latter for provider paths, whose ``Authorization`` carries the API key; like every
``x-mockserver-*`` header it is never forwarded upstream).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qs

from starlette.types import Scope

from mockserver.errors import APIError, AuthenticationError, Forbidden
from mockserver.wire import headers as h

__all__ = ["LOOPBACK", "Admin", "admin_problem", "bearer_problem", "recording_problem", "same_token"]


@dataclass(frozen=True, slots=True)
class Admin:
    """Who may use the admin API: loopback clients only unless ``remote``; a bearer ``token``."""

    token: str = ""
    remote: bool = False


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


def recording_problem(admin: Admin, scope: Scope) -> APIError | None:
    """The admin rule for ``x-mockserver-record-mode`` and ``x-mockserver-cassette`` on the
    provider paths: 403 (or 401 without the admin token) naming the header, before anything
    reads the cassettes or calls the upstream (None: not asked, or allowed). What modes a request
    may ask, and which names, the cassette backends check (:func:`mockserver.backends.replay.vetted`)."""
    asked = next((key for key, _ in scope["headers"] if key in (h.RECORD_MODE, h.CASSETTE)), None)
    if asked is None:
        return None
    client = scope.get("client")
    what = f"The header {h.name(asked)}"
    return admin_problem(admin, client[0] if client else None, scope["headers"], what, h.name(asked))


def _google_key(scope: Scope) -> str | None:
    """The key of a Gemini request: ``x-goog-api-key``, else the ``key`` query parameter."""
    header: bytes | None = next((value for key, value in scope["headers"] if key == b"x-goog-api-key"), None)
    if header is not None:
        return header.decode("latin-1").strip()
    query: bytes = scope.get("query_string", b"")
    if b"key=" not in query:
        return None
    keys: list[str] = parse_qs(query.decode("latin-1")).get("key", [])
    return keys[0] if keys else None


def bearer_problem(keys: frozenset[str], scope: Scope) -> AuthenticationError | None:
    """401 unless the request's bearer token is one of ``keys`` (None: it is)."""
    header = next((value for key, value in scope["headers"] if key == b"authorization"), b"").decode("latin-1")
    scheme, _, token = header.partition(" ")
    google = _google_key(scope) if not header else None
    if google:  # Google's clients send the key as x-goog-api-key or ?key= (never as a bearer)
        scheme, token = "bearer", google
    if scheme.lower() != "bearer" or not token.strip():
        return AuthenticationError(
            "You didn't provide an API key. You need to provide your API key in an Authorization "
            "header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            code="missing_api_key",
        )
    token = token.strip()
    if token not in keys:
        shown = token[:3] + "*" * 4 + token[-4:] if len(token) > 8 else "*" * 4
        return AuthenticationError(f"Incorrect API key provided: {shown}.", code="invalid_api_key")
    return None
