"""Appending to a cassette costs the same at any size, and stays atomic and vcrpy's.

* A YAML cassette we append to is in the appendable layout (``version: 1`` first, the
  interactions last, each closed by ``# end``): vcrpy replays it, a cassette in vcrpy's own
  layout is moved to it by its first append, and an append never reads what is already there
  (it only looks at the file's last bytes).
* A torn last item (an append cut short) is ignored on load, with a warning, and cut off by the
  next append — checked at every cut of an item, and with child processes SIGKILLed while they
  append, again and again, loading the file after every kill.
* Appended interactions are redacted like saved ones.
"""

from __future__ import annotations

import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import httpx
import pytest
import vcr  # type: ignore[import-untyped]

from mockserver.cassettes import files
from mockserver.cassettes.files import CassetteDir
from mockserver.cassettes.format import (
    APPEND_END,
    APPEND_HEADER,
    Interaction,
    RecordedRequest,
    RecordedResponse,
    Stream,
    StreamEvent,
    loads,
)
from tests.support.live import ROOT

URL = "https://api.openai.com/v1/chat/completions"


def _plain(n: int, body: bytes = b'{"id":"chatcmpl-1"}') -> Interaction:
    request = RecordedRequest("POST", f"{URL}?n={n}", (("content-type", "application/json"),), b'{"n": %d}' % n)
    return Interaction(request, RecordedResponse(200, (("content-type", "application/json"),), body, "OK", None, 0.1))


def _streamed(n: int) -> Interaction:
    events = (StreamEvent(0.1, b'data: {"n": %d}\n\n' % n), StreamEvent(0.2, b"data: [DONE]\n\n"))
    headers = (("content-type", "text/event-stream"),)
    return Interaction(
        RecordedRequest("POST", f"{URL}?s={n}", (), b'{"stream": true}'),
        RecordedResponse.streamed(200, headers, Stream(events)),
    )


def test_appends_write_the_appendable_layout_and_vcrpy_replays_it(tmp_path: Path) -> None:
    store = CassetteDir(tmp_path)
    store.append("ours", [_plain(1)])
    store.append("ours", [_streamed(2), _plain(3, b'{"id":"chatcmpl-3"}')])
    text = store.resolve("ours").read_text()
    assert text.startswith(APPEND_HEADER) and text.endswith(APPEND_END) and text.count(APPEND_END) == 3
    assert store.load("ours") == (_plain(1), _streamed(2), _plain(3, b'{"id":"chatcmpl-3"}'))
    with vcr.VCR().use_cassette(str(store.resolve("ours")), record_mode="none"), httpx.Client() as client:
        assert client.post(f"{URL}?n=3", json={}).json() == {"id": "chatcmpl-3"}
        with client.stream("POST", f"{URL}?s=2", json={"stream": True}) as streamed:
            lines = [line for line in streamed.iter_lines() if line]
    assert lines == ['data: {"n": 2}', "data: [DONE]"]


def test_the_first_append_moves_a_vcrpy_layout_cassette_once(tmp_path: Path) -> None:
    store = CassetteDir(tmp_path)
    store.save("old", [_plain(1), _plain(2)])  # save() writes vcrpy's own layout
    assert store.resolve("old").read_text().startswith("interactions:")
    store.append("old", [_plain(3)])
    assert store.resolve("old").read_text().startswith(APPEND_HEADER)
    assert store.load("old") == (_plain(1), _plain(2), _plain(3))
    (tmp_path / "empty.yaml").write_text("")
    store.append("empty", [_plain(4)])
    assert store.load("empty") == (_plain(4),)


def test_an_append_never_reads_the_cassette(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = CassetteDir(tmp_path)
    store.append("big", [_plain(i) for i in range(300)])
    size = store.resolve("big").stat().st_size
    read: list[int] = []
    real_read = os.read

    def counting(fd: int, n: int) -> bytes:
        data = real_read(fd, n)
        read.append(len(data))
        return data

    def refuse(*_: object) -> None:
        raise AssertionError("an append must not load the cassette")

    monkeypatch.setattr(files, "load", refuse)
    monkeypatch.setattr(files.os, "read", counting)
    store.append("big", [_plain(300)])
    monkeypatch.undo()
    assert sum(read) < 1_000 < size  # the header and the last END line, not the file
    assert len(store.load("big")) == 301


def test_a_torn_last_item_is_ignored_then_cut_off(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = CassetteDir(tmp_path)
    store.append("torn", [_plain(0), _streamed(1)])
    path = store.resolve("torn")
    whole = path.read_bytes()
    store.append("torn", [_plain(2, b'{"text": "a line\\n# end\\n inside a body"}')])
    full = path.read_bytes()
    cuts = [*sorted(random.Random(8).sample(range(len(whole) + 1, len(full)), 40)), len(full) - 1]
    for cut in cuts:
        path.write_bytes(full[:cut])
        with caplog.at_level(logging.WARNING, logger="mockserver"):
            caplog.clear()
            assert store.load("torn") == (_plain(0), _streamed(1))  # the torn item is left out ...
        assert "append cut short" in caplog.text  # ... and said so
        store.append("torn", [_plain(9)])  # the next append cuts it off first
        assert path.read_bytes() == whole + dumps_item(_plain(9))
        assert store.load("torn") == (_plain(0), _streamed(1), _plain(9))
    path.write_bytes(full)
    assert store.load("torn")[-1].response.body == b'{"text": "a line\\n# end\\n inside a body"}'
    with vcr.VCR().use_cassette(str(path), record_mode="none"), httpx.Client() as client:
        assert client.post(f"{URL}?n=2", json={}).json() == {"text": "a line\n# end\n inside a body"}


def dumps_item(interaction: Interaction) -> bytes:
    from mockserver.cassettes.format import dump_items

    return dump_items([interaction]).encode()


def test_a_header_alone_loads_empty(tmp_path: Path) -> None:
    (tmp_path / "h.yaml").write_text(APPEND_HEADER + "- request: {bo")
    store = CassetteDir(tmp_path)
    assert store.load("h") == ()
    store.append("h", [_plain(1)])
    assert store.load("h") == (_plain(1),)


def test_appended_interactions_are_redacted(tmp_path: Path) -> None:
    key = "sk-proj-" + "Qx7" * 12
    request = RecordedRequest("POST", URL, (("authorization", f"Bearer {key}"),), json.dumps({"k": key}).encode())
    store = CassetteDir(tmp_path)
    store.append("secret", [_plain(1)])
    store.append("secret", [Interaction(request, RecordedResponse(200, (), f'"{key}"'.encode()))])
    raw = store.resolve("secret").read_text()
    assert key not in raw and "REDACTED" in raw
    assert loads(raw)[1].request.header("authorization") == "REDACTED"


def test_json_cassettes_are_still_rewritten_whole(tmp_path: Path) -> None:
    store = CassetteDir(tmp_path)
    store.append("j.json", [_plain(1)])
    store.append("j.json", [_plain(2)])
    assert json.loads(store.resolve("j.json").read_text())["version"] == 1
    assert store.load("j.json") == (_plain(1), _plain(2))


# ---- crash safety: SIGKILL while appending --------------------------------------------------

APPENDER = """
import os, sys, time
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse, _vcr
from mockserver.cassettes.files import CassetteDir

_vcr()  # vcrpy imported before the clock starts: the kill is meant for appends
store = CassetteDir(sys.argv[1])
start = int(sys.argv[3])
def one(i):
    request = RecordedRequest("POST", "http://h/v1/completions", (), b'{"prompt": "%d"}' % i)
    return Interaction(request, RecordedResponse(200, (), b"y" * (40_000 + 997 * (i % 50))))
if sys.argv[2] == "stalled":  # the kill lands inside the write: half the item is on disk
    real = os.write
    def half(fd, data):
        real(fd, bytes(data[: len(data) // 2]))
        print("torn", flush=True)
        time.sleep(60)
    os.write = half
    store.append("crash", [one(start)])
else:
    print("appending", flush=True)
    for i in range(start, start + 100_000):
        store.append("crash", [one(i)])
        print(i, flush=True)  # this one is on disk, whole and fsynced
"""


def _kill_appender(directory: Path, mode: str, start: int, after: float) -> list[int]:
    """Run the appender, SIGKILL it ``after`` seconds after it starts writing; the appends it
    reported done."""
    child = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(directory), mode, str(start)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() in ("appending\n", "torn\n")
        threading.Event().wait(after)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=10)
    assert child.stdout is not None
    return [int(line) for line in child.stdout.read().split() if line.strip().isdigit()]


def test_sigkill_mid_append_always_leaves_a_loadable_cassette(tmp_path: Path) -> None:
    rng = random.Random(16)
    store = CassetteDir(tmp_path)
    acknowledged: list[int] = []
    for round_ in range(8):
        mode = "stalled" if round_ % 4 == 3 else "looping"
        done = _kill_appender(tmp_path, mode, round_ * 1_000, rng.uniform(0.05, 0.4))
        acknowledged += done
        if not store.exists("crash"):  # killed before its first append was renamed into place
            assert not acknowledged
            continue
        loaded = [int(json.loads(i.request.body)["prompt"]) for i in store.load("crash")]  # never raises
        assert set(acknowledged) <= set(loaded), "an append reported done was lost"
        assert len(loaded) <= len(acknowledged) + round_ + 1  # at most the one being written, per kill
        assert loaded == sorted(loaded)
        for interaction in store.load("crash"):
            assert len(interaction.response.body) >= 40_000  # no item is half there
    text = store.resolve("crash").read_text()
    assert text.startswith(APPEND_HEADER)
    store.append("crash", [_plain(0)])  # a last append leaves it whole: vcrpy reads it
    assert store.resolve("crash").read_text().endswith(APPEND_END)
    with vcr.VCR().use_cassette(str(store.resolve("crash")), record_mode="none"), httpx.Client() as client:
        assert client.post(f"{URL}?n=0", json={}).json() == {"id": "chatcmpl-1"}
    assert list(tmp_path.glob(".*.tmp")) == []
