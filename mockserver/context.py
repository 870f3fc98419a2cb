"""What every handler needs, built once by ``create_app`` and stored on ``app.state.ctx``.

Each part holds the few values it uses: nothing below ``create_app`` reads the settings.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from starlette.types import Scope

from mockserver.answers.script import Script
from mockserver.cassettes.order import ReplayOrder
from mockserver.clock import Clock
from mockserver.faults.journal import Journal
from mockserver.faults.ratelimit import RateLimiter
from mockserver.faults.rules import RuleBook
from mockserver.http.limits import Limits
from mockserver.profiles import PROFILES, Profile
from mockserver.responses.lifecycle import Lifecycle
from mockserver.routes.codec import Options
from mockserver.spine.backend import Backend, Chain
from mockserver.spine.engine import Engine
from mockserver.state.base import State
from mockserver.state.memory import MemoryState
from mockserver.state.sync import Bridge, Refresh

__all__ = ["NOTE_KEY", "PROFILE_KEY", "Admin", "Chaos", "ServerContext"]

PROFILE_KEY = "mockserver.profile"  # set in the ASGI scope by the path-prefix middleware
# A callable ``(what) -> None`` a test harness leaves in the scope to hear of failures a test
# should see (a cassette miss): the error handler calls it, so nobody reads the answer's body.
NOTE_KEY = "mockserver.note"


@dataclass(frozen=True, slots=True)
class Chaos:
    """The live, resettable state of a test run: fault rules, the journal, the rate limiter,
    and where replays are in their cassettes."""

    rules: RuleBook
    journal: Journal
    limiter: RateLimiter
    replay: ReplayOrder = field(default_factory=ReplayOrder)  # cassette replay positions

    def reset(self) -> None:
        """:meth:`areset` of everything, from sync code (a test's thread)."""
        self.rules.bridge.call(self.areset())

    async def areset(self, session: str | None = None) -> None:
        """Everything (``session=None``: the rate-limit buckets too, which are per key, not per
        session), or one session's rules, journal and replay places — across the fleet on a
        shared state."""
        await self.rules.aclear(session)
        await self.journal.aclear(session)
        await self.replay.aclear(session)
        if session is None:
            await self.limiter.areset()


@dataclass(frozen=True, slots=True)
class Admin:
    """Who may use the admin API: loopback clients only unless ``remote``; a bearer ``token``."""

    token: str = ""
    remote: bool = False


@dataclass(frozen=True, slots=True)
class ServerContext:
    engine: Engine
    chain: Chain  # the backends, in the order they are tried (--backend)
    clock: Clock
    profile: Profile  # the server's own dialect, answering unprefixed paths
    chaos: Chaos
    responses: Lifecycle  # the Responses API's store and background runs (and stored chat completions)
    options: Options = field(default_factory=Options)  # what the codecs read
    seed: int = 0  # the global seed, mixed into every request that sends none
    script: Script = field(default_factory=Script)  # scripted answers (--rules, /__mockserver/answers)
    admin: Admin = field(default_factory=Admin)
    model: Backend | None = None  # the reference model, when the chain has it (embeddings)
    limits: Limits = field(default_factory=Limits)  # what one request may ask (the edge's, the injector's)
    state: State = field(default_factory=MemoryState)  # every piece of mutable state (--state)
    bridge: Bridge = field(default_factory=Bridge)  # the state, reached from sync code too
    # A request's first look at a shared state (rule versions, the clock, the journal's id).
    refresh: Refresh | None = None

    def profile_of(self, scope: Scope) -> Profile:
        """The profile answering this request: its path prefix's, else the server's."""
        name = scope.get(PROFILE_KEY)
        return PROFILES[name] if name is not None else self.profile
