"""redis-py for the Redis engine: which client a URL names, one per event loop, and its failures
as :class:`~mockserver.state.base.StateUnavailable`.

Three deployments, one engine (:func:`target` reads the URL):

* ``redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]`` (``rediss://`` for TLS; redis-py's query options,
  e.g. ``?ssl_cert_reqs=none`` or ``?ssl_ca_certs=PATH``): one Redis;
* ``redis+cluster://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]`` (``rediss+cluster://``): a Redis
  Cluster, found from any of the nodes named (redis-py's :class:`~redis.asyncio.cluster.RedisCluster`
  keeps the map of its slots). Every
  key the engine writes carries a hash tag (``{state}``, ``{records}``), so each script and
  multi-key command stays in one slot;
* ``redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/SERVICE[/DB]`` (``rediss+sentinel://``):
  the primary the Sentinels name ``SERVICE``, followed through a failover.

A redis-py client's connections belong to the event loop that opened them (a server runs its
loop in a thread, pytest-asyncio gives each test its own): :class:`Link` keeps one client per
loop. For one Redis and for a cluster, that client is :mod:`~mockserver.state.redis.pipe`'s: the
commands one turn of the loop asks go out in one write on redis-py's connections (per node of a
cluster), where redis-py's own client would send each alone — the budget is 0.3 ms of server CPU per
scripted answer for all of Redis, and the writes were most of it; Sentinel's primary is found
by redis-py's Sentinel-managed connections. Failures are of two kinds, kept apart on purpose:

* the connection — cannot connect, lost, no reply within :data:`TIMEOUT`, a password refused, a
  cluster without its slots: :class:`StateUnavailable` (a 503 the client may retry), naming the URL
  with its password hidden. For a moment after one (a back-off doubling from 50 ms to
  :data:`BACKOFF_MAX`) every command fails at once, so a dead Redis is not hammered by a busy
  fleet, and one that comes back is used again within half a second. Nothing is retried by
  redis-py: a count or a script sent twice would count twice (a cluster's redirect, which says
  the command did not run, is followed once);
* an error reply (``WRONGTYPE …``): redis-py's ``ResponseError``, a programming error.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, Concatenate, Literal, ParamSpec, Protocol, TypeVar
from urllib.parse import unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.sentinel
import redis.cluster
import redis.sentinel
from redis.backoff import NoBackoff
from redis.connection import parse_url as _parse_url
from redis.exceptions import AuthenticationError, NoScriptError, RedisClusterException, RedisError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from mockserver.state.base import StateUnavailable
from mockserver.state.redis.pipe import ClusterConnections, Connections
from mockserver.state.urls import hidden

__all__ = ["BACKOFF_MAX", "TIMEOUT", "Link", "ReplyError", "Script", "Target", "guarded", "target"]

ReplyError = ResponseError  # an error reply: the command was wrong, the connection is fine

TIMEOUT = 2.0  # seconds to connect, and for a reply
BACKOFF_MIN = 0.05  # seconds of failing fast after the first failure
BACKOFF_MAX = 0.5  # the back-off doubles up to this: a Redis back is used within ~0.5 s
CONNECTIONS = 1024  # a client's connections (per node of a cluster): redis-py refuses more at once

Kind = Literal["single", "cluster", "sentinel"]

# Error replies that say the connection cannot serve anyone (a password missing or refused, a
# dataset still loading after a restart, a cluster without a quorum, …): an outage, not a bug.
_OUTAGES = ("NOAUTH", "WRONGPASS", "LOADING", "MASTERDOWN", "BUSY ", "CLUSTERDOWN", "TRYAGAIN", "READONLY")


@dataclass(frozen=True, slots=True)
class Target:
    """What a state URL names: the deployment, its nodes, and redis-py's connection options."""

    kind: Kind
    url: str  # for ``single``: the URL itself (redis-py reads it)
    nodes: tuple[tuple[str, int], ...] = ()
    options: dict[str, Any] = field(default_factory=dict)  # username, password, db, ssl…
    service: str = ""  # Sentinel's name of the primary
    node: str = ""  # for ``cluster``: a node's own URL, ``{node}`` standing for its HOST:PORT


def target(url: str) -> Target:
    """The deployment ``url`` names; ValueError (the password hidden) when it is malformed."""
    scheme, _, rest = url.partition("://")
    base, _, mode = scheme.partition("+")
    if base not in ("redis", "rediss") or mode not in ("", "cluster", "sentinel") or not rest:
        raise ValueError(f"not a redis:// URL: {hidden(url)}")
    if not mode:
        try:
            parse_url(url)  # redis-py's own reading: a bad port or database fails here, not later
        except ValueError:
            raise ValueError(f"bad port or database number in {hidden(url)}") from None
        return Target("single", url)
    parts = urlsplit(url)
    login, _, hosts = parts.netloc.rpartition("@")
    nodes = []
    for node in hosts.split(","):
        host, colon, port = node.rpartition(":")
        if not colon or not port.isdigit() or not host:
            raise ValueError(f"{hidden(url)}: name each node as HOST:PORT, separated by commas")
        nodes.append((host.strip("[]"), int(port)))
    path = [unquote(p) for p in parts.path.strip("/").split("/") if p]
    service = ""
    if mode == "sentinel":
        if not path:
            raise ValueError(f"{hidden(url)}: name the primary after the Sentinels: /SERVICE[/DB]")
        service, path = path[0], path[1:]
    if len(path) > 1 or (path and not path[0].isdigit()) or (mode == "cluster" and path and path[0] != "0"):
        raise ValueError(f"bad database number in {hidden(url)} (a cluster has database 0 only)")
    # redis-py reads the login and the query (TLS options) of a plain URL of the first node.
    plain = f"{base}://{login + '@' if login else ''}{hosts.split(',')[0]}/{path[0] if path else 0}"
    options = parse_url(plain + (f"?{parts.query}" if parts.query else ""))
    for key in ("host", "port", "connection_class"):
        options.pop(key, None)
    if base == "rediss":
        options["ssl"] = True
    node = ""
    if mode == "cluster":
        options.pop("db", None)
        node = f"{base}://{login + '@' if login else ''}{{node}}/0" + (f"?{parts.query}" if parts.query else "")
    return Target(mode, url, tuple(nodes), options, service, node)  # type: ignore[arg-type]


def parse_url(url: str) -> dict[str, Any]:
    """redis-py's reading of a ``redis://`` URL: its connection options."""
    options: dict[str, Any] = _parse_url(url)  # type: ignore[no-untyped-call]
    return options


@dataclass(frozen=True, slots=True)
class Script:
    """A Lua script, run by its SHA1 (EVALSHA) and sent whole only when Redis lacks it."""

    source: str
    sha: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "sha", hashlib.sha1(self.source.encode()).hexdigest())

    async def run(self, client: Any, keys: Sequence[Any] = (), args: Sequence[Any] = ()) -> Any:
        """EVALSHA, and EVAL when Redis does not have it yet (a new, restarted or flushed
        server), which caches it there for the next time. The keys are declared: a cluster
        client sends the script to the node of their (one) slot."""
        try:
            return await client.execute_command("EVALSHA", self.sha, len(keys), *keys, *args)
        except NoScriptError:
            return await client.execute_command("EVAL", self.source, len(keys), *keys, *args)


class Link:
    """The redis-py clients of one URL: one per event loop, and one blocking, for a thread that
    must not depend on any loop (the records' heartbeat)."""

    def __init__(self, url: str, *, timeout: float = TIMEOUT) -> None:
        self.target = target(url)
        self.where = hidden(url)
        self.timeout = timeout
        self.cluster = self.target.kind == "cluster"
        self._clients: dict[asyncio.AbstractEventLoop, Any] = {}
        self._backoff = 0.0
        self.retry_at = 0.0  # time.monotonic() before which every command fails at once
        self._why = ""

    # ---- clients -------------------------------------------------------------------------

    def client(self) -> Any:
        """This event loop's client (made on first use; it connects on its first command):
        :mod:`~mockserver.state.redis.pipe`'s connections for each kind."""
        loop = asyncio.get_running_loop()
        made = self._clients.get(loop)
        if made is None:
            for old in [old for old in self._clients if old.is_closed()]:  # a finished test's loop
                del self._clients[old]
            made = self._clients[loop] = self._make(asyncio=True)
        return made

    def blocking(self) -> Any:
        """A new blocking client (``redis.Redis`` or ``redis.cluster.RedisCluster``)."""
        return self._make(asyncio=False)

    def _make(self, *, asyncio: bool) -> Any:
        t = self.target
        common: dict[str, Any] = {
            "socket_timeout": self.timeout,
            "socket_connect_timeout": self.timeout,
            "max_connections": CONNECTIONS,
        }
        if t.kind == "single":
            if asyncio:
                return Connections(self._factory(t.url), self.timeout)  # connects on its first command
            return redis.Redis.from_url(t.url, retry=_retry(False), **common)
        if t.kind == "cluster":
            if asyncio:
                nodes = [redis.asyncio.cluster.ClusterNode(h, p) for h, p in t.nodes]
                cluster = redis.asyncio.cluster.RedisCluster(
                    startup_nodes=nodes, retry=_retry(True), **common, **t.options
                )
                return ClusterConnections(cluster, self._node_factory, self.timeout)
            blocking = [redis.cluster.ClusterNode(h, p) for h, p in t.nodes]  # type: ignore[no-untyped-call]
            return redis.cluster.RedisCluster(startup_nodes=blocking, retry=_retry(False), **common, **t.options)
        sentinels: Any = redis.asyncio.sentinel.Sentinel if asyncio else redis.sentinel.Sentinel  # untyped
        watch = {"socket_timeout": self.timeout, "socket_connect_timeout": self.timeout}
        common.pop("max_connections")
        options = {**t.options, "max_connections": CONNECTIONS}
        watcher = sentinels(list(t.nodes), sentinel_kwargs=watch, **common)
        if not asyncio:
            return watcher.master_for(t.service, retry=_retry(False), **options)
        # The pipe on redis-py's Sentinel-managed connections: each asks the Sentinels where the
        # primary is as it connects, and one that meets a demoted primary (READONLY) is dropped.
        primary = watcher.master_for(t.service, retry=_retry(True), **{**options, "socket_timeout": None})
        return Connections(primary.connection_pool, self.timeout, closing=watcher.sentinels)

    def _factory(self, url: str) -> redis.asyncio.ConnectionPool:
        """What makes :mod:`~mockserver.state.redis.pipe`'s connections to ``url``: no socket
        timeout (the pipe times its replies), no retries."""
        return redis.asyncio.ConnectionPool.from_url(
            url, socket_timeout=None, socket_connect_timeout=self.timeout, retry=_retry(True)
        )

    def _node_factory(self, host: str, port: int) -> redis.asyncio.ConnectionPool:
        return self._factory(
            self.target.node.replace("{node}", f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        )

    async def pipeline(self, commands: Sequence[Sequence[Any]]) -> list[Any]:
        """Several commands in one round trip (not a transaction), their replies in order."""
        if not commands:
            return []
        made = self.client()
        if isinstance(made, Connections | ClusterConnections):
            return await made.execute_many(commands)
        pipe = made.pipeline(transaction=False)
        for command in commands:
            pipe.execute_command(*command)
        replies: list[Any] = await pipe.execute()
        return replies

    async def release(self) -> None:
        """Close this loop's client (a loop about to end: a test's, a thread's)."""
        made = self._clients.pop(asyncio.get_running_loop(), None)
        if made is not None:
            with contextlib.suppress(RedisError, OSError, RuntimeError):
                await made.aclose()

    async def close(self) -> None:
        """Close every client: this loop's now, another running loop's from that loop."""
        here = asyncio.get_running_loop()
        for loop, made in list(self._clients.items()):
            if loop is here:
                with contextlib.suppress(RedisError, OSError, RuntimeError):
                    await made.aclose()
            elif not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # closed meanwhile
                    asyncio.run_coroutine_threadsafe(made.aclose(), loop)
        self._clients.clear()

    # ---- failures ------------------------------------------------------------------------

    def down(self) -> StateUnavailable:
        """What a command meets while the back-off lasts."""
        return StateUnavailable(self.where, self._why)

    def failed(self, exc: BaseException) -> BaseException:
        """What ``exc`` raised by redis-py becomes: StateUnavailable for an outage, else ``exc``
        itself. A failure to connect (refused, unreachable, a password refused) starts or
        grows the back-off; a connection lost is tried again at once (Redis may be back)."""
        if isinstance(exc, ResponseError) and not str(exc).startswith(_OUTAGES):
            return exc
        why = _why(exc)
        if why.startswith("could not connect"):
            self._backoff = min(BACKOFF_MAX, max(BACKOFF_MIN, self._backoff * 2))
            self.retry_at = time.monotonic() + self._backoff
            self._why = why
        return StateUnavailable(self.where, why)

    def recovered(self) -> None:
        self._backoff = 0.0
        self.retry_at = 0.0


def _retry(asyncio: bool) -> Any:
    """No retries: a command that failed is the caller's to retry (a 503 says so)."""
    if asyncio:
        return redis.asyncio.retry.Retry(NoBackoff(), 0)
    return redis.retry.Retry(NoBackoff(), 0)


def _why(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    if isinstance(exc, AuthenticationError) or "connecting to" in text or isinstance(exc, RedisClusterException):
        return f"could not connect: {text}"
    if isinstance(exc, RedisTimeoutError | TimeoutError):
        return f"no reply within {TIMEOUT:g} s" if isinstance(exc, TimeoutError) and not str(exc) else text
    if isinstance(exc, RedisConnectionError | OSError):
        return f"connection lost: {text}"
    return text


class _Engine(Protocol):
    _link: Link


E = TypeVar("E", bound=_Engine)
P = ParamSpec("P")
R = TypeVar("R")


def guarded(
    method: Callable[Concatenate[E, P], Coroutine[Any, Any, R]],
) -> Callable[Concatenate[E, P], Coroutine[Any, Any, R]]:
    """An engine method whose redis-py failures are StateUnavailable (see :meth:`Link.failed`)."""

    async def run(self: E, /, *args: P.args, **kwargs: P.kwargs) -> R:
        link = self._link
        if link.retry_at and time.monotonic() < link.retry_at:
            raise link.down()
        try:
            result = await method(self, *args, **kwargs)
        except (RedisError, RedisClusterException, OSError) as exc:
            raise link.failed(exc) from None
        if link.retry_at:
            link.recovered()
        return result

    functools.update_wrapper(run, method)
    return run
