"""What the fault machinery costs a request that gets no fault:
``python bench/faults_overhead.py [--rounds N] [--duration S]``.

Two servers from this tree side by side — one as users run it, one with ``--no-injector``
(provider paths bypass fault decisions, rate limits and the journal) — measured in
interleaved rounds on the 16-token chat completion (concurrency 1 and 16) and on
``GET /v1/models`` (concurrency 16: the cheapest request, where a fixed cost shows most).
Prints req/s per cell and the ratio with / without. Figures are for issue notes only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import statistics
from contextlib import ExitStack

from bench import driver, procs
from bench.driver import CHAT, SHORT_PROMPTS
from bench.loadgen import Cell


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=4.0)
    a = p.parse_args(argv)
    with ExitStack() as stack:
        on = stack.enter_context(procs.running("injector", procs.mockserver_command(procs.free_port())))
        off = stack.enter_context(
            procs.running("no-injector", procs.mockserver_command(procs.free_port(), extra=["--no-injector"]))
        )
        chosen = driver.choose_chat(on.port, SHORT_PROMPTS)
        cells = {
            "chat c=1": (CHAT, "POST", chosen.json(), 1),
            "chat c=16": (CHAT, "POST", chosen.json(), 16),
            "models c=16": ("/v1/models", "GET", "", 16),
        }
        rates: dict[tuple[str, str], list[float]] = {}
        for round_ in range(a.rounds):
            for name, (path, method, body, concurrency) in cells.items():
                for label, server in (("on", on), ("off", off)):
                    cell = Cell(
                        port=server.port,
                        path=path,
                        method=method,
                        body=body,
                        concurrency=concurrency,
                        warmup=1.0,
                        duration=a.duration,
                        server_pid=server.pid,
                    )
                    result = driver.run_cell(cell)
                    rates.setdefault((name, label), []).append(result["requests_per_s"])
                    print(
                        f"round {round_ + 1} {name:>12} injector {label:>3}: {result['requests_per_s']:8.1f} req/s "
                        f"p50 {result['latency_ms']['p50']:6.2f} ms errors {result['errors']}",
                        flush=True,
                    )
        print(
            f"\nrequest: {chosen.note}\n\n"
            "| cell | injector on (req/s) | off (req/s) | on / off |\n| --- | --- | --- | --- |"
        )
        for name in cells:
            with_, without = statistics.median(rates[(name, "on")]), statistics.median(rates[(name, "off")])
            print(f"| {name} | {with_:.1f} | {without:.1f} | {with_ / without:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
