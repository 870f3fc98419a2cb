"""What every handler needs, built once by ``create_app`` and stored on ``app.state.ctx``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from starlette.types import Scope

from mockserver.answers.script import Script
from mockserver.cassettes.order import ReplayOrder
from mockserver.clock import Clock
from mockserver.config import Settings
from mockserver.errors import NotFound
from mockserver.faults.journal import Journal
from mockserver.faults.ratelimit import RateLimiter
from mockserver.faults.rules import RuleBook
from mockserver.profiles import PROFILES, Profile
from mockserver.responses.lifecycle import Lifecycle
from mockserver.spine.engine import Engine

__all__ = ["PROFILE_KEY", "Chaos", "ServerContext", "model_not_found"]

PROFILE_KEY = "mockserver.profile"  # set in the ASGI scope by the path-prefix middleware


@dataclass(frozen=True, slots=True)
class Chaos:
    """The live, resettable state of a test run: fault rules, the journal, the rate limiter,
    and where replays are in their cassettes."""

    rules: RuleBook
    journal: Journal
    limiter: RateLimiter
    replay: ReplayOrder = field(default_factory=ReplayOrder)  # cassette replay positions

    def reset(self) -> None:
        self.rules.clear()
        self.journal.clear()
        self.limiter.reset()
        self.replay.clear()


@dataclass(frozen=True, slots=True)
class ServerContext:
    settings: Settings
    engine: Engine
    clock: Clock
    profile: Profile  # the server's own dialect, answering unprefixed paths
    chaos: Chaos
    vocab_size: int | None = None  # the backend's vocabulary, when it has one (logit_bias checks)
    responses: Lifecycle | None = None  # the Responses API's store and background runs
    script: Script = field(default_factory=Script)  # scripted answers (--rules, /__mockserver/answers)
    _windows: dict[str, dict[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        explicit = self.settings.model_windows()
        for name, profile in PROFILES.items():
            # --models replaces every profile's list; without it each lists its provider's ids.
            self._windows[name] = explicit or dict.fromkeys(profile.models, self.settings.context_window)

    def profile_of(self, scope: Scope) -> Profile:
        """The profile answering this request: its path prefix's, else the server's."""
        name = scope.get(PROFILE_KEY)
        return PROFILES[name] if name is not None else self.profile

    def models(self, profile: Profile) -> Mapping[str, int]:
        """Listed model id → context window, as ``profile`` lists them."""
        return self._windows[profile.name]

    def context_window(self, model: str, profile: Profile) -> int:
        """The model's context window; unlisted models get the default unless rejected."""
        window = self._windows[profile.name].get(model)
        if window is not None:
            return window
        if self.settings.reject_unknown_models:
            raise model_not_found(model)
        return self.settings.context_window


def model_not_found(model: str) -> NotFound:
    return NotFound(
        f"The model `{model}` does not exist or you do not have access to it.",
        param="model",
        code="model_not_found",
    )
