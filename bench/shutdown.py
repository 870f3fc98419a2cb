"""How long ``mockserver serve`` takes to exit after SIGINT or SIGTERM.

Three servers, each started fresh per round the way users start them (``python -m mockserver
serve``): idle with ``--backend script`` (no model), idle with the default chain (the model
loaded, one answer served first so nothing is still warming up), and busy — the default
chain with streams in flight when the signal arrives, at the default ``--shutdown-timeout``.
The figure is signal → process gone, as a supervisor (Ctrl-C, ``docker stop``, systemd)
sees it. A figure, not a test: the time depends on the machine and its load.

    python bench/shutdown.py [--rounds 5] [--streams 8]
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `bench` importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.procs import HOST, Server, free_port, mockserver_command, post_json, spawn, stop, wait_ready

__all__ = ["Scenario", "measure", "table"]

CHAT = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Tell me about Lisbon."}], "max_tokens": 8}


@dataclass(frozen=True)
class Scenario:
    name: str
    flags: tuple[str, ...]
    streams: int  # streams in flight when the signal is sent (0: idle)


@dataclass
class Round:
    seconds: float
    code: int | None
    in_flight: int = 0  # streams not yet ended when the signal was sent
    finished: int = 0  # streams that ended with `data: [DONE]`
    cut: int = 0  # streams the shutdown closed before their end


@dataclass
class _Stream:
    """One streamed chat completion read to its end on a thread of its own."""

    sock: socket.socket
    done: bool = False
    thread: threading.Thread = field(init=False)

    def __post_init__(self) -> None:
        self.thread = threading.Thread(target=self._drain, daemon=True)

    def _drain(self) -> None:
        tail = b""
        try:
            while chunk := self.sock.recv(65536):
                tail = (tail + chunk)[-64:]  # only the end matters: does it close with [DONE]?
        except OSError:
            pass  # reset by the exiting server: a cut stream
        self.done = b"data: [DONE]" in tail
        self.sock.close()


def _open_stream(port: int, max_tokens: int) -> _Stream:
    """Start a long streamed answer and return once its first event has arrived, so the
    stream is really in flight (the model answering) when the signal is sent."""
    # ignore_eos: the model may not end early, so the stream outlasts the shutdown's start.
    answer = {**CHAT, "max_tokens": max_tokens, "stream": True, "seed": 1, "ignore_eos": True}
    body = json.dumps(answer).encode()
    sock = socket.create_connection((HOST, port), timeout=120)
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: {HOST}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode()
    sock.sendall(head + body)
    seen = b""
    while b"data: " not in seen:
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError(f"stream closed before its first event: {seen[:300]!r}")
        seen += chunk
    stream = _Stream(sock)
    stream.done = b"data: [DONE]" in seen
    stream.thread.start()
    return stream


def _start(scenario: Scenario) -> Server:
    server = spawn(scenario.name, mockserver_command(free_port(), extra=scenario.flags))
    wait_ready(server, timeout=120)
    # One answer first: the model loaded (default chain), the request path warm. With only
    # `script` and no rules that answer is the chain's 404 `no_answer`, which warms it as well.
    status, body = post_json(server.port, "/v1/chat/completions", CHAT, timeout=120)
    if status >= 500:
        stop(server)
        raise RuntimeError(f"{scenario.name}: first answer failed: {status} {body}")
    return server


def measure(scenario: Scenario, signum: signal.Signals, max_tokens: int) -> Round:
    server = _start(scenario)
    try:
        streams = [_open_stream(server.port, max_tokens) for _ in range(scenario.streams)]
        time.sleep(0.2)  # idle: let the warm-up answer's connection close; busy: streams well under way
        in_flight = sum(stream.thread.is_alive() for stream in streams)
        start = time.perf_counter()
        server.proc.send_signal(signum)
        code = server.proc.wait(timeout=60)
        seconds = time.perf_counter() - start
        for stream in streams:
            stream.thread.join(timeout=10)
        finished = sum(stream.done for stream in streams)
        return Round(seconds, code, in_flight, finished, len(streams) - finished)
    finally:
        stop(server)


def table(results: dict[tuple[str, str], list[Round]]) -> str:
    lines = [
        "| server | signal | rounds | exit, s: min / median / max | exit code | streams in flight → finished / cut |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for (name, signame), rounds in results.items():
        times = [r.seconds for r in rounds]
        codes = ", ".join(sorted({str(r.code) for r in rounds}))
        in_flight, finished, cut = (sum(getattr(r, k) for r in rounds) for k in ("in_flight", "finished", "cut"))
        streams = f"{in_flight} → {finished} / {cut}"
        spread = f"{min(times):.2f} / {statistics.median(times):.2f} / {max(times):.2f}"
        lines.append(f"| {name} | {signame} | {len(rounds)} | {spread} | {codes} | {streams} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="fresh servers per server kind and signal")
    parser.add_argument("--streams", type=int, default=8, help="streams in flight for the busy server")
    parser.add_argument(
        "--max-tokens", type=int, default=4000, help="tokens each busy stream asks for (longer than the shutdown)"
    )
    args = parser.parse_args(argv)
    scenarios = (
        Scenario("idle, --backend script", ("--backend", "script"), 0),
        Scenario("idle, default chain (model loaded)", (), 0),
        Scenario(f"busy, default chain, {args.streams} streams in flight", (), args.streams),
    )
    results: dict[tuple[str, str], list[Round]] = {}
    for scenario in scenarios:
        for signum in (signal.SIGINT, signal.SIGTERM):
            key = (scenario.name, signum.name)
            results[key] = [measure(scenario, signum, args.max_tokens) for _ in range(args.rounds)]
            print(f"{scenario.name}, {signum.name}: {[round(r.seconds, 3) for r in results[key]]}", file=sys.stderr)
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
