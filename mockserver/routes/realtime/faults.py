"""Faults on a Realtime socket: asked for by the handshake's ``x-mockserver-fault`` header, and
given by ``--faults`` and the fault rules whose ``path`` matches ``/v1/realtime`` (each response
counts as one call to it: ``nth`` and ``times`` count responses). A response reads the fleet's
rules as they stand when it starts: on a shared state it takes the same first look as an HTTP
request at the edge (:class:`~mockserver.state.sync.Refresh`), so a rule another process added
reaches a socket here without this process serving an HTTP request first.

The grammar is the HTTP one (:mod:`mockserver.faults.catalogue`); on a socket each applies per
response, counted in server events from ``response.created``:

* ``stream.cut_after=N`` — the socket closes normally (1000) after N events: a dropped session;
* ``stream.reset_after=N`` — the socket closes with 1011 (server error) after N events;
* ``stream.error_at=N`` — event N is an ``error`` event (``server_error``) and the response fails;
* ``http.429`` — the response is refused: an ``error`` event (``rate_limit_exceeded``), then
  ``rate_limits.updated`` with nothing remaining;
* ``latency.*`` and ``content.*`` — the engine paces and bends the answer, as on every wire.

``@p=…`` draws from a generator seeded by the session and the response's number: the same
session asks the same faults on every run. Other faults do not apply to a socket.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mockserver.faults.catalogue import Fault, parse, request_rng
from mockserver.faults.rules import RequestInfo, RuleBook
from mockserver.state.sync import Refresh

__all__ = ["PATH", "SocketFaults", "read", "ruled"]

PATH = "/v1/realtime"  # what fault rules match a socket's responses by

SOCKET = frozenset({"stream.cut_after", "stream.reset_after", "stream.error_at", "http.429"})


def read(spec: str | None) -> tuple[Fault, ...]:
    """The faults a handshake asks for; :class:`FaultError` for a spec that does not parse."""
    return parse(spec) if spec else ()


async def ruled(
    rules: RuleBook, refresh: Refresh | None, seed: int, info: RequestInfo, session_id: str, response: int
) -> tuple[Fault, ...]:
    """The faults ``--faults`` and the matching rules give one response (those a socket can
    suffer), drawn from a generator seeded by the session and the response's number; the rules
    are the fleet's current ones (``refresh``: the state's first look, a no-op with ``memory``)."""
    if refresh is not None:
        await refresh.sync()  # before ``active``: the rule another process added may be the first
    if not rules.active:
        return ()
    rng = request_rng(seed, "realtime-rules", session_id, response)
    found = await rules.decide(info, (), rng)
    return tuple(f for f in found if f.name in SOCKET or f.kind in ("latency", "content"))


@dataclass(frozen=True, slots=True)
class SocketFaults:
    """What one response suffers: the faults drawn for it."""

    faults: tuple[Fault, ...]

    @classmethod
    def drawn(cls, faults: Sequence[Fault], seed: int, session: str, response: int) -> SocketFaults:
        rng = request_rng(seed, "realtime", session, response)
        return cls(tuple(f for f in faults if f.probability >= 1.0 or rng.random() < f.probability))

    def _n(self, name: str) -> int | None:
        found = next((f for f in self.faults if f.name == name), None)
        return None if found is None else max(1, int(found["n"]))

    @property
    def engine(self) -> tuple[Fault, ...]:
        """The faults the engine applies (latency, content)."""
        return tuple(f for f in self.faults if f.kind in ("latency", "content"))

    @property
    def refused(self) -> bool:
        return any(f.name == "http.429" for f in self.faults)

    @property
    def error_at(self) -> int | None:
        return self._n("stream.error_at")

    def closes_after(self) -> tuple[int, int] | None:
        """After how many events the socket closes, and with which code."""
        cut, reset = self._n("stream.cut_after"), self._n("stream.reset_after")
        if cut is not None:
            return cut, 1000
        if reset is not None:
            return reset, 1011
        return None
