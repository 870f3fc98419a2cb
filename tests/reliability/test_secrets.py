"""Secrets never reach disk: a real recording server (a child process) proxies requests that
carry every secret kind in every place (a custom credential header's value in the body and URL
too) to an upstream (another child) whose answers echo them
back, streamed and not; then the written cassette is grepped for every spelling of every
secret, ``mockserver cassettes check`` passes it, and a replay server answers from it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
import yaml

from mockserver.cassettes.redact import redact_text, scrubbing
from tests.reliability.harness import Child, child_server
from tests.support.live import ROOT
from tests.unit.cassettes.test_secrets import KINDS, forms

MARKER = "secrets-check"  # the upstream's scripted answer matches on it
CUSTOM = "plain-value-" + "4242"  # an X-Custom-Token value no value pattern knows
# CUSTOM goes in the body too (and the URL): a value seen once in a credential header is
# scrubbed everywhere in that interaction (issue 34, item 8), though no value pattern knows it.
ALL = " | ".join(kind.text for kind in KINDS) + f" | {CUSTOM}"
SECRETS = [kind.secret for kind in KINDS] + [CUSTOM]


def _headers() -> dict[str, str]:
    by = {kind.name: kind.text for kind in KINDS}
    return {
        "authorization": f"Bearer {by['openai']}",
        "x-api-key": by["anthropic"],
        "api-key": by["stripe"],
        "cookie": f"session={by['jwt']}; theme=dark",
        "x-custom-token": CUSTOM,
        "x-trace": f"caller {by['aws-key-id']}",  # no credential name: caught by value
    }


def _chat(stream: bool) -> dict[str, Any]:
    url = next(kind.text for kind in KINDS if kind.name == "url-password")
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": f"connect with {url}"},
            {"role": "user", "content": f"{MARKER}: {ALL}"},
        ],
        "metadata": {kind.name: kind.text[:512] for kind in KINDS[:16]},
        "user": next(kind.text for kind in KINDS if kind.name == "github"),
        "max_tokens": 400,
        "stream": stream,
    }


def _responses(stream: bool) -> dict[str, Any]:
    # Responses echo instructions, metadata and user in every answer (and in stream events).
    return {
        "model": "m",
        "input": f"{MARKER}: {ALL}",
        "instructions": f"keys: {ALL}",
        "metadata": {kind.name: kind.text for kind in KINDS[:16]},
        "user": next(kind.text for kind in KINDS if kind.name == "slack"),
        "max_output_tokens": 16,
        "stream": stream,
    }


def _completions(stream: bool) -> dict[str, Any]:
    # ``echo`` sends the prompt back as the answer's first text.
    return {"model": "m", "prompt": f"{MARKER}: {ALL}", "echo": True, "max_tokens": 4, "stream": stream}


@dataclass(frozen=True)
class Call:
    path: str
    body: dict[str, Any]

    @property
    def stream(self) -> bool:
        return bool(self.body["stream"])


QUERY = "?api_key=" + quote(next(kind.text for kind in KINDS if kind.name == "google"), safe="") + f"&note={CUSTOM}"
CALLS = [
    Call(f"/chat/completions{QUERY}", _chat(False)),
    Call(f"/chat/completions{QUERY}", _chat(True)),
    Call("/responses", _responses(False)),
    Call("/responses", _responses(True)),
    Call("/completions", _completions(False)),
    Call("/completions", _completions(True)),
]


def _send(child: Child, call: Call) -> httpx.Response:
    with httpx.Client(timeout=60) as client:
        response = client.post(child.base_url + call.path, json=call.body, headers=_headers())
    assert response.status_code == 200, response.text[:500]
    return response


def _text(call: Call, response: httpx.Response) -> str:
    """What a client reads from the answer: the text, joined over a stream's events."""
    if not call.stream:
        return response.text
    pieces: list[str] = []
    for line in response.text.splitlines():
        if line.startswith("data: {"):
            data = json.loads(line[6:])
            for choice in data.get("choices") or []:
                pieces.append((choice.get("delta") or {}).get("content") or choice.get("text") or "")
            pieces.append(data.get("delta") if isinstance(data.get("delta"), str) else "")
    return "".join(pieces)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("secrets")
    directory = root / "cassettes"
    with child_server(["--frozen-time", "1700000000"], root / "upstream.log") as upstream:
        # The upstream's chat answer says every secret back, a few characters per stream event.
        httpx.post(
            upstream.url + "/__mockserver/answers", json={"match": MARKER, "text": f"Echo: {ALL}"}
        ).raise_for_status()
        args = ["--cassettes", str(directory), "--record-mode", "all", "--upstream", upstream.url]
        with child_server(args, root / "recorder.log") as recorder:
            answers = [_send(recorder, call) for call in CALLS]
    for call, answer in zip(CALLS, answers, strict=True):
        assert answer.headers["x-mockserver-source"] == "record"
        if not call.path.startswith("/responses"):  # they echo what was sent (or the script's echo)
            assert any(secret in _text(call, answer) for secret in SECRETS), call.path
    yield {"dir": directory, "answers": answers}


def _files(directory: Path) -> list[Path]:
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    assert files, "nothing was recorded"
    return files


def test_no_spelling_of_any_secret_is_on_disk(recorded: dict[str, Any]) -> None:
    written = "".join(path.read_text(errors="replace") for path in _files(recorded["dir"]))
    # What was sent is there, its credentials redacted: the header names, the echoed metadata.
    assert re.search(r"(?i)x-custom-token:\s*-\s*REDACTED\n", written) and "sk-REDACTED" in written
    assert written.count("REDACTED") >= len(CALLS) * len(SECRETS)
    for path in _files(recorded["dir"]):
        raw = path.read_bytes().decode("utf-8", errors="replace")
        parsed = json.dumps(yaml.safe_load(raw), ensure_ascii=False)  # YAML folding and escapes undone
        for secret in SECRETS:
            for form in forms(secret):
                assert form not in raw, f"{form!r} written to {path.name}"
                assert form not in parsed, f"{form!r} written to {path.name} (YAML-escaped)"


def test_no_secret_is_on_disk_in_pieces(recorded: dict[str, Any]) -> None:
    """A streamed answer sends the secrets a few characters per event: joined, they are gone too."""
    from mockserver.cassettes.files import load

    for path in _files(recorded["dir"]):
        for interaction in load(path):
            if interaction.response.stream is None:
                continue
            body = interaction.response.body.decode()
            call = next(c for c in CALLS if interaction.request.path.endswith(c.path.split("?")[0]) and c.stream)
            joined = _text(call, httpx.Response(200, text=body))
            for secret in SECRETS:
                assert secret not in joined, f"{interaction.request.path}: a streamed secret, joined"


def test_cassettes_check_passes_what_was_written(recorded: dict[str, Any]) -> None:
    command = [sys.executable, "-m", "mockserver", "cassettes", "check", str(recorded["dir"])]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no secrets found" in result.stdout


def test_the_cassette_replays_the_same_requests(recorded: dict[str, Any], tmp_path: Path) -> None:
    with child_server(["--cassettes", str(recorded["dir"])], tmp_path / "replay.log") as replay:
        for call, answer in zip(CALLS, recorded["answers"], strict=True):
            again = _send(replay, call)
            assert again.headers["x-mockserver-source"] == "replay", call.path
            # The answer as recorded, with the secrets it echoed redacted.
            with scrubbing([CUSTOM]):  # the custom header's value, scrubbed from what it echoed
                assert _text(call, again) == redact_text(_text(call, answer)), call.path
