"""Scripted answers: which requests get a decided answer instead of the model's free choice.

A rule matches on the request — its surface (``chat``, ``completions``, ``responses``), the
model, a regular expression searched in the last user message (in the prompt, for
completions), whether tools are offered, the nth matching call — and carries an
:class:`~mockserver.spine.request.Answer`: text, tool calls or a refusal, or a ``sequence`` of
them handed out one per answered call. The first rule that applies decides; the model still
scores the answer downstream, so logprobs, usage and streaming stay its own.

As with fault rules (:mod:`mockserver.faults.rules`), a rule with a ``session`` applies only to
requests sending that ``x-mockserver-session`` (and goes before the global rules), and every
rule counts its calls per session, so parallel test workers on one server each see their own
``nth`` and their own place in a sequence. Rules come from ``--rules FILE`` (YAML, pinned:
kept across resets, like ``--faults``), the admin API (``/__mockserver/answers``) and Python
(``app.state.ctx.script.add(text="Sunny.", match="weather")``).

On a shared state (``--state sqlite:…`` or ``redis://…``) the rules and counts are every
process's: a rule added through one answers on all, and each step of a sequence goes out once.

This module is the rule book: it holds the rules, answers requests and counts calls. One rule —
its record, parsing and validation — is :mod:`mockserver.answers.script_rule`.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mockserver.answers.script_rule import RuleError, ScriptExhausted, ScriptRule, Surface
from mockserver.spine.request import Answer, GenerationRequest
from mockserver.state.sync import Bridge, Cached, safe, version_step

__all__ = ["RuleError", "Script", "ScriptExhausted", "ScriptRule", "Surface"]

# The state's keys (see mockserver.state.base): the rules, their ids and version, and each
# session's counts (calls matched: c:<id>, answers given: g:<id>) under script:s:<session>:.
RULES = "script:rules"
IDS = "script:ids"
VERSION = "script:version"
COUNTS = "script:s:"


@dataclass(frozen=True, slots=True)
class _Book:
    """The rules as one request sees them: pinned and shared, in the order added, and the
    same split by session (built once per change, so answering does not filter)."""

    ordered: tuple[ScriptRule, ...] = ()
    globals: tuple[ScriptRule, ...] = ()
    by_session: Mapping[str, tuple[ScriptRule, ...]] = field(default_factory=dict)
    # Whether the global rules, and which sessions' own, have a rule that reads a count (nth,
    # times, a sequence's step): where none does, the same request gets the same answer.
    counting: bool = False
    counting_sessions: frozenset[str] = frozenset()

    @classmethod
    def of(cls, rules: Iterable[ScriptRule]) -> _Book:
        ordered = tuple(sorted(rules, key=lambda r: r.id))
        sessions: dict[str, list[ScriptRule]] = {}
        for rule in ordered:
            if rule.session is not None:
                sessions.setdefault(rule.session, []).append(rule)
        globals_ = tuple(r for r in ordered if r.session is None)
        return cls(
            ordered,
            globals_,
            {name: tuple(rules) for name, rules in sessions.items()},
            any(_counts(r) for r in globals_),
            frozenset(name for name, rules in sessions.items() if any(_counts(r) for r in rules)),
        )

    def for_session(self, session: str | None) -> tuple[ScriptRule, ...]:
        """The session's rules first, then the global ones."""
        own = self.by_session.get(session) if session is not None else None
        return own + self.globals if own else self.globals

    def counts(self, session: str | None) -> bool:
        """Does any rule the session sees read a count?"""
        return self.counting or (session is not None and session in self.counting_sessions)


def _counts(rule: ScriptRule) -> bool:
    return bool(rule.nth or rule.times is not None or rule.sequence)


class Script(Cached):
    """The scripted rules and their per-session call counters, kept in the state (``bridge``):
    safe to change while requests run, and shared by every process on a shared state.

    Rules live in the state's map ``script:rules`` (id → the rule's JSON); this process keeps a
    copy, reloaded when ``script:version`` moves (see :class:`mockserver.state.sync.Refresh`).
    Pinned rules (the ``--rules`` file's) are configuration every process loads alike: they
    stay local and take the ids from 1, before any shared rule's. Counts are state counters
    under ``script:s:<session>:``, so one ``forget`` resets a session's.
    """

    version_key = VERSION

    def __init__(self, bridge: Bridge | None = None) -> None:
        self.bridge = bridge if bridge is not None else Bridge()
        self.state = self.bridge.state
        self._pinned: list[ScriptRule] = []
        self._pinned_made = 0  # pinned ids given so far (never less: ids are not reused)
        self._shared: dict[int, ScriptRule] = {}  # the state's rules, as last read (memory: written here too)
        self._version = 0  # the script:version the copy reflects
        self._book = _Book()
        self.changes = 0  # moves with every change of the rules (their version, for this process)
        self._prefixes: dict[str | None, str] = {}  # session → its counters' prefix (made once)
        # The admin API runs on the event loop, tests call the Python API from their own thread.
        self._lock = threading.Lock()

    # -- the copy

    def _rebuild(self) -> None:
        self._book = _Book.of([*self._pinned, *self._shared.values()])
        self.changes += 1

    def counts(self, session: str | None) -> bool:
        """Does a rule the session sees read a count (so the same request may be answered
        otherwise next time)?"""
        return self._book.counts(session)

    async def reload(self, version: int) -> None:
        """Read the shared rules again (their version moved to ``version``)."""
        found = await self.state.map_all(RULES)
        rules = {}
        for key, raw in found.items():
            for rule_id, data in _entries(key, raw):
                rule = ScriptRule.from_json(data["rule"], rule_id)
                rules[rule.id] = replace(rule, source=data.get("source"))
        with self._lock:
            self._shared = rules
            self._version = version
            self._rebuild()

    async def _changed(self, written: Iterable[ScriptRule] = (), gone: Iterable[int] = ()) -> None:
        """After a write: bump the version; a shared state is read again, memory's copy is ours."""
        version = await self.state.add(VERSION, version_step())
        if self.state.shared:
            await self.reload(version)  # the version read first, so a later write reloads again
            return
        with self._lock:
            for rule in written:
                self._shared[rule.id] = rule
            for rule_id in gone:
                self._shared.pop(rule_id, None)
            self._version = version
            self._rebuild()

    # -- adding, removing, listing

    def add(self, data: Mapping[str, Any] | None = None, /, *, session: str | None = None, **fields: Any) -> ScriptRule:
        """Add one rule, given as a mapping, as keywords, or both (keywords win)::

            script.add(text="Sunny.", match="weather", nth=2)
            script.add({"tool_calls": [{"name": "get_weather"}]}, session="worker-1")

        ``session`` scopes a rule that names none. :class:`RuleError` (a ``ValueError``) names
        the field when the rule is wrong.
        """
        return self.extend([{**(data or {}), **fields}], session, located=False)[0]

    def extend(
        self,
        items: Iterable[Any],
        session: str | None = None,
        *,
        located: bool = True,
        source: str | None = None,
        pinned: bool = False,
    ) -> list[ScriptRule]:
        """Add several rules, all or none. A wrong one raises :class:`RuleError` whose message
        starts with the rule's position (``rule 3 (match 'weather'): ...``) unless ``located`` is off."""
        rules = _parsed(items, session, located, source)
        if pinned:
            return self._pin(rules)
        return self.bridge.call(self._write(rules))

    async def aextend(
        self, items: Iterable[Any], session: str | None = None, *, located: bool = True, source: str | None = None
    ) -> list[ScriptRule]:
        """:meth:`extend` for the event loop (the admin API)."""
        return await self._write(_parsed(items, session, located, source))

    def _pin(self, rules: list[ScriptRule]) -> list[ScriptRule]:
        with self._lock:
            start = self._pinned_made + 1
            added = [replace(rule, id=start + i, pinned=True) for i, rule in enumerate(rules)]
            self._pinned.extend(added)
            self._pinned_made += len(added)
            self._rebuild()
        return added

    async def _write(self, rules: list[ScriptRule]) -> list[ScriptRule]:
        if not rules:
            return []
        last = await self.state.add(IDS, len(rules))
        # Shared ids come after the pinned ones, which every process numbers alike from 1.
        first = self._pinned_made + last - len(rules) + 1
        added = [replace(rule, id=first + i) for i, rule in enumerate(rules)]
        stored = [_stored(rule, i) for i, rule in enumerate(added)]
        # All or none, on every state engine: the rules of one call are one field written whole
        # (one assignment, one SQLite statement, one HSET) under the first one's id, so no reader
        # ever sees a part of them, and a failure leaves none (the encoding is done before).
        value = stored[0] if len(stored) == 1 else {"batch": stored}
        await self.state.map_put(RULES, str(first), _encoded(value))
        await self._changed(written=added)
        return added

    def load_file(self, path: str | os.PathLike[str], *, pinned: bool = False) -> list[ScriptRule]:
        """Add the rules of a YAML file: a list of rules, or a mapping ``{rules: [...]}``.
        ``pinned`` rules survive :meth:`clear` (the ``--rules`` file's are). A mistake raises
        :class:`RuleError` naming the file, the rule's position and the field."""
        import yaml  # only when a file is used

        name = str(path)
        try:
            doc = _bounded_yaml(Path(path).read_text(encoding="utf-8"), name)
        except OSError as exc:
            raise RuleError(f"{name}: cannot read the rules file ({exc.strerror or exc})") from None
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise RuleError(f"{name}: not valid YAML: {exc}") from None
        if isinstance(doc, Mapping) and list(doc) == ["rules"]:
            doc = doc["rules"]
        if doc is None:
            doc = []  # an empty file: no rules
        if not isinstance(doc, list):
            raise RuleError(f"{name}: expected a list of rules, or a mapping with one key 'rules' holding that list")
        try:
            return self.extend(doc, source=name, pinned=pinned)
        except RuleError as exc:
            raise RuleError(f"{name}: {exc}", exc.field) from None

    @property
    def empty(self) -> bool:
        """No rule at all (read without the lock: a hint that lets a request skip matching;
        on a shared state, as of the request's first look)."""
        return not self._book.ordered

    def remove(self, rule_id: int) -> bool:
        return self.bridge.call(self.aremove(rule_id))

    async def aremove(self, rule_id: int) -> bool:
        """Drop one rule. A pinned one is dropped from this process only (every process loads it)."""
        with self._lock:
            kept = [r for r in self._pinned if r.id != rule_id]
            if len(kept) != len(self._pinned):
                self._pinned = kept
                self._rebuild()
                return True
        for key, raw in (await self.state.map_all(RULES)).items():
            if any(found == rule_id for found, _ in _entries(key, raw)):
                await self._drop(key, raw, {rule_id})
                await self._changed(gone=[rule_id])
                return True
        return False

    async def _drop(self, key: str, raw: bytes, ids: set[int]) -> None:
        """Remove rules ``ids`` from the field ``key`` holds (``raw``): the field goes when
        nothing is left of it; a batch keeps its other rules' places (so their ids)."""
        data = json.loads(raw)
        if "batch" not in data:
            await self.state.map_delete(RULES, key)
            return
        batch = [None if int(key) + i in ids else item for i, item in enumerate(data["batch"])]
        if any(item is not None for item in batch):
            await self.state.map_put(RULES, key, _encoded({"batch": batch}))
        else:
            await self.state.map_delete(RULES, key)

    def rules(self, session: str | None = None) -> list[ScriptRule]:
        """Every rule (``session=None``), or those of one session."""
        if self.state.shared:
            self.bridge.call(self.refresh())
        return self._listed(session)

    async def arules(self, session: str | None = None) -> list[ScriptRule]:
        await self.refresh()
        return self._listed(session)

    def _listed(self, session: str | None) -> list[ScriptRule]:
        return [r for r in self._book.ordered if session is None or r.session == session]

    def clear(self, session: str | None = None, *, pinned: bool = False) -> None:
        """Drop every rule (``session=None``) or one session's, and start their call counts
        again. Pinned rules (the ``--rules`` file's) stay, counted from zero, unless ``pinned``."""
        self.bridge.call(self.aclear(session, pinned=pinned))

    async def aclear(self, session: str | None = None, *, pinned: bool = False) -> None:
        """:meth:`clear` for the event loop."""
        if pinned:
            with self._lock:
                self._pinned = [r for r in self._pinned if session is not None and r.session != session]
                self._rebuild()
        if session is None:
            await self.state.forget(RULES)
            await self.state.forget(COUNTS)
            gone: list[int] = list(self._shared)
        else:
            found = await self.state.map_all(RULES)
            gone = []
            for key, raw in found.items():
                ids = {rule_id for rule_id, data in _entries(key, raw) if data["rule"].get("session") == session}
                if ids:
                    await self._drop(key, raw, ids)
                    gone.extend(ids)
            await self.state.forget(f"{COUNTS}{safe(session)}:")
        await self._changed(gone=gone)

    # -- answering

    async def answer(self, request: GenerationRequest, surface: str, session: str | None = None) -> Answer | None:
        """The answer the first applicable rule gives ``request`` on ``surface`` (``chat``,
        ``completions`` or ``responses``), or None: the model answers freely (see :meth:`choose`)."""
        chosen = await self.choose(request, surface, session)
        return chosen[1] if chosen is not None else None

    async def choose(
        self, request: GenerationRequest, surface: str, session: str | None = None
    ) -> tuple[ScriptRule, Answer] | None:
        """The first applicable rule and the answer it gives ``request`` on ``surface``, or None.

        The session's rules go first, then the global ones, each in the order added. Every
        rule whose filters match counts the call (per session), whether or not it answers,
        so a rule's ``nth`` counts the calls *it* matches, whatever the rules before it do;
        a sequence moves on only when its rule answers. Raises :class:`ScriptExhausted`.

        Only a count some rule reads is kept: the calls of a rule with ``nth`` or ``times``,
        and the steps a sequence has given. One state call counts them all at once (when the
        first matching rule answers every call, its next step too); a rule that answers after
        others it had to look past moves its sequence with a second. So requests on any process
        each get their own step, and the usual rule — plain text, no ``nth`` — costs no call.
        """
        rules = self._book.for_session(session)
        if not rules:
            return None
        subjects = _subjects(request)
        model, tools = request.model, bool(request.tools)
        matching = [rule for rule in rules if rule.matches(surface, model, tools, subjects)]
        if not matching:
            return None
        prefix = self._prefixes.get(session)
        if prefix is None:
            if len(self._prefixes) >= 4096:
                self._prefixes.clear()
            prefix = self._prefixes[session] = f"{COUNTS}{safe(session)}:"
        counted = [rule for rule in matching if rule.nth or rule.times is not None]
        first = matching[0]
        certain = not (first.nth or first.times is not None)  # it answers whatever the count
        keys = [f"{prefix}c:{rule.id}" for rule in counted]
        if certain and first.sequence:
            keys.append(f"{prefix}g:{first.id}")
        numbers: list[int] = []
        if keys:
            _, numbers = await self.state.exchange((), keys)
        if certain:  # ScriptExhausted past a sequence's end ("then": "error")
            return first, first.answer_at(numbers[-1] - 1 if first.sequence else 0)
        calls = {rule.id: call for rule, call in zip(counted, numbers, strict=True)}
        for rule in matching:
            call = calls.get(rule.id)
            if call is None or rule.takes(call):
                if not rule.sequence:
                    return rule, rule.answer_at(0)
                return rule, rule.answer_at(await self.state.add(f"{prefix}g:{rule.id}") - 1)
        return None


def _parsed(items: Iterable[Any], session: str | None, located: bool, source: str | None) -> list[ScriptRule]:
    """The rules of ``items``, all valid (else :class:`RuleError`, located unless ``located`` is off)."""
    rules = []
    for position, item in enumerate(items, 1):
        data = {"session": session, **item} if session is not None and isinstance(item, Mapping) else item
        try:
            rule = ScriptRule.from_json(data)
        except RuleError as exc:
            if not located:
                raise
            raise RuleError(f"rule {position}{_label(item)}: {exc}", exc.field) from None
        rules.append(replace(rule, source=source))
    return rules


def _encoded(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _stored(rule: ScriptRule, position: int) -> dict[str, Any]:
    """A rule as the state keeps it, checked to encode (a :class:`RuleError` before any write)."""
    data = rule.to_json()
    del data["id"]
    data.pop("source", None)
    value = {"rule": data, "source": rule.source}
    try:
        _encoded(value)
    except UnicodeEncodeError:
        raise RuleError(
            f"rule {position + 1}: a field is not valid Unicode (a lone surrogate escape such as \\ud800)"
        ) from None
    return value


def _entries(key: str, raw: bytes) -> list[tuple[int, dict[str, Any]]]:
    """The rules one field of the state's map holds, with their ids: one rule (``key`` is its
    id), or a batch written whole (ids ``key``, ``key`` + 1, …; a rule removed since is null)."""
    data = json.loads(raw)
    if "batch" not in data:
        return [(int(key), data)]
    return [(int(key) + i, item) for i, item in enumerate(data["batch"]) if item is not None]


def _subjects(request: GenerationRequest) -> tuple[str, ...]:
    """What ``match`` searches: each prompt's last user message, or its text (token ids have none)."""
    out = []
    for prompt in request.prompts:
        if prompt.messages is not None:
            users = [m.content for m in prompt.messages if m.role == "user"]
            if users:
                out.append(users[-1])
        elif prompt.text is not None:
            out.append(prompt.text)
    return tuple(out)


def _label(item: Any) -> str:
    """How a rule is named in messages besides its position: its ``match``, else its model."""
    if isinstance(item, Mapping):
        for key in ("match", "model", "endpoint"):
            if isinstance(item.get(key), str):
                return f" ({key} {item[key]!r})"
    return ""


# What a rules file may expand to, aliases followed: PyYAML shares an aliased node, but every
# use of the rules walks it again — a 700-byte alias bomb built a 70 MB string and aborted the
# process. The composed graph is measured (each node once, by identity) before it is built.
MAX_YAML_NODES = 100_000


def _bounded_yaml(text: str, name: str) -> Any:
    """``text`` as YAML (the safe loader), refused with a :class:`RuleError` when its aliases
    expand it past :data:`MAX_YAML_NODES` nodes."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        sizes: dict[int, int] = {}
        entered: set[int] = set()
        stack: list[tuple[Any, bool]] = [(node, False)]
        while stack:  # post-order without recursion (a deep file must not overflow the stack)
            current, done = stack.pop()
            if id(current) in sizes:
                continue
            children = _children(current)
            if done:
                sizes[id(current)] = min(MAX_YAML_NODES + 1, 1 + sum(sizes[id(c)] for c in children))
                continue
            if id(current) in entered:
                raise RuleError(f"{name}: a YAML alias refers to a node that contains it (a recursive alias)")
            entered.add(id(current))
            stack.append((current, True))
            stack.extend((c, False) for c in children if id(c) not in sizes)
        if sizes[id(node)] > MAX_YAML_NODES:
            raise RuleError(
                f"{name}: its aliases expand it past {MAX_YAML_NODES:,} YAML nodes (an alias bomb?): "
                "write the rules out, or share less through '*' aliases"
            )
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _children(node: Any) -> list[Any]:
    value = node.value
    if isinstance(value, list):
        return [c for pair in value for c in (pair if isinstance(pair, tuple) else (pair,))]
    return []
