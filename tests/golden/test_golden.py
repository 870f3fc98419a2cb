"""The golden corpus answers as recorded: status, meaningful headers and every body byte.

``corpus.json`` was written by ``python -m tests.golden.record`` before a refactor; after
it, every case must answer the same. ``CHANGED`` lists the cases whose answers a change
altered on purpose, each with the reason; they must differ (so the list stays honest) and
are otherwise left to the tests of that change.

Re-recorded when the model came to compute with its own kernel (``mockserver/gpt/kernels``):
the 18 answers that moved were logprob digits (chat, completions, echo, ``prompt_logprobs``,
Responses, scripted answers scored, Fireworks' integer logprobs), the embeddings, one
``best_of`` ranking and one sampled completion; no other byte. The cases listed in
``CHANGED`` before then are in git history (tests/golden/test_golden.py at 4fd281b). The
corpus answers the same with every kernel: the C one and its NumPy definition, so a machine
without a C compiler, or with other CPU instructions, serves the very same bytes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.golden.record import CORPUS, run

CHANGED: dict[str, str] = {}
# Headers an answer may gain without changing its meaning.
ADDED_OK = frozenset({"x-mockserver-source", "x-request-id"})


def _same(old: dict[str, Any], new: dict[str, Any]) -> bool:
    if "failed" in old or "failed" in new:
        return old.get("failed") == new.get("failed")
    if (old["status"], old["sha256"], old["length"]) != (new["status"], new["sha256"], new["length"]):
        return False
    gained = set(new["headers"]) - set(old["headers"])
    if gained - ADDED_OK or any(new["headers"].get(k) != v for k, v in old["headers"].items()):
        return False
    return "final" not in old or _same(old["final"], new["final"])


@pytest.mark.slow
@pytest.mark.parametrize("kernel", ["auto", "numpy"])
def test_the_golden_corpus_answers_byte_for_byte(kernel: str) -> None:
    recorded = json.loads(CORPUS.read_text())
    answered = run(kernel=kernel)
    assert sorted(answered) == sorted(recorded)
    differ, missing = [], []
    for server, group in recorded.items():
        for case_id, old in group.items():
            new = answered[server].get(case_id)
            if new is None:
                missing.append(case_id)
            elif not _same(old, new) and case_id not in CHANGED:
                differ.append(f"{server}:{case_id}")
    stale = [c for c in CHANGED if all(c not in g or _same(recorded[s][c], g[c]) for s, g in answered.items())]
    assert not missing, f"cases no longer asked: {missing}"
    assert not differ, f"{len(differ)} answers changed: {differ}"
    assert not stale, f"listed as changed but answer as recorded: {stale}"
