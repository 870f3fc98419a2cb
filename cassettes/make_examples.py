"""Rebuild the shipped example cassettes: ``python cassettes/make_examples.py``.

* ``chat-stream.yaml``, ``completions-logprobs.yaml`` and ``responses-stream.yaml`` are real recordings: a mockserver
  (reference model, frozen time) as the upstream, a recording mockserver in front of it
  (``--record-mode all``), and requests sent through the recorder — exactly what a user does
  against a real provider.
* ``chat-tool-call-stream.yaml`` is written from OpenAI's documented chunk format (the first
  delta of a call carries ``index``, ``id``, ``type`` and ``function.name``; the arguments
  follow as fragments), because the reference model does not call tools yet.

The files are deterministic: the same bytes on every run, recorded offsets aside.
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from mockserver.app import create_app  # noqa: E402
from mockserver.cassettes.files import CassetteDir  # noqa: E402
from mockserver.cassettes.format import Interaction, RecordedRequest, RecordedResponse, Stream, StreamEvent  # noqa: E402
from mockserver.config import Settings  # noqa: E402
from tests.support.live import serve_in_thread  # noqa: E402

HERE = Path(__file__).resolve().parent
FROZEN = 1_700_000_000.0


def _record(directory: Path, name: str, path: str, body: dict[str, object]) -> None:
    with serve_in_thread(create_app(Settings(frozen_time=FROZEN))) as upstream:
        settings = Settings(cassettes=str(directory), record_mode="all", upstream=upstream.url, cassette=name)
        with (
            serve_in_thread(create_app(settings)) as recorder,
            httpx.stream("POST", recorder.url + path, json=body, timeout=60) as response,
        ):
            response.read()


def _tool_call_stream() -> Interaction:
    head = {"id": "chatcmpl-toolcall0example", "object": "chat.completion.chunk", "created": 1700000000}
    head |= {"model": "gpt-4o-mini", "system_fingerprint": "fp_example"}
    deltas: list[tuple[dict[str, object], str | None]] = [
        ({"role": "assistant", "content": None, "refusal": None}, None),
        (
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_weather0example",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": ""},
                    }
                ]
            },
            None,
        ),
        ({"tool_calls": [{"index": 0, "function": {"arguments": '{"city":'}}]}, None),
        ({"tool_calls": [{"index": 0, "function": {"arguments": ' "Lisbon",'}}]}, None),
        ({"tool_calls": [{"index": 0, "function": {"arguments": ' "unit": "celsius"}'}}]}, None),
        ({}, "tool_calls"),
    ]
    events = []
    for i, (delta, finish) in enumerate(deltas):
        chunk = {**head, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]}
        data = b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n"
        events.append(StreamEvent(0.25 + 0.03 * i, data))
    events.append(StreamEvent(0.25 + 0.03 * len(deltas), b"data: [DONE]\n\n"))
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "The current weather in a city.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "city": {"type": "string"},
                        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                    },
                    "required": ["city"],
                },
            },
        }
    ]
    body = {
        "model": "gpt-4o-mini",
        "messages": [{"role": "user", "content": "What is the weather in Lisbon?"}],
        "tools": tools,
        "stream": True,
    }
    request = RecordedRequest(
        "POST", "https://api.openai.com/v1/chat/completions", (("content-type", "application/json"),)
    )
    request = RecordedRequest(request.method, request.uri, request.headers, json.dumps(body).encode())
    headers = (("content-type", "text/event-stream; charset=utf-8"),)
    return Interaction(request, RecordedResponse.streamed(200, headers, Stream(tuple(events)), "OK", events[-1].offset))


def main() -> int:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        chat = {
            "model": "gpt-4o-mini",
            "messages": [{"role": "user", "content": "Tell me about Lisbon."}],
            "seed": 7,
            "max_tokens": 24,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        _record(work, "chat-stream.yaml", "/v1/chat/completions", chat)
        completion = {"model": "gpt-3.5-turbo-instruct", "prompt": "The weather today", "max_tokens": 12}
        _record(work, "completions-logprobs.yaml", "/v1/completions", completion | {"logprobs": 2, "seed": 3})
        response = {"model": "gpt-4o-mini", "input": "Tell me about the sea.", "max_output_tokens": 24, "stream": True}
        _record(work, "responses-stream.yaml", "/v1/responses", response | {"temperature": 0})
        for name in ("chat-stream.yaml", "completions-logprobs.yaml", "responses-stream.yaml"):
            # Recorded against a local port; shown as the provider it stands for.
            recorded = [
                replace(i, request=replace(i.request, uri="https://api.openai.com" + i.request.path))
                for i in CassetteDir(work).load(name)
            ]
            CassetteDir(HERE).save(name, recorded)
    CassetteDir(HERE).save("chat-tool-call-stream.yaml", [_tool_call_stream()])
    print("\n".join(sorted(p.name for p in HERE.glob("*.yaml"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
