"""The golden corpus answers as recorded: status, meaningful headers and every body byte.

``corpus.json`` was written by ``python -m tests.golden.record`` before a refactor; after
it, every case must answer the same. ``CHANGED`` lists the cases whose answers a change
altered on purpose, each with the reason; they must differ (so the list stays honest) and
are otherwise left to the tests of that change.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.golden.record import CORPUS, run

CHANGED: dict[str, str] = {
    # Fault decisions hash the canonical body (sorted keys, delivery fields left out), so the
    # same request decides the same whatever its key order: other draws than the raw body's.
    "faults/misc/http.503@p=0.5": "canonical fault hashing",
    "faults/misc/http.503@p=0.5/stream": "canonical fault hashing",
    "faults/misc/content.length@p=0.5": "canonical fault hashing",
    "faults/misc/content.length@p=0.5/stream": "canonical fault hashing",
    # stream.error_at on a Responses stream: an `error` event with its sequence_number, then
    # `response.failed` (was a chat-style `data: {"error": …}` frame).
    "faults/responses/stream.error_at=5": "the Responses error shape",
    # max_tokens alone larger than the window: the error names max_tokens (was "prompt").
    "completions/err_context": "context errors name the field to change",
    # The x-mockserver-faults echo keeps the grammar the fault was written in (was http.429=2,
    # which reads as a probability).
    "faults/http/http.429,retry_after=2": "fault echoes keep their grammar",
    # "auto" after a tool result answers with decided text quoting the result ("Here is what I
    # found: get_weather returned {…}", cut by the case's small max tokens), no longer sampled.
    "chat/tool_result": "the tool policy quotes tool results",
    "chat/tool_result/stream": "the tool policy quotes tool results",
    "responses/function_output": "the tool policy quotes tool results",
    "responses/function_output/stream": "the tool policy quotes tool results",
    # Token ids are checked against the model family's real vocabulary: the 400 names it.
    "completions/err_token": "token-id errors name the model's vocabulary",
    # Tool-call and refusal streams open with {"role": "assistant", "content": null, …} in the
    # chunk of their first delta (as OpenAI's), so the SDK's fold gives content None like the
    # non-streamed twin (was a chunk of its own with content "").
    "chat/functions/stream": "tool-call streams open with content null",
    "chat/tool_auto/stream": "tool-call streams open with content null",
    "chat/tool_auto/stream_bare": "tool-call streams open with content null",
    "chat/tool_logprobs/stream": "tool-call streams open with content null",
    "chat/tool_named/stream": "tool-call streams open with content null",
    "chat/tool_required/stream": "tool-call streams open with content null",
    "rules/chat_tool_stream": "tool-call streams open with content null",
    "faults/chat/content.refusal/stream": "refusal streams open with content null",
    "rules/password/stream": "refusal streams open with content null",
    # Each choice's role chunk goes with its first content (it must know which field it opens),
    # so with n > 1 choice 1's role chunk follows choice 0's first token.
    "chat/n2/stream": "role chunks go with each choice's first content",
    "rules/greet/n2_stream": "role chunks go with each choice's first content",
}
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
def test_the_golden_corpus_answers_byte_for_byte() -> None:
    recorded = json.loads(CORPUS.read_text())
    answered = run()
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
