"""The servers measured side by side, one per backend, all answering the same chat request.

* **ceiling**: ``bench/ceiling.py``, the fastest a Starlette handler answers here;
* **reference**: ``python -m mockserver serve``: the tiny model samples 16 tokens;
* **scripted**: another ``mockserver serve`` with one scripted rule added through
  ``POST /__mockserver/answers`` (``{"text": <a 16-token sentence>}``, no ``match``), so every
  chat request gets that sentence: the model only prefills the prompt, and the decided
  tokens are played one per step instead of sampled;
* **replay**: ``mockserver serve --cassettes DIR`` over a cassette recorded in this run by a
  third, recording ``mockserver`` (``--record-mode all``) proxying the reference server, exactly
  as a user records a real provider. The recorder is stopped before the replay server starts.

The streamed body carries an explicit ``"n": 1`` (the default, so the answer is the same):
the cassette matcher leaves ``stream`` and ``stream_options`` out of its key, and after the
last recording of a key the last one repeats, so without a difference both requests would
replay whichever was recorded last.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import driver, procs

__all__ = ["Backends", "script", "started", "streamed_body"]

ANSWERS = "/__mockserver/answers"
# Tried in order; the first the model's tokenizer splits into exactly 16 tokens is kept.
SCRIPTED_TEXTS = (
    "Your order has shipped and should arrive soon.",
    "The meeting is moved to Friday at noon.",
    "Your order has shipped and will arrive on Monday.",
)
CASSETTE = "bench.yaml"


@dataclass(frozen=True)
class Backends:
    servers: dict[str, procs.Server]  # ceiling, reference, scripted, replay
    chosen: driver.Chosen  # the 16-token chat request every backend answers
    plain: str  # its JSON, non-streamed
    streamed: str  # streamed, with include_usage and an explicit n (see the module docstring)
    notes: dict[str, str]

    def server(self, name: str) -> procs.Server:
        return self.servers[name]


def streamed_body(chosen: driver.Chosen) -> dict[str, Any]:
    return {**chosen.body, "stream": True, "stream_options": {"include_usage": True}, "n": 1}


def _completion_tokens(port: int, body: dict[str, Any]) -> int:
    status, answer = procs.post_json(port, driver.CHAT, body)
    usage = answer.get("usage")
    if status != 200 or not isinstance(usage, dict):
        raise RuntimeError(f"chat completion failed: {status} {answer}")
    return int(usage["completion_tokens"])


def script(port: int, body: dict[str, Any], tokens: int = 16) -> str:
    """Leave one rule on the server whose text is ``tokens`` long (else the last tried)."""
    for text in SCRIPTED_TEXTS:
        procs.request(port, "DELETE", ANSWERS)
        status, answer = procs.request(port, "POST", ANSWERS, {"text": text})
        if status != 200:
            raise RuntimeError(f"adding the scripted rule failed: {status} {answer[:300]!r}")
        got = _completion_tokens(port, {**body, "max_tokens": 64})
        if got == tokens:
            return f'rule `{{"text": {json.dumps(text)}}}` ({got} tokens)'
    return f'rule `{{"text": {json.dumps(text)}}}` ({got} tokens; no candidate had {tokens}, max_tokens cuts it)'


def _interactions(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if line == "- request:")
    except OSError:
        return 0


def record(
    upstream: procs.Server,
    bodies: list[dict[str, Any]],
    directory: Path,
    prefix: list[str] | None = None,
    timeout: float = 30.0,
) -> str:
    """Send ``bodies`` through a recording mockserver in front of ``upstream``; wait for the file."""
    argv = procs.mockserver_command(
        procs.free_port(),
        prefix,
        extra=[
            "--cassettes",
            str(directory),
            "--record-mode",
            "all",
            "--upstream",
            f"http://{procs.HOST}:{upstream.port}",
            "--cassette",
            CASSETTE,
        ],
    )
    path = directory / CASSETTE
    with procs.running("recorder", argv) as recorder:
        for body in bodies:
            status, raw = procs.request(recorder.port, "POST", driver.CHAT, body)
            if status != 200:
                raise RuntimeError(f"recording failed: {status} {raw[:300]!r}")
        deadline = time.monotonic() + timeout  # each interaction is written once its response ends
        while _interactions(path) < len(bodies):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{path} holds {_interactions(path)} of {len(bodies)} interactions")
            time.sleep(0.05)
    size = path.stat().st_size
    return f"{len(bodies)} interactions recorded through a recording mockserver ({size / 1024:.0f} KiB of YAML)"


@contextmanager
def started(prefix: list[str] | None = None, timeout: float = 60.0) -> Iterator[Backends]:
    """Every server, ready and answering the chosen request; all stopped on exit.
    ``prefix`` replaces ``python -m mockserver`` (development only)."""

    def mockserver(name: str, *extra: str) -> procs.Server:
        argv = procs.mockserver_command(procs.free_port(), prefix, extra)
        return stack.enter_context(procs.running(name, argv, timeout))

    with ExitStack() as stack:
        ceiling = stack.enter_context(procs.running("ceiling", procs.ceiling_command(procs.free_port()), timeout))
        reference = mockserver("reference")
        scripted = mockserver("scripted")
        chosen = driver.choose_chat(reference.port, driver.SHORT_PROMPTS)
        streamed = streamed_body(chosen)
        notes = {"reference": chosen.note, "scripted": script(scripted.port, chosen.body)}
        directory = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-cassettes-")))
        # The two measured requests, then each other prompt both ways: a cassette of a few.
        bodies = [chosen.body, streamed]
        for prompt in driver.SHORT_PROMPTS:
            other = driver.chat_body(prompt, 16, temperature=0)
            if other["messages"] != chosen.body["messages"]:
                bodies += [other, {**other, "stream": True, "stream_options": {"include_usage": True}}]
        notes["replay"] = record(reference, bodies, directory, prefix)
        replay = mockserver("replay", "--cassettes", str(directory))
        for body in (chosen.body, streamed):  # a replay miss would fail every cell: find out now
            status, raw = procs.request(replay.port, "POST", driver.CHAT, body)
            if status != 200:
                raise RuntimeError(f"replay of the recorded request failed: {status} {raw[:300]!r}")
        servers = {"ceiling": ceiling, "reference": reference, "scripted": scripted, "replay": replay}
        yield Backends(servers, chosen, json.dumps(chosen.body), json.dumps(streamed), notes)
