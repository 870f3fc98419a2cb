"""Voice on one server, in one run: ``python bench/voice.py [--rounds N] [--sessions 32]``.

1. **Speech**: ``POST /v1/audio/speech`` of a 200-character input as ``wav``: the server's time
   (the in-process call the route makes — synthesis and encoding — and, beside it, the whole
   request on loopback, whose difference is HTTP and the client).
2. **Transcription**: a 10 s clip mockserver spoke (wav), ``POST /v1/audio/transcriptions``
   (``whisper-1``, json): the in-process work (decode + hear) and the whole request.
3. **Realtime**: N concurrent ``/v1/realtime`` sessions (a WebSocket each), each asking one text
   turn (session.update to text, an item, response.create, until response.done), while a probe
   thread asks ``GET /health`` back to back: its p50/p99 and the turns' wall time.

Issue 32 asks for ≤ 50 ms (speech, transcription) and a /health p99 ≤ 50 ms under the 32 sessions.
Figures describe one machine at one moment: they go into issue notes, never into test assertions.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import asyncio
import http.client
import json
import statistics
import threading
import time
import uuid
from typing import Any

import websockets

from bench import procs
from mockserver.voice import formats, modem, speech
from mockserver.voice.transcribe import hear

TEXT_200 = ("Please confirm the booking for two at eight tonight, window seat if possible, and send the " * 3)[:200]


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    return f"median {statistics.median(ordered) * 1000:.1f} ms, p90 {ordered[int(len(ordered) * 0.9)] * 1000:.1f} ms"


def _timed(call: Any, rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        call()
        out.append(time.perf_counter() - start)
    return out


def _multipart(name: str, data: bytes, fields: dict[str, str]) -> tuple[bytes, str]:
    boundary = uuid.uuid4().hex
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode() for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    return b"".join(parts) + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


def _post(port: int, path: str, body: bytes, content_type: str) -> bytes:
    conn = http.client.HTTPConnection(procs.HOST, port, timeout=60)
    try:
        conn.request("POST", path, body=body, headers={"content-type": content_type})
        response = conn.getresponse()
        data = response.read()
        assert response.status == 200, data[:300]
        return data
    finally:
        conn.close()


def speech_bench(port: int, rounds: int) -> None:
    body = json.dumps({"model": "tts-1", "voice": "alloy", "input": TEXT_200, "response_format": "wav"}).encode()
    inproc = _timed(lambda: speech.speak(TEXT_200, "alloy", 1.0, "wav", 7), rounds)
    wire = _timed(lambda: _post(port, "/v1/audio/speech", body, "application/json"), rounds)
    seconds = modem.duration(TEXT_200, 1.0)
    print(f"speech, 200 characters as wav ({seconds:.1f} s of audio): server work {_ms(inproc)}; request {_ms(wire)}")


def transcription_bench(port: int, rounds: int) -> None:
    chars = 160  # about 10 s at speed 1
    text = ("The quick brown fox jumps over the lazy dog and keeps on running far away. " * 4)[:chars]
    wav = speech.speak(text, "alloy", 1.0, "wav", 1).audio
    samples, rate = formats.decode(wav)
    body, kind = _multipart("clip.wav", wav, {"model": "whisper-1"})

    def work() -> None:
        x, r = formats.decode(wav)
        assert hear(x, r).spoken is not None

    inproc = _timed(work, rounds)
    wire = _timed(lambda: _post(port, "/v1/audio/transcriptions", body, kind), rounds)
    print(f"transcription of a {len(samples) / rate:.1f} s wav: server work {_ms(inproc)}; request {_ms(wire)}")


async def _session(port: int, index: int) -> float:
    start = time.perf_counter()
    async with websockets.connect(f"ws://{procs.HOST}:{port}/v1/realtime?model=gpt-realtime") as ws:
        await ws.recv()
        await ws.send(
            json.dumps({"type": "session.update", "session": {"type": "realtime", "output_modalities": ["text"]}})
        )
        item = {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"Hello number {index}."}],
        }
        await ws.send(json.dumps({"type": "conversation.item.create", "item": item}))
        await ws.send(json.dumps({"type": "response.create"}))
        while json.loads(await ws.recv())["type"] != "response.done":
            pass
    return time.perf_counter() - start


def _probe(port: int, stop: threading.Event, out: list[float]) -> None:
    conn = http.client.HTTPConnection(procs.HOST, port, timeout=10)
    while not stop.is_set():
        start = time.perf_counter()
        conn.request("GET", "/health")
        conn.getresponse().read()
        out.append(time.perf_counter() - start)
    conn.close()


def realtime_bench(port: int, sessions: int) -> None:
    health: list[float] = []
    stop = threading.Event()
    quiet = threading.Thread(target=_probe, args=(port, stop, health))
    quiet.start()
    time.sleep(0.5)
    stop.set()
    quiet.join()
    idle = sorted(health)
    health = []
    stop = threading.Event()
    probe = threading.Thread(target=_probe, args=(port, stop, health))
    probe.start()

    async def all_sessions() -> list[float]:
        return list(await asyncio.gather(*(_session(port, i) for i in range(sessions))))

    start = time.perf_counter()
    turns = asyncio.run(all_sessions())
    wall = time.perf_counter() - start
    stop.set()
    probe.join()
    busy = sorted(health)

    def p99(values: list[float]) -> float:
        return values[min(len(values) - 1, int(len(values) * 0.99))] * 1000

    print(
        f"realtime: {sessions} concurrent sessions, one text turn each, all done in {wall:.2f} s "
        f"(a session's median {statistics.median(turns) * 1000:.0f} ms); /health during: "
        f"p50 {statistics.median(busy) * 1000:.1f} ms, p99 {p99(busy):.1f} ms over {len(busy)} probes "
        f"(idle baseline p50 {statistics.median(idle) * 1000:.1f} ms, p99 {p99(idle):.1f} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--sessions", type=int, default=32)
    args = parser.parse_args()
    port = procs.free_port()
    with procs.running("mockserver", procs.mockserver_command(port)) as server:
        _post(
            server.port,
            "/v1/audio/speech",
            json.dumps({"model": "tts-1", "voice": "alloy", "input": "warm"}).encode(),
            "application/json",
        )
        speech_bench(server.port, args.rounds)
        transcription_bench(server.port, args.rounds)
        realtime_bench(server.port, args.sessions)


if __name__ == "__main__":
    main()
