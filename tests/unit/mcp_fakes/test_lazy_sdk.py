"""The MCP SDK stays off the generation path: building the app and answering a chat completion
import none of it; the first message to /mcp does (and is answered)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.support.live import ROOT

SCRIPT = """
import json, sys
from starlette.testclient import TestClient
from mockserver import Settings, create_app

app = create_app(Settings(backend="script", frozen_time=1_700_000_000))
seen = {}
with TestClient(app) as client:
    client.post("/__mockserver/answers", json={"text": "Hi."}).raise_for_status()
    asked = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "x"}]}
    chat = client.post("/v1/chat/completions", json=asked)
    seen["chat"] = chat.json()["choices"][0]["message"]["content"]
    seen["before"] = sorted(m for m in sys.modules if m.split(".")[0] in ("mcp", "mcp_types"))
    hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
    answer = client.post("/mcp", json=init, headers={"accept": "application/json, text/event-stream"})
    seen["mcp"] = answer.status_code
    seen["after"] = "mcp.server.lowlevel" in sys.modules
print(json.dumps(seen))
"""


def test_the_sdk_loads_on_the_first_mcp_message_only() -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"chat": "Hi.", "before": [], "mcp": 200, "after": True}
