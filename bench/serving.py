"""Every mockserver benchmark in one run: ``python bench/serving.py [--quick] [--out FILE]``
(``make bench``; ``make bench BENCH_ARGS=--quick`` for a smoke run).

Starts the ceiling app and one ``python -m mockserver serve`` per backend (reference,
scripted, replay) as child processes, drives them from separate load-generator processes,
then measures start-up, import time, the model alone, cassette lookup and memory, and writes
a markdown report to ``BENCHMARKS.md`` at the repository root (``--out`` to change). Every
phase is bounded in time and every child process is stopped in a ``finally``; only
127.0.0.1 is used. The figures describe one machine at one moment; they are for the README
and issue reports, never assertions in the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

# `python bench/serving.py` puts bench/ on sys.path, not the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import shlex
import signal
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

from bench import backends, driver, machine, procs, report, sections, startup
from bench.sections import Options

__all__ = ["main", "parse_args"]

LOAD_SECTIONS = ("throughput", "prompt50", "streams")


def parse_args(argv: list[str] | None = None) -> Options:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="short everything: a smoke run of about 1.5 minutes")
    p.add_argument("--duration", type=float, help="measured seconds per cell (default 1.5, quick 1)")
    p.add_argument("--rounds", type=int, help="rounds of every throughput cell, best kept (default 3, quick 1)")
    p.add_argument("--warmup", type=float, help="warm-up seconds per cell (default 0.5, quick 0.3)")
    p.add_argument("--concurrency", default="1,16,64", help="comma-separated levels (default 1,16,64)")
    p.add_argument("--client", choices=("raw", "httpx"), default="raw", help="load generator's HTTP client")
    p.add_argument("--out", type=Path, default=procs.ROOT / "BENCHMARKS.md", help="report path")
    p.add_argument("--json", type=Path, default=None, help="also write the raw figures as JSON here")
    p.add_argument(
        "--server-cmd",
        default=None,
        help="development only: a command replacing `python -m mockserver` (e.g. a launcher with other assets)",
    )
    p.add_argument("--assets", type=Path, default=None, help="weights for the model-only figures (default: shipped)")
    a = p.parse_args(argv)
    duration = a.duration if a.duration is not None else (1.0 if a.quick else 1.5)
    warmup = a.warmup if a.warmup is not None else (0.3 if a.quick else 0.5)
    return Options(
        quick=a.quick,
        duration=duration,
        warmup=warmup,
        rounds=a.rounds if a.rounds is not None else (1 if a.quick else 3),
        concurrency=tuple(int(c) for c in a.concurrency.split(",") if c.strip()),
        health_duration=max(3.0, 4 * duration),
        stream_tokens=64,
        startup_runs=3 if a.quick else 5,
        import_runs=3 if a.quick else 9,
        model_reps=100 if a.quick else 1000,
        model_budget=0.5 if a.quick else 2.0,
        lookup_rounds=3 if a.quick else 9,
        lookup_io=not a.quick,
        journal_entries=10_000,
        stored=100 if a.quick else 200,
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
    elapsed = time.perf_counter() - started
    results.setdefault("timings", {})[name] = elapsed
    print(f"[bench] {name} done in {elapsed:.1f} s", file=sys.stderr, flush=True)


def _command(argv: list[str] | None) -> str:
    """The command that reproduces the figures (where the output goes does not change them)."""
    given, kept = list(sys.argv[1:] if argv is None else argv), []
    while given:
        arg = given.pop(0)
        if arg in ("--out", "--json"):
            given = given[1:]
        elif not arg.startswith(("--out=", "--json=")):
            kept.append(arg)
    args = " ".join(shlex.quote(a) for a in kept)
    if args in ("", "--quick"):
        return "make bench" + (" BENCH_ARGS=--quick" if args else "")
    return f"python bench/serving.py {args}"


def _on_sigterm(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds through every finally: no child is left behind


def main(argv: list[str] | None = None) -> int:
    o = parse_args(argv)
    signal.signal(signal.SIGTERM, _on_sigterm)
    began = time.perf_counter()
    results: dict[str, Any] = {"meta": machine.describe(_command(argv))}
    results["meta"] |= {"quick": o.quick, "duration": o.duration, "warmup": o.warmup, "rounds": o.rounds}
    results["meta"]["client"] = o.client
    if o.server_cmd or o.assets:
        results["meta"]["override"] = f"server `{' '.join(o.server_cmd or [])}`, model-only `{o.assets}`"
    with ExitStack() as stack:  # every server up side by side; stopped whatever happens
        print("[bench] starting the servers and recording the cassette …", file=sys.stderr, flush=True)
        try:
            b = stack.enter_context(backends.started(o.server_cmd))
        except Exception as exc:
            for name in LOAD_SECTIONS:
                results[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        else:
            results["rss"] = {"rest": sections.resident(b)}
            _section(results, "throughput", lambda: sections.throughput(o, b))
            _section(results, "prompt50", lambda: sections.prompt50(o, b.server("reference")))
            _section(results, "streams", lambda: sections.streams(o, b.server("reference")))
            results["rss"]["after"] = sections.resident(b, settle=0.0)
    # Start-up, import and the rest run with no server alive, so nothing else competes.
    first = driver.chat_body("Hello!", 1, temperature=0)
    _section(
        results,
        "startup",
        lambda: startup.serve_startup(o.startup_runs, lambda p: procs.mockserver_command(p, o.server_cmd), first),
    )
    statements = ["import mockserver", "import mockserver.app"]
    _section(results, "imports", lambda: startup.import_figures(o.import_runs, statements))
    _section(results, "model", lambda: sections.model_only(o))
    _section(results, "lookup", lambda: sections.lookup(o))
    journalled = json.dumps(driver.chat_body(driver.SHORT_PROMPTS[0], 16, temperature=0))
    _section(results, "memory", lambda: sections.memory(o, journalled))
    results["meta"]["load_after"] = machine.load_average()
    results["meta"]["elapsed_s"] = time.perf_counter() - began
    text = report.render(results)
    print(text)
    o.out.parent.mkdir(parents=True, exist_ok=True)
    o.out.write_text(text)
    if o.json_out is not None:
        o.json_out.write_text(json.dumps(results, indent=2))
    print(f"[bench] wrote {o.out} in {results['meta']['elapsed_s']:.0f} s", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
