"""What every handler needs, built once by ``create_app`` and stored on ``app.state.ctx``."""

from __future__ import annotations

from dataclasses import dataclass

from mockserver.clock import Clock
from mockserver.config import Settings
from mockserver.engine import Engine
from mockserver.errors import NotFound
from mockserver.profiles import Profile

__all__ = ["ServerContext", "model_not_found"]


@dataclass(frozen=True, slots=True)
class ServerContext:
    settings: Settings
    engine: Engine
    clock: Clock
    profile: Profile
    windows: dict[str, int]  # listed model id → context window

    def context_window(self, model: str) -> int:
        """The model's context window; unlisted models get the default unless rejected."""
        window = self.windows.get(model)
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
