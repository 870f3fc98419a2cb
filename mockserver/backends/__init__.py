"""Backends by name, imported lazily: torch loads only if the reference backend is chosen.

Each entry is an import string of a factory ``(Settings) -> Backend``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mockserver.config import Settings
    from mockserver.spine.backend import Backend

__all__ = ["BACKENDS", "load_backend"]

BACKENDS: dict[str, str] = {
    "reference": "mockserver.backends.reference.backend:from_settings",
}


def load_backend(settings: Settings) -> Backend:
    """Build the backend ``settings.backend`` names (ValueError for an unknown name)."""
    target = BACKENDS.get(settings.backend)
    if target is None:
        raise ValueError(f"unknown backend {settings.backend!r}; choose from {sorted(BACKENDS)}")
    module, _, factory = target.partition(":")
    backend: Backend = getattr(importlib.import_module(module), factory)(settings)
    return backend
