"""Serving benchmark for mockserver: ``python bench/serving.py [--quick] [--out FILE]``.

Starts the ceiling app and ``python -m mockserver serve`` as child processes, drives them
from separate load-generator processes, then measures start-up, import time and the model
alone, and prints a markdown report (also written to ``--out``). Every phase is bounded in
time and every child process is stopped in a ``finally``. The figures describe one machine
at one moment; they are for issue reports, never assertions in the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `python bench/serving.py` puts bench/ on sys.path, not the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import importlib.metadata
import importlib.util
import json
import os
import shlex
import subprocess
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

from bench import driver, procs, report, startup
from bench.loadgen import Cell, system_busy

# Asked of the model in order; the first whose greedy reply fills 16 tokens is kept.
SHORT_PROMPTS = (
    "Write a short poem about rain.",
    "Tell me about Marie Curie.",
    "Explain photosynthesis.",
    "Describe the ocean.",
    "Tell me about Paris.",
    "Explain quantum computing in simple terms.",
)
# Cut to the longest prefix whose chat prompt is ≤ 50 tokens (see driver.fit_prompt).
LONG_TEXT = (
    "Our team is planning a weekend trip to the mountains next month. We need to book a cabin for six "
    "people, rent two cars, and buy food for three days. Some of us want to hike to the lake on Saturday, "
    "while others prefer to stay near the cabin and read. The weather forecast says it may rain on Sunday "
    "morning, so we should bring jackets and a few board games for the evenings."
)
LONG_SUFFIX = " Please write a detailed plan for us."
CHAT = "/v1/chat/completions"


@dataclass(frozen=True)
class Options:
    duration: float
    warmup: float
    concurrency: tuple[int, ...]
    health_duration: float
    startup_runs: int
    import_runs: int
    model_reps: int
    model_budget: float
    client: str
    out: Path
    json_out: Path | None
    server_cmd: list[str] | None
    assets: Path | None


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short everything: a smoke run of about a minute")
    p.add_argument("--duration", type=float, help="measured seconds per cell (default 5, quick 1.5)")
    p.add_argument("--warmup", type=float, help="warm-up seconds per cell (default 1, quick 0.3)")
    p.add_argument("--concurrency", default="1,16,64", help="comma-separated levels (default 1,16,64)")
    p.add_argument("--client", choices=("raw", "httpx"), default="raw", help="load generator's HTTP client")
    p.add_argument("--out", type=Path, default=procs.ROOT / "bench" / "results.md", help="report path")
    p.add_argument("--json", type=Path, default=None, help="also write the raw figures as JSON here")
    p.add_argument(
        "--server-cmd",
        default=None,
        help="development only: a command replacing `python -m mockserver` (e.g. a launcher with other assets)",
    )
    p.add_argument("--assets", type=Path, default=None, help="weights for the model-only figures (default: shipped)")
    a = p.parse_args(argv)
    duration = a.duration if a.duration is not None else (1.5 if a.quick else 5.0)
    warmup = a.warmup if a.warmup is not None else (0.3 if a.quick else 1.0)
    return Options(
        duration=duration,
        warmup=warmup,
        concurrency=tuple(int(c) for c in a.concurrency.split(",") if c.strip()),
        health_duration=max(3.0, 2 * duration),
        startup_runs=3 if a.quick else 5,
        import_runs=3 if a.quick else 9,
        model_reps=100 if a.quick else 1000,
        model_budget=0.5 if a.quick else 2.0,
        client=a.client,
        out=a.out,
        json_out=a.json,
        server_cmd=shlex.split(a.server_cmd) if a.server_cmd else None,
        assets=a.assets,
    )


def _section(results: dict[str, Any], name: str, run: Callable[[], dict[str, Any]]) -> None:
    """Run one section; a failure is reported in its place instead of ending the benchmark."""
    print(f"[bench] {name} …", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        results[name] = run()
    except Exception as exc:  # one broken section must not hide the others' figures
        results[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
    print(f"[bench] {name} done in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)


def throughput(o: Options, ceiling: procs.Server, mock: procs.Server) -> dict[str, Any]:
    """Section 1: ceiling, chat and chat-stream at each concurrency, interleaved so drift hits all."""
    chosen = driver.choose_chat(mock.port, SHORT_PROMPTS)
    plain = chosen.json()
    streamed = chosen.json(stream=True, stream_options={"include_usage": True})
    rows = []
    for c in o.concurrency:
        base = Cell(port=0, path=CHAT, concurrency=c, warmup=o.warmup, duration=o.duration, client=o.client)
        for name, label, server, body, stream in (
            ("ceiling", "ceiling (Starlette)", ceiling, plain, False),  # parses the same JSON body
            ("chat", "chat, 16 tokens", mock, plain, False),
            ("stream", "chat, 16 tokens, stream", mock, streamed, True),
        ):
            cell = replace(base, port=server.port, server_pid=server.pid, body=body, stream=stream)
            rows.append({"name": name, "label": label, "concurrency": c, "result": driver.run_cell(cell)})
    check = []
    for c in sorted({min(o.concurrency), max(o.concurrency)}):
        for client in ("raw", "httpx"):
            cell = Cell(
                port=ceiling.port,
                path=CHAT,
                body=plain,
                concurrency=c,
                warmup=o.warmup,
                duration=o.duration / 2,
                client=client,
                server_pid=ceiling.pid,
            )
            check.append({"client": client, "concurrency": c, "result": driver.run_cell(cell)})
    return {"chat_note": f"{chosen.note}, prompt_tokens {chosen.prompt_tokens}", "rows": rows, "client_check": check}


def prompt50(o: Options, mock: procs.Server) -> dict[str, Any]:
    """Section 2: a ~50-token prompt, 16 tokens, one request at a time."""
    content = driver.fit_prompt(mock.port, LONG_TEXT.split(), 50, LONG_SUFFIX)
    chosen = driver.choose_chat(mock.port, [content])
    cell = Cell(
        port=mock.port,
        path=CHAT,
        body=chosen.json(),
        concurrency=1,
        warmup=o.warmup,
        duration=o.duration,
        client=o.client,
        server_pid=mock.pid,
    )
    return {"note": chosen.note, "result": driver.run_cell(cell)}


def health(o: Options, mock: procs.Server) -> dict[str, Any]:
    """Section 3: /health probed at 50 Hz from its own process while 32 streams generate."""
    chosen = driver.choose_chat(mock.port, SHORT_PROMPTS, tokens=200)
    body = chosen.json(stream=True, stream_options={"include_usage": True})
    # Streams in flight when the window ends are hung up on: only the probe's figures matter.
    streams = Cell(
        port=mock.port,
        path=CHAT,
        body=body,
        concurrency=32,
        warmup=1.0,
        duration=o.health_duration,
        stream=True,
        drain=False,
        client=o.client,
        server_pid=mock.pid,
    )
    # The probe starts measuring after the streams are all running and stops before they do.
    probe = Cell(
        port=mock.port,
        path="/health",
        method="GET",
        rate_hz=50.0,
        warmup=1.5,
        duration=o.health_duration - 1.0,
        timeout=10.0,
        client=o.client,
        server_pid=mock.pid,
    )
    streams_result, probe_result = driver.run_cells_together([streams, probe])
    return {"note": chosen.note, "duration": o.health_duration, "streams": streams_result, "probe": probe_result}


def model_only(o: Options) -> dict[str, Any]:
    """Section 6, in a child process so torch and its threads never touch this one."""
    argv = [sys.executable, "-m", "bench.modelbench", "--reps", str(o.model_reps), "--budget", str(o.model_budget)]
    if o.assets is not None:
        argv += ["--assets", str(o.assets)]
    done = subprocess.run(argv, cwd=procs.ROOT, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"exit {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def _busy_now(seconds: float = 1.0) -> float:
    """CPU-seconds per second the machine spends busy right now, before we add any load."""
    first = system_busy()
    time.sleep(seconds)
    return (system_busy() - first) / seconds


def environment(o: Options, mock_cmd: list[str], ceiling_cmd: list[str]) -> dict[str, Any]:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "unknown",
    )
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=procs.ROOT, capture_output=True, text=True)
    shipped = procs.ROOT / "mockserver" / "reference" / "assets"
    have = all((shipped / f).is_file() for f in ("tokenizer.json", "model.safetensors", "config.json"))
    assets = "shipped (`mockserver/reference/assets`)" if have else "**shipped assets missing**"
    if o.server_cmd or o.assets:
        assets = f"**development override** (server `{' '.join(o.server_cmd or [])}`, model-only `{o.assets}`)"
    fast = all(importlib.util.find_spec(m) is not None for m in ("uvloop", "httptools"))
    return {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "commit": commit.stdout.strip() or "unknown",
        "cores": os.cpu_count(),
        "cpu": cpu,
        "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
        "busy_before": _busy_now(),
        "versions": {n: _version(n) for n in ("starlette", "uvicorn", "uvloop", "httptools", "httpx", "torch")},
        "server_command": " ".join(mock_cmd).replace(sys.executable, "python"),
        "ceiling_command": " ".join(ceiling_cmd).replace(sys.executable, "python"),
        "loop_note": "its uvicorn loop/http 'auto' resolves to uvloop/httptools"
        + (" (both installed)" if fast else " — **but uvloop/httptools are missing**: asyncio/h11"),
        "assets": assets,
        "duration": o.duration,
        "warmup": o.warmup,
        "client": f"{o.client} sockets (asyncio + uvloop)" if o.client == "raw" else "httpx.AsyncClient",
    }


def main(argv: list[str] | None = None) -> int:
    o = parse_args(argv)
    mock_cmd = procs.mockserver_command(procs.free_port(), o.server_cmd)
    ceiling_cmd = procs.ceiling_command(procs.free_port())
    results: dict[str, Any] = {"meta": environment(o, mock_cmd, ceiling_cmd)}
    with ExitStack() as stack:  # both servers up side by side; stopped whatever happens
        try:
            ceiling = stack.enter_context(procs.running("ceiling", ceiling_cmd))
            mock = stack.enter_context(procs.running("mockserver", mock_cmd))
        except RuntimeError as exc:
            for name in ("throughput", "prompt50", "health"):
                results[name] = {"error": str(exc)[:2000]}
        else:
            _section(results, "throughput", lambda: throughput(o, ceiling, mock))
            _section(results, "prompt50", lambda: prompt50(o, mock))
            _section(results, "health", lambda: health(o, mock))
    # Start-up and import run with no server alive, so nothing else competes for the CPUs.
    first = driver.chat_body("Hello!", 1, temperature=0)
    _section(
        results,
        "startup",
        lambda: startup.serve_startup(o.startup_runs, lambda p: procs.mockserver_command(p, o.server_cmd), first),
    )
    statements = ["import mockserver", "import mockserver.app"]
    _section(results, "imports", lambda: startup.import_figures(o.import_runs, statements))
    _section(results, "model", lambda: model_only(o))
    results["meta"]["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    text = report.render(results)
    print(text)
    o.out.parent.mkdir(parents=True, exist_ok=True)
    o.out.write_text(text)
    if o.json_out is not None:
        o.json_out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
