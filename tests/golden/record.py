"""Ask every golden case and write what came back: ``python -m tests.golden.record [OUT]``.

Each answer is kept as its status, the headers that carry meaning, and the body: its
SHA-256 and length always, and (with ``--full``) the whole body, to diff against when a
refactor changes something. A stream's body is every byte received, in order; a transport
failure is kept as its exception's name.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from mockserver.app import create_app
from mockserver.config import Settings
from tests.golden.cases import SERVERS, Case, cases
from tests.support.live import ROOT, serve_in_thread

FROZEN = 1_700_000_000.0
CORPUS = Path(__file__).with_name("corpus.json")
# Headers whose values are part of an answer's meaning (the rest vary with the server's stack).
KEPT = (
    "content-type",
    "x-mockserver-seed",
    "x-mockserver-faults",
    "x-mockserver-source",
    "retry-after",
    "x-should-retry",
    "x-ratelimit-reset-requests",
)


def settings(server: str, workdir: Path, kernel: str = "auto") -> Settings:
    fields = dict(SERVERS[server])
    if "cassettes" in fields:  # a copy: a test must not write into the shipped cassettes
        copy = workdir / f"cassettes-{server}"
        shutil.copytree(ROOT / fields["cassettes"], copy, ignore=shutil.ignore_patterns("*.py"))
        fields["cassettes"] = str(copy)
    if "rules" in fields:
        fields["rules"] = str(ROOT / fields["rules"])
    return Settings(frozen_time=FROZEN, kernel=kernel, **fields)


def _answer(status: int, headers: httpx.Headers, body: bytes, full: bool) -> dict[str, Any]:
    kept = {k: headers[k] for k in KEPT if k in headers}
    out: dict[str, Any] = {
        "status": status,
        "headers": kept,
        "sha256": hashlib.sha256(body).hexdigest(),
        "length": len(body),
    }
    if full:
        out["body"] = base64.b64encode(body).decode()
    return out


def ask(client: httpx.Client, case: Case, full: bool) -> dict[str, Any]:
    content = case.body if isinstance(case.body, str) else None
    data = None if isinstance(case.body, str) or case.body is None else case.body
    headers = {"x-mockserver-session": "golden", **case.headers}
    try:
        with client.stream(case.method, case.path, json=data, content=content, headers=headers) as response:
            body = b"".join(response.iter_raw())
            answer = _answer(response.status_code, response.headers, body, full)
    except httpx.HTTPError as exc:
        return {"failed": type(exc).__name__}
    if case.poll and answer["status"] == 200:
        answer["final"] = _poll(client, json.loads(body)["id"], full)
    return answer


def _poll(client: httpx.Client, response_id: str, full: bool) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        got = client.get(f"/v1/responses/{response_id}")
        if got.json().get("status") not in ("queued", "in_progress") or time.monotonic() > deadline:
            return _answer(got.status_code, got.headers, got.content, full)
        time.sleep(0.02)


def run(full: bool = False, only: str | None = None, kernel: str = "auto") -> dict[str, dict[str, Any]]:
    """Every case's answer, by server then case id, the model computed by ``kernel``."""
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for server, group in cases().items():
            if only is not None and server != only:
                continue
            with (
                serve_in_thread(create_app(settings(server, Path(tmp), kernel))) as live,
                httpx.Client(base_url=live.url, timeout=60) as client,
            ):
                out[server] = {case.id: ask(client, case, full) for case in group}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", nargs="?", default=str(CORPUS))
    parser.add_argument("--full", action="store_true", help="keep whole bodies (for diffing, not for the repo)")
    args = parser.parse_args(argv)
    answers = run(args.full)
    Path(args.out).write_text(json.dumps(answers, indent=1, sort_keys=True) + "\n")
    print(f"{sum(len(g) for g in answers.values())} answers → {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
