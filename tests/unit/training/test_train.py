"""``make train`` runs: the training script, end to end, on a tiny budget (it once failed to
import for months: nothing ran it), and what it writes is served without torch."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live import ROOT
from tests.support.torch_watch import PRELUDE, attempts

# The fresh checkpoint served as the server serves the shipped one (the torch-free loader, the
# reference backend, the app), in a process watched for torch: a chat answered with logprobs.
SERVE = """
import asyncio, json, sys
from pathlib import Path
import httpx
from mockserver import Settings, create_app
from mockserver.backends.reference.backend import ReferenceBackend

app = create_app(Settings(frozen_time=1700000000), backend=ReferenceBackend(1, assets=Path(sys.argv[1])))
body = {"model": "m", "messages": [{"role": "user", "content": "Hello!"}], "max_tokens": 5, "logprobs": True}

async def main():
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://mockserver", timeout=120) as client:
        answer = await client.post("/v1/chat/completions", json=body)
    print(json.dumps([answer.status_code, answer.headers.get("x-mockserver-source"), answer.json()]))
    print(sorted(m for m in sys.modules if m.split(".")[0] == "torch"))

asyncio.run(main())
"""


@pytest.mark.slow
def test_the_training_script_writes_assets_the_server_loads(tmp_path: Path) -> None:
    out = tmp_path / "assets"
    done = subprocess.run(
        [sys.executable, "-m", "training.train", "--docs", "3000", "--steps", "2", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert {p.name for p in out.iterdir()} == {"config.json", "model.safetensors", "tokenizer.json"}
    assert json.loads((out / "config.json").read_text())["vocab_size"] == 2048
    assert "end with <|im_end|>" in done.stdout  # the closing check sampled chats with the decoder

    from mockserver.backends.reference.runtime import Runtime

    runtime = Runtime(out)
    logits, _ = runtime.decoder.prefill(runtime.tokenizer.encode("Hello"))
    assert logits.shape == (1, 2048)

    log = tmp_path / "torch.log"
    served = subprocess.run(
        [sys.executable, "-c", PRELUDE + SERVE, str(out)],
        cwd=ROOT,
        env={**os.environ, "TORCH_WATCH": str(log)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert served.returncode == 0, served.stderr[-3000:]
    answer, modules = served.stdout.strip().splitlines()[-2:]
    status, source, body = json.loads(answer)
    assert (status, source) == (200, "reference"), body
    assert body["choices"][0]["logprobs"]["content"]  # two steps of training: nonsense, but scored
    assert modules == "[]" and attempts(log) == "", attempts(log)
