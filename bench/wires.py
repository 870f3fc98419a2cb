"""What a scripted answer costs on each wire beside a scripted chat answer, on one server, in
one run: ``python bench/wires.py [--wire anthropic|gemini|all] [--duration S] [--concurrency 1,16] [--rounds N]``.

One ``mockserver serve --backend script`` process with one scripted rule (bench/spine.py's
24-token text, no ``match``) answers every wire: ``POST /v1/chat/completions``, Anthropic's
``POST /v1/messages`` and Gemini's ``POST /v1beta/models/gemini-2.5-flash:generateContent``,
plain and streamed (``stream: true``; Gemini's ``:streamGenerateContent?alt=sse``). Chat and a
wire take turns, round after round, so drift on a shared machine falls on both alike. Load is
``wrk`` (closed loop, after a warm-up); the figure is the server's CPU per request (utime +
stime from ``/proc`` over the window, over the requests answered) and the ratio wire / chat of
its median over the rounds. Issue 29 asks for a ratio within 1.10.

Figures describe one machine at one moment: they go into issue notes and README tables, never
into test assertions.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import re
import statistics
import subprocess
import tempfile
from contextlib import ExitStack
from typing import Any

from bench import procs, spine

PROMPT = spine.PROMPT
CHAT: dict[str, Any] = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": PROMPT}]}
MESSAGES: dict[str, Any] = {
    "model": "claude-sonnet-5",
    "max_tokens": 64,
    "messages": [{"role": "user", "content": PROMPT}],
}
CONTENTS: dict[str, Any] = {"contents": [{"role": "user", "parts": [{"text": PROMPT}]}]}
GEMINI = "/v1beta/models/gemini-2.5-flash"

# A case: its path and body. Each wire is measured against chat, plain and streamed.
CASES: dict[str, tuple[str, dict[str, Any]]] = {
    "chat": ("/v1/chat/completions", CHAT),
    "chat stream": ("/v1/chat/completions", {**CHAT, "stream": True}),
    "anthropic": ("/v1/messages", MESSAGES),
    "anthropic stream": ("/v1/messages", {**MESSAGES, "stream": True}),
    "gemini": (f"{GEMINI}:generateContent", CONTENTS),
    "gemini stream": (f"{GEMINI}:streamGenerateContent?alt=sse", CONTENTS),
}
WIRES = ("anthropic", "gemini")
_LUA = """wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"  -- as the Anthropic 2.x SDK sends its key
"""


def _wrk(port: int, path: str, body: dict[str, Any], concurrency: int, seconds: float, workdir: Path) -> int:
    """Requests answered (a non-2xx answer stops the run: it would measure an error path)."""
    script = workdir / "body.lua"
    script.write_text(_LUA % json.dumps(body))
    threads = 1 if concurrency == 1 else 2
    argv = ["wrk", f"-t{threads}", f"-c{concurrency}", f"-d{max(1, round(seconds))}s", "-s", str(script)]
    out = subprocess.run(
        [*argv, f"http://127.0.0.1:{port}{path}"], capture_output=True, text=True, check=True, timeout=seconds + 60
    ).stdout
    done = re.search(r"(\d+) requests in", out)
    assert done is not None and "Non-2xx" not in out, out
    return int(done.group(1))


def cpu_per_request(server: procs.Server, case: str, concurrency: int, seconds: float, workdir: Path) -> float:
    """Milliseconds of the server's CPU per answer of ``case``."""
    path, body = CASES[case]
    _wrk(server.port, path, body, concurrency, 1, workdir)  # warm-up
    before = spine._cpu(server.pid)
    answered = _wrk(server.port, path, body, concurrency, seconds, workdir)
    return (spine._cpu(server.pid) - before) / max(1, answered) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wire", choices=(*WIRES, "all"), default="all", help="the wire(s) measured beside chat")
    parser.add_argument("--duration", type=float, default=4.0, help="seconds per measured window")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated wrk connection counts")
    parser.add_argument("--rounds", type=int, default=3, help="turns each wire takes per cell")
    args = parser.parse_args()
    wires = WIRES if args.wire == "all" else (args.wire,)
    levels = [int(c) for c in args.concurrency.split(",")]
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        argv = procs.mockserver_command(procs.free_port(), extra=["--backend", "script"])
        server = stack.enter_context(procs.running("scripted", argv))
        status, answer = procs.request(server.port, "POST", "/__mockserver/answers", {"text": spine._scripted_text()})
        assert status == 200, answer
        for case, (path, body) in CASES.items():  # each answers the scripted text, 200
            status, answer = procs.request(server.port, "POST", path, body)
            assert status == 200 and (b"shipped" in answer or "stream" in case), (case, answer[:300])
        print("| wire | shape | concurrency | chat ms CPU/request | wire ms CPU/request | wire / chat |")
        print("| --- | --- | --- | --- | --- | --- |")
        for wire in wires:
            for suffix in ("", " stream"):
                pair = ("chat" + suffix, wire + suffix)
                for concurrency in levels:
                    seen: dict[str, list[float]] = {case: [] for case in pair}
                    for _ in range(args.rounds):
                        for case in pair:
                            seen[case].append(cpu_per_request(server, case, concurrency, args.duration, Path(tmp)))
                    chat, other = (statistics.median(seen[case]) for case in pair)
                    shape = "streamed" if suffix else "plain"
                    row = f"| {wire} | {shape} | {concurrency} | {chat:.3f} | {other:.3f} | {other / chat:.3f} |"
                    print(row, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
