"""Shared fixtures: one live server per session (real socket), official SDK clients."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

# httpcore2 before any test runs: pytester's in-process runs (tests/plugin) put sys.modules back
# as they found it afterwards, and httpx2 imports httpcore2 lazily, caching its exception classes
# on first use. Imported first inside such a run, httpcore2 would be dropped after it and imported
# anew, and httpx2 would no longer recognise the new module's errors: a reset connection would
# reach the SDK as a raw httpcore2.ReadError instead of openai.APIConnectionError.
import httpcore2  # noqa: F401
import openai
import pytest
import pytest_asyncio

from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

# No torch here: serving never imports it, and a session that never touches the model should not
# pay its ~2 s import. The few tests that run the torch module import it themselves (and set one
# intra-op thread where it matters: tests/unit/gpt/test_torch_definition.py).


@pytest.fixture(scope="session")
def live() -> Iterator[Live]:
    app = create_app(Settings(frozen_time=FROZEN))
    with serve_in_thread(app) as server:
        yield server


@pytest.fixture
def client(live: Live) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=live.base_url, api_key="sk-test", max_retries=0) as c:
        yield c


@pytest_asyncio.fixture
async def async_client(live: Live) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(base_url=live.base_url, api_key="sk-test", max_retries=0) as c:
        yield c
