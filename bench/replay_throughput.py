"""Replay throughput against the Starlette ceiling: ``python bench/replay_throughput.py``.

Serves the shipped ``cassettes/`` and replays the non-stream completions recording at
concurrency 1 and 16, interleaved with the ceiling app (``bench/ceiling.py``) measured in
the same run, with the fault injector on (as users run it) and off. Prints req/s and the
ratio to the ceiling. Figures are for issue notes only.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import statistics
from contextlib import ExitStack

from bench import driver, procs
from bench.loadgen import Cell
from mockserver.cassettes.files import CassetteDir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=4.0)
    a = p.parse_args(argv)
    shipped = procs.ROOT / "cassettes"
    (recorded,) = CassetteDir(shipped).load("completions-logprobs.yaml")
    body = recorded.request.body.decode()
    path = "/v1/completions"
    with ExitStack() as stack:
        servers = {
            "ceiling": stack.enter_context(procs.running("ceiling", procs.ceiling_command(procs.free_port()))),
            "replay": stack.enter_context(
                procs.running(
                    "replay", procs.mockserver_command(procs.free_port(), extra=["--cassettes", str(shipped)])
                )
            ),
            "replay --no-injector": stack.enter_context(
                procs.running(
                    "replay-bare",
                    procs.mockserver_command(procs.free_port(), extra=["--cassettes", str(shipped), "--no-injector"]),
                )
            ),
        }
        rates: dict[tuple[str, int], list[float]] = {}
        for round_ in range(a.rounds):
            for concurrency in (1, 16):
                for name, server in servers.items():
                    cell = Cell(
                        port=server.port,
                        path=path,
                        body=body,
                        concurrency=concurrency,
                        warmup=1.0,
                        duration=a.duration,
                        server_pid=server.pid,
                    )
                    result = driver.run_cell(cell)
                    rates.setdefault((name, concurrency), []).append(result["requests_per_s"])
                    print(
                        f"round {round_ + 1} c={concurrency:>2} {name:>22}: {result['requests_per_s']:8.1f} req/s "
                        f"errors {result['errors']}",
                        flush=True,
                    )
        print("\n| server | c | req/s | × ceiling |\n| --- | --- | --- | --- |")
        for (name, concurrency), values in rates.items():
            ceiling, rate = statistics.median(rates[("ceiling", concurrency)]), statistics.median(values)
            print(f"| {name} | {concurrency} | {rate:.0f} | {rate / ceiling:.2f} |")
        print(json.dumps({f"{n} c={c}": statistics.median(v) for (n, c), v in rates.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
