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

This module is the rule book: it holds the rules, answers requests and counts calls. One rule —
its record, parsing and validation — is :mod:`mockserver.answers.script_rule`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mockserver.answers.script_rule import RuleError, ScriptExhausted, ScriptRule, Surface
from mockserver.spine.request import Answer, GenerationRequest

__all__ = ["RuleError", "Script", "ScriptExhausted", "ScriptRule", "Surface"]


@dataclass
class Script:
    """The live scripted rules and their per-session call counters; safe to change while requests run."""

    _rules: list[ScriptRule] = field(default_factory=list)
    _calls: dict[tuple[int, str | None], int] = field(default_factory=dict)  # matching calls → nth, times
    _given: dict[tuple[int, str | None], int] = field(default_factory=dict)  # answers given → sequence place
    _next_id: int = 1
    # Requests and the admin API share one event loop, but tests call the Python API from their own thread.
    _lock: threading.Lock = field(default_factory=threading.Lock)

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
        rules = []
        for position, item in enumerate(items, 1):
            data = {"session": session, **item} if session is not None and isinstance(item, Mapping) else item
            try:
                rule = ScriptRule.from_json(data)
            except RuleError as exc:
                if not located:
                    raise
                raise RuleError(f"rule {position}{_label(item)}: {exc}", exc.field) from None
            rules.append(replace(rule, source=source, pinned=pinned))
        with self._lock:
            added = [replace(rule, id=self._next_id + i) for i, rule in enumerate(rules)]
            self._next_id += len(added)
            self._rules.extend(added)
        return added

    def load_file(self, path: str | os.PathLike[str], *, pinned: bool = False) -> list[ScriptRule]:
        """Add the rules of a YAML file: a list of rules, or a mapping ``{rules: [...]}``.
        ``pinned`` rules survive :meth:`clear` (the ``--rules`` file's are). A mistake raises
        :class:`RuleError` naming the file, the rule's position and the field."""
        import yaml  # only when a file is used

        name = str(path)
        try:
            doc = yaml.load(
                Path(path).read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            )
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
        """No rule at all (read without the lock: a hint that lets a request skip matching)."""
        return not self._rules

    def remove(self, rule_id: int) -> bool:
        with self._lock:
            kept = [r for r in self._rules if r.id != rule_id]
            found = len(kept) != len(self._rules)
            self._rules = kept
            return found

    def rules(self, session: str | None = None) -> list[ScriptRule]:
        """Every rule (``session=None``), or those of one session."""
        with self._lock:
            return [r for r in self._rules if session is None or r.session == session]

    def clear(self, session: str | None = None, *, pinned: bool = False) -> None:
        """Drop every rule (``session=None``) or one session's, and start their call counts
        again. Pinned rules (the ``--rules`` file's) stay, counted from zero, unless ``pinned``."""
        with self._lock:
            self._rules = [
                r for r in self._rules if (r.pinned and not pinned) or (session is not None and r.session != session)
            ]
            if session is None:
                self._calls.clear()
                self._given.clear()
            else:
                self._calls = {k: v for k, v in self._calls.items() if k[1] != session}
                self._given = {k: v for k, v in self._given.items() if k[1] != session}

    def answer(self, request: GenerationRequest, surface: str, session: str | None = None) -> Answer | None:
        """The answer the first applicable rule gives ``request`` on ``surface`` (``chat``,
        ``completions`` or ``responses``), or None: the model answers freely.

        The session's rules go first, then the global ones, each in the order added. Every
        rule whose filters match counts the call (per session), whether or not it answers,
        so a rule's ``nth`` counts the calls *it* matches, whatever the rules before it do;
        a sequence moves on only when its rule answers. Raises :class:`ScriptExhausted`.
        """
        subjects = _subjects(request)
        tools = bool(request.tools)
        decided: Answer | None = None
        exhausted: ScriptExhausted | None = None
        with self._lock:
            ordered = [r for r in self._rules if session is not None and r.session == session]
            ordered += [r for r in self._rules if r.session is None]
            for rule in ordered:
                if not rule.matches(surface, request.model, tools, subjects):
                    continue
                key = (rule.id, session)
                call = self._calls[key] = self._calls.get(key, 0) + 1
                if decided is not None or exhausted is not None or not rule.takes(call):
                    continue
                given = self._given[key] = self._given.get(key, 0) + 1
                try:
                    decided = rule.answer_at(given - 1)
                except ScriptExhausted as exc:
                    exhausted = exc  # raised once every matching rule has counted this call
        if exhausted is not None:
            raise exhausted
        return decided


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
