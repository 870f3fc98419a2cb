"""The ``mcp.*`` faults a JSON-RPC message to ``/mcp`` gets: by its header or by a rule.

A message is matched by rules as ``POST /mcp/<method>`` — ``/mcp/tools/call/<tool>`` and
``/mcp/prompts/get/<prompt>`` for the named ones — so ``{"faults": "mcp.error", "path":
"/mcp/tools/call/search"}`` breaks one tool and ``"path": "/mcp*"`` every message. Only requests
get faults (a notification has no answer to break) and ``initialize`` none (it is the handshake
every fault needs first). Probabilities draw from the message's own seeded generator, so the same
message breaks the same way every run. The rule book is consulted only while a rule names an MCP
fault: a model-only rule with ``times`` is never counted down by MCP traffic.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from mockserver.faults.catalogue import Fault, request_rng
from mockserver.faults.rules import RequestInfo, RuleBook

__all__ = ["McpFaults", "Plan", "rule_path"]


@dataclass(frozen=True, slots=True)
class Plan:
    applied: tuple[Fault, ...] = ()
    tool_error: bool = False  # mcp.error on a tools/call
    error_code: int | None = None  # mcp.protocol_error: the JSON-RPC code answered
    latency_ms: float = 0.0
    drop: bool = False  # mcp.drop_session


def rule_path(message: dict[str, Any]) -> str:
    """The path rules match a message on: ``/mcp/<method>[/<name>]``."""
    method = str(message.get("method"))
    params = message.get("params")
    name = params.get("name") if isinstance(params, dict) and method in ("tools/call", "prompts/get") else None
    return f"/mcp/{method}" + (f"/{name}" if isinstance(name, str) else "")


class McpFaults:
    def __init__(self, rules: RuleBook, seed: int, time_scale: float) -> None:
        self.rules = rules
        self.seed = seed
        self.time_scale = time_scale

    async def _ruled(self, session: str | None) -> bool:
        """Does any rule this session sees name an MCP fault?"""
        found = await self.rules.alist(None)
        return any(r.session in (None, session) and any(f.kind == "mcp" for f in r.faults) for r in found) or any(
            f.kind == "mcp" for f in self.rules.defaults
        )

    async def decide(self, message: Any, session: str | None, asked: tuple[Fault, ...]) -> Plan:
        """The faults ``message`` (the parsed body) gets and what they do."""
        if not isinstance(message, dict) or "id" not in message or message.get("method") in (None, "initialize"):
            return Plan()
        if not asked and not await self._ruled(session):
            return Plan()
        path = rule_path(message)
        canonical = json.dumps(message, sort_keys=True, separators=(",", ":"), default=str)
        rng = request_rng(self.seed, "POST", path, canonical, session)
        chosen = await self.rules.decide(RequestInfo("POST", path, session=session), asked, rng)
        applied: list[Fault] = []
        tool_error, code, latency, drop = False, None, 0.0, False
        for fault in chosen:
            if fault.kind != "mcp" or fault in applied:
                continue
            if fault.name == "mcp.error":
                if message.get("method") != "tools/call":
                    continue  # a tool's failure: other methods have no isError to set
                tool_error = True
            elif fault.name == "mcp.protocol_error":
                if code is not None:
                    continue
                code = -int(fault["code"])
            elif fault.name == "mcp.latency":
                latency = max(latency, fault["ms"])
            elif fault.name == "mcp.drop_session":
                drop = True
            applied.append(fault)
        return Plan(tuple(applied), tool_error, code, latency, drop)

    async def delay(self, plan: Plan) -> None:
        if plan.latency_ms > 0 and self.time_scale > 0:
            await asyncio.sleep(plan.latency_ms / 1000.0 * self.time_scale)
