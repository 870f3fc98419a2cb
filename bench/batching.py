"""Batched decoding against the single-row path, side by side in one run:
``python -m bench.batching [--quick] [--json FILE]``.

Starts two reference-model servers that differ only in ``max_batch``: **alone** (0: every
request decodes by itself on the model pool, the path before batching) and **batched**
(64: continuous batching, :mod:`mockserver.backends.reference.scheduler`). Both answer every
request with the same bytes (``tests/server/test_batching.py``); this measures what batching
buys. Cells run in interleaved rounds (alone, batched, alone, …), each keeping its best round:
other load on the machine can only lower a throughput. Measured, per server:

* 64-token streams (greedy, ``ignore_eos``) at 1 / 8 / 32 / 64 concurrent streams: total
  tokens per second, and time to first token;
* the 16-token chat of ``make bench`` (not streamed) at concurrency 1 (latency) and 64 (req/s);
* ``/health`` probed at 50 Hz while 32 streams run.

and, without HTTP (``python -m bench.batching model``, a child process of its own), one decoding
step per row: ``GPT.step`` row by row against ``step_rows`` at B = 1 / 8 / 32 / 64, rows of
mixed lengths (each its own attention call) and of one length (one call for all).

Also ``python -m bench.batching serve --port P --max-batch N``: the server it starts (the
settings a plain ``mockserver serve`` has, with the backend built for ``max_batch``).
Prints a markdown table, and one JSON object with ``--json``. Figures describe one machine at
one moment (the load average is printed beside them); they are never test assertions.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from typing import Any

from bench import driver, machine, procs
from bench.loadgen import Cell

__all__ = ["main"]

SERVERS = {"alone": 0, "batched": 64}
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
def _servers() -> Iterator[dict[str, procs.Server]]:
    with ExitStack() as stack:
        started = {}
        for name, max_batch in SERVERS.items():
            port = procs.free_port()
            argv = [sys.executable, "-m", "bench.batching", "serve", "--port", str(port), "--max-batch", str(max_batch)]
            started[name] = stack.enter_context(procs.running(name, argv))
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


def measure(quick: bool, rounds: int, duration: float) -> dict[str, Any]:
    results: dict[str, Any] = {"meta": machine.describe("python -m bench.batching" + (" --quick" if quick else ""))}
    with _servers() as servers:
        alone = servers["alone"]
        chosen = driver.choose_chat(alone.port, driver.SHORT_PROMPTS)
        stream_body = driver.chat_body(
            driver.SHORT_PROMPTS[0],
            STREAM_TOKENS,
            temperature=0,
            ignore_eos=True,
            stream=True,
            stream_options={"include_usage": True},
        )

        def cells(base: Cell) -> dict[str, Cell]:
            return {n: replace(base, port=s.port, server_pid=s.pid) for n, s in servers.items()}

        streams: dict[str, Any] = {}
        for c in STREAMS:
            base = Cell(
                port=0,
                path=driver.CHAT,
                body=json.dumps(stream_body),
                stream=True,
                concurrency=c,
                warmup=1.0,
                duration=duration,
            )
            streams[str(c)] = _best(cells(base), rounds)
        results["streams"] = streams
        chat: dict[str, Any] = {"note": chosen.note, "tokens": chosen.completion_tokens}
        for c in (1, 64):
            base = Cell(port=0, path=driver.CHAT, body=chosen.json(), concurrency=c, warmup=0.5, duration=duration)
            chat[str(c)] = _best(cells(base), rounds)
        results["chat16"] = chat
        health: dict[str, Any] = {}
        for name, server in servers.items():
            load = Cell(
                port=server.port,
                path=driver.CHAT,
                body=json.dumps(stream_body),
                stream=True,
                concurrency=32,
                warmup=1.0,
                duration=max(3.0, 2 * duration),
                server_pid=server.pid,
            )
            probe = Cell(
                port=server.port,
                path="/health",
                method="GET",
                rate_hz=50.0,
                warmup=1.5,
                duration=max(3.0, 2 * duration) - 1.0,
                timeout=10.0,
            )
            _, probed = driver.run_cells_together([load, probe])
            health[name] = probed
        results["health"] = health
    model = subprocess.run(
        [sys.executable, "-m", "bench.batching", "model"], cwd=procs.ROOT, capture_output=True, text=True, timeout=600
    )
    results["model"] = json.loads(model.stdout) if model.returncode == 0 else {"error": model.stderr[-2000:]}
    results["meta"]["load_after"] = machine.load_average()
    return results


def model_only(reps: int = 30) -> dict[str, Any]:
    """Microseconds per row of one decoding step, single-row vs batched (best of 5 runs)."""
    import time

    import torch

    from mockserver.gpt.batched import SlotCache, step_rows
    from mockserver.gpt.model import load_model
    from mockserver.gpt.tokenizer import ASSETS

    torch.set_num_threads(1)  # as the model threads run
    model = load_model(ASSETS)

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
        caches = [model.prefill(list(range(3, 53 + (0 if same else i))))[1] for i in range(b)]
        store = SlotCache(model, slots=b)
        slots = [store.load(c) for c in caches]

        def batched() -> None:
            step_rows(model, store, slots, [5] * b)
            for s in slots:  # back to where it was: every run steps the same lengths
                store.end[s] -= 1
                store.position[s] -= 1

        def alone() -> None:
            for c in caches:
                model.step(5, c)

        return best(alone, b), best(batched, b)

    out: dict[str, Any] = {}
    for b in STREAMS:
        alone, mixed = timed(b, same=False)
        _, same = timed(b, same=True)
        out[str(b)] = {"alone": alone, "batched_mixed": mixed, "batched_same": same}
    out["load_after"] = machine.load_average()
    return out


def _tokens_per_s(result: dict[str, Any]) -> float:
    return float(result["requests_per_s"] * (result["completion_tokens_mean"] or 0))


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        "## Batched decoding vs the single-row path",
        "",
        f"{meta['cores']} cores ({meta['cpu']}), {meta['date']}, commit {meta['commit']}. Load average "
        f"before: {meta['load_before']}, after: {meta['load_after']}. Best of the interleaved rounds per cell.",
        "",
        "| streams | alone tokens/s | batched tokens/s | × | alone TTFT p50 ms | batched TTFT p50 ms | "
        "alone server CPU | batched server CPU |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c, pair in results["streams"].items():
        a, b = pair["alone"], pair["batched"]
        ta, tb = _tokens_per_s(a), _tokens_per_s(b)
        lines.append(
            f"| {c} | {ta:.0f} | {tb:.0f} | {tb / ta if ta else float('nan'):.1f} | "
            f"{a['first_token_ms']['p50']:.1f} | {b['first_token_ms']['p50']:.1f} | "
            f"{a['server_cpu']:.2f} | {b['server_cpu']:.2f} |"
        )
    chat = results["chat16"]
    lines += [
        "",
        f"16-token chat (not streamed; {chat['note']}, {chat['tokens']} tokens):",
        "",
        "| concurrency | alone req/s | batched req/s | × | alone p50 ms | batched p50 ms |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for c in ("1", "64"):
        a, b = chat[c]["alone"], chat[c]["batched"]
        ra, rb = a["requests_per_s"], b["requests_per_s"]
        lines.append(
            f"| {c} | {ra:.1f} | {rb:.1f} | {rb / ra if ra else float('nan'):.1f} | "
            f"{a['latency_ms']['p50']:.1f} | {b['latency_ms']['p50']:.1f} |"
        )
    lines += ["", "`/health` at 50 Hz during 32 streams:", ""]
    for name, probe in results["health"].items():
        lat = probe["latency_ms"]
        lines.append(f"- {name}: p50 {lat['p50']:.1f} ms, p99 {lat['p99']:.1f} ms, errors {probe['errors']}")
    model = results.get("model", {})
    if "error" in model:
        lines += ["", f"Model only: failed: {model['error']}"]
    elif model:
        lines += [
            "",
            f"Model only (no HTTP), µs per row of one decoding step (load after: {model['load_after']}):",
            "",
            "| rows | GPT.step row by row | step_rows, mixed lengths | step_rows, one length |",
            "| --- | --- | --- | --- |",
        ]
        for b in STREAMS:
            r = model[str(b)]
            lines.append(f"| {b} | {r['alone']:.0f} | {r['batched_mixed']:.0f} | {r['batched_same']:.0f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    served = sub.add_parser("serve", help="run one of the two servers (the bench starts them itself)")
    served.add_argument("--port", type=int, required=True)
    served.add_argument("--max-batch", type=int, required=True)
    sub.add_parser("model", help="the model-only figures, as JSON (the bench runs it as a child)")
    parser.add_argument("--quick", action="store_true", help="one round of 1.5 s per cell (default: 3 of 3 s)")
    parser.add_argument("--json", default=None, help="also write the raw figures here")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return _serve(args.port, args.max_batch)
    if args.command == "model":
        print(json.dumps(model_only()), flush=True)
        return 0
    results = measure(args.quick, 1 if args.quick else 3, 1.5 if args.quick else 3.0)
    print(render(results), flush=True)
    if args.json:
        with open(args.json, "w") as out:
            json.dump(results, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
