"""What a state URL names (``memory``, ``sqlite``, ``redis``) and how it is shown (password hidden).

``redis`` is every form the Redis engine takes: ``redis://`` and ``rediss://`` (one Redis),
``redis+cluster://`` and ``rediss+cluster://`` (a Redis Cluster), ``redis+sentinel://`` and
``rediss+sentinel://`` (the primary a set of Sentinels names).

Apart from :mod:`mockserver.state.open` so the engines, which name their URL in errors, can use
it without importing the module that imports them.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

__all__ = ["StateURLError", "hidden", "kind_of"]


_REDIS = frozenset(f"{base}{mode}" for base in ("redis", "rediss") for mode in ("", "+cluster", "+sentinel"))


class StateURLError(ValueError):
    """A ``--state`` or ``--store`` value that names no engine (the message says what would)."""


def kind_of(url: str) -> str:
    """``memory``, ``sqlite`` or ``redis`` (StateURLError for anything else)."""
    if url == "memory":
        return "memory"
    scheme, sep, rest = url.partition(":")
    if scheme == "sqlite" and sep and rest:
        return "sqlite"
    if scheme in _REDIS and rest.startswith("//"):
        return "redis"
    raise StateURLError(
        f"unknown state {hidden(url)!r}: use 'memory', 'sqlite:PATH' or 'redis://HOST:PORT/DB' "
        "(or rediss://, redis+cluster://HOST:PORT,…, redis+sentinel://HOST:PORT,…/SERVICE)"
    )


def hidden(url: str) -> str:
    """``url`` fit for logs, the banner and /metrics: a password in it is replaced by ``***``."""
    if "://" not in url:
        return url
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a cluster's HOST:PORT,HOST:PORT is no port: read below, by hand)
    except ValueError:
        scheme, _, rest = url.partition("://")
        login, at, _ = rest.partition("/")[0].rpartition("@")
        if not at:
            return url
        user = login.partition(":")[0]
        return f"{scheme}://{user}:***@{rest[len(login) + 1 :]}"
    if parts.password is None and "@" not in parts.netloc:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}" if user else f":***@{host}"))
