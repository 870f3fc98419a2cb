"""The pytest plugin's servers: one per distinct settings, made when a test first needs one.

A server's settings are what cannot vary per request: the cassette directory, the upstream,
and whatever else a test gives explicitly (``settings=``). The record mode, the cassette and
the session travel in each request's headers, so tests differing only in those share a server.

* :class:`LocalServer`: the app on an event loop of its own, in a daemon thread. A uvicorn
  socket opens on that loop when a test first needs a URL; in-process clients skip it, through
  an ``httpx2.ASGITransport`` run on that loop. :class:`~mockserver.testing.failures.SessionLayer`
  in front of the app keeps each test's failures.
* :class:`~mockserver.testing.shared.ProcessServer`: with xdist, one child process per settings,
  shared by the workers of the run (in-process tests still get a local app).

Local apps share one backend per model configuration, whose model loads on first use.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2

from mockserver.spine.backend import ModelBase
from mockserver.testing.failures import Failures, SessionLayer
from mockserver.testing.shared import ProcessServer, shared_server
from mockserver.testing.transports import AsyncHop, Loop, SyncHop

if TYPE_CHECKING:
    import uvicorn

    from mockserver.config import Settings
    from mockserver.spine.backend import Model
    from mockserver.spine.events import Event
    from mockserver.spine.request import GenerationRequest

__all__ = ["LazyBackend", "LocalServer", "Server", "Servers"]


class LazyBackend(ModelBase):
    """One model for every local app of the session. Its ``warm_up`` and ``close`` are the
    base's, which do nothing: the model loads on the first generation (never, for a session
    that only replays), and closes once, with the session."""

    def __init__(self, backend: Model) -> None:
        self.backend = backend
        self.vocab_size = backend.vocab_size

    def generate(self, request: GenerationRequest) -> AsyncIterator[Event]:
        return self.backend.generate(request)

    def __getattr__(self, name: str) -> Any:  # the model's counters (steps), as tests read them
        return getattr(self.backend, name)


class LocalServer:
    """The app in this process, on its own loop; ``url`` opens a socket on first use."""

    log: Path | None = None  # its log is the test run's

    def __init__(self, settings: Settings, backend: LazyBackend | None) -> None:
        from mockserver.app import create_app

        self.settings = settings
        self.app = create_app(settings, backend=backend)
        self.failures = Failures()
        self.asgi = SessionLayer(self.app, self.failures)
        self.loop = Loop("mockserver")
        self._lifespan = self.app.router.lifespan_context(self.app)
        self.loop.run(self._lifespan.__aenter__(), timeout=60)
        self._uvicorn: uvicorn.Server | None = None
        self._serving: concurrent.futures.Future[None] | None = None
        self._url: str | None = None
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        with self._lock:
            if self._url is None:
                self._url = self._listen()
            return self._url

    def _listen(self) -> str:
        import uvicorn

        from mockserver.http.server import uvicorn_config

        # The lifespan ran already; log_config=None: the test process's logging stays as the
        # test runner set it up.
        config = uvicorn_config(self.asgi, lifespan="off", log_config=None, shutdown_timeout=2)
        self._uvicorn = server = uvicorn.Server(config)
        self._serving = asyncio.run_coroutine_threadsafe(server.serve(), self.loop.loop)
        deadline = time.monotonic() + 30
        while not server.started:
            if self._serving.done() or time.monotonic() > deadline:
                raise RuntimeError("mockserver's test server did not start listening")
            time.sleep(0.005)
        port: int = server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def transport(self, inprocess: bool) -> httpx2.BaseTransport:
        if inprocess:  # ASGI is async only: the sync client's requests hop to the app's loop
            return SyncHop(httpx2.ASGITransport(app=self.asgi, raise_app_exceptions=False), self.loop)
        return httpx2.HTTPTransport(verify=False, trust_env=False)

    def async_transport(self, inprocess: bool) -> AsyncHop:
        if inprocess:
            return AsyncHop(httpx2.ASGITransport(app=self.asgi, raise_app_exceptions=False), self.loop)
        return AsyncHop(httpx2.AsyncHTTPTransport(verify=False, trust_env=False), self.loop)

    def close(self) -> None:
        try:
            if self._uvicorn is not None and self._serving is not None:
                self._uvicorn.should_exit = True
                self._serving.result(timeout=10)
            self.loop.run(self._lifespan.__aexit__(None, None, None), timeout=10)
        finally:
            self.loop.close()


Server = LocalServer | ProcessServer


class Servers:
    """The test session's servers: one per distinct settings, made on first use. ``shared``
    (a directory every xdist worker of the run sees) makes socket servers shared processes;
    in-process servers are always this process's own."""

    def __init__(self, shared: Path | None = None, watch: int | None = None) -> None:
        self._shared = shared if sys.platform != "win32" else None  # no flock there: one server per worker
        self._watch = watch if watch is not None else os.getpid()
        self._local: dict[str, LocalServer] = {}
        self._process: dict[str, ProcessServer] = {}
        self._backends: dict[str, LazyBackend] = {}
        self._client_loop: Loop | None = None

    def get(self, settings: Mapping[str, Any], inprocess: bool = False) -> Server:
        """The server for ``settings`` (explicit :class:`Settings` fields; the environment's
        ``MOCKSERVER_*`` variables apply too, as they do to ``mockserver serve``)."""
        from mockserver.config import Settings

        checked = Settings(**settings)  # a mistake fails the test's set-up here, named by pydantic
        key = json.dumps(settings, sort_keys=True, default=str)
        if self._shared is not None and not inprocess:
            found = self._process.get(key)
            if found is None:
                if self._client_loop is None:
                    self._client_loop = Loop("mockserver-clients")
                found = shared_server(self._shared, settings, checked, self._watch, self._client_loop)
                self._process[key] = found
            return found
        local = self._local.get(key)
        if local is None:
            local = self._local[key] = LocalServer(checked, self._backend(checked))
        return local

    def _backend(self, settings: Settings) -> LazyBackend | None:
        """The model the session's apps share, per model configuration (loaded on first use);
        None without torch (the apps' chains then leave the model out)."""
        from mockserver.backends import model_installed

        if not model_installed():
            return None
        from mockserver.backends.reference.backend import ReferenceBackend
        from mockserver.media.vectors import MAX_INPUT_TOKENS

        windows = settings.model_windows()
        longest = max([settings.context_window, MAX_INPUT_TOKENS, *windows.values()])
        key = json.dumps([settings.model_threads, longest, settings.max_batch])
        if key not in self._backends:
            self._backends[key] = LazyBackend(
                ReferenceBackend(settings.model_threads, max_positions=longest, max_batch=settings.max_batch)
            )
        return self._backends[key]

    def close(self) -> None:
        for local in self._local.values():
            local.close()
        for shared in self._backends.values():
            shared.backend.close()
        if self._client_loop is not None:
            self._client_loop.close()
        self._local.clear()
        self._backends.clear()
