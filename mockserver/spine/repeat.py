"""What an answer promises about the same request asked again: the handler's half of the edge's
remembered answers (:mod:`mockserver.edge.repeats`).

The edge leaves a :class:`Promise` in the scope of a request it may remember (see
:data:`~mockserver.wire.scope.REPEAT_KEY`); the generation handler fills it in as the answer
is made — the versions of the backends it came through (the chain's, when the answer was
steady), what a repeat must still do, and, once it was made all at once, the second it was
created in and its token usage. The edge remembers the answer only when both halves came.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from mockserver.spine.backend import Ask
from mockserver.spine.events import Event, Usage

__all__ = ["Promise"]


@dataclass(slots=True, eq=False)
class Promise:
    versions: tuple[int, ...] | None = None  # the chain's versions the answer stands on (None: no promise)
    again: tuple[Callable[[], Awaitable[object]], ...] = ()  # what a repeat still does (a cassette's place)
    whole: bool = False  # the answer was made all at once
    created: int | None = None  # the second it was created in (None: its bytes name no time: a recording's)
    usage: tuple[Usage, ...] = ()  # its token counts, which a repeat counts in the metrics again

    def vouch(self, ask: Ask) -> None:
        """The chain answered ``ask``: what it promises (nothing, unless it was steady)."""
        self.versions = ask.versions
        self.again = tuple(ask.again)

    def made(self, created: int | None, events: Sequence[Event]) -> None:
        """The answer was made at once, of ``events``, ``created`` that second (None: a
        recording's bytes, the same in any second)."""
        self.whole = True
        self.created = created
        self.usage = tuple(e for e in events if isinstance(e, Usage))

    @property
    def kept(self) -> bool:
        """Did both halves come: a steady chain and an answer made at once?"""
        return self.versions is not None and self.whole
