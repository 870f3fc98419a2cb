"""The ``backend`` fixture: one parametrized fixture runs the same contract tests against every
implementation — scripted answers, a replay of recordings, and the reference model — so what
the SDK and the wire spec ask of an answer is asked of each."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.backends import Backend, ReplayBackend, ScriptBackend
from tests.support.live import FROZEN, Live, serve_in_thread

BACKENDS = ("script", "replay", "reference")


@pytest.fixture(scope="session")
def script_live() -> Iterator[Live]:
    """A server that answers only from its script (``--backend script``)."""
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN, backend="script"))) as server:
        yield server


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, live: Live, tmp_path: Path) -> Iterator[Backend]:
    with ExitStack() as stack:
        if request.param == "script":
            yield ScriptBackend(stack, request.getfixturevalue("script_live"))
        elif request.param == "replay":
            yield ReplayBackend(stack, live, tmp_path / "cassettes")
        else:
            yield Backend("reference", stack, live)
