"""``make train`` runs: the training script, end to end, on a tiny budget (it once failed to
import for months: nothing ran it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.live import ROOT


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
