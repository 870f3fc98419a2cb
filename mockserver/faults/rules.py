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

import builtins
import heapq
import json
import logging
import random
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from mockserver.faults.catalogue import MAX_TERMS, Fault, FaultError, parse
from mockserver.state.sync import Bridge, Cached, safe, version_step

__all__ = ["RequestInfo", "Rule", "RuleBook", "RuleFieldError"]

# The state's keys: the rules (id → JSON), their ids and version, each session's call counts.
RULES = "faults:rules"
IDS = "faults:ids"
VERSION = "faults:version"
COUNTS = "faults:s:"


log = logging.getLogger("mockserver")


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


# Faults one request gets at most (its header's, the defaults and every matching rule's, in that
# order): each is marked on the request and echoed in ``x-mockserver-faults``, so however many
# rules match, the work and the header stay bounded (MAX_TERMS terms a spec, 2,048 characters).
MAX_APPLIED = 2 * MAX_TERMS


class RuleBook(Cached):
    """The live rules and their call counters, kept in the state (``bridge``): safe to change
    while requests run, and every process's on a shared state.

    As with scripted answers (:class:`mockserver.answers.scripted.Script`): the rules live in the
    state's map ``faults:rules``, this process keeps a copy reloaded when ``faults:version``
    moves, and each session's call counts are counters under ``faults:s:<session>:``. The
    ``--faults`` defaults are configuration every process has: they are never written.
    """

    version_key = VERSION

    def __init__(self, defaults: tuple[Fault, ...] = (), bridge: Bridge | None = None) -> None:
        self.defaults = defaults  # --faults: every request
        self.bridge = bridge if bridge is not None else Bridge()
        self.state = self.bridge.state
        self._rules: tuple[Rule, ...] = ()  # in the order added
        # The same rules by session (None: the global ones), in id order: a request looks at its
        # own session's and the global ones only — 10,000 sessions' leftover rules cost it nothing.
        self._by_session: dict[str | None, tuple[Rule, ...]] = {}
        self._version = 0
        self._lock = threading.Lock()
        self._warned = False  # the MAX_APPLIED warning, once

    async def reload(self, version: int) -> None:
        """Read the shared rules again (their version moved to ``version``)."""
        found = await self.state.map_all(RULES)
        rules = sorted((Rule.from_json(json.loads(raw), int(key)) for key, raw in found.items()), key=lambda r: r.id)
        with self._lock:
            self._set(tuple(rules))
            self._version = version

    async def _changed(self, written: Rule | None = None, gone: frozenset[int] = frozenset()) -> None:
        version = await self.state.add(VERSION, version_step())
        if self.state.shared:
            await self.reload(version)
            return
        with self._lock:  # memory: this copy is the rules
            if gone or written is None:
                kept = [r for r in self._rules if r.id not in gone]
                self._set(tuple(kept + ([written] if written is not None else [])))
            else:  # one more rule (ids grow): no walk over the others, so N adds cost O(N), not O(N²)
                self._rules = (*self._rules, written)
                self._by_session = {
                    **self._by_session,
                    written.session: (*self._by_session.get(written.session, ()), written),
                }
            self._version = version

    def _set(self, rules: tuple[Rule, ...]) -> None:
        """Caller holds the lock: the rules, and their index by session."""
        by_session: dict[str | None, list[Rule]] = {}
        for rule in rules:
            by_session.setdefault(rule.session, []).append(rule)
        self._rules = rules
        self._by_session = {session: tuple(found) for session, found in by_session.items()}

    def _candidates(self, session: str | None) -> Iterable[Rule]:
        """The rules that may match a request of ``session``: the global ones and its own, in
        the order added (ids grow as rules are added)."""
        index = self._by_session
        mine = index.get(session, ()) if session is not None else ()
        shared = index.get(None, ())
        return heapq.merge(shared, mine, key=lambda rule: rule.id) if mine and shared else (mine or shared)

    def add(self, data: Mapping[str, Any]) -> Rule:
        return self.bridge.call(self.aadd(data))

    async def aadd(self, data: Mapping[str, Any]) -> Rule:
        Rule.from_json(data, 0)  # a wrong rule takes no id
        rule = Rule.from_json(data, await self.state.add(IDS))
        saved = rule.to_json()
        del saved["id"]
        await self.state.map_put(RULES, str(rule.id), json.dumps(saved, separators=(",", ":")).encode())
        await self._changed(written=rule)
        return rule

    def remove(self, rule_id: int) -> bool:
        return self.bridge.call(self.aremove(rule_id))

    async def aremove(self, rule_id: int) -> bool:
        if not await self.state.map_delete(RULES, str(rule_id)):
            return False
        await self._changed(gone=frozenset({rule_id}))
        return True

    def clear(self, session: str | None = None) -> None:
        """Every rule (``session=None``), or those of one session."""
        self.bridge.call(self.aclear(session))

    async def aclear(self, session: str | None = None) -> None:
        if session is None:
            await self.state.forget(RULES)
            await self.state.forget(COUNTS)
            gone = frozenset(r.id for r in self._rules)
        else:
            found = await self.state.map_all(RULES)
            dropped = set()
            for key, raw in found.items():
                if json.loads(raw).get("session") == session:
                    await self.state.map_delete(RULES, key)
                    dropped.add(int(key))
            await self.state.forget(f"{COUNTS}{safe(session)}:")
            gone = frozenset(dropped)
        await self._changed(gone=gone)

    async def alist(self, session: str | None = None) -> list[Rule]:
        await self.refresh()
        return self._listed(session)

    def _listed(self, session: str | None) -> list[Rule]:
        return [r for r in self._rules if session is None or r.session == session]

    def list(self, session: str | None = None) -> builtins.list[Rule]:  # after the others: it shadows list
        if self.state.shared:
            self.bridge.call(self.refresh())
        return self._listed(session)

    @property
    def active(self) -> bool:
        """Any defaults or rules (on a shared state, as of the request's first look)."""
        return bool(self.defaults or self._rules)

    async def decide(self, info: RequestInfo, asked: tuple[Fault, ...], rng: random.Random) -> tuple[Fault, ...]:
        """The faults this request gets: its header's, the defaults, then matching rules' —
        each kept with its probability, drawn in that order from ``rng``. One state call
        counts the calls of the matching rules that read them (none when none does)."""
        candidates = list(asked) + list(self.defaults)
        matching = [rule for rule in self._candidates(info.session) if rule.matches(info)]
        # Only rules with ``times`` or ``nth`` read their count: the others are not counted.
        counted = [rule for rule in matching if rule.nth or rule.times is not None]
        calls: dict[int, int] = {}
        if counted:
            prefix = f"{COUNTS}{safe(info.session)}:c:"
            _, numbers = await self.state.exchange((), [f"{prefix}{rule.id}" for rule in counted])
            calls = {rule.id: call for rule, call in zip(counted, numbers, strict=True)}
        for rule in matching:
            call = calls.get(rule.id)
            if call is not None:
                if rule.times is not None and call > rule.times:
                    continue
                if rule.nth and call not in rule.nth:
                    continue
            candidates.extend(rule.faults)
        chosen = tuple(f for f in candidates if f.probability >= 1.0 or rng.random() < f.probability)
        if len(chosen) > MAX_APPLIED:  # every one is marked and echoed (x-mockserver-faults): bounded
            if not self._warned:
                self._warned = True
                log.warning("faults: %d apply to one request; the first %d are kept", len(chosen), MAX_APPLIED)
            chosen = chosen[:MAX_APPLIED]
        return chosen
