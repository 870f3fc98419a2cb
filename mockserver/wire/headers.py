"""Every ``x-mockserver-*`` header, named once (as ASGI gives header names: lower-case bytes).

Asked by clients: ``session`` (a test worker's own rules, journal and replay places),
``fault`` (faults for this request), ``cassette`` and ``record-mode`` (which recordings, and
whether to record: privileged, see :mod:`mockserver.http.auth`), ``admin-token`` (the
``--admin-token`` on a provider path, whose ``Authorization`` holds the API key).
Sent back: ``seed`` (the request's seed), ``faults`` (the faults applied),
``source`` (which backend answered: ``script``, ``replay``, ``record``, ``reference``, or
``miss`` for a cassette miss).
"""

from __future__ import annotations

__all__ = [
    "ADMIN_TOKEN",
    "CASSETTE",
    "FAULT",
    "FAULTS",
    "PREFIX",
    "RECORD_MODE",
    "RETRY_COUNT",
    "SEED",
    "SESSION",
    "SOURCE",
    "header",
    "name",
]

PREFIX = b"x-mockserver-"
SESSION = b"x-mockserver-session"
FAULT = b"x-mockserver-fault"
CASSETTE = b"x-mockserver-cassette"
RECORD_MODE = b"x-mockserver-record-mode"
ADMIN_TOKEN = b"x-mockserver-admin-token"
SEED = b"x-mockserver-seed"
FAULTS = b"x-mockserver-faults"
SOURCE = b"x-mockserver-source"
RETRY_COUNT = b"x-stainless-retry-count"  # the OpenAI SDKs' retry attempt (0 for the first)


def name(header: bytes) -> str:
    """A header name as a ``str`` (for dicts of headers and error params)."""
    return header.decode("latin-1")


def header(headers: list[tuple[bytes, bytes]], name: bytes) -> str | None:
    """The first value of ``name`` in ASGI ``headers`` (latin-1, as HTTP has it), or None."""
    for key, value in headers:
        if key == name:
            return value.decode("latin-1")
    return None
