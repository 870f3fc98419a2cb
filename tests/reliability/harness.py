"""Pieces the reliability tests share: servers whose process or event loop can be looked into,
SSE parsing, and the checks that hold a stream against its non-stream twin."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette

from mockserver.routes.responses.codec import assistant_text
from tests.support.live import ROOT, Live, free_port, stop, url_of, uvicorn_in_thread, wait_healthy

Json = dict[str, Any]
FROZEN = "1700000000"


# ---- servers ------------------------------------------------------------------------------


@dataclass
class Child:
    """A ``python -m mockserver serve`` child: its URL, pid and log file."""

    url: str
    proc: subprocess.Popen[bytes]
    log: Path

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)


@contextmanager
def child_server(args: Sequence[str], log: Path, env: dict[str, str] | None = None) -> Iterator[Child]:
    """A subprocess server on a free 127.0.0.1 port (its output to ``log``: a pipe nobody reads
    would fill up and block it). Killed in the ``finally``, however the test ends."""
    port = free_port()
    command = [sys.executable, "-m", "mockserver", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    with log.open("ab") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **(env or {})}, stdout=out, stderr=out)
    child = Child(f"http://127.0.0.1:{port}", proc, log)
    try:
        try:
            wait_healthy(child.url, proc)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}\n{child.output()[-3000:]}") from None
        yield child
    finally:
        stop(proc)


@dataclass
class InThread:
    """A uvicorn server in a thread of this process, so its event loop can be looked into."""

    live: Live
    server: uvicorn.Server
    loop: asyncio.AbstractEventLoop

    def call(self, fn: Callable[[], Any], timeout: float = 10.0) -> Any:
        """Run ``fn`` on the server's loop (from a coroutine there) and return its result."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def wait(self, coroutine: Coroutine[Any, Any, Any], timeout: float = 30.0) -> Any:
        """Run ``coroutine`` on the server's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def tasks(self) -> list[asyncio.Task[Any]]:
        """The server loop's tasks, but the one asking."""
        return self.call(lambda: [t for t in asyncio.all_tasks() if t is not asyncio.current_task()])  # type: ignore[no-any-return]


@contextmanager
def thread_server(app: Starlette) -> Iterator[InThread]:
    with uvicorn_in_thread(app) as server:
        yield InThread(Live(url_of(server), app), server, server.servers[0].get_loop())


@contextmanager
def errors_logged() -> Iterator[list[logging.LogRecord]]:
    """ERROR records the server logs meanwhile (an unhandled exception, a failed stream):
    uvicorn's own loggers do not propagate to the root, so pytest's caplog misses them."""
    found: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            found.append(record)

    handler = Keep(logging.ERROR)
    loggers = [logging.getLogger(name) for name in ("mockserver", "uvicorn.error")]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield found
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


def described(records: list[logging.LogRecord]) -> list[str]:
    return [f"{r.name}: {r.getMessage()} {r.exc_info[1]!r}" if r.exc_info else r.getMessage() for r in records[:5]]


def proc_status(pid: int, key: str) -> int:
    """A number from /proc/<pid>/status: ``VmRSS`` (kB), ``Threads``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name == key:
            return int(value.split()[0])
    raise KeyError(key)


def p50(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def latencies(url: str, body: Json, count: int, timeout: float = 30.0) -> list[float]:
    """Wall-clock seconds of ``count`` sequential non-stream requests."""
    found = []
    with httpx.Client(timeout=timeout) as client:
        for _ in range(count):
            start = time.perf_counter()
            response = client.post(url, json=body)
            found.append(time.perf_counter() - start)
            assert response.status_code == 200, response.text[:500]
    return found


# ---- SSE ----------------------------------------------------------------------------------


@dataclass
class Frame:
    event: str | None
    data: str


def frames(raw: bytes) -> list[Frame]:
    """The SSE frames of a whole body (comments dropped)."""
    found = []
    for block in raw.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        event, data = None, []
        for line in block.split("\n"):
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data or event:
            found.append(Frame(event, "\n".join(data)))
    return found


# ---- holding a stream against its twin ----------------------------------------------------


@dataclass
class Checked:
    """What one stream check looked at."""

    events: int = 0


@dataclass
class _Choice:
    text: list[str] = field(default_factory=list)
    finish: str | None = None
    tokens: list[str] = field(default_factory=list)


def check_chat_stream(raw: bytes, twin: Json) -> Checked:
    """A chat stream: one id throughout, each choice's deltas in order give the twin's text (and
    its logprob tokens, one by one), one finish_reason, then the usage chunk, then [DONE]."""
    parsed = frames(raw)
    assert parsed and parsed[-1].data == "[DONE]", f"no [DONE] at the end: {raw[-300:]!r}"
    chunks = [json.loads(f.data) for f in parsed[:-1]]
    assert all("error" not in c for c in chunks), chunks
    choices: dict[int, _Choice] = {}
    usage = None
    for i, chunk in enumerate(chunks):
        assert chunk["id"] == twin["id"] and chunk["object"] == "chat.completion.chunk"
        assert chunk["created"] == twin["created"] and chunk["model"] == twin["model"]
        if chunk.get("usage") is not None:
            assert i == len(chunks) - 1 and not chunk["choices"], "usage comes last, alone"
            usage = chunk["usage"]
        for c in chunk["choices"]:
            seen = choices.setdefault(c["index"], _Choice())
            assert seen.finish is None, "an event after the choice's finish_reason"
            seen.text.append(c["delta"].get("content") or "")
            if c.get("logprobs") and c["logprobs"].get("content"):
                seen.tokens += [t["token"] for t in c["logprobs"]["content"]]
            seen.finish = c.get("finish_reason")
    assert sorted(choices) == [c["index"] for c in twin["choices"]]
    for c in twin["choices"]:
        seen = choices[c["index"]]
        assert "".join(seen.text) == (c["message"]["content"] or ""), "stream text differs from the twin"
        assert seen.finish == c["finish_reason"]
        if c.get("logprobs"):
            assert seen.tokens == [t["token"] for t in c["logprobs"]["content"]], "tokens lost or reordered"
    assert usage == twin["usage"]
    return Checked(len(parsed))


def check_completion_stream(raw: bytes, twin: Json) -> Checked:
    parsed = frames(raw)
    assert parsed and parsed[-1].data == "[DONE]", f"no [DONE] at the end: {raw[-300:]!r}"
    chunks = [json.loads(f.data) for f in parsed[:-1]]
    assert all("error" not in c for c in chunks), chunks
    choices: dict[int, _Choice] = {}
    usage = None
    for i, chunk in enumerate(chunks):
        assert chunk["id"] == twin["id"] and chunk["created"] == twin["created"]
        if chunk.get("usage") is not None:
            assert i == len(chunks) - 1 and not chunk["choices"], "usage comes last, alone"
            usage = chunk["usage"]
        for c in chunk["choices"]:
            seen = choices.setdefault(c["index"], _Choice())
            assert seen.finish is None, "an event after the choice's finish_reason"
            seen.text.append(c["text"])
            if c.get("logprobs"):
                seen.tokens += c["logprobs"]["tokens"]
            seen.finish = c.get("finish_reason")
    assert sorted(choices) == [c["index"] for c in twin["choices"]]
    for c in twin["choices"]:
        seen = choices[c["index"]]
        assert "".join(seen.text) == c["text"], "stream text differs from the twin"
        assert seen.finish == c["finish_reason"]
        if c.get("logprobs"):
            assert seen.tokens == c["logprobs"]["tokens"], "tokens lost or reordered"
    assert usage == twin["usage"]
    return Checked(len(parsed))


def check_responses_stream(raw: bytes, twin: Json) -> Checked:
    """A Responses stream: sequence numbers 0, 1, 2, … with none missing, the text deltas
    give the twin's text, and the closing event carries the twin itself."""
    parsed = frames(raw)
    events = [json.loads(f.data) for f in parsed]
    for f, e in zip(parsed, events, strict=True):
        assert f.event == e["type"], "the event: line names the data's type"
    assert [e["sequence_number"] for e in events] == list(range(len(events))), "events lost or reordered"
    assert all(e["type"] != "error" for e in events), events[-1]
    deltas = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    assert deltas == assistant_text(twin), "stream text differs from the twin"
    closing = events[-1]
    assert closing["type"] in ("response.completed", "response.incomplete"), closing["type"]
    final = closing["response"]
    assert final["status"] == twin["status"] and final["usage"] == twin["usage"]
    assert final["id"] == twin["id"] and final.get("incomplete_details") == twin.get("incomplete_details")
    assert assistant_text(final) == assistant_text(twin)
    return Checked(len(parsed))


CHECKS: dict[str, Callable[[bytes, Json], Checked]] = {
    "/chat/completions": check_chat_stream,
    "/completions": check_completion_stream,
    "/responses": check_responses_stream,
}


def check_twin(path: str, body: Json, twin: Json) -> None:
    """A non-stream answer under load equals the one given on a quiet server."""
    assert body == twin, f"{path}: the answer under load differs from the quiet one"


def error_envelope(payload: Any) -> Json:
    """``{"error": {"message": str, "type": str, ...}}``, or an AssertionError saying why not."""
    assert isinstance(payload, dict) and isinstance(payload.get("error"), dict), f"not an error envelope: {payload!r}"
    error = payload["error"]
    assert isinstance(error.get("message"), str) and error["message"], f"no message: {payload!r}"
    assert isinstance(error.get("type"), str) and error["type"], f"no type: {payload!r}"
    return error


# ---- /health while a client abuses the server ----------------------------------------------


class HealthProbe:
    """``/health`` latencies, sampled from a thread on one keep-alive connection while the
    block runs. A figure to print (``p99_ms``), never a timed assertion; what is asserted is
    that every probe was answered 200."""

    def __init__(self, url: str, pause: float = 0.005) -> None:
        self.url = url.rstrip("/") + "/health"
        self.pause = pause
        self.samples: list[float] = []
        self.failures: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="health-probe", daemon=True)

    def _run(self) -> None:
        with httpx.Client(timeout=120) as client:
            while not self._stop.is_set():
                start = time.perf_counter()
                try:
                    status = client.get(self.url).status_code
                except httpx.HTTPError as exc:
                    self.failures.append(type(exc).__name__)
                    continue
                self.samples.append(time.perf_counter() - start)
                if status != 200:
                    self.failures.append(str(status))
                self._stop.wait(self.pause)

    def __enter__(self) -> HealthProbe:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=150)

    def rounds(self, least: int, samples: int = 50, most: int = 2000) -> Iterator[int]:
        """0, 1, 2, …: at least ``least`` rounds of abuse, and on until the probe has
        ``samples`` samples (so its p99 means something), never more than ``most``."""
        for i in range(most):
            if i >= least and len(self.samples) >= samples:
                return
            yield i

    def figures(self) -> dict[str, float | int]:
        """p50 / p99 / max in milliseconds, and how many samples."""
        if not self.samples:
            return {"n": 0}
        ordered = sorted(self.samples)
        p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
        return {
            "n": len(ordered),
            "p50_ms": round(statistics.median(ordered) * 1000, 1),
            "p99_ms": round(p99 * 1000, 1),
            "max_ms": round(ordered[-1] * 1000, 1),
        }

    def check(self) -> None:
        """Every probe answered 200 (however slowly)."""
        assert self.samples, "/health was never answered during the abuse"
        assert not self.failures, f"/health failed during the abuse: {self.failures[:5]}"
