"""The server under a hostile client's big prompts, beside the same server at rest:
``python -m bench.abuse [--mb 5] [--rounds 3]``. Prints a markdown table.

A ``mockserver serve`` child (``--max-body-bytes`` raised so the prompt reaches the context
check rather than the 413) is warmed with one normal request; then ``/health`` is asked again
and again on its own connection, first at rest, then while ``--rounds`` prompts of ``--mb``
megabytes each go to chat, completions and Responses in turn. Every one of them must be
refused (400 ``context_length_exceeded``): the figures are what refusing them costs. RSS is
the child's ``VmRSS`` after each phase, and its peak ``VmHWM`` over the whole run.

Before the limits, a 5 MB prompt took 1.3 GB and ``/health`` stalled (p99 20.9 s): the
issue's aim is a p99 of 50 ms or less while this runs.

Round 3 (issue 34; ``--round 3``, or ``--round all`` for both side by side): a fresh server per
case, ``/health`` probed the same way while a hostile or unlucky client does one thing again and
again, then a normal request must still be answered —

* ``redaction``: 24 KB bodies of ``awsaws…`` / ``secret-secret-…`` / ``%41%41…`` sent to a replay
  server, which redacts each to match it (before: ~20 s of frozen loop per body);
* ``match``: a scripted ``match`` that slips past the definition's probes, searched against a
  5,000-character prompt (bounded by the search timeout; ``(a+)+$`` itself is refused);
* ``fault spec``: a 2,000-term ``x-mockserver-fault`` (a 400 naming the limit; 10,000 terms
  pass the 64 KiB head limit, a 431);
* ``head``: a header value streamed 4 MB long (a 431 at 64 KiB);
* ``trickle``: request bodies sent a byte at a time (a 408 after ``--body-timeout 1``);
* ``disk full``: recordings into a full tmpfs (a 507 before the upstream is asked; root only).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

import httpx

from bench.probe import Probe, _status
from tests.support.live import ROOT, free_port, stop, wait_healthy

__all__ = ["main", "measure"]

MB = 1024 * 1024


def _bodies(size: int) -> list[tuple[str, dict[str, Any]]]:
    text = "word " * (size // 5)
    return [
        ("/v1/completions", {"model": "m", "prompt": text, "max_tokens": 4}),
        ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": text}], "max_tokens": 4}),
        ("/v1/responses", {"model": "m", "input": text, "max_output_tokens": 16}),
    ]


def measure(mb: float, rounds: int, rest_seconds: float = 3.0) -> dict[str, Any]:
    """Start a child server, measure it at rest and under ``rounds`` × 3 prompts of ``mb`` MB."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "mockserver", "serve", "--host", "127.0.0.1", "--port", str(port)]
    command += ["--max-body-bytes", str(int(mb * MB) + 4 * MB)]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_healthy(url, proc)
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}
        httpx.post(url + "/v1/chat/completions", json=chat, timeout=60).raise_for_status()  # load the model
        with Probe(url) as rest:
            time.sleep(rest_seconds)
        rss_rest = _status(proc.pid, "VmRSS")
        sent = [(path, json.dumps(body).encode()) for path, body in _bodies(int(mb * MB))]
        refused: list[float] = []
        with Probe(url) as abuse, httpx.Client(timeout=300) as client:
            for _ in range(rounds):
                for path, raw in sent:
                    start = time.perf_counter()
                    answer = client.post(url + path, content=raw, headers={"content-type": "application/json"})
                    refused.append(time.perf_counter() - start)
                    code = answer.json().get("error", {}).get("code")
                    if answer.status_code != 400 or code != "context_length_exceeded":
                        raise RuntimeError(f"{path}: {answer.status_code} {answer.text[:300]}")
        rss_abuse = _status(proc.pid, "VmRSS")
        after = httpx.post(url + "/v1/chat/completions", json=chat, timeout=60)
        return {
            "mb": mb,
            "requests": len(refused),
            "refused_mean_s": statistics.mean(refused),
            "rest": {**rest.figures(), "rss_mb": rss_rest / 1024},
            "abuse": {**abuse.figures(), "rss_mb": rss_abuse / 1024},
            "peak_rss_mb": _status(proc.pid, "VmHWM") / 1024,
            "serves_after": after.status_code == 200,
        }
    finally:
        stop(proc)


def table(found: dict[str, Any]) -> str:
    rest, abuse = found["rest"], found["abuse"]
    rows = [
        f"| | at rest | during {found['requests']} prompts of {found['mb']:g} MB |",
        "|---|---:|---:|",
        f"| `/health` p50 | {rest['p50_ms']:.1f} ms | {abuse['p50_ms']:.1f} ms |",
        f"| `/health` p99 | {rest['p99_ms']:.1f} ms | {abuse['p99_ms']:.1f} ms |",
        f"| `/health` samples | {rest['n']} | {abuse['n']} |",
        f"| server RSS after | {rest['rss_mb']:.0f} MB | {abuse['rss_mb']:.0f} MB |",
    ]
    notes = (
        f"\nPeak RSS over the run (VmHWM): {found['peak_rss_mb']:.0f} MB. Each prompt refused "
        f"(400 context_length_exceeded) in {found['refused_mean_s'] * 1000:.0f} ms on average, "
        f"client-side, sending included. A normal request afterwards: "
        f"{'200' if found['serves_after'] else 'FAILED'}."
    )
    return "\n".join(rows) + "\n" + notes


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=5.0, help="megabytes per prompt")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three endpoints")
    parser.add_argument("--round", choices=("2", "3", "all"), default="all", help="which issue's cases")
    parser.add_argument("--json", action="store_true", help="print the raw figures as JSON too")
    args = parser.parse_args(argv)
    raw: dict[str, Any] = {}
    if args.round in ("2", "all"):
        raw["round 2"] = found = measure(args.mb, args.rounds)
        print(table(found))
    if args.round in ("3", "all"):
        from bench.abuse_cases import measure_round3, round3_table

        raw["round 3"] = cases = measure_round3()
        print("\n" + round3_table(cases))
    if args.json:
        print(json.dumps(raw, indent=2))


if __name__ == "__main__":
    main()
