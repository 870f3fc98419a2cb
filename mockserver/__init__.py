"""mockserver: an OpenAI-compatible test double for LLM inference APIs.

Public names are loaded on first use, so ``import mockserver`` stays cheap (no Starlette,
no pydantic, never torch) for tools that only need the package to exist.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = ["Settings", "__version__", "create_app"]

_LAZY = {"create_app": "mockserver.app", "Settings": "mockserver.config"}

if TYPE_CHECKING:
    from mockserver.app import create_app
    from mockserver.config import Settings


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'mockserver' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
