"""What one answer costs on each backend, beside the Starlette ceiling, in one run:
``python bench/spine.py [--baseline REV] [--duration S] [--rounds N] [--concurrency 1,16,64] [--out FILE]
[--[no-]aimock]``.

Servers, each its own process, started the way users start them:

* **ceiling** — ``bench/ceiling.py`` under uvicorn (uvloop, httptools): parse a JSON body,
  answer a small fixed object. The fastest a Starlette handler answers here.
* **scripted** — ``mockserver serve`` with one scripted rule (``{"text": …}`` of 24 tokens,
  no ``match``) added over the admin API: every chat request gets that answer. Measured
  *plain* and *stream* with one body sent again and again — answered as remembered after the
  first (``mockserver/edge/repeats.py``: the edge keeps the bytes of an answer made at once
  from a rule that reads no count, and sends them again to the identical request within its
  second, journaled and counted), as a test suite asking the same thing again is — and
  *varied*: every body its own (a number after the prompt), so nothing remembered is reused
  and every request takes the long way (read, validated, asked of the chain, encoded).
* **replay** — ``mockserver serve --cassettes DIR`` over a cassette recorded in this run by a
  recording mockserver proxying a reference one (its one recording of the body, answered as
  remembered after the first, as above).
* **reference** — ``mockserver serve``: the model samples a 16-token answer.
* **baseline-…** — with ``--baseline REV``, the same scripted and reference servers from a git
  worktree of that revision, side by side in the same run (the figures the issue compares).
* **aimock 1.43** — a peer, not ours (``bench/aimock.py``): ``@copilotkit/aimock@1.43.0``, fetched
  with ``npm pack`` into ``bench/.aimock/`` on first use, run by ``node`` with one catch-all fixture
  answering the scripted text, plain and streamed. By default it joins the run when it can be
  fetched and run (else a note says why not); ``--aimock`` requires it, ``--no-aimock`` leaves it out.

Load comes from ``wrk`` (a separate C process; Debian's ``wrk``), closed loop at each
concurrency, after a warm-up. *CPU per request* is the server process's own CPU time
(utime + stime from ``/proc``) over the measured window divided by the requests it answered:
on a shared 2-core machine this is the steadier figure, since requests per second drop
whenever anything else takes a core. The reference model's latency is measured alone, at
concurrency 1, as wrk's p50.

Figures describe one machine at one moment: they go into issue notes and README tables, never
into test assertions.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, replace
from typing import Any

from bench import aimock, baseline, procs

CHAT = "/v1/chat/completions"
PROMPT = "Tell me about the sea and the ships that sail on it, please."
# Sentences joined until the shipped tokenizer counts 24 tokens (cut to 24 exactly).
SENTENCES = ("Your order has shipped and should arrive on Monday.", "Thank you for shopping with us today.")
TOKENS = 24  # of the scripted answer


@dataclass
class Cell:
    server: str
    shape: str  # "plain", "stream", or "varied" (plain, every body its own)
    concurrency: int
    requests: int
    seconds: float
    rps: float
    p50_ms: float
    p99_ms: float
    cpu_ms: float  # server CPU per request
    errors: int
    round: int = 0


def _scripted_text(tokens: int = TOKENS) -> str:
    from mockserver.gpt.tokenizer import Tokenizer

    tok = Tokenizer.shipped()
    text = " ".join(SENTENCES * 4)
    ids = tok.encode(text)[:tokens]
    cut = tok.decode(ids)
    assert len(tok.encode(cut)) == tokens, "the scripted text does not round-trip to 24 tokens"
    return cut


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


_LUA = """wrk.method = "POST"
wrk.body = [[%s]]
wrk.headers["Content-Type"] = "application/json"
"""

# Every request's body its own (a number after the prompt, unique across wrk's threads): what
# the server remembers of a body it has read before is never reused.
_VARIED = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local threads = 0
function setup(thread)
  thread:set("id", threads)
  threads = threads + 1
end
function init(args)
  n = id * 1000000000
end
function request()
  n = n + 1
  return wrk.format(nil, nil, nil, [[%s]] .. n .. [[%s]])
end
"""
VARY = "@@N@@"  # where the request's number goes (JSON keeps it as it is; no prompt holds it)


def _wrk(
    port: int, body: dict[str, Any], concurrency: int, seconds: float, workdir: Path, varied: bool = False
) -> dict[str, float]:
    script = workdir / "body.lua"
    if varied:
        head, tail = json.dumps(_varied(body)).split(VARY)
        script.write_text(_VARIED % (head, tail))
    else:
        script.write_text(_LUA % json.dumps(body))
    threads = 1 if concurrency == 1 else 2
    out = subprocess.run(
        [
            "wrk",
            f"-t{threads}",
            f"-c{concurrency}",
            f"-d{max(1, round(seconds))}s",
            "--latency",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}{CHAT}",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    ).stdout
    done = re.search(r"(\d+) requests in ([\d.]+)(m?s)", out)
    assert done is not None, out
    requests = int(done.group(1))
    errors = sum(int(n) for n in re.findall(r"Non-2xx or 3xx responses: (\d+)", out))
    errors += sum(int(n) for n in re.findall(r"(?:connect|read|write|timeout) (\d+)", out))
    return {"requests": requests, "p50": _ms(out, "50%"), "p99": _ms(out, "99%"), "errors": errors}


def _varied(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with a place for the request's number at the end of its last message."""
    messages = [dict(m) for m in body["messages"]]
    messages[-1]["content"] = f"{messages[-1]['content']} #{VARY}"
    return {**body, "messages": messages}


def _ms(out: str, label: str) -> float:
    found = re.search(rf"{re.escape(label)}\s+([\d.]+)(us|ms|s)\b", out)
    if found is None:
        return float("nan")
    value, unit = float(found.group(1)), found.group(2)
    return value / 1000 if unit == "us" else value * 1000 if unit == "s" else value


def measure(
    name: str,
    pid: int,
    port: int,
    body: dict[str, Any],
    shape: str,
    concurrency: int,
    seconds: float,
    warmup: float,
    workdir: Path,
    varied: bool = False,
) -> Cell:
    _wrk(port, body, concurrency, warmup, workdir, varied)
    before, started = _cpu(pid), time.perf_counter()
    got = _wrk(port, body, concurrency, seconds, workdir, varied)
    elapsed, cpu = time.perf_counter() - started, _cpu(pid) - before
    n = max(1, int(got["requests"]))
    return Cell(
        name, shape, concurrency, n, elapsed, n / seconds, got["p50"], got["p99"], cpu / n * 1000, int(got["errors"])
    )


def _serve(stack: ExitStack, name: str, extra: list[str] = (), tree: Path | None = None) -> procs.Server:  # type: ignore[assignment]
    argv = procs.mockserver_command(procs.free_port(), extra=list(extra))
    return stack.enter_context(procs.running(name, argv, root=tree or procs.ROOT))


def _script(port: int, text: str) -> None:
    """One rule for every request; then one scored answer, so the model has loaded (in the
    background, from start-up) before anything is measured."""
    status, answer = procs.request(port, "POST", "/__mockserver/answers", {"text": text})
    assert status == 200, answer
    body = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}], "logprobs": True}
    status, answer = procs.request(port, "POST", CHAT, body)
    assert status == 200, answer


def _sixteen(port: int) -> dict[str, Any]:
    """A chat request the model answers with exactly 16 tokens (seed searched)."""
    for seed in range(200):
        body = {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": PROMPT}],
            "max_tokens": 16,
            "seed": seed,
        }
        status, answer = procs.post_json(port, CHAT, body)
        if status == 200 and answer.get("usage", {}).get("completion_tokens") == 16:  # type: ignore[union-attr]
            return body
    raise RuntimeError("no seed gives a 16-token answer")


def _aimock_peer(wanted: bool | None) -> tuple[Path, str] | None:
    """aimock's unpacked package and the ``node`` to run it, or None. Fetched before any server starts,
    so a registry out of reach costs seconds, not a run: by default that skips aimock with a note;
    asked for by name (``--aimock``) it stops the run (``aimock.Unavailable``)."""
    if wanted is False:
        return None
    try:
        unpacked = aimock.package()
        return unpacked, aimock.node(unpacked)
    except aimock.Unavailable as exc:
        if wanted:
            raise
        print(f"bench/spine.py: without aimock ({exc}); --no-aimock silences this", file=sys.stderr)
        return None


def _start_aimock(
    stack: ExitStack, peer: tuple[Path, str], workdir: Path, text: str, chat: dict[str, Any], notes: dict[str, str]
) -> procs.Server:
    """aimock on a free loopback port with one fixture answering ``text``; checked to answer the
    measured body, plain and streamed, with that text before anything is measured."""
    unpacked, node_path = peer
    chunk = aimock.stream_chunk_size(text, TOKENS)
    fixture = aimock.write_fixture(workdir / "aimock-fixtures.json", text)
    argv = aimock.command(unpacked, node_path, procs.free_port(), fixture, chunk)
    server = stack.enter_context(procs.running("aimock", argv))
    _check_answer(server.port, chat, text)
    frames, streamed = _stream(server.port, {**chat, "stream": True})
    assert streamed == text, streamed
    version = subprocess.run([node_path, "--version"], capture_output=True, text=True, check=False).stdout.strip()
    notes["aimock"] = f"{aimock.SPEC} on node {version}: dist/cli.js --chunk-size {chunk} ({frames} content frames)"
    return server


def _check_answer(port: int, body: dict[str, Any], text: str) -> None:
    """A 200 whose message is ``text``: a peer answering anything else would be measured doing other work."""
    status, raw = procs.request(port, "POST", CHAT, body)
    assert status == 200, raw
    content = json.loads(raw)["choices"][0]["message"]["content"]
    assert content == text, raw


def _stream(port: int, body: dict[str, Any]) -> tuple[int, str]:
    """The frames of a streamed chat answer that carry content, and their text joined: the stream
    cells compare servers that send the same text in about as many writes."""
    status, raw = procs.request(port, "POST", CHAT, body)
    assert status == 200, raw
    parts: list[str] = []
    for line in raw.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            parts += [c["delta"]["content"] for c in json.loads(line[6:])["choices"] if c["delta"].get("content")]
    return len(parts), "".join(parts)


def run(args: argparse.Namespace, peer: tuple[Path, str] | None = None) -> tuple[list[Cell], dict[str, str]]:
    levels = [int(c) for c in args.concurrency.split(",")]
    text = _scripted_text()
    chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": PROMPT}]}
    streamed = {**chat, "stream": True}
    cells: list[Cell] = []
    notes: dict[str, str] = {"scripted text": text}
    with ExitStack() as stack, tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        ceiling_port = procs.free_port()
        ceiling = stack.enter_context(procs.running("ceiling", procs.ceiling_command(ceiling_port)))
        scripted = _serve(stack, "scripted")
        _script(scripted.port, text)
        reference = _serve(stack, "reference")
        sixteen = _sixteen(reference.port)
        notes["16-token request"] = json.dumps(sixteen)
        cassettes = workdir / "cassettes"
        cassettes.mkdir()
        recorder = _serve(
            stack,
            "recorder",
            ["--cassettes", str(cassettes), "--record-mode", "all", "--upstream", f"http://127.0.0.1:{reference.port}"],
        )
        procs.post_json(recorder.port, CHAT, sixteen)
        procs.stop(recorder)
        replay = _serve(stack, "replay", ["--cassettes", str(cassettes)])
        servers = [("ceiling", ceiling, chat), ("scripted", scripted, chat), ("replay", replay, sixteen)]
        notes["scripted stream"] = f"{_stream(scripted.port, streamed)[0]} content frames"
        if args.baseline:
            tree = stack.enter_context(baseline.checkout(args.baseline))
            old = _serve(stack, f"scripted@{args.baseline}", tree=tree)
            _script(old.port, text)
            servers.append((f"scripted@{args.baseline}", old, chat))
            notes["baseline"] = subprocess.run(
                ["git", "rev-parse", "--short", args.baseline], cwd=procs.ROOT, capture_output=True, text=True
            ).stdout.strip()
        if peer is not None:
            servers.append((aimock.NAME, _start_aimock(stack, peer, workdir, text, chat, notes), chat))
        streams = [s for s in servers if s[0].startswith("scripted") or s[0] == aimock.NAME]
        for concurrency in levels:
            for turn in range(args.rounds):
                # Each round in another order (rotated), so a drift of the machine's speed
                # during a level falls on every server alike.
                for name, server, body in _rotated(servers, turn):
                    cell = measure(
                        name, server.pid, server.port, body, "plain", concurrency, args.duration, args.warmup, workdir
                    )
                    cells.append(replace(cell, round=turn))
                # The scripted answer to bodies never seen before (nothing remembered is reused).
                cell = measure(
                    "scripted",
                    scripted.pid,
                    scripted.port,
                    chat,
                    "varied",
                    concurrency,
                    args.duration,
                    args.warmup,
                    workdir,
                    varied=True,
                )
                cells.append(replace(cell, round=turn))
                for name, server, body in _rotated(streams, turn):
                    cell = measure(
                        name,
                        server.pid,
                        server.port,
                        {**body, **streamed},
                        "stream",
                        concurrency,
                        args.duration,
                        args.warmup,
                        workdir,
                    )
                    cells.append(replace(cell, round=turn))
        # The model alone, at concurrency 1: latency of the 16-token answer, today against the baseline.
        cells.append(
            measure(
                "reference", reference.pid, reference.port, sixteen, "plain", 1, args.duration, args.warmup, workdir
            )
        )
        if args.baseline:
            old_ref = _serve(stack, f"reference@{args.baseline}", tree=tree)
            cells.append(
                measure(
                    f"reference@{args.baseline}",
                    old_ref.pid,
                    old_ref.port,
                    sixteen,
                    "plain",
                    1,
                    args.duration,
                    args.warmup,
                    workdir,
                )
            )
            cells.append(
                measure(
                    "reference", reference.pid, reference.port, sixteen, "plain", 1, args.duration, args.warmup, workdir
                )
            )
    return cells, notes


def _rotated(items: list[Any], turn: int) -> list[Any]:
    at = turn % len(items) if items else 0
    return items[at:] + items[:at]


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(cells: list[Cell], notes: dict[str, str]) -> str:
    """One row per (server, shape, concurrency): with ``--rounds`` above 1, each figure is the
    median of its rounds (and the rounds' req/s are listed), each ratio the median of the
    per-round ratios to the ceiling's cell of the same round; then the issue's targets."""
    groups: dict[tuple[str, str, int], list[Cell]] = {}
    for c in cells:
        groups.setdefault((c.server, c.shape, c.concurrency), []).append(c)
    ceiling = {(c.concurrency, c.round): c for c in cells if c.server == "ceiling"}
    lines = [
        "| server | shape | c | req/s | × ceiling req/s | CPU ms/req | × ceiling CPU | p50 ms | p99 ms | errors "
        "| rounds' req/s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    ratios: dict[tuple[str, str, int], tuple[float, float, float]] = {}  # × ceiling req/s, × CPU, req/s
    for (server, shape, level), group in groups.items():
        tops = [ceiling.get((c.concurrency, c.round)) for c in group]
        rate = _median([c.rps / t.rps for c, t in zip(group, tops, strict=True) if t])
        cpu = _median([c.cpu_ms / t.cpu_ms for c, t in zip(group, tops, strict=True) if t and t.cpu_ms])
        rps = _median([c.rps for c in group])
        ratios[(server, shape, level)] = (rate, cpu, rps)
        lines.append(
            f"| {server} | {shape} | {level} | {rps:,.0f} | {rate:.2f} | {_median([c.cpu_ms for c in group]):.3f} "
            f"| {cpu:.2f} | {_median([c.p50_ms for c in group]):.2f} | {_median([c.p99_ms for c in group]):.2f} "
            f"| {sum(c.errors for c in group)} | {' / '.join(f'{c.rps:,.0f}' for c in group)} |"
        )
    lines += ["", *_verdicts(ratios), "", *(f"- {k}: `{v}`" for k, v in notes.items())]
    return "\n".join(lines)


def _verdicts(ratios: dict[tuple[str, str, int], tuple[float, float, float]]) -> list[str]:
    """Issue 26's targets against the medians above, one line each (a level without its cells is skipped)."""
    levels = sorted({level for _, _, level in ratios})
    checks: list[tuple[str, Any]] = [
        ("scripted plain ≥ 0.6× the ceiling's req/s", lambda c: ratios[("scripted", "plain", c)][0] >= 0.6),
        (
            "scripted plain ≥ aimock's req/s",
            lambda c: ratios[("scripted", "plain", c)][2] >= ratios[(aimock.NAME, "plain", c)][2],
        ),
        ("scripted plain CPU ≤ 1.6× the ceiling's", lambda c: ratios[("scripted", "plain", c)][1] <= 1.6),
        ("scripted stream CPU ≤ 3× the ceiling's", lambda c: ratios[("scripted", "stream", c)][1] <= 3.0),
        ("replay ≥ 0.8× the ceiling's req/s", lambda c: ratios[("replay", "plain", c)][0] >= 0.8),
    ]
    out = ["| target | " + " | ".join(f"c={c}" for c in levels) + " |", "| --- |" + " --- |" * len(levels)]
    for label, holds in checks:
        marks = []
        for c in levels:
            try:
                marks.append("holds" if holds(c) else "**misses**")
            except KeyError:
                marks.append("—")
        out.append(f"| {label} | " + " | ".join(marks) + " |")
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--baseline", default="", help="a git revision to measure beside this checkout")
    p.add_argument("--duration", type=float, default=5.0, help="measured seconds per cell")
    p.add_argument("--warmup", type=float, default=1.0, help="warm-up seconds per cell")
    p.add_argument("--concurrency", default="1,16,64")
    p.add_argument(
        "--rounds", type=int, default=1, help="rounds of every cell per level, interleaved (medians reported)"
    )
    p.add_argument("--out", type=Path, default=None, help="also write the table here")
    p.add_argument(
        "--aimock",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=f"measure {aimock.SPEC} too (npm pack into bench/.aimock/); default: when it can be fetched and run",
    )
    args = p.parse_args(argv)
    if shutil.which("wrk") is None:
        print("bench/spine.py needs wrk (apt-get install wrk)", file=sys.stderr)
        return 2
    try:
        peer = _aimock_peer(args.aimock)
    except aimock.Unavailable as exc:
        print(f"bench/spine.py --aimock: {exc}", file=sys.stderr)
        return 2
    cells, notes = run(args, peer)
    table = report(cells, notes)
    print(table)
    if args.out is not None:
        args.out.write_text(table + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
