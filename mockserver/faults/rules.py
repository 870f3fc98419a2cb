"""Rules: which faults a request gets without asking for them.

A rule matches on the request (path, model, ``stream``, whether tools are offered, the
SDK's retry attempt, the nth matching call) and carries fault specs. ``times`` limits it to
its first N matching calls — "fail the first two attempts, then succeed" is
``{"faults": "http.503", "times": 2}``. A rule with a ``session`` applies only to requests
sending that ``x-mockserver-session``, and counts calls per session, so parallel test
workers on one server do not interfere. Rules come from ``--faults`` (every request) and the
admin API; :meth:`RuleBook.decide` joins them with the request's own header and draws the
probabilities from the request's generator.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mockserver.faults.catalogue import Fault, FaultError, parse

__all__ = ["RequestInfo", "Rule", "RuleBook", "RuleFieldError"]


class RuleFieldError(ValueError):
    """A rule the admin API cannot take; ``field`` names the field at fault (the error's param)."""

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class RequestInfo:
    """What rules can match on, read once from the request."""

    method: str
    path: str
    model: str | None = None
    stream: bool = False
    tools: bool = False
    session: str | None = None
    retry_attempt: int = 0


@dataclass(frozen=True, slots=True)
class Rule:
    faults: tuple[Fault, ...]
    id: int = 0
    path: str | None = None  # exact, or a prefix when it ends with "*"
    model: str | None = None
    stream: bool | None = None
    tools: bool | None = None
    retry_attempt: int | None = None
    nth: tuple[int, ...] = ()  # only these matching calls (1 = the first)
    times: int | None = None  # only the first N matching calls
    session: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any], rule_id: int) -> Rule:
        """A rule as the admin API takes it; :class:`RuleFieldError` (a ``ValueError``) with a
        readable message naming the field if wrong."""
        known = {"faults", "path", "model", "stream", "tools", "retry_attempt", "nth", "times", "session"}
        unknown = sorted(set(data) - known)
        if unknown:
            raise RuleFieldError(
                f"unknown rule fields: {', '.join(unknown)} (known: {', '.join(sorted(known))})", unknown[0]
            )
        spec = data.get("faults")
        if not isinstance(spec, str) or not spec.strip():
            raise RuleFieldError("a rule needs 'faults': a fault spec such as \"http.503@p=0.5\"", "faults")
        try:
            faults = parse(spec)
        except FaultError as exc:
            raise RuleFieldError(str(exc), "faults") from None
        nth = data.get("nth") or ()
        if isinstance(nth, int):
            nth = (nth,)
        checks = {
            "path": str,
            "model": str,
            "stream": bool,
            "tools": bool,
            "retry_attempt": int,
            "times": int,
            "session": str,
        }
        for name, kind in checks.items():
            value = data.get(name)
            if value is not None and (not isinstance(value, kind) or (kind is int and isinstance(value, bool))):
                raise RuleFieldError(f"rule field {name!r} must be a {kind.__name__}", name)
        if not isinstance(nth, list | tuple) or not all(isinstance(n, int) and n >= 1 for n in nth):
            raise RuleFieldError("rule field 'nth' must be a call number ≥ 1 or a list of them", "nth")
        return cls(
            faults=faults,
            id=rule_id,
            path=data.get("path"),
            model=data.get("model"),
            stream=data.get("stream"),
            tools=data.get("tools"),
            retry_attempt=data.get("retry_attempt"),
            nth=tuple(nth),
            times=data.get("times"),
            session=data.get("session"),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "faults": "; ".join(f.render() for f in self.faults)}
        for name in ("path", "model", "stream", "tools", "retry_attempt", "times", "session"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        if self.nth:
            out["nth"] = list(self.nth)
        return out

    def matches(self, info: RequestInfo) -> bool:
        """Everything but the call count."""
        if self.session is not None and self.session != info.session:
            return False
        if self.path is not None:
            if self.path.endswith("*"):
                if not info.path.startswith(self.path[:-1]):
                    return False
            elif info.path != self.path:
                return False
        return (
            (self.model is None or self.model == info.model)
            and (self.stream is None or self.stream == info.stream)
            and (self.tools is None or self.tools == info.tools)
            and (self.retry_attempt is None or self.retry_attempt == info.retry_attempt)
        )


@dataclass
class RuleBook:
    """The live rules and their call counters; safe to change while requests run."""

    defaults: tuple[Fault, ...] = ()  # --faults: every request
    _rules: list[Rule] = field(default_factory=list)
    _calls: dict[tuple[int, str | None], int] = field(default_factory=dict)
    _next_id: int = 1
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, data: Mapping[str, Any]) -> Rule:
        with self._lock:
            rule = Rule.from_json(data, self._next_id)
            self._next_id += 1
            self._rules.append(rule)
            return rule

    def remove(self, rule_id: int) -> bool:
        with self._lock:
            kept = [r for r in self._rules if r.id != rule_id]
            found = len(kept) != len(self._rules)
            self._rules = kept
            return found

    def clear(self, session: str | None = None) -> None:
        """Every rule (``session=None``), or those of one session."""
        with self._lock:
            if session is None:
                self._rules, self._calls = [], {}
            else:
                self._rules = [r for r in self._rules if r.session != session]
                self._calls = {k: v for k, v in self._calls.items() if k[1] != session}

    def list(self, session: str | None = None) -> list[Rule]:
        with self._lock:
            return [r for r in self._rules if session is None or r.session == session]

    @property
    def active(self) -> bool:
        return bool(self.defaults or self._rules)

    def decide(self, info: RequestInfo, asked: tuple[Fault, ...], rng: random.Random) -> tuple[Fault, ...]:
        """The faults this request gets: its header's, the defaults, then matching rules' —
        each kept with its probability, drawn in that order from ``rng``."""
        candidates = list(asked) + list(self.defaults)
        with self._lock:
            for rule in self._rules:
                if not rule.matches(info):
                    continue
                key = (rule.id, info.session)
                call = self._calls.get(key, 0) + 1
                self._calls[key] = call
                if rule.times is not None and call > rule.times:
                    continue
                if rule.nth and call not in rule.nth:
                    continue
                candidates.extend(rule.faults)
        return tuple(f for f in candidates if f.probability >= 1.0 or rng.random() < f.probability)
