"""Run load-generator processes, and choose the requests the cells send.

A model can end a reply early (``<|im_end|>``), so "a 16-token completion" is not
guaranteed by ``max_tokens: 16`` alone. :func:`choose_chat` tries a short, bounded list of
settings and keeps the first that really yields 16 tokens; the report states which it kept
and the mean ``completion_tokens`` actually measured.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from bench.loadgen import Cell
from bench.procs import ROOT, post_json

__all__ = [
    "CHAT",
    "LONG_SUFFIX",
    "LONG_TEXT",
    "SHORT_PROMPTS",
    "Chosen",
    "chat_body",
    "choose_chat",
    "fit_prompt",
    "run_cell",
    "run_cells_together",
]

# Asked of the model in order; the first whose greedy reply fills 16 tokens is kept.
SHORT_PROMPTS = (
    "Write a short poem about rain.",
    "Tell me about Marie Curie.",
    "Explain photosynthesis.",
    "Describe the ocean.",
    "Tell me about Paris.",
    "Explain quantum computing in simple terms.",
)
# Cut to the longest prefix whose chat prompt is ≤ 50 tokens (see fit_prompt).
LONG_TEXT = (
    "Our team is planning a weekend trip to the mountains next month. We need to book a cabin for six "
    "people, rent two cars, and buy food for three days. Some of us want to hike to the lake on Saturday, "
    "while others prefer to stay near the cabin and read. The weather forecast says it may rain on Sunday "
    "morning, so we should bring jackets and a few board games for the evenings."
)
LONG_SUFFIX = " Please write a detailed plan for us."
CHAT = "/v1/chat/completions"
MODEL = "gpt-4o-mini"
SEEDS = range(1, 21)  # tried in order when greedy ends early


def _bound(cell: Cell) -> float:
    """The longest a load-generator process may take before it is killed."""
    return cell.warmup + cell.duration + 2 * cell.timeout + 30  # warm-up wait and drain: ≤ timeout each


def run_cells_together(cells: Sequence[Cell]) -> list[dict[str, Any]]:
    """Start one load generator per cell at the same moment; wait for all of them."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "bench.loadgen", json.dumps(asdict(cell))],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for cell in cells
    ]
    try:
        results = []
        for proc, cell in zip(procs, cells, strict=True):
            out, err = proc.communicate(timeout=_bound(cell))
            if proc.returncode != 0:
                raise RuntimeError(f"load generator failed ({proc.returncode}):\n{err[-2000:]}")
            results.append(json.loads(out))
        return results
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


def run_cell(cell: Cell) -> dict[str, Any]:
    return run_cells_together([cell])[0]


@dataclass(frozen=True)
class Chosen:
    """A chat body and why it was chosen."""

    body: dict[str, Any]
    completion_tokens: int
    prompt_tokens: int
    note: str

    def json(self, **changes: Any) -> str:
        return json.dumps({**self.body, **changes})


def _usage(port: int, body: dict[str, Any]) -> tuple[int, int]:
    status, answer = post_json(port, "/v1/chat/completions", body)
    if status != 200:
        raise RuntimeError(f"chat completion failed: {status} {answer}")
    usage = answer.get("usage")
    assert isinstance(usage, dict)
    return int(usage["completion_tokens"]), int(usage["prompt_tokens"])


def chat_body(content: str, max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": max_tokens, **extra}


def choose_chat(port: int, contents: Sequence[str], tokens: int = 16) -> Chosen:
    """The first of: greedy on each content, then temperature 1 with seeds, giving ``tokens``."""
    tries = [chat_body(c, tokens, temperature=0) for c in contents]
    tries += [chat_body(contents[0], tokens, temperature=1, seed=s) for s in SEEDS]
    best: Chosen | None = None
    for body in tries:
        completion, prompt = _usage(port, body)
        how = "greedy (temperature 0)" if body["temperature"] == 0 else f"temperature 1, seed {body['seed']}"
        chosen = Chosen(body, completion, prompt, f"{how}, prompt {body['messages'][0]['content']!r}")
        if completion >= tokens:
            return chosen
        if best is None or completion > best.completion_tokens:
            best = chosen
    assert best is not None
    return Chosen(
        best.body, best.completion_tokens, best.prompt_tokens, best.note + f" (no try reached {tokens} tokens)"
    )


def fit_prompt(port: int, words: Sequence[str], target: int, suffix: str = "") -> str:
    """The longest prefix of ``words`` (+ ``suffix``) whose chat prompt is ≤ ``target`` tokens.

    Binary search on the word count, one 1-token request per probe (≤ log2(len) requests):
    the prompt's size is measured by the server's own ``usage.prompt_tokens``.
    """
    low, high = 1, len(words)
    while low < high:
        middle = (low + high + 1) // 2
        _, prompt = _usage(port, chat_body(" ".join(words[:middle]) + suffix, 1, temperature=0))
        if prompt <= target:
            low = middle
        else:
            high = middle - 1
    return " ".join(words[:low]) + suffix
