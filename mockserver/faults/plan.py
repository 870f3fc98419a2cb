"""A request's faults between the edge that decides them and the code that applies them.

The injector (:mod:`mockserver.edge.injection`) decides the plan and leaves it in the ASGI
scope; whatever applies a fault notes it in the scope's *applied* list — the injector its
HTTP and transport faults, the generation handler those its answer really gets. Only applied
faults are reported (``x-mockserver-faults``, the journal, ``/metrics``): a stream fault on a
request that does not stream, a content fault on a replayed recording, or a latency fault on
an endpoint that generates nothing is not.
"""

from __future__ import annotations

from collections.abc import Iterable, MutableMapping, Sequence
from typing import Any

from mockserver.faults.catalogue import Fault
from mockserver.wire.scope import APPLIED_KEY, PLAN_KEY

__all__ = ["applicable", "note", "planned"]


def planned(scope: MutableMapping[str, Any]) -> tuple[Fault, ...]:
    found: tuple[Fault, ...] = scope.get(PLAN_KEY, ())
    return found


def note(scope: MutableMapping[str, Any], faults: Iterable[Fault]) -> None:
    """Report ``faults`` as applied to this request's response."""
    applied: list[Fault] | None = scope.get(APPLIED_KEY)
    if applied is not None:
        applied.extend(f for f in faults if f not in applied)


def applicable(plan: Sequence[Fault], *, generated: bool, stream: bool, paced: bool = True) -> list[Fault]:
    """The faults of ``plan`` an answer gets: latency when it runs under the engine (``paced``:
    a generation endpoint's), content faults when the answer is generated (not a recording),
    stream faults when it streams."""
    return [
        f
        for f in plan
        if (f.kind == "latency" and paced) or (f.kind == "content" and generated) or (f.kind == "stream" and stream)
    ]
