"""The server xdist workers share: ``mockserver serve`` in a child process, one per run and settings.

The first worker to need it starts it under a file lock in the run's shared temp directory and
writes its address there (``mockserver-<hash>.json``); the others read it. The controller stops
it at the end of the run (:func:`stop_shared`); should the controller die first, a watchdog in
the child (:func:`serve_watched`) stops it. The record mode is not a setting here: tests send
theirs per request, so tests with different record modes share one server.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx2

from mockserver.testing.transports import AsyncHop, Loop

if TYPE_CHECKING:
    from mockserver.config import Settings
    from mockserver.testing.failures import Failures, SessionLayer

__all__ = ["ProcessServer", "serve_watched", "shared_server", "stop_shared"]

_CHILDREN: list[subprocess.Popen[bytes]] = []  # kept referenced: they outlive the worker that started them


@dataclass
class ProcessServer:
    """A ``mockserver serve`` child process, shared by the xdist workers of one run."""

    url: str
    pid: int
    log: Path
    client_loop: Loop
    settings: Settings  # as this process reads them (the child read the same flags and environment)
    # Nothing to reach into: it lives in another process. (Failures come from its journal.)
    app: None = None
    asgi: SessionLayer | None = None
    failures: Failures | None = None

    def transport(self, inprocess: bool) -> httpx2.BaseTransport:
        return httpx2.HTTPTransport(verify=False, trust_env=False)

    def async_transport(self, inprocess: bool) -> AsyncHop:
        return AsyncHop(httpx2.AsyncHTTPTransport(verify=False, trust_env=False), self.client_loop)


def shared_server(
    directory: Path, settings: Mapping[str, Any], checked: Settings, watch: int, client_loop: Loop
) -> ProcessServer:
    """The run's server for ``settings``: found in ``directory``, else started (under a lock)."""
    name = hashlib.sha256(json.dumps(settings, sort_keys=True, default=str).encode()).hexdigest()[:12]
    info = directory / f"mockserver-{name}.json"
    with _flock(directory / f"mockserver-{name}.lock"):
        if info.exists():
            found = json.loads(info.read_text())
            if _healthy(found["url"]):
                return ProcessServer(found["url"], found["pid"], Path(found["log"]), client_loop, checked)
        log = directory / f"mockserver-{name}.log"
        if settings.get("cassettes"):
            # `serve` refuses a cassette directory that does not exist (a typo would otherwise miss
            # every request); the plugin's is where its tests' recordings go: made here.
            Path(str(settings["cassettes"])).mkdir(parents=True, exist_ok=True)
        url, pid = _start(settings, log, watch)
        info.write_text(json.dumps({"url": url, "pid": pid, "log": str(log), "settings": settings}, default=str))
        return ProcessServer(url, pid, log, client_loop, checked)


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    import fcntl

    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def _healthy(url: str) -> bool:
    try:
        return httpx2.get(url + "/health", timeout=1, verify=False, trust_env=False).status_code == 200
    except httpx2.HTTPError:
        return False


def _flags(settings: Mapping[str, Any]) -> list[str]:
    """``mockserver serve`` flags for explicit settings (the CLI derives them from Settings)."""
    out = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if isinstance(value, bool):
            out.append(flag if value else "--no-" + flag[2:])
        elif value is not None:
            out += [flag, ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)]
    return out


def _start(settings: Mapping[str, Any], log: Path, watch: int) -> tuple[str, int]:
    proc = None
    for _ in range(3):  # a port found free can be taken before the child binds it: try another
        port = _free_port()
        entry = "from mockserver.testing.shared import serve_watched; serve_watched()"
        command = [sys.executable, "-c", entry, str(watch)]
        command += ["serve", "--host", "127.0.0.1", "--port", str(port), *_flags(settings)]
        with log.open("ab") as out:
            proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        _CHILDREN.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while proc.poll() is None:
            if _healthy(url):
                return url, proc.pid
            if time.monotonic() > deadline:
                _terminate(proc.pid)
                break
            time.sleep(0.05)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
    code = proc.returncode if proc is not None else None
    raise RuntimeError(f"the shared mockserver did not start (exit {code}); its log {log} ends:\n{tail}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def serve_watched() -> None:
    """Entry of a shared server (``python -c``; argv ``-c WATCHED_PID serve FLAGS...``): the
    ``serve`` command, plus a watchdog that stops it once the watched process (the xdist
    controller) is gone — the safety net for a run that was killed before it could stop it."""
    watched = int(sys.argv[1])

    def watch() -> None:
        while True:
            time.sleep(0.5)
            try:
                os.kill(watched, 0)
            except ProcessLookupError:
                os.kill(os.getpid(), signal.SIGTERM)  # uvicorn shuts down as on Ctrl-C
                return
            except PermissionError:
                pass

    threading.Thread(target=watch, name="mockserver-watchdog", daemon=True).start()
    from mockserver.cli import main

    raise SystemExit(main(sys.argv[2:]))


def stop_shared(directory: Path) -> None:
    """Stop the shared servers recorded in ``directory`` (the controller, at the end of the run)."""
    for info in sorted(directory.glob("mockserver-*.json")):
        pid = int(json.loads(info.read_text())["pid"])
        _terminate(pid)
        info.unlink(missing_ok=True)


def _terminate(pid: int) -> None:
    mine = next((p for p in _CHILDREN if p.pid == pid), None)
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    if mine is not None:  # our own child: reap it
        try:
            mine.wait(timeout=10)
        except subprocess.TimeoutExpired:
            mine.kill()
            mine.wait()
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
