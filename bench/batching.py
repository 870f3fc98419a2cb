"""The reference model under load, beside its baseline in one run:
``python -m bench.batching [--quick] [--baseline REV] [--json FILE]``.

Starts four reference-model servers: this tree's, decoding alone (``max_batch`` 0: each request
by itself on the model pool) and batched (64: continuous batching,
:mod:`mockserver.backends.reference.scheduler`), and the same two from commit ``--baseline``
(default :data:`BASELINE`, the tree before the model computed with its own kernel), checked out
beside this one (:mod:`bench.baseline`; ``--baseline none`` skips them). Within one tree every
server answers the same bytes (``tests/server/test_batching.py``). Cells run in interleaved
rounds (each server in turn), each keeping its best round: other load on the machine can only
lower a throughput. Measured, per server:

* 64-token streams (greedy, ``ignore_eos``) at 1 / 8 / 32 / 64 concurrent streams: total
  tokens per second, and time to first token;
* the 16-token chat of ``make bench`` (not streamed) at concurrency 1 (latency) and 64 (req/s);
* ``/health`` probed at 50 Hz while 32 streams run;

and, without HTTP (``python -m bench.batching model``, a child process of its own, in each
tree), µs per row of one decoding step at B = 1 / 8 / 32 / 64, rows of mixed lengths and of one.

Also ``python -m bench.batching serve --port P --max-batch N``: the server it starts (the
settings a plain ``mockserver serve`` has, with the backend built for ``max_batch``).
Prints a markdown table, and one JSON object with ``--json``. Figures describe one machine at
one moment (the load average is printed beside them); they are never test assertions.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import baseline, driver, machine, procs
from bench.loadgen import Cell

__all__ = ["BASELINE", "main"]

BASELINE = "4fd281b"  # batched decoding on torch and MKL: the last commit before the kernel
MAX_BATCH = {"alone": 0, "batched": 64}
STREAMS = (1, 8, 32, 64)
STREAM_TOKENS = 64


def _serve(port: int, max_batch: int) -> int:
    import uvicorn

    from mockserver.app import create_app
    from mockserver.backends.reference.backend import ReferenceBackend
    from mockserver.config import Settings
    from mockserver.http.server import uvicorn_config
    from mockserver.media.vectors import MAX_INPUT_TOKENS

    settings = Settings(host=procs.HOST, port=port, log_level="warning")
    longest = max([settings.context_window, MAX_INPUT_TOKENS, *settings.model_windows().values()])
    backend = ReferenceBackend(settings.model_threads, max_positions=longest, max_batch=max_batch)
    app = create_app(settings, backend=backend)
    uvicorn.Server(uvicorn_config(app, procs.HOST, port, "warning")).run()
    return 0


@contextmanager
def _servers(trees: dict[str, Path]) -> Iterator[dict[str, procs.Server]]:
    """Every tree's two servers, named ``tree/alone`` and ``tree/batched``."""
    with ExitStack() as stack:
        started = {}
        for tree, root in trees.items():
            for mode, max_batch in MAX_BATCH.items():
                port = procs.free_port()
                argv = [
                    sys.executable,
                    "-m",
                    "bench.batching",
                    "serve",
                    "--port",
                    str(port),
                    "--max-batch",
                    str(max_batch),
                ]
                started[f"{tree}/{mode}"] = stack.enter_context(procs.running(f"{tree}-{mode}", argv, root=root))
        for server in started.values():  # the model loads on the first request, not in a cell
            procs.post_json(server.port, driver.CHAT, driver.chat_body("Hi", 2, temperature=0))
        yield started


def _best(cells: dict[str, Cell], rounds: int) -> dict[str, dict[str, Any]]:
    """Each server's cell ``rounds`` times, interleaved; the best round kept (all req/s listed)."""
    best: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for name, cell in cells.items():
            result = driver.run_cell(cell)
            result["load_before"] = machine.load_average()
            kept = best.get(name)
            rates = [*(kept or {}).get("rounds", []), result["requests_per_s"]]
            if kept is None or result["requests_per_s"] > kept["requests_per_s"]:
                best[name] = result
            best[name]["rounds"] = rates
    return best


def _model_figures(root: Path) -> dict[str, Any]:
    env_root = {} if root == procs.ROOT else {"PYTHONPATH": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "bench.batching", "model"],
        cwd=root,
        env={**os.environ, **env_root},
        capture_output=True,
        text=True,
        timeout=600,
    )
    return json.loads(done.stdout) if done.returncode == 0 else {"error": done.stderr[-2000:]}


def measure(quick: bool, rounds: int, duration: float, base: str | None) -> dict[str, Any]:
    results: dict[str, Any] = {"meta": machine.describe("python -m bench.batching" + (" --quick" if quick else ""))}
    with ExitStack() as stack:
        trees = {"now": procs.ROOT}
        if base is not None:
            results["meta"]["baseline"] = baseline.describe(base)
            trees = {"before": stack.enter_context(baseline.checkout(base)), **trees}
        servers = stack.enter_context(_servers(trees))
        first = next(iter(servers.values()))
        chosen = driver.choose_chat(first.port, driver.SHORT_PROMPTS)
        stream_body = driver.chat_body(
            driver.SHORT_PROMPTS[0],
            STREAM_TOKENS,
            temperature=0,
            ignore_eos=True,
            stream=True,
            stream_options={"include_usage": True},
        )

        def cells(cell: Cell) -> dict[str, Cell]:
            return {n: replace(cell, port=s.port, server_pid=s.pid) for n, s in servers.items()}

        streams: dict[str, Any] = {}
        for c in STREAMS:
            cell = Cell(
                port=0,
                path=driver.CHAT,
                body=json.dumps(stream_body),
                stream=True,
                concurrency=c,
                warmup=1.0,
                duration=duration,
            )
            streams[str(c)] = _best(cells(cell), rounds)
        results["streams"] = streams
        chat: dict[str, Any] = {"note": chosen.note, "tokens": chosen.completion_tokens}
        for c in (1, 64):
            cell = Cell(port=0, path=driver.CHAT, body=chosen.json(), concurrency=c, warmup=0.5, duration=duration)
            chat[str(c)] = _best(cells(cell), rounds)
        results["chat16"] = chat
        health: dict[str, Any] = {}
        for name, server in servers.items():
            span = max(3.0, 2 * duration)
            load = Cell(
                port=server.port,
                path=driver.CHAT,
                body=json.dumps(stream_body),
                stream=True,
                concurrency=32,
                warmup=1.0,
                duration=span,
                server_pid=server.pid,
            )
            probe = Cell(
                port=server.port,
                path="/health",
                method="GET",
                rate_hz=50.0,
                warmup=1.5,
                duration=span - 1.0,
                timeout=10.0,
            )
            _, probed = driver.run_cells_together([load, probe])
            health[name] = probed
        results["health"] = health
        results["model"] = {tree: _model_figures(root) for tree, root in trees.items()}
    results["meta"]["load_after"] = machine.load_average()
    return results


def model_only(reps: int = 30) -> dict[str, Any]:
    """µs per row of one decoding step (best of 5 runs): each row alone, and all together."""
    import time

    from mockserver.gpt import kernels
    from mockserver.gpt.decoder import Decoder
    from mockserver.gpt.model import load_model
    from mockserver.gpt.tokenizer import ASSETS

    decoder = Decoder.of(load_model(ASSETS), kernels.load())

    def best(fn: Any, rows: int) -> float:
        for _ in range(3):
            fn()
        runs = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            runs.append((time.perf_counter() - start) / reps / rows * 1e6)
        return min(runs)

    def timed(b: int, same: bool) -> tuple[float, float]:
        slots = decoder.slots(b)
        placed = [slots.copy(decoder.prefill(list(range(3, 53 + (0 if same else i))))[1], 0) for i in range(b)]

        def back() -> None:  # every run steps the same lengths
            for s in placed:
                slots.end[s] -= 1
                slots.position[s] -= 1

        def batched() -> None:
            decoder.step(slots, [(s, 5) for s in placed])
            back()

        def alone() -> None:
            for s in placed:
                decoder.step(slots, [(s, 5)])
            back()

        return best(alone, b), best(batched, b)

    out: dict[str, Any] = {"kernel": decoder.kernel.name}
    for b in STREAMS:
        alone, mixed = timed(b, same=False)
        _, same = timed(b, same=True)
        out[str(b)] = {"alone": alone, "batched_mixed": mixed, "batched_same": same}
    out["load_after"] = machine.load_average()
    return out


def _tokens_per_s(result: dict[str, Any]) -> float:
    return float(result["requests_per_s"] * (result["completion_tokens_mean"] or 0))


def _ratio(value: float, base: float) -> str:
    return f"{value / base:.1f}×" if base else "–"


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    names = list(next(iter(results["streams"].values())))
    first = names[0]  # the baseline's single-row path when there is a baseline
    lines = [
        "## The reference model under load, beside its baseline",
        "",
        f"{meta['cores']} cores ({meta['cpu']}), {meta['date']}, commit {meta['commit']}"
        + (f"; baseline {meta['baseline']}" if meta.get("baseline") else "")
        + f". Load average before: {meta['load_before']}, after: {meta['load_after']}. Best of the interleaved "
        f"rounds per cell; × is against **{first}**.",
        "",
        "Total tokens/s of 64-token streams (time to first token p50, ms):",
        "",
        "| streams | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for c, row in results["streams"].items():
        base = _tokens_per_s(row[first])
        rates = {n: _tokens_per_s(row[n]) for n in names}
        cells = [f"{rates[n]:,.0f} ({_ratio(rates[n], base)}; {row[n]['first_token_ms']['p50']:.1f})" for n in names]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    chat = results["chat16"]
    lines += [
        "",
        f"16-token chat, not streamed ({chat['note']}, {chat['tokens']} tokens): req/s (p50 ms):",
        "",
        "| concurrency | " + " | ".join(names) + " |",
        "| --- | " + " | ".join("---" for _ in names) + " |",
    ]
    for c in ("1", "64"):
        base = chat[c][first]["requests_per_s"]
        cells = [
            f"{chat[c][n]['requests_per_s']:,.1f} ({_ratio(chat[c][n]['requests_per_s'], base)}; "
            f"{chat[c][n]['latency_ms']['p50']:.1f})"
            for n in names
        ]
        lines.append(f"| {c} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "Server CPU (cores) during 32 streams: "
        + ", ".join(f"{n} {results['streams']['32'][n]['server_cpu']:.2f}" for n in names),
        "",
        "`/health` at 50 Hz during 32 streams:",
        "",
    ]
    for name, probe in results["health"].items():
        lat = probe["latency_ms"]
        lines.append(f"- {name}: p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, errors {probe['errors']}")
    for tree, model in results.get("model", {}).items():
        if "error" in model:
            lines += ["", f"Model only ({tree}): failed: {model['error']}"]
            continue
        lines += [
            "",
            f"Model only, {tree} ({model.get('kernel', 'torch')}), µs per row of one decoding step "
            f"(load after: {model['load_after']}):",
            "",
            "| rows | row by row | together, mixed lengths | together, one length |",
            "| --- | --- | --- | --- |",
        ]
        for b in STREAMS:
            r = model[str(b)]
            lines.append(f"| {b} | {r['alone']:.0f} | {r['batched_mixed']:.0f} | {r['batched_same']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    served = sub.add_parser("serve", help="run one of the servers (the bench starts them itself)")
    served.add_argument("--port", type=int, required=True)
    served.add_argument("--max-batch", type=int, required=True)
    sub.add_parser("model", help="the model-only figures, as JSON (the bench runs it as a child)")
    parser.add_argument("--quick", action="store_true", help="one round of 1.5 s per cell (default: 3 of 3 s)")
    parser.add_argument(
        "--baseline", default=BASELINE, help=f"commit to measure beside this tree (default {BASELINE}; 'none')"
    )
    parser.add_argument("--json", default=None, help="also write the raw figures here")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args.port, args.max_batch)
    if args.command == "model":
        print(json.dumps(model_only()), flush=True)
        return 0
    base = None if args.baseline == "none" else args.baseline
    if base is not None and baseline.describe(base) is None:
        print(f"baseline {base} is not in this clone: measuring this tree alone", file=sys.stderr)
        base = None
    results = measure(args.quick, 1 if args.quick else 3, 1.5 if args.quick else 3.0, base)
    print(render(results), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
