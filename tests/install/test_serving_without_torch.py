"""The serving process never imports torch: the reference model's weights are read with NumPy
(safetensors' NumPy loader) and computed by the project's kernels. torch is installed here (it
defines and trains the model, and the tests hold the kernels to it), so each check watches for an
attempt to import it (tests/support/torch_watch.py) and looks at ``sys.modules`` after the model
has answered: free text with logprobs, streamed, echoed prompt logprobs and embeddings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.live import free_port, stop, wait_healthy
from tests.support.torch_watch import PRELUDE, attempts
from tests.support.venvs import ROOT

MAX_TOKENS = 12
CHAT = {
    "model": "gpt-4o-mini",
    "messages": [{"role": "user", "content": "Tell me about the city of Paris."}],
    "max_tokens": MAX_TOKENS,
    "seed": 7,
    "logprobs": True,
    "top_logprobs": 3,
}
COMPLETION = {
    "model": "gpt-3.5-turbo-instruct",
    "prompt": "Once upon a time",
    "max_tokens": 4,
    "logprobs": 2,
    "echo": True,
}
EMBEDDING = {"model": "text-embedding-3-small", "input": "The capital of France."}

IN_PROCESS = f"""
import asyncio, json, sys
import httpx
from mockserver import Settings, create_app

app = create_app(Settings(frozen_time=1700000000))

async def main():
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://mockserver", timeout=120) as client:
        chat = await client.post("/v1/chat/completions", json={CHAT!r})
        streamed = await client.post("/v1/chat/completions", json={{**{CHAT!r}, "stream": True}})
        echoed = await client.post("/v1/completions", json={COMPLETION!r})
        vectors = await client.post("/v1/embeddings", json={EMBEDDING!r})
    print(json.dumps({{
        "status": [r.status_code for r in (chat, streamed, echoed, vectors)],
        "source": chat.headers["x-mockserver-source"],
        "logprobs": chat.json()["choices"][0]["logprobs"]["content"],
        "stream_done": streamed.text.endswith("data: [DONE]\\n\\n"),
        "echo_logprobs": echoed.json()["choices"][0]["logprobs"]["token_logprobs"],
        "dimensions": len(vectors.json()["data"][0]["embedding"]),
        "kernel": app.state.ctx.model.warm_up().result().kernel.name,
        "torch": sorted(m for m in sys.modules if m == "torch" or m.startswith("torch.")),
    }}))

asyncio.run(main())
"""


def _watched_env(log: Path) -> dict[str, str]:
    return {**os.environ, "TORCH_WATCH": str(log)}


def test_the_model_answers_in_process_without_importing_torch(tmp_path: Path) -> None:
    """The serving path in one process (the app, the reference backend, its runtime and kernels):
    real logprobs from the model, and torch neither imported nor asked for."""
    log = tmp_path / "torch.log"
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + IN_PROCESS],
        cwd=ROOT,
        env=_watched_env(log),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    assert seen["status"] == [200, 200, 200, 200] and seen["stream_done"]
    assert seen["source"] == "reference"  # the model wrote it: no rule, no cassette
    content = seen["logprobs"]
    assert 0 < len(content) <= MAX_TOKENS
    for entry in content:  # self-consistent: the sampled token's logprob, the top 3 best first
        tops = [t["logprob"] for t in entry["top_logprobs"]]
        assert len(tops) == 3 and tops == sorted(tops, reverse=True) and all(t <= 0 for t in tops)
        assert entry["logprob"] <= 0
    echo = seen["echo_logprobs"]
    assert echo[0] is None and all(isinstance(x, float) and x <= 0 for x in echo[1:])
    assert seen["dimensions"] == 1536
    assert seen["kernel"]  # which kernel answered: the C one when built, else numpy (the same bytes)
    assert seen["torch"] == [], seen["torch"]
    assert attempts(log) == ""


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="reads /proc/<pid>/maps")
def test_a_served_model_never_imports_or_maps_torch(tmp_path: Path) -> None:
    """``mockserver serve`` as users start it, its model answering over HTTP: no attempt to import
    torch, and no libtorch in its memory."""
    log = tmp_path / "torch.log"
    port = free_port()
    serve = "import runpy, sys\nsys.argv[0] = 'mockserver'\nrunpy.run_module('mockserver', run_name='__main__')\n"
    command = [sys.executable, "-c", PRELUDE + serve, "serve", "--port", str(port), "--frozen-time", "1700000000"]
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "server.log").open("wb") as out:
        proc = subprocess.Popen(command, cwd=tmp_path, env=_watched_env(log), stdout=out, stderr=out)
    try:
        wait_healthy(url, proc)
        chat = httpx.post(url + "/v1/chat/completions", json=CHAT, timeout=120)
        assert chat.status_code == 200, chat.text
        assert chat.headers["x-mockserver-source"] == "reference"
        assert chat.json()["choices"][0]["logprobs"]["content"]
        echoed = httpx.post(url + "/v1/completions", json=COMPLETION, timeout=120)
        assert echoed.status_code == 200, echoed.text
        maps = Path(f"/proc/{proc.pid}/maps").read_text().splitlines()
        assert [line for line in maps if "libtorch" in line] == []
    finally:
        stop(proc)
    assert attempts(log) == "", attempts(log)
