"""Every wire format of logprobs, built from the spine's tokens in one place.

* ``legacy``: completions' ``{tokens, token_logprobs, top_logprobs, text_offset}`` (also what
  some providers return on chat when ``logprobs`` is an integer);
* ``content``: chat's ``{"content": [{token, logprob, bytes, top_logprobs}], "refusal": null}``;
* ``prompt``: vLLM's ``prompt_logprobs``: per prompt position ``null`` (the first) or
  ``{"<token id>": {logprob, rank, decoded_token}}`` holding the prompt token and the top
  alternatives.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mockserver.spine.events import PromptPosition, Token

__all__ = ["content", "legacy", "prompt"]


def legacy(tokens: Sequence[Token], start: int) -> dict[str, Any]:
    """Offsets count characters from ``start``. The top map holds the requested alternatives
    plus the sampled token (up to ``logprobs + 1`` entries, as OpenAI documents); an unscored
    token (the first of an echoed prompt) has ``null`` there."""
    offsets: list[int] = []
    position = start
    tops: list[dict[str, float] | None] = []
    for t in tokens:
        offsets.append(position)
        position += len(t.text)
        if t.logprob is None:
            tops.append(None)
        else:
            top = {c.token: c.logprob for c in t.top}
            top.setdefault(t.token, t.logprob)
            tops.append(top)
    return {
        "tokens": [t.token for t in tokens],
        "token_logprobs": [t.logprob for t in tokens],
        "top_logprobs": tops,
        "text_offset": offsets,
    }


def content(tokens: Sequence[Token]) -> dict[str, Any]:
    return {
        "content": [
            {
                "token": t.token,
                "logprob": t.logprob,
                "bytes": list(t.bytes),
                "top_logprobs": [{"token": c.token, "logprob": c.logprob, "bytes": list(c.bytes)} for c in t.top],
            }
            for t in tokens
        ],
        "refusal": None,
    }


def prompt(positions: Sequence[PromptPosition | None]) -> list[dict[str, dict[str, Any]] | None]:
    out: list[dict[str, dict[str, Any]] | None] = []
    for position in positions:
        if position is None:
            out.append(None)
            continue
        entry: dict[str, dict[str, Any]] = {}
        for scored in (position.token, *position.top):
            entry.setdefault(
                str(scored.id), {"logprob": scored.logprob, "rank": scored.rank, "decoded_token": scored.token}
            )
        out.append(entry)
    return out
