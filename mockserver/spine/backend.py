"""The only contract for answers: a request in, an async stream of events out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from mockserver.spine.events import Event
from mockserver.spine.request import GenerationRequest

__all__ = ["Backend"]


class Backend(Protocol):
    """The only backend contract: a request in, an async stream of events out.

    Errors about the request (bad token ids, context overflow) must be raised before the
    first event, so the engine can still answer them with an HTTP status.
    """

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]: ...

