"""A batch against the same requests sent directly, on one server, in one run:
``python bench/batches.py [--lines N] [--step S] [--rounds R]``.

One ``mockserver serve --backend script`` process with one scripted rule answers ``N`` chat
requests (default 10,000, each its own question) twice per round: sent directly one by one
over one keep-alive connection (the client waits for each answer before the next), and as
one batch of the same lines (uploaded as a ``batch`` file, then polled until ``completed``).
The rate is lines per second; the batch's counts from ``POST /v1/batches`` to ``completed``
(validation and finalizing included; ``--step`` is the server's ``--batch-step-time``, the
least time each status lasts). While the batch runs, a second client asks ``GET /health``
every 10 ms: its p99 is the latency an interactive request sees beside a running batch
(and beside nothing, as a baseline). Issue 31 asks for a batch rate ≥ 0.8× the direct rate
and ``/health`` p99 ≤ 50 ms.

Figures describe one machine at one moment: they go into issue notes and README tables, never
into test assertions.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import http.client
import json
import statistics
import threading
import time
import uuid
from typing import Any

from bench import procs

TEXT = "The batch answered this line as the same request sent directly would be answered."


def _body(i: int) -> dict[str, Any]:
    return {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"Question number {i}?"}]}


def _direct(port: int, lines: int) -> float:
    """Seconds to send ``lines`` requests one by one over one connection."""
    conn = http.client.HTTPConnection(procs.HOST, port, timeout=60)
    headers = {"content-type": "application/json"}
    try:
        start = time.perf_counter()
        for i in range(lines):
            conn.request("POST", "/v1/chat/completions", body=json.dumps(_body(i)), headers=headers)
            response = conn.getresponse()
            response.read()
            assert response.status == 200, response.status
        return time.perf_counter() - start
    finally:
        conn.close()


def _upload(port: int, lines: int) -> str:
    rows = "".join(
        json.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions", "body": _body(i)}) + "\n"
        for i in range(lines)
    ).encode()
    boundary = uuid.uuid4().hex
    payload = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\nbatch\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="bench.jsonl"\r\n'
            "Content-Type: application/jsonl\r\n\r\n"
        ).encode()
        + rows
        + f"\r\n--{boundary}--\r\n".encode()
    )
    conn = http.client.HTTPConnection(procs.HOST, port, timeout=60)
    try:
        conn.request(
            "POST", "/v1/files", body=payload, headers={"content-type": f"multipart/form-data; boundary={boundary}"}
        )
        response = conn.getresponse()
        data = json.loads(response.read())
        assert response.status == 200, data
        return str(data["id"])
    finally:
        conn.close()


class Prober:
    """``GET /health`` every ``every`` seconds on its own connection, until stopped."""

    def __init__(self, port: int, every: float = 0.01) -> None:
        self.port, self.every = port, every
        self.times: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        conn = http.client.HTTPConnection(procs.HOST, self.port, timeout=10)
        while not self._stop.is_set():
            start = time.perf_counter()
            conn.request("GET", "/health")
            response = conn.getresponse()
            response.read()
            self.times.append(time.perf_counter() - start)
            self._stop.wait(self.every)
        conn.close()

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def p99_ms(self) -> float:
        ordered = sorted(self.times)
        return 1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else float("nan")


def _batch(port: int, file_id: str, lines: int) -> tuple[float, float, int]:
    """Seconds from create to completed, /health p99 (ms) meanwhile, and the probes taken."""
    with Prober(port) as prober:
        start = time.perf_counter()
        status, batch = procs.post_json(
            port,
            "/v1/batches",
            {"input_file_id": file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"},
        )
        assert status == 200, batch
        while batch.get("status") not in ("completed", "failed", "expired", "cancelled"):
            time.sleep(0.05)
            _, raw = procs.request(port, "GET", f"/v1/batches/{batch['id']}")
            batch = json.loads(raw)
        elapsed = time.perf_counter() - start
    assert batch["status"] == "completed", batch
    counts = batch["request_counts"]
    assert counts == {"total": lines, "completed": lines, "failed": 0}, counts
    _, out = procs.request(port, "GET", f"/v1/files/{batch['output_file_id']}/content")
    first = json.loads(out.split(b"\n", 1)[0])
    assert first["response"]["body"]["choices"][0]["message"]["content"] == TEXT
    return elapsed, prober.p99_ms(), len(prober.times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--step", type=float, default=0.5, help="the server's --batch-step-time")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args(argv)
    port = procs.free_port()
    extra = ["--backend", "script", "--batch-step-time", str(args.step)]
    with procs.running("batches", procs.mockserver_command(port, extra=extra)) as server:
        status, _ = procs.post_json(server.port, "/__mockserver/answers", {"text": TEXT})
        assert status == 200
        with Prober(port) as idle:
            time.sleep(2)
        rows = []
        for _ in range(args.rounds):
            direct = _direct(port, args.lines)
            file_id = _upload(port, args.lines)
            batch, p99, probes = _batch(port, file_id, args.lines)
            rows.append((args.lines / direct, args.lines / batch, p99, probes))
    print(f"{args.lines} lines, --batch-step-time {args.step:g}, {args.rounds} round(s)")
    print(f"/health p99 idle: {idle.p99_ms():.1f} ms ({len(idle.times)} probes)")
    for n, (direct_rate, batch_rate, p99, probes) in enumerate(rows, 1):
        print(
            f"round {n}: direct {direct_rate:,.0f} lines/s, batch {batch_rate:,.0f} lines/s "
            f"(x{batch_rate / direct_rate:.2f}), /health p99 during the batch {p99:.1f} ms ({probes} probes)"
        )
    ratio = statistics.median(b / d for d, b, _, _ in rows)
    worst = max(r[2] for r in rows)
    print(f"median batch/direct: x{ratio:.2f} (issue 31 asks >= 0.8); /health p99 max {worst:.1f} ms (<= 50)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
