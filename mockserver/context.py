"""What every handler needs, built once by ``create_app`` and stored on ``app.state.ctx``.

Each part holds the few values it uses: nothing below ``create_app`` reads the settings.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from starlette.types import Scope

from mockserver.answers.reasoning import DEFAULT_PATTERNS
from mockserver.answers.scripted import Script
from mockserver.cassettes.order import ReplayOrder
from mockserver.clock import Clock
from mockserver.engine import Engine
from mockserver.faults.journal import Journal
from mockserver.faults.ratelimit import RateLimiter
from mockserver.faults.rules import RuleBook
from mockserver.http.auth import Admin
from mockserver.http.limits import Limits
from mockserver.lifecycle.runs import Lifecycle
from mockserver.profiles import PROFILES, Models, Profile
from mockserver.spine.backend import Chain, Model
from mockserver.state.base import State
from mockserver.state.memory import MemoryState
from mockserver.state.sync import Bridge, Refresh
from mockserver.wire.scope import PROFILE_KEY

__all__ = ["Chaos", "Conversation", "Memo", "Options", "ServerContext"]


K = TypeVar("K")
V = TypeVar("V")
Conversation = tuple[tuple[str, str], ...]  # (role, text) turns


@dataclass(frozen=True, slots=True)
class Options:
    """What codecs read besides the body and the profile."""

    strict: bool = False  # answer exactly as the profile's provider documents
    vocab_size: int | None = None  # the model's vocabulary (logit_bias, stop_token_ids)
    models: Models = field(default_factory=Models)
    reasoning_models: tuple[str, ...] = DEFAULT_PATTERNS
    limits: Limits = field(default_factory=Limits)  # choices and list sizes one request may ask for
    # The conversation a stored response continues (Responses' previous_response_id).
    history: Conversation = ()


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


class Memo(Generic[K, V]):
    """A bounded map, least recently used out first: what one request computes that the next
    identical one may take as it is (the generation handler's reading of a body). Used on the event loop only."""

    def __init__(self, size: int = 512) -> None:
        self.size = size
        self._kept: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        found = self._kept.get(key)
        if found is not None:
            self._kept.move_to_end(key)
        return found

    def put(self, key: K, value: V) -> None:
        self._kept[key] = value
        if len(self._kept) > self.size:
            self._kept.popitem(last=False)


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
    model: Model | None = None  # the reference model, when the chain has it (embeddings)
    limits: Limits = field(default_factory=Limits)  # what one request may ask (the edge's, the injector's)
    state: State = field(default_factory=MemoryState)  # every piece of mutable state (--state)
    bridge: Bridge = field(default_factory=Bridge)  # the state, reached from sync code too
    # A request's first look at a shared state (rule versions, the clock, the journal's id).
    refresh: Refresh | None = None
    # Bodies read before (raw bytes and what they are read as → what the handler made of
    # them): an identical request is not validated, hashed and decoded again.
    reads: Memo[Any, Any] = field(default_factory=Memo)

    def profile_of(self, scope: Scope) -> Profile:
        """The profile answering this request: its path prefix's, else the server's."""
        name = scope.get(PROFILE_KEY)
        return PROFILES[name] if name is not None else self.profile
