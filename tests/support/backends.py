"""The backends a contract test runs against, behind one interface (see tests/contract/conftest.py).

A :class:`Backend` is one implementation of the OpenAI API on a real socket: ``script`` (a
server that answers only from scripted rules), ``replay`` (a server over cassettes recorded
from the reference server) or ``reference`` (the session's server and its model). A test
``prepare``\\ s each request it will send — the script adds a rule answering it, replay records
it — then talks to ``client`` (the official SDK) or ``http`` (raw httpx). Every response either
gives is noted in ``sources`` (its ``x-mockserver-source`` header), so a test can check that
the backend it asked for is the one that answered.
"""

from __future__ import annotations

import functools
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import openai

from mockserver.answers.scripted import Script
from mockserver.app import create_app
from mockserver.config import Settings
from tests.support.live import FROZEN, Live, serve_in_thread

Json = dict[str, Any]

# What the script answers: longer than any max_tokens of the contract tests, so they cut it
# as they cut the model's words.
SCRIPTED = (
    "Paris is the capital of France, a city on the Seine known for its museums, its cafés, "
    "the Eiffel Tower and the long avenues that lead to the Arc de Triomphe."
)
_SURFACES = {"/chat/completions": "chat", "/completions": "completions", "/responses": "responses"}


class Backend:
    """The reference server as it is; the other backends override :meth:`prepare` and :meth:`_serve`."""

    def __init__(self, name: str, stack: ExitStack, live: Live | None = None) -> None:
        self.name = name
        self.sources: list[str] = []  # x-mockserver-source of every response, in order
        self._stack = stack
        self._live = live

    def prepare(self, path: str, *bodies: Json) -> None:
        """Make sure the backend answers each of ``bodies`` POSTed to ``path`` (under /v1)."""

    def _serve(self) -> Live:
        raise AssertionError(f"the {self.name} backend has no server")

    @property
    def live(self) -> Live:
        if self._live is None:
            self._live = self._serve()
        return self._live

    @property
    def base_url(self) -> str:
        return self.live.base_url

    @functools.cached_property
    def http(self) -> httpx.Client:
        return self._stack.enter_context(httpx.Client(timeout=60, event_hooks={"response": [self._seen]}))

    @functools.cached_property
    def client(self) -> openai.OpenAI:
        sdk = openai.OpenAI(base_url=self.base_url, api_key="sk-test", max_retries=0, http_client=self.http)
        return self._stack.enter_context(sdk)

    def _seen(self, response: httpx.Response) -> None:
        self.sources.append(response.headers.get("x-mockserver-source", "(none)"))

    def __repr__(self) -> str:
        return f"<{self.name} backend>"


class ScriptBackend(Backend):
    """A server with ``backend="script"``: no rule, no answer (a 404)."""

    def __init__(self, stack: ExitStack, live: Live) -> None:
        super().__init__("script", stack, live)
        assert live.app is not None
        self.script: Script = live.app.state.ctx.script
        stack.callback(self.script.clear)

    def prepare(self, path: str, *bodies: Json) -> None:
        for body in bodies:
            self.script.add(endpoint=_SURFACES[path], model=body["model"], text=SCRIPTED)


class ReplayBackend(Backend):
    """A server over ``directory``'s cassettes and nothing else (a miss is a 404), which
    ``prepare`` fills by recording what ``upstream`` answers. It starts when first asked for,
    so every request must be prepared before the first is sent."""

    def __init__(self, stack: ExitStack, upstream: Live, directory: Path) -> None:
        super().__init__("replay", stack)
        self.upstream = upstream
        self.directory = directory

    def prepare(self, path: str, *bodies: Json) -> None:
        assert self._live is None, "prepare every request before sending the first: replay loads cassettes at start"
        settings = Settings(
            cassettes=str(self.directory), record_mode="all", upstream=self.upstream.url, frozen_time=FROZEN
        )
        with serve_in_thread(create_app(settings)) as recorder, httpx.Client(timeout=60) as http:
            for body in bodies:
                with http.stream("POST", recorder.base_url + path, json=body) as response:
                    response.read()  # a stream is recorded once it has ended
                    assert response.status_code == 200, response.text
                    assert response.headers["x-mockserver-source"] == "record"

    def _serve(self) -> Live:
        settings = Settings(cassettes=str(self.directory), frozen_time=FROZEN)
        return self._stack.enter_context(serve_in_thread(create_app(settings)))
