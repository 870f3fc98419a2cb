"""What the logits processors cost: ``python bench/processors.py [--baseline REV] [--rounds N]``.

The 16-token chat completion of a ~50-token prompt, one request at a time, on four servers
measured in interleaved rounds (so the machine's drift hits all alike):

* **baseline**: the code at ``--baseline`` (default: the foundation's last commit), checked
  out into a temporary ``git worktree`` and served from there;
* **plain**: this tree, the same request (no processor on: the fast path);
* **processed**: this tree, every processor on at once (logit_bias, presence, frequency and
  repetition penalties, min_p, top_k, ignore_eos, min_tokens; temperature 0.8);
* **mirostat**: this tree, Mirostat v2 (plus ignore_eos, so every reply has 16 tokens).

Prints p50/p90 per server per round and the ratio of the medians to the baseline. Figures
are for issue notes, never assertions in the test suite.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import statistics
from contextlib import ExitStack
from typing import Any

from bench import baseline, driver, procs
from bench.driver import CHAT, LONG_SUFFIX, LONG_TEXT
from bench.loadgen import Cell

FOUNDATION = "a195894"
PROCESSORS: dict[str, Any] = {
    "temperature": 0.8,
    "seed": 1,
    "top_k": 40,
    "min_p": 0.02,
    "presence_penalty": 0.5,
    "frequency_penalty": 0.3,
    "repetition_penalty": 1.1,
    "logit_bias": {"300": 1.5, "301": -2.0},
    "ignore_eos": True,
    "min_tokens": 4,
}
MIROSTAT: dict[str, Any] = {"temperature": 1.0, "seed": 1, "mirostat_target": 3.0, "ignore_eos": True}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default=FOUNDATION, help=f"git revision to compare with (default {FOUNDATION})")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--duration", type=float, default=4.0, help="measured seconds per server per round")
    a = p.parse_args(argv)
    with ExitStack() as stack:
        tree = stack.enter_context(baseline.checkout(a.baseline))
        servers = {
            "baseline": stack.enter_context(
                procs.running("baseline", procs.mockserver_command(procs.free_port()), root=tree)
            ),
            "current": stack.enter_context(procs.running("current", procs.mockserver_command(procs.free_port()))),
        }
        content = driver.fit_prompt(servers["current"].port, LONG_TEXT.split(), 50, LONG_SUFFIX)
        chosen = driver.choose_chat(servers["current"].port, [content])
        variants = {
            "baseline": (servers["baseline"], chosen.json()),
            "plain": (servers["current"], chosen.json()),
            "processed": (servers["current"], chosen.json(**PROCESSORS)),
            "mirostat": (servers["current"], chosen.json(**MIROSTAT)),
        }
        p50s: dict[str, list[float]] = {name: [] for name in variants}
        print(f"request: {chosen.note}, prompt_tokens {chosen.prompt_tokens}; baseline {a.baseline}")
        for round_ in range(a.rounds):
            for name, (server, body) in variants.items():
                cell = Cell(
                    port=server.port,
                    path=CHAT,
                    body=body,
                    concurrency=1,
                    warmup=1.0,
                    duration=a.duration,
                    server_pid=server.pid,
                )
                result = driver.run_cell(cell)
                latency = result["latency_ms"]
                p50s[name].append(latency["p50"])
                print(
                    f"round {round_ + 1} {name:>9}: p50 {latency['p50']:6.2f} ms  p90 {latency['p90']:6.2f} ms  "
                    f"tokens {result['completion_tokens_mean']:.1f}  errors {result['errors']}  "
                    f"other CPU {max(0.0, result['system_cpu'] - result['server_cpu'] - result['client_cpu']):.2f}",
                    flush=True,
                )
        base = statistics.median(p50s["baseline"])
        summary = {name: statistics.median(values) for name, values in p50s.items()}
        print("\n| server | median p50 (ms) | × baseline |\n| --- | --- | --- |")
        for name, value in summary.items():
            print(f"| {name} | {value:.2f} | {value / base:.3f} |")
        print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
