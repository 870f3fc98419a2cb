"""Backends by name, imported lazily, and the chain ``--backend`` lists.

Each entry of :data:`BACKENDS` is the import string of a factory ``(Parts) -> Backend``: the
model's weights are read only where a request reaches the reference model (or a scripted answer
asks the model for logprobs), vcrpy and httpx only where cassettes are used. Serving never
imports torch (it defines and trains the model, outside the plain install).

The chain a server runs (:func:`chain_names`): ``--backend`` when given; otherwise ``script``,
then — with ``--cassettes`` — ``replay,record``, then ``reference`` unless a cassette miss is to be
an error (``--on-miss error``, the default with cassettes).

The reference model is in the plain install: NumPy and safetensors, dependencies of the package,
read and compute it. Only a broken install lacks them (:func:`model_installed`); there the
default chain leaves the model out, ``--backend reference`` is a start-up error, and a request that
needs it (logprobs of a scripted answer, embeddings) is a 400 saying what to install
(:class:`ModelNotInstalled`).
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mockserver.errors import InvalidRequest
from mockserver.spine.backend import Chain

if TYPE_CHECKING:
    from mockserver.answers.scripted import Script
    from mockserver.cassettes.library import CassetteOptions, Library
    from mockserver.cassettes.order import ReplayOrder
    from mockserver.spine.backend import Backend, Model

__all__ = [
    "BACKENDS",
    "MODEL_EXTRA",
    "ModelNotInstalled",
    "ModelOptions",
    "Parts",
    "build_chain",
    "chain_names",
    "check_names",
    "model_installed",
]

BACKENDS: dict[str, str] = {
    "script": "mockserver.backends.script:from_parts",
    "replay": "mockserver.backends.replay:from_parts",
    "record": "mockserver.backends.record:from_parts",
    "reference": "mockserver.backends.reference.backend:from_parts",
}
NEEDS_CASSETTES = frozenset({"replay", "record"})
# How to bring the reference model back: what a broken install lacks (the package depends on both).
MODEL_EXTRA = "pip install 'numpy>=1.26' 'safetensors>=0.4'"


@functools.cache
def model_installed() -> bool:
    """Are NumPy and safetensors importable (so the reference model can be)? Looked up, not
    imported: only a request that reaches the model should pay for loading it."""
    return all(importlib.util.find_spec(name) is not None for name in ("numpy", "safetensors"))


class ModelNotInstalled(InvalidRequest):
    """A request that needs the reference model on a server without it (a broken install)."""

    def __init__(self, what: str, param: str | None = None) -> None:
        super().__init__(
            f"{what} needs the reference model, which is not installed on this server: {MODEL_EXTRA} "
            "(dependencies of mockserver: reinstall it; see the README).",
            param=param,
            code="model_not_installed",
        )


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """What the reference model is built with."""

    threads: int = 2
    max_positions: int = 8192  # the longest sequence it must read (rotary table size)
    max_batch: int = 64  # rows in one batched decoding step (0: every request alone)
    kernel: str = "auto"  # what computes it (mockserver.gpt.kernels.load)


@dataclass
class Parts:
    """What the backends of a chain are built from: explicit values, never the settings.

    :meth:`reference` is the one reference backend of an app, made on first use: the chain's
    ``reference`` and the scorer of scripted answers asking for logprobs share it. ``model``
    injects one ready-made (the pytest plugin shares a model between apps; tests inject fakes).
    """

    script: Script
    replay_order: ReplayOrder
    model_options: ModelOptions = field(default_factory=ModelOptions)
    cassettes: CassetteOptions | None = None
    model: Model | None = None
    _library: Library | None = None

    def library(self) -> Library:
        """The cassette directory, loaded once for replay and record together."""
        if self._library is None:
            from mockserver.cassettes.library import Library

            if self.cassettes is None:
                raise ValueError("replay and record need a cassette directory (--cassettes DIR)")
            self._library = Library(self.cassettes)
        return self._library

    def reference(self) -> Model:
        """The reference backend; :class:`ModelNotInstalled` without NumPy and safetensors."""
        if self.model is None:
            if not model_installed():
                raise ModelNotInstalled("This answer")
            from mockserver.backends.reference.backend import ReferenceBackend

            options = self.model_options
            self.model = ReferenceBackend(
                options.threads, max_positions=options.max_positions, max_batch=options.max_batch, kernel=options.kernel
            )
        return self.model


def chain_names(backend: str, cassettes: bool, on_miss: str) -> tuple[str, ...]:
    """The chain to run: ``backend`` (comma-separated) when given, else the default."""
    if backend.strip():
        return tuple(name.strip() for name in backend.split(",") if name.strip())
    model = ("reference",) if model_installed() else ()  # a broken install: the default leaves it out
    if not cassettes:
        return ("script", *model)
    # --on-miss reference asks for the model: without it, check_names says so.
    return ("script", "replay", "record") + (("reference",) if on_miss == "reference" else ())


def check_names(names: tuple[str, ...], cassettes: bool) -> None:
    """ValueError, in one line, for a chain that cannot run."""
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise ValueError(f"unknown backend {unknown[0]!r}; choose from {', '.join(BACKENDS)}" if unknown else "empty")
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"backend {repeated[0]!r} is listed twice")
    needing = [n for n in names if n in NEEDS_CASSETTES]
    if needing and not cassettes:
        raise ValueError(f"backend {needing[0]!r} needs a cassette directory (--cassettes DIR)")
    if "reference" in names and not model_installed():
        raise ValueError(f"backend 'reference' needs the reference model, which is not installed: {MODEL_EXTRA}")


def build_chain(names: tuple[str, ...], parts: Parts) -> Chain:
    """The chain of backends ``names``, each built by its registered factory."""
    links = []
    for name in names:
        module, _, factory = BACKENDS[name].partition(":")
        make: Callable[[Parts], Backend] = getattr(importlib.import_module(module), factory)
        links.append((name, make(parts)))
    absent = "reference" not in names and not model_installed()
    missing = f" The reference model is not installed: {MODEL_EXTRA}." if absent else ""
    return Chain(links, missing)
