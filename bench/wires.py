"""What a scripted answer costs on each wire beside a scripted chat answer, on one server, in
one run: ``python bench/wires.py [--wire anthropic|gemini|all] [--duration S] [--concurrency 1,16]
[--rounds N] [--measure cpu,instructions] [--requests N] [--count-rounds N] [--out FILE] [--raw FILE]``.

One ``mockserver serve --backend script`` process with one scripted rule (bench/spine.py's
24-token text, no ``match``) answers every wire: ``POST /v1/chat/completions``, Anthropic's
``POST /v1/messages`` and Gemini's ``POST /v1beta/models/gemini-2.5-flash:generateContent``,
plain and streamed (``stream: true``; Gemini's ``:streamGenerateContent?alt=sse``). A *cell* is
a shape (plain or streamed) at a concurrency; in it chat and each wire take turns, round after
round, the order rotated each round (chat, anthropic, gemini; anthropic, gemini, chat; …) so
neither drift nor position in the round favours one case. Each round gives a ratio wire / chat
from that round's own windows; the table shows the median of those ratios and their spread
(p25–p75, the interquartile range), so a reader sees whether 10% is resolved: a cell is shown
within 1.10 only when its p75 is. Issue 29 asks for a ratio within 1.10.

Two measures, each on its own server, one after the other (never at once):

* **CPU time** (``cpu``): the server runs natively and ``wrk`` loads it (closed loop, one
  warm-up per case and cell, then windows of ``--duration`` seconds). The figure is the server
  process's CPU per request: its CPU clock (``clock_gettime`` on the process's clock, in
  nanoseconds, every thread) over the window, over the requests answered. It is what users pay,
  but on a shared two-core machine it moves with other load by ±10% from run to run; pairing
  within a round removes most of that, the spread shows what is left.
* **Instructions** (``instructions``): the server runs under Valgrind's callgrind (see
  :mod:`bench.callgrind`) and each window is exactly ``--requests`` requests; the figure is the
  instructions it executed per request. Other load does not change it (what remains is the
  garbage collector's timing, a few percent), so it resolves 10% where CPU time cannot. The
  hardware counter (``perf stat -e instructions:u``) would be cheaper, but this machine's kernel
  has no PMU driver: perf answers ``<not supported>``.

The report ends with how busy the machine was meanwhile: every core's busy time over each
phase (from ``/proc/stat``), the server's share, and the time the server waited for a CPU
(``/proc/PID/schedstat``), which is what other load costs it.

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
import subprocess
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from bench import callgrind, procs, spine, wirestats
from bench.loadgen import system_busy

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
MEASURES = ("cpu", "instructions")
SHAPES = {"plain": "", "streamed": " stream"}
_LUA = """wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer sk-bench"  -- as the Anthropic 2.x SDK sends its key
"""

# One window of one case: (case, concurrency) -> its figure per request.
Window = Callable[[str, int], float]


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


def cpu_seconds(pid: int) -> float:
    """The process's CPU clock (all its threads, living or ended), to the nanosecond: the clock id
    Linux gives another process's CPU time (``MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED)``)."""
    return time.clock_gettime(((~pid) << 3) | 2)


def cpu_per_request(server: procs.Server, case: str, concurrency: int, seconds: float, workdir: Path) -> float:
    """Milliseconds of the server's CPU per answer of ``case`` over one window (warm it up first)."""
    path, body = CASES[case]
    before = cpu_seconds(server.pid)
    answered = _wrk(server.port, path, body, concurrency, seconds, workdir)
    return (cpu_seconds(server.pid) - before) / max(1, answered) * 1000


def _start(stack: ExitStack, argv: list[str], timeout: float = 60.0) -> procs.Server:
    """A scripted server that answers every case with the scripted text (checked once each)."""
    server = stack.enter_context(procs.running("scripted", argv, timeout=timeout))
    status, answer = procs.request(server.port, "POST", "/__mockserver/answers", {"text": spine._scripted_text()})
    assert status == 200, answer
    for case, (path, body) in CASES.items():
        status, answer = procs.request(server.port, "POST", path, body, timeout=600)
        assert status == 200 and (b"shipped" in answer or "stream" in case), (case, answer[:300])
    return server


def _cells(
    args: argparse.Namespace, wires: tuple[str, ...], rounds: int, warm: Callable[[str, int], None], window: Window
) -> list[wirestats.Cell]:
    """Every shape at every concurrency: each case warmed once, then ``rounds`` rotated rounds."""
    cells: list[wirestats.Cell] = []
    for shape, suffix in SHAPES.items():
        cases = [name + suffix for name in ("chat", *wires)]
        for concurrency in args.levels:
            for case in cases:
                warm(case, concurrency)
            seen: dict[str, list[float]] = {case: [] for case in cases}
            for turn in range(rounds):
                for case in cases[turn % len(cases) :] + cases[: turn % len(cases)]:
                    seen[case].append(window(case, concurrency))
            for wire, case in zip(wires, cases[1:], strict=True):
                cells.append(wirestats.Cell(wire, shape, concurrency, seen[cases[0]], seen[case]))
            print(f"  {shape} c={concurrency}: {rounds} rounds", file=sys.stderr, flush=True)
    return cells


def _cpu_phase(args: argparse.Namespace, wires: tuple[str, ...], tmp: Path) -> wirestats.Phase:
    with ExitStack() as stack:
        server = _start(stack, procs.mockserver_command(procs.free_port(), extra=["--backend", "script"]))
        meter = wirestats.Meter.start(server.pid, cpu_seconds(server.pid))

        def warm(case: str, concurrency: int) -> None:
            _wrk(server.port, *CASES[case], concurrency, 1, tmp)

        def window(case: str, concurrency: int) -> float:
            return cpu_per_request(server, case, concurrency, args.duration, tmp)

        cells = _cells(args, wires, args.rounds, warm, window)
        return wirestats.Phase("cpu", "ms CPU", cells, meter.stop(cpu_seconds(server.pid)))


def _instruction_phase(args: argparse.Namespace, wires: tuple[str, ...], tmp: Path) -> wirestats.Phase:
    dumps = tmp / "callgrind"
    dumps.mkdir()
    with ExitStack() as stack:
        argv = callgrind.command(procs.mockserver_command(procs.free_port(), extra=["--backend", "script"]), dumps)
        server = _start(stack, argv, timeout=600)
        stack.enter_context(callgrind.instrumented(server))
        meter = wirestats.Meter.start(server.pid, cpu_seconds(server.pid))

        def warm(case: str, concurrency: int) -> None:
            callgrind.count(server, dumps, *CASES[case], max(20, concurrency * 2), concurrency)

        def window(case: str, concurrency: int) -> float:
            return callgrind.count(server, dumps, *CASES[case], args.requests, concurrency) / 1000

        cells = _cells(args, wires, args.count_rounds, warm, window)
        return wirestats.Phase("instructions", "k instructions", cells, meter.stop(cpu_seconds(server.pid)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wire", choices=(*WIRES, "all"), default="all", help="the wire(s) measured beside chat")
    parser.add_argument("--duration", type=float, default=1.0, help="seconds per CPU window (whole seconds)")
    parser.add_argument("--concurrency", default="1,16", help="comma-separated connection counts")
    parser.add_argument("--rounds", type=int, default=15, help="rounds per cell for the CPU measure")
    parser.add_argument("--measure", default="cpu,instructions", help="comma-separated: cpu, instructions")
    parser.add_argument("--requests", type=int, default=100, help="requests per instruction-counting window")
    parser.add_argument("--count-rounds", type=int, default=7, help="rounds per cell for the instruction count")
    parser.add_argument("--out", type=Path, help="also write the report (markdown) to this file")
    parser.add_argument("--raw", type=Path, help="write every round's figures (JSON) to this file")
    args = parser.parse_args()
    wires = WIRES if args.wire == "all" else (args.wire,)
    args.levels = [int(c) for c in args.concurrency.split(",")]
    measures = [m.strip() for m in args.measure.split(",") if m.strip()]
    unknown = set(measures) - set(MEASURES)
    if unknown:
        parser.error(f"--measure: unknown {sorted(unknown)} (choose from {', '.join(MEASURES)})")
    if "instructions" in measures and not callgrind.available():
        parser.error("--measure instructions needs valgrind and callgrind_control on the path")
    phases: list[wirestats.Phase] = []
    busy_before, started = system_busy(), time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for measure in measures:
            print(f"{measure}:", file=sys.stderr, flush=True)
            run = _cpu_phase if measure == "cpu" else _instruction_phase
            phases.append(run(args, wires, Path(tmp)))
    elapsed = time.perf_counter() - started
    report = wirestats.report(phases, (system_busy() - busy_before) / elapsed, elapsed, " ".join(sys.argv))
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
    if args.raw:
        args.raw.write_text(json.dumps([phase.raw() for phase in phases], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
