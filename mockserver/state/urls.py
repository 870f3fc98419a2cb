"""What a state URL names (``memory``, ``sqlite``, ``redis``) and how it is shown (password hidden).

Apart from :mod:`mockserver.state.open` so the engines, which name their URL in errors, can use
it without importing the module that imports them.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["StateURLError", "hidden", "kind_of"]


class StateURLError(ValueError):
    """A ``--state`` or ``--store`` value that names no engine (the message says what would)."""


def kind_of(url: str) -> str:
    """``memory``, ``sqlite`` or ``redis`` (StateURLError for anything else)."""
    if url == "memory":
        return "memory"
    scheme, sep, rest = url.partition(":")
    if scheme == "sqlite" and sep and rest:
        return "sqlite"
    if scheme in ("redis", "rediss") and rest.startswith("//"):
        return "redis"
    raise StateURLError(
        f"unknown state {hidden(url)!r}: use 'memory', 'sqlite:PATH' or 'redis://HOST:PORT/DB' (or rediss://)"
    )


def hidden(url: str) -> str:
    """``url`` fit for logs, the banner and /metrics: a password in it is replaced by ``***``."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
    except ValueError:
        return url.split("://", 1)[0] + "://***"
    if parts.password is None and "@" not in parts.netloc:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}" if user else f":***@{host}"))
