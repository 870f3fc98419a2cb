"""Issue 34's cases for ``python -m bench.abuse --round 3`` (see its docstring): one fresh
``mockserver serve`` child per case, ``/health`` probed while the case runs, then a normal
request. Each case's check is the refusal's shape (status and error code), so a case whose
guard broke fails loudly rather than measuring something else."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from bench.probe import Probe, _status
from tests.support.live import ROOT, free_port, stop, wait_healthy

__all__ = ["measure_round3", "round3_table"]

CHAT = {"model": "m", "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}


@contextmanager
def _child(args: list[str]) -> Iterator[tuple[str, int]]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mockserver", "serve", "--host", "127.0.0.1", "--port", str(port), *args]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(url, proc)
        yield url, proc.pid
    finally:
        stop(proc)


def _case(args: list[str], abuse: Callable[[str], None], rounds: int, after: Callable[[str], bool]) -> dict[str, Any]:
    with _child(args) as (url, pid):
        with Probe(url) as probe:
            start = time.perf_counter()
            done = 0
            while done < rounds or (len(probe.samples) < 50 and done < 50 * rounds):  # enough samples for a p99
                abuse(url)
                done += 1
            took = time.perf_counter() - start
        return {
            **probe.figures(),
            "per_abuse_ms": took / done * 1000,
            "abuses": done,
            "rss_mb": _status(pid, "VmRSS") / 1024,
            "serves_after": after(url),
        }


def _chat_ok(url: str) -> bool:
    return httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=60).status_code == 200


def _expect(answer: httpx.Response, status: int, code: str) -> None:
    got = answer.json().get("error", {}).get("code") if answer.status_code == status else None
    if got != code:
        raise RuntimeError(f"expected {status} {code}, got {answer.status_code} {answer.text[:300]}")


def _rules(folder: Path, text: str) -> list[str]:
    path = folder / "rules.yaml"
    path.write_text(text)
    return ["--backend", "script", "--rules", str(path)]


def _redaction(folder: Path) -> dict[str, Any]:
    from mockserver.cassettes.files import save
    from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse

    body = b'{"model":"m","messages":[{"role":"user","content":"recorded"}]}'
    request = RecordedRequest("POST", "https://api.openai.com/v1/chat/completions", (), body)
    response = RecordedResponse(200, (("content-type", "application/json"),), b"{}", "OK", None, 0.01)
    save(folder / "cassettes" / "one.yaml", [Interaction(request, response)])
    runs = iter(["aws", "secret-", "%41"] * 100)

    def abuse(url: str) -> None:
        run = next(runs)
        text = (run * (24 * 1024 // len(run) + 1))[: 24 * 1024]
        sent = {**CHAT, "messages": [{"role": "user", "content": text}]}
        _expect(httpx.post(url + "/v1/chat/completions", json=sent, timeout=120), 404, "cassette_miss")

    def after(url: str) -> bool:
        got = httpx.post(url + "/v1/chat/completions", content=body, headers={"content-type": "application/json"})
        return got.status_code == 200

    return _case(["--cassettes", str(folder / "cassettes"), "--backend", "replay"], abuse, 12, after)


def _match(folder: Path) -> dict[str, Any]:
    args = _rules(folder, "- {match: '^(\\w+\\s?)*$', text: slow}\n- text: Hello there.\n")
    sent = {**CHAT, "messages": [{"role": "user", "content": "a" * 5000 + "!"}]}

    def abuse(url: str) -> None:
        got = httpx.post(url + "/v1/chat/completions", json=sent, timeout=60)
        if got.status_code != 200:
            raise RuntimeError(got.text[:300])

    return _case(args, abuse, 20, _chat_ok)


def _fault_spec(folder: Path) -> dict[str, Any]:
    # 2,000 terms (~33 KB: under the 64 KiB head limit, so the spec's own limit answers)
    spec = "; ".join(f"latency.ttft={i % 50}" for i in range(2_000))

    def abuse(url: str) -> None:
        got = httpx.post(url + "/v1/chat/completions", json=CHAT, headers={"x-mockserver-fault": spec}, timeout=60)
        if got.status_code != 400:
            raise RuntimeError(got.text[:300])

    return _case(_rules(folder, "- text: Hello there.\n"), abuse, 20, _chat_ok)


def _connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=30)


def _head(folder: Path) -> dict[str, Any]:
    def abuse(url: str) -> None:
        with _connect(url) as sock:
            sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nx-big: ")
            try:
                for _ in range(256):  # up to 4 MB, 16 KiB a write
                    sock.sendall(b"a" * 16384)
            except OSError:
                pass
            reply = sock.recv(65536)
        if not reply.startswith(b"HTTP/1.1 431"):
            raise RuntimeError(reply[:200].decode("latin-1"))

    return _case(_rules(folder, "- text: Hello there.\n"), abuse, 10, _chat_ok)


def _trickle(folder: Path) -> dict[str, Any]:
    body = json.dumps(CHAT).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
    head += b"content-length: %d\r\n\r\n" % len(body)

    def abuse(url: str) -> None:
        with _connect(url) as sock:
            sock.sendall(head)
            reply = b""
            for i in range(len(body)):
                try:
                    sock.sendall(body[i : i + 1])
                except OSError:
                    break
                sock.settimeout(0.2)
                try:
                    reply = sock.recv(65536)
                except TimeoutError:
                    continue
                if reply:
                    break
        if not reply.startswith(b"HTTP/1.1 408"):
            raise RuntimeError(reply[:200].decode("latin-1"))

    args = [*_rules(folder, "- text: Hello there.\n"), "--body-timeout", "1"]
    return _case(args, abuse, 3, _chat_ok)


def _leaving(folder: Path) -> dict[str, Any]:
    """Clients that leave during a ten-minute queue delay: each must be noticed (499
    client_disconnect in the journal) and cost nothing more."""
    slow = {"x-mockserver-fault": "latency.queue,ms=600000"}

    def abuse(url: str) -> None:
        try:
            httpx.post(url + "/v1/chat/completions", json=CHAT, headers=slow, timeout=httpx.Timeout(30, read=0.2))
        except httpx.ReadTimeout:
            pass
        else:
            raise RuntimeError("answered through a ten-minute queue delay")

    def after(url: str) -> bool:
        for _ in range(50):
            entries = httpx.get(url + "/__mockserver/journal", timeout=60).json()["entries"]
            if entries and all(e["ended"] != "pending" for e in entries):
                break
            time.sleep(0.1)
        gone = all((e["status"], e["ended"]) == (499, "client_disconnect") for e in entries)
        return gone and _chat_ok(url)

    return _case(_rules(folder, "- text: Hello there.\n"), abuse, 20, after)


def _disk_full(folder: Path) -> dict[str, Any] | None:
    disk = folder / "disk"
    disk.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        return None  # needs root
    try:
        with _child(_rules(folder, "- text: Recorded.\n")) as (upstream, _):
            filler = os.open(disk / ".filler", os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                while os.write(filler, b"\0" * 4096):
                    pass
            except OSError:
                pass
            finally:
                os.close(filler)
            args = ["--cassettes", str(disk), "--record-mode", "all", "--upstream", upstream]

            def abuse(url: str) -> None:
                _expect(httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=60), 507, "cassette_write_failed")

            def after(url: str) -> bool:
                (disk / ".filler").unlink()
                return _chat_ok(url)

            return _case(args, abuse, 20, after)
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


CASES: dict[str, Callable[[Path], dict[str, Any] | None]] = {
    "redaction (24 KB hostile bodies, replay)": _redaction,
    "match (a slow pattern, 5,000 characters)": _match,
    "fault spec (2,000 terms in a header)": _fault_spec,
    "head (4 MB header value)": _head,
    "trickle (a byte at a time, --body-timeout 1)": _trickle,
    "disk full (recording into a full tmpfs)": _disk_full,
    "leaving (clients gone during a 10-minute queue delay)": _leaving,
}


def measure_round3() -> dict[str, Any]:
    found: dict[str, Any] = {}
    for name, case in CASES.items():
        with tempfile.TemporaryDirectory() as folder:
            found[name] = case(Path(folder))
    return found


def round3_table(found: dict[str, Any]) -> str:
    rows = [
        "| round 3 case | `/health` p50 | `/health` p99 | samples | each abuse | RSS after | answers after |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for name, f in found.items():
        if f is None:
            rows.append(f"| {name} | — | — | — | — | — | skipped (needs root to mount a tmpfs) |")
            continue
        rows.append(
            f"| {name} | {f['p50_ms']:.1f} ms | {f['p99_ms']:.1f} ms | {f['n']} | {f['per_abuse_ms']:.0f} ms "
            f"| {f['rss_mb']:.0f} MB | {'yes' if f['serves_after'] else 'NO'} |"
        )
    return "\n".join(rows)
