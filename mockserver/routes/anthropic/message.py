"""The folded answer as Anthropic's ``Message``: its content blocks in the order the events came
— ``thinking`` (with a signature), ``text``, ``tool_use`` — its ``stop_reason`` and
``stop_sequence`` and its ``usage``, exact by the shipped tokenizer. The stream
(:mod:`mockserver.routes.anthropic.stream`) writes the same blocks event by event, by the same
rules, so the SDK folds it into this message.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from mockserver.routes.codec import Call
from mockserver.spine.events import Usage
from mockserver.spine.result import ChoiceResult, Result
from mockserver.spine.seeding import digest
from mockserver.wire.json import Json

__all__ = ["SERVICE_TIER", "blocks", "head", "message", "signature", "stop_of", "tool_id", "tool_input", "usage"]

SERVICE_TIER = "standard"


def tool_id(call_id: str) -> str:
    """A call's id as Anthropic spells them (``toolu_…``); an id a rule gave is kept."""
    return "toolu_" + call_id[5:] if call_id.startswith("call_") else call_id


def signature(call: Call, thinking: str) -> str:
    """A thinking block's signature: stable for the request, seed and thought (base64, as
    Anthropic's are; opaque to clients, which send it back unchanged)."""
    raw = digest(b"signature", call.gen.seed, call.gen.canonical, thinking)
    return base64.b64encode(raw + digest(b"signature", raw)).decode()


def tool_input(arguments: str) -> Any:
    """A call's arguments as the ``input`` object; broken JSON (``content.bad_arguments``)
    goes out as the text it is, so the fault shows."""
    if not arguments:
        return {}
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def blocks(call: Call, c: ChoiceResult) -> list[Json]:
    """The content blocks of a finished choice (the order and rules the stream follows)."""
    out: list[Json] = []
    if c.reasoning is not None:
        out.append({"type": "thinking", "thinking": c.reasoning, "signature": signature(call, c.reasoning)})
    said = c.parts or c.refusal is not None
    if said or (not c.tool_calls and c.reasoning is None):
        out.append({"type": "text", "text": c.text + (c.refusal or "")})
    for t in c.tool_calls:
        out.append({"type": "tool_use", "id": tool_id(t.id), "name": t.name, "input": tool_input(t.arguments)})
    return out


def stop_of(c: ChoiceResult | None) -> tuple[str | None, str | None]:
    """``(stop_reason, stop_sequence)`` of a finished choice."""
    if c is None or c.finish_reason is None:
        return None, None
    if c.refusal is not None or c.finish_reason == "content_filter":
        return "refusal", None
    if c.finish_reason == "stop" and isinstance(c.matched, str):
        return "stop_sequence", c.matched
    return {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}[c.finish_reason], None


def usage(u: Usage | None, tier: str | None) -> Json:
    u = u or Usage(0, 0)
    return {
        "input_tokens": u.prompt_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
        "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
        "output_tokens": u.completion_tokens,
        "service_tier": tier or SERVICE_TIER,
    }


def head(call: Call) -> Json:
    """The message's fields before its content (``message_start`` carries them too)."""
    return {"id": call.id, "type": "message", "role": "assistant", "model": call.gen.model}


def message(call: Call, result: Result) -> Json:
    """The non-streamed ``Message``."""
    c = result.choices.get(0)
    reason, sequence = stop_of(c)
    return {
        **head(call),
        "content": blocks(call, c if c is not None else ChoiceResult(0)),
        "stop_reason": reason,
        "stop_sequence": sequence,
        "usage": usage(result.usage, call.service_tier),
    }
